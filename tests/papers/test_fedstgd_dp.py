"""FedSTGD with distributed DP in every sum of its windows (papers/fedstgd_dp.py, the noise;
papers/fedstgd_budget.py, the account; threat_model.md ST-DDP, ST-DDP-FLOOR): each sum is its
clients' plaintext sum plus the stated noise, the run's one epsilon is the composition of every
release of a window, and the noise stops a server that knows every other client's inputs."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np
import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers import fedstgd_dp
from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig
from secure_fedgraph.privacy.analysis.prv import prv_epsilon
from secure_fedgraph.privacy.analysis.rdp import gaussian_rdp, rdp_to_epsilon
from secure_fedgraph.privacy.analysis.skellam import ORDERS, SkellamRelease, sensitivities, skellam_rdp
from secure_fedgraph.protocol.core.spec import NoiseUnit
from secure_fedgraph.protocol.engine.contexts import ServerContext
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, roles
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import HZMETRO_DIR, defence_stops, needs_hzmetro

TINY = dict(hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16)


class _Recorder:
    """Per noised sum, in order: the server's result and, for each contributor, its id, what it
    staged (before any clipping) and what it put into the ring (clipped, rounded, noised)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.inputs: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.results = []
        with_noise, secure_sum = roles.ClientRole._with_noise, ServerContext.secure_sum

        def recording_noise(role, spec, x, **kw):
            out = with_noise(role, spec, x, **kw)
            if spec.noise is not None:
                self.inputs.append((role.client_id, np.array(x, dtype=np.float64), out))
            return out

        def recording_sum(ctx, spec):
            result = yield from secure_sum(ctx, spec)
            self.results.append(result)
            return result

        monkeypatch.setattr(roles.ClientRole, "_with_noise", recording_noise)
        monkeypatch.setattr(ServerContext, "secure_sum", recording_sum)

    def sums(self) -> list[tuple]:
        """(result, {client: (staged, sent)} of its contributors) of every noised sum."""
        out, taken = [], 0
        for result in self.results:
            if result.spec.noise is not None:
                mine = self.inputs[taken : taken + len(result.contributors)]
                out.append((result, {client: (staged, sent) for client, staged, sent in mine}))
                taken += len(result.contributors)
        return out


def _flat(spec, values) -> np.ndarray:
    return np.concatenate([np.ravel(values[t.name]) for t in spec.tensors])


def _units(spec, staged: np.ndarray) -> np.ndarray:
    """The test's own rows of a staged contribution: one per window (P/Q: row b of every tensor;
    statistics: the staged rows), (windows, values)."""
    if spec.noise.unit is NoiseUnit.SUMMED_ROWS:
        return staged
    tensors = spec.unflatten(staged)
    return np.concatenate([tensors[t.name].reshape(t.shape[0], -1) for t in spec.tensors], axis=1)


def _clipped_sum(spec, staged: np.ndarray, bits: int) -> np.ndarray:
    """What the contribution holds before the noise: every window's row clipped to the sum's
    bound (the plaintext reference), on the grid; a flat vector in spec order."""
    rows = _units(spec, staged)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = rows * np.minimum(1.0, spec.noise.l2_clip / np.maximum(norms, 1e-300))
    if spec.noise.unit is NoiseUnit.SUMMED_ROWS:
        flat = rows.sum(0)
    else:
        widths = [t.size // t.shape[0] for t in spec.tensors]
        parts = np.split(rows, np.cumsum(widths)[:-1], axis=1)
        flat = np.concatenate([p.reshape(-1) for p in parts])
    return np.rint(flat * 2.0**bits) / 2.0**bits


@needs_hzmetro
def test_every_sum_of_the_windows_is_the_plaintext_sum_plus_the_stated_noise(monkeypatch):
    """A DDP run over mask (3 clients, one round): every sum that carries the windows (the
    normalisation, the P/Q sums and their gradients, the error statistics) is noised; what the
    server holds is exactly the sum of what the clients put into the ring, and that is the sum of
    their plaintext rows, each clipped to its bound, plus noise of the stated standard deviation
    z C (within 5% over the P/Q and gradient sums' values; within 6 of it for the statistics)."""
    recorder = _Recorder(monkeypatch)
    config = FedSTGDConfig(clients=3, rounds=1, ddp_noise=0.5, dpsgd_sigma=1.0, **{**TINY, "max_windows": 8})
    simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR)
    scaled = defaultdict(list)
    for result, inputs in recorder.sums():
        spec, noise = result.spec, result.spec.noise
        bits = noise.grid_bits(SecureSumConfig().mask.precision_bits)
        delivered = _flat(spec, result.values)
        assert np.allclose(delivered, sum(sent for _, sent in inputs.values()), rtol=0, atol=len(inputs) * 2.0**-bits)
        plain = sum(_clipped_sum(spec, staged, bits) for staged, _ in inputs.values())
        stated = noise.noise_multiplier * noise.l2_clip * math.sqrt(len(inputs) / noise.expected_contributors)
        scaled[spec.name].append((delivered - plain) / stated)
    assert set(scaled) == {"normalisation", "pq", "pq-grad", "validation", "test"}
    for name, parts in scaled.items():
        values = np.concatenate(parts)
        if name in ("pq", "pq-grad"):
            assert values.size > 10_000 and abs(values.std() - 1) < 0.05 and abs(values.mean()) < 0.05, name
        else:
            assert np.abs(values).max() < 6, name


@needs_hzmetro
def test_the_runs_one_epsilon_composes_every_release_of_a_window():
    """3 clients, one round of 2 batches of 8 windows over 8 GRU steps: a training window is in the
    normalisation sum, 16 P/Q sums, 16 gradient sums and one DP-SGD step; a validation (test)
    window in 16 P/Q sums and one error sum. Recomputed here from the options alone: Skellam RDP
    per sum (replace-one sensitivity of one window's row, rounding included, the noise of all 3
    clients), opacus' Gaussian RDP of the DP-SGD step at sigma / 2, added at each order; the run
    reports the largest member's epsilon from RDP, and PRV's from the same releases as Gaussian
    ones. With plain the server sees each noisy input, carrying one client's share only."""
    config = FedSTGDConfig(clients=3, rounds=1, ddp_noise=4.0, dpsgd_sigma=4.0, **TINY)
    privacy = simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR).metrics["privacy"]

    def release(clip: float, bits: int, values: int, share: int = 3) -> SkellamRelease:
        l1, l2 = sensitivities(l2_clip=clip, precision_bits=bits, dimension=values, replace_one=True)
        return SkellamRelease(l1, l2, share * (4.0 * clip * 2.0**bits) ** 2 / 3)

    def member(share: int = 3) -> dict[str, SkellamRelease]:
        # decoder rows are the widest: (4 MLP units + 16 GNEA columns) x (8 + 8); the gradient rows need a 24-bit grid
        return {"pq": release(20.0, 20, 20 * 16, share), "pq-grad": release(1e-4, 24, 20 * 16, share),
                "normalisation": release(math.sqrt(2), 20, 2, share), "validation": release(5.0, 20, 4, share),
                "test": release(5.0, 20, 4, share)}  # error rows within E^2 + 1 = 5

    counts = {"training": {"normalisation": 1, "pq": 16, "pq-grad": 16}, "validation": {"pq": 16, "validation": 1},
              "test": {"pq": 16, "test": 1}}
    dpsgd = [(4.0 / 2, 1.0, 1)]

    def epsilon(share: int = 3) -> float:
        releases = member(share)
        return max(rdp_to_epsilon(ORDERS, np.array([sum(n * skellam_rdp(releases[k], a) for k, n in kinds.items()) for a in ORDERS])
                                  + (gaussian_rdp(dpsgd, ORDERS) if m == "training" else 0), 1e-5) for m, kinds in counts.items())

    assert privacy["epsilon_max"] == pytest.approx(epsilon(), rel=1e-9)
    assert privacy["epsilon_per_client"] == {str(c): privacy["epsilon_max"] for c in range(3)}
    gaussian = {k: math.sqrt(r.variance) / r.l2 for k, r in member().items()}
    prv = max(prv_epsilon([(gaussian[k], 1.0, n) for k, n in kinds.items()] + (dpsgd if m == "training" else []), 1e-5).epsilon
              for m, kinds in counts.items())
    assert privacy["accountants"]["prv"]["epsilon_max"] == pytest.approx(prv, rel=1e-9)
    assert privacy["releases_per_window"]["training"] == {"normalisation": 1, "pq": 16, "pq-grad": 16, "dpsgd": 1}
    assert privacy["epsilon_with_colluders"] == pytest.approx(epsilon(share=2), rel=1e-9)  # one colluder of 3 subtracts its noise
    plain = simulate(FedSTGD(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=HZMETRO_DIR).metrics["privacy"]
    assert plain["epsilon_max"] == pytest.approx(epsilon(share=1), rel=1e-9) and plain["epsilon_max"] > privacy["epsilon_max"]


def _window_distinguishing(recorder: _Recorder, target: int) -> float:
    """The attack's accuracy: for every P/Q sum and every pair of windows (b, b') of its batch,
    the server subtracts the other clients' inputs (they collude, and know their own noise),
    leaving the target's row b; told the target's rows of b and b' (clipped), it says which one
    the target holds at b: the nearer."""
    right = total = 0
    for result, inputs in recorder.sums():
        if result.spec.name != "pq":
            continue
        spec = result.spec
        residual = _units(spec, _flat(spec, result.values) - sum(sent for c, (_, sent) in inputs.items() if c != target))
        truth = _units(spec, _clipped_sum(spec, inputs[target][0], spec.noise.grid_bits(20)))
        for b in range(len(truth)):
            for other in range(len(truth)):
                if other != b and not np.allclose(truth[b], truth[other]):
                    total += 1
                    right += np.linalg.norm(residual[b] - truth[b]) < np.linalg.norm(residual[b] - truth[other])
    return right / total


@needs_hzmetro
def test_attack_the_server_with_every_other_client_tells_which_window_a_client_holds_unless_noised(monkeypatch):
    """The server plus clients 1 and 2 (every client but the target, client 0; all on their
    default policies) know every other input of each P/Q sum, subtract it, and for each pair of
    the target's windows in a batch guess which of the two it holds at a row: with the noise
    (z = 1) they are right about two times in three (the target's own share, z C / sqrt(3) per
    value, against rows a few units apart), with the Skellam noise switched off every time."""
    import secure_fedgraph.privacy.mechanisms.skellam as skellam_module

    config = FedSTGDConfig(clients=3, rounds=1, ddp_noise=1.0, dpsgd_sigma=1.0, **{**TINY, "max_windows": 8})
    accuracies = []

    def attack() -> bool:
        with monkeypatch.context() as recording:
            recorder = _Recorder(recording)
            simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR, policy=ClientPolicy())
        accuracies.append(_window_distinguishing(recorder, target=0))
        return accuracies[-1] > 0.95

    defence_stops(attack, monkeypatch, skellam_module, "skellam", lambda variance, count, key=None: np.zeros(count, dtype=np.int64))
    assert accuracies[0] < 0.8 and accuracies[1] == 1.0


@needs_hzmetro
def test_attack_a_server_asking_for_the_pq_sums_with_less_noise_than_the_clients_floor(monkeypatch):
    """Clients started with --min-ddp-noise 0.9 (their own floor, ClientPolicy.min_ddp_noise),
    in a run announcing ddp_noise=1, which they let through. A deviating server asks for the P/Q
    sums with multiplier 0.05: each client refuses before its rows leave it; with the clients'
    check switched off the server holds P/Q sums with a twentieth of the noise."""
    config = FedSTGDConfig(clients=3, rounds=1, ddp_noise=1.0, dpsgd_sigma=1.0, **{**TINY, "max_windows": 8})
    policy = dataclasses.replace(ClientPolicy(), min_ddp_noise=0.9)
    assert "privacy" in simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR, policy=policy).metrics  # the honest run passes
    window_noise = fedstgd_dp.window_noise

    def quieter(ctx, plan_config, layout, kind):
        noise = window_noise(ctx, plan_config, layout, kind)
        return dataclasses.replace(noise, noise_multiplier=0.05) if kind == "pq" else noise

    monkeypatch.setattr(fedstgd_dp, "window_noise", quieter)

    def attack() -> bool:
        with monkeypatch.context() as recording:
            recorder = _Recorder(recording)
            simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR, policy=policy)
        residuals = [(_flat(r.spec, r.values) - sum(_clipped_sum(r.spec, staged, 20) for staged, _ in inputs.values())) / r.spec.noise.l2_clip
                     for r, inputs in recorder.sums() if r.spec.name == "pq"]
        return bool(residuals) and float(np.concatenate(residuals).std()) < 0.2  # the floor's would be about 0.9

    defence_stops(attack, monkeypatch, ClientPolicy, "check_noise", lambda self, spec, **kw: None)


def test_distributed_dp_options_are_checked_and_name_what_to_change():
    """Off by default; ddp_noise needs DP-SGD (else the model the FedAvg sums carry holds the
    windows' gradients without noise), more than one client, and no target epsilon (it
    calibrates dpsgd_sigma alone); with it a window reaches the other clients' gradients only
    through noised sums, so DP-SGD is priced at 2 clips whatever the number of clients."""
    assert FedSTGDConfig().ddp_noise == 0 and FedSTGDConfig(dpsgd_sigma=1.0).dpsgd_sensitivity == pytest.approx(4.0)
    with pytest.raises(ConfigError, match=r"ddp_noise=2 needs dpsgd_sigma > 0 \(e.g. --set dpsgd_sigma=2\)"):
        FedSTGDConfig(ddp_noise=2.0)
    with pytest.raises(ConfigError, match="one-party run"):
        FedSTGDConfig(clients=1, adjacency="exact", ddp_noise=1.0, dpsgd_sigma=1.0)
    with pytest.raises(ConfigError, match="ddp_gradient_clip must be a finite number > 0"):
        FedSTGDConfig(ddp_gradient_clip=0.0)
    config = FedSTGDConfig(ddp_noise=1.0, dpsgd_sigma=1.0)
    assert config.dpsgd_sensitivity == 2.0
    with pytest.raises(ConfigError, match="a target epsilon calibrates dpsgd_sigma alone"):
        FedSTGD(config).calibrated(5.0)



def test_the_account_takes_each_kinds_costliest_sum_and_prices_a_silent_client_at_every_planned_step():
    """fedstgd_budget.report on sums made by hand: a P/Q sum that lost a contributor carries
    less noise and raises the epsilon of the clients in it (the kind's costliest sum counts for
    every release of it), not of the one that left; a client that left before reporting its
    DP-SGD steps is priced at every step the plan allows (2 rounds: 2), one that reported fewer
    at those."""
    from secure_fedgraph.papers import fedstgd_budget
    from secure_fedgraph.privacy import Steps
    from secure_fedgraph.protocol.core.spec import SumNoise, SumSpec
    from secure_fedgraph.protocol.engine.noise_ledger import NoisedSum

    config = FedSTGDConfig(clients=3, rounds=2, ddp_noise=2.0, dpsgd_sigma=2.0, **TINY)
    noise = SumNoise(l2_clip=20.0, noise_multiplier=2.0, expected_contributors=3, unit=NoiseUnit.ROW)
    spec = SumSpec.of("pq", {"P": np.zeros((8, 4, 10)), "Q": np.zeros((8, 16, 10))}, noise=noise)
    everyone = [NoisedSum(0, spec, frozenset({0, 1, 2}))] * 3
    steps = {0: [Steps(2.0, 1.0, 2, 2.0)], 1: [Steps(2.0, 1.0, 2, 2.0)]}  # client 2 left before it reported

    def epsilons(sums, reported) -> dict[str, float]:
        return fedstgd_budget.report(sums, reported, config, clients=[0, 1, 2], unit="one window", delta=1e-5, precision_bits=20,
                                     server_sees_inputs=False, colluders=1)["epsilon_per_client"]

    full = epsilons(everyone, steps)
    assert full["2"] == full["0"] == full["1"]  # silent client 2: its 2 planned steps, as the others reported
    assert epsilons(everyone, {**steps, 2: [Steps(2.0, 1.0, 1, 2.0)]})["2"] < full["2"]
    dropped = epsilons([*everyone, NoisedSum(1, spec, frozenset({0, 1}))], steps)
    assert dropped["0"] > full["0"] and dropped["2"] == full["2"]
