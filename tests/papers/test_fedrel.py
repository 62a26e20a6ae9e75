"""FedRel: the relevance-weighted aggregation through secure sums equals the paper's eqs. 19-21
in the clear on every backend, the server's transcript holds no individual d_hat_k, e_k or
Theta_k, the plan's options, costs and baselines."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from secure_fedgraph.errors import CapacityError, ConfigError
from secure_fedgraph.papers.fedrel import FedRel, FedRelConfig, FedRelSums, client_cases
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs import simulate as simulate_module
from secure_fedgraph.runs.simulate import simulate, simulate_one_party
from secure_fedgraph.training.relevance import PREFIX, WEIGHT, RelevancePrecision, relevance_in_the_clear, weights_from_sums
from tests.helpers import UEA_DIR, needs_uea

# one round after a one-round VAE: every sum of the plan, small and fast
TINY = dict(rounds=1, local_steps=1, vae_rounds=1, vae_local_steps=1, features=8, hidden=8, segments=5, window=2)


class _Recorded:
    """What each client contributed to each sum (the audit hook of ClientHost, in this process)."""

    def __init__(self) -> None:
        self.inputs: dict[str, dict[int, dict[str, np.ndarray]]] = {}

    def host(self, original):
        recorded = self

        class RecordingHost(original):
            def __init__(self, **kwargs) -> None:
                super().__init__(**kwargs)
                self.on_contribute = lambda h, name, tensors, client=self.client_id: recorded.inputs.setdefault(name, {}).__setitem__(
                    client, {k: np.array(v, dtype=np.float64) for k, v in tensors.items()})

        return RecordingHost


@pytest.fixture(scope="module")
def runs():
    """The same 3-participant FedRel round on each backend, the server's received messages kept."""
    config = FedRelConfig(clients=3, **TINY)
    out = {}
    for backend in Backend:
        recorded = _Recorded()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(simulate_module, "ClientHost", recorded.host(simulate_module.ClientHost))
            result = simulate(FedRel(config), SecureSumConfig(backend=backend), data_dir=UEA_DIR, record=True)
        out[backend] = (result, recorded.inputs)
    return config, out


def _held(result, client: int, name: str):
    return result.hosts[client]._held[name][0]  # the latest result of sum ``name`` this client received


@needs_uea
@pytest.mark.parametrize("backend", list(Backend), ids=lambda b: b.value)
def test_aggregate_from_secure_sums_equals_eqs_19_to_21_in_the_clear(runs, backend):
    """Every participant's Theta from the two sums equals eq. 21 computed from the individual
    d_hat_k and Theta_k as the paper's server would (eqs. 19-20 in the clear), within the error
    the backends state: the sums' own bounds, and d_tilde's carried through e_k."""
    config, by_backend = runs
    result, inputs = by_backend[backend]
    clients = sorted(inputs["relevance"])
    d_hats = [inputs["distribution"][k]["d_hat"] for k in clients]
    e = [float(inputs["relevance"][k][WEIGHT][0]) for k in clients]
    thetas = [{n[len(PREFIX):]: v / e_k for n, v in inputs["relevance"][k].items() if n.startswith(PREFIX)} for k, e_k in zip(clients, e)]
    d_tilde, r, theta = relevance_in_the_clear(d_hats, thetas, temperature=config.temperature)
    assert np.isclose(sum(r), 1.0) and len(set(np.round(r, 6))) > 1  # relevance is not uniform here
    np.testing.assert_allclose(np.array(e) / sum(e), r, rtol=1e-5)  # each e_k is eq. 20's numerator, shifted
    precision = config.precision
    for k in clients:
        distribution, weighted = _held(result, k, "distribution"), _held(result, k, "relevance")
        secure_d_tilde = distribution.values["d_hat"] / len(distribution.contributors)
        d_error = distribution.error_bound / len(clients)
        assert np.max(np.abs(secure_d_tilde - d_tilde)) <= d_error + 1e-12
        eta = math.expm1(abs(precision.temperature) * math.sqrt(config.latent) * d_error)  # relative error of each e_k
        theta_max = max(float(np.max(np.abs(v))) for t in thetas for v in t.values())
        bound = weighted.error_bound * (1 + theta_max) / sum(e) + 2 * eta / (1 - eta) * theta_max + 1e-12
        secure = weights_from_sums(weighted.values)
        error = max(float(np.max(np.abs(secure[n] - theta[n]))) for n in theta)
        assert error <= bound, (backend, error, bound)
        assert bound <= (1e-11 if backend is Backend.PLAIN else 10 * config.aggregation_error)


def _windows(vector: np.ndarray) -> list[bytes]:
    """Byte patterns of a vector as float32 and float64, 4 values at a time (one value if
    shorter), each at least 8 bytes long: a 4-byte pattern (one float32) turns up by chance in a
    few MB of ciphertext about once in a few hundred runs, an 8-byte one never."""
    flat = np.asarray(vector, dtype=np.float64).ravel()
    size = min(4, flat.size)
    return [flat[i : i + size].astype(dtype).tobytes() for dtype in ("<f4", "<f8") for i in range(0, flat.size - size + 1, max(size, flat.size // 8))
            if size * np.dtype(dtype).itemsize >= 8]


@needs_uea
@pytest.mark.parametrize("backend", list(Backend), ids=lambda b: b.value)
def test_the_servers_transcript_holds_no_individual_d_hat_e_or_theta(runs, backend):
    """Every byte the server received in the run is searched for each participant's d_hat_k,
    e_k, e_k Theta_k and Theta_k (as float32 and float64): with mask and ckks none is there;
    with plain (the baseline that hands the server every input, P-CLEAR) the same search finds
    them, so the probe is not blind."""
    _, by_backend = runs
    result, inputs = by_backend[backend]
    received = b"".join(wire for _, _, wire in result.received)
    secrets = {}
    for k, tensors in inputs["relevance"].items():
        e_k = float(tensors[WEIGHT][0])
        secrets[f"d_hat_{k}"] = _windows(inputs["distribution"][k]["d_hat"])
        secrets[f"e_{k}"] = _windows(tensors[WEIGHT])
        weighted = np.concatenate([v.ravel() for n, v in tensors.items() if n.startswith(PREFIX)])
        secrets[f"e_theta_{k}"] = _windows(weighted[:64])
        secrets[f"theta_{k}"] = _windows((weighted / e_k)[:64].astype(np.float32))
    found = {name for name, patterns in secrets.items() if any(p in received for p in patterns)}
    if backend is Backend.PLAIN:
        assert {n for n in found if not n.startswith("theta_")} == {n for n in secrets if not n.startswith("theta_")}
    else:
        assert found == set()


def test_the_relevance_sum_states_its_range_and_resolution():
    """e_k lies in [e^-h, e^h] for any distance in [0, D], so |e_k Theta_k| <= e^h W is the
    range; the resolution keeps Theta within the stated error; ckks refuses a resolution finer
    than its error bound instead of releasing a coarser sum."""
    config = FedRelConfig(clients=3, **TINY)
    precision = config.precision
    assert precision.distance_bound == pytest.approx(2 * math.sqrt(config.latent))
    for distance in (0.0, precision.distance_bound):
        e = math.exp(precision.temperature * distance - precision.shift)
        assert math.exp(-precision.half_span) - 1e-12 <= e <= math.exp(precision.half_span) + 1e-12
    spec = FedRelSums(config).relevance
    assert spec.clip_range == pytest.approx(math.exp(precision.half_span) * config.weight_clip)
    assert spec.resolution == pytest.approx(config.aggregation_error * math.exp(-precision.half_span) / (1 + config.weight_clip))
    assert spec.tensors[-1].name == WEIGHT and spec.size == FedRelSums(config).model.size + 1
    from secure_fedgraph.protocol.sum_backends import CkksConfig, MaskConfig

    assert MaskConfig().encoding_of(spec, 5).precision_bits > 20  # mask takes the bits the resolution needs
    CkksConfig().encoding(spec, 5)  # within ckks' stated error at the defaults
    fine = FedRelSums(dataclasses.replace(config, aggregation_error=1e-9)).relevance
    with pytest.raises(CapacityError, match="relevance"):
        CkksConfig().encoding(fine, 5)
    opposite = RelevancePrecision(precision.distance_bound, temperature=-1.0)
    assert opposite.shift == -precision.shift and opposite.clip_range == precision.clip_range


def test_config_checks_name_the_option():
    with pytest.raises(ConfigError, match="speaker"):
        FedRelConfig(split="speaker")
    with pytest.raises(ConfigError, match="segments"):
        FedRelConfig(segments=3)
    with pytest.raises(ConfigError, match="window"):
        FedRelConfig(window=5)
    with pytest.raises(ConfigError, match="aggregation"):
        FedRelConfig(aggregation="mean")
    with pytest.raises(ConfigError, match="temperature"):
        FedRelConfig(temperature=0)
    with pytest.raises(ConfigError, match="dataset"):
        FedRelConfig(dataset="shl")


@needs_uea
@pytest.mark.parametrize("dataset,split", [("basicmotions", "class"), ("japanesevowels", "class"), ("japanesevowels", "speaker")])
@pytest.mark.parametrize("clients", [2, 3, 5])
def test_participants_hold_their_own_non_iid_cases(dataset, split, clients):
    """Every training case is at exactly one participant, every class is somewhere, no
    participant holds every class, and with the speaker split no speaker is at two."""
    config = FedRelConfig(dataset=dataset, clients=clients, split=split)
    parts = client_cases(config, UEA_DIR)
    train = np.concatenate([p.train_x for p in parts])
    assert len(train) == {"basicmotions": 40, "japanesevowels": 270}[dataset]
    assert len({x.tobytes() for x in train}) == len(train)  # no case twice
    classes = [set(p.train_y.tolist()) for p in parts]
    n_classes = int(max(max(c) for c in classes)) + 1
    assert set().union(*classes) == set(range(n_classes))
    assert all(len(c) < n_classes for c in classes)
    if split == "speaker":
        assert sum(len(c) for c in classes) == n_classes
    assert sum(len(p.test_y) for p in parts) == {"basicmotions": 40, "japanesevowels": 370}[dataset]


@needs_uea
def test_uniform_aggregation_is_fedavg_with_one_sum_per_round_and_no_vae():
    config = FedRelConfig(clients=3, aggregation="uniform", **{**TINY, "rounds": 2})
    metrics = simulate(FedRel(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=UEA_DIR).metrics
    sums = FedRelSums(config)
    assert metrics["cost"] == {"secure_sums_per_round": 1, "elements_up_per_client_per_round": sums.model.size}
    assert "vae" not in str(metrics["elements_by_phase"]) and metrics["elements_by_phase"]["aggregation"]["up"] == 2 * 3 * sums.model.size
    relevance = FedRelSums(dataclasses.replace(config, aggregation="relevance"))
    assert relevance.elements_per_round() == sums.model.size + 1 + config.latent  # e_k Theta_k, e_k, d_hat_k
    assert len(metrics["rounds"]) == 2 and 0 <= metrics["test_acc"] <= 1


@needs_uea
def test_dpsgd_trains_diig_case_by_case_and_each_participant_reports_its_own_rate():
    """Uniform aggregation with DP-SGD: every participant takes rounds x local_steps noisy
    steps at q = batch_size / its own cases, so participants with fewer cases spend more; the
    calibration holds for the smallest participant. Relevance is refused:
    it also releases functions of d_k, which DP-SGD does not cover."""
    from secure_fedgraph.privacy import rdp_epsilon

    config = FedRelConfig(clients=3, aggregation="uniform", dpsgd_sigma=1.3, dpsgd_clip=0.5, **{**TINY, "rounds": 2, "local_steps": 2})
    result = simulate(FedRel(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=UEA_DIR)
    privacy = result.metrics["privacy"]
    cases = [len(c.train_y) for c in client_cases(config, UEA_DIR)]
    assert privacy["dpsgd_steps_per_client"] == {str(k): 4 for k in range(3)}
    assert privacy["epsilon_per_client"] == {str(k): pytest.approx(rdp_epsilon([(1.3, config.batch_size / n, 4)], 1e-5))
                                             for k, n in enumerate(cases)}
    assert privacy["unit"].startswith("one training case") and 0 <= result.metrics["test_acc"] <= 1
    calibrated = FedRel(dataclasses.replace(config, dpsgd_sigma=0.0)).calibrated(3.0, data_dir=UEA_DIR).config.dpsgd_sigma
    assert max(rdp_epsilon([(calibrated, config.batch_size / n, 4)], 1e-5) for n in cases) <= 3.0
    with pytest.raises(ConfigError, match="dpsgd_sigma needs aggregation='uniform'"):
        FedRelConfig(clients=3, dpsgd_sigma=1.0, **TINY)


@needs_uea
def test_mask_gives_the_plain_numbers_and_the_centralised_run_is_one_party(runs):
    _, by_backend = runs
    plain, mask = (by_backend[b][0].metrics for b in (Backend.PLAIN, Backend.MASK))
    assert [mask[k] for k in ("test_acc", "test_f1")] == [plain[k] for k in ("test_acc", "test_f1")]
    config = FedRelConfig(clients=1, **TINY)
    central = simulate_one_party(FedRel(config), data_dir=UEA_DIR)
    assert central["plan"] == "fedrel-centralised" and central["clients"] == 1 and len(central["rounds"]) == 1


@needs_uea
def test_run_fedrel_from_the_command_line(tmp_path, capsys):
    from secure_fedgraph.cli import main

    args = ["run", "fedrel", "--rounds", "1", "--set", "vae_rounds=1", "--set", "features=8", "--set", "hidden=8", "--data-dir", str(UEA_DIR)]
    assert main([*args, "--clients", "1", "--out", str(tmp_path / "central")]) == 0
    assert main([*args, "--clients", "2", "--backend", "plain", "--out", str(tmp_path / "two")]) == 0
    out = capsys.readouterr().out
    assert "one party holding all the data" in out and out.count("test accuracy") == 2 and "macro-F1" in out
    assert (tmp_path / "two" / "metrics.json").is_file()
    assert main(["run", "fedrel", "--set", "split=speaker", "--out", str(tmp_path / "bad")]) == 2  # basicmotions has no speakers
    assert "split='speaker' needs speaker labels" in capsys.readouterr().err
