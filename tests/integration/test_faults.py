"""A real client process killed on entering each secure-sum stage of each plan (issue 14, item 4;
threat_model.md R-DROP).

For fedavg-gru, CNFGNN, FedSTGD and FedRel, and each stage of the mask protocol (advertise, share_keys,
input, consistency, unmask, deliver): a server process, a process hosting the survivors (clients
0-4) and one hosting the victims (5 and 6), started with ``client --crash-at STAGE@1``. The
victims' process SIGKILLs itself on receiving its first request of that stage in round 1, before
answering: after a round of training, so recovery has real models to recover. Seven clients,
because against the default third of colluders (C = 2) the complete graph's threshold is t = 5
(2t > 7 + C), so the five survivors hold enough shares to rebuild both victims' secrets; with
six, t = 5 of four survivors could only re-key or abandon.

Each run must finish every round with the survivors (their process exits 0, the victims are in
``metrics["dropped"]``, the server saw them leave at that stage) and give the numbers of the same
plan run in one process (runs/simulate.py) with the same crash point (protocol/core/crash_point.py: the
in-process runner silences the victims at the same request): bit for bit, since mask sums are
exact in the ring whatever the masks. Where the plan allows it, the numbers also equal the plain
backend's over the same survivors, within the encoding error, which shows that the recovered
sums are the true sums of the right contributors. What happens to the victims' input in round 1:

* advertise, share_keys: they leave in the key set-up, which goes on among the survivors; no sum
  of round 1 holds their input;
* input: the survivors' pairwise masks with them are removed with their mask keys, rebuilt from
  the survivors' shares; their input is not in the sum;
* consistency, unmask: their masked input arrived, so it is in the sum; their self-masks are
  removed with their seeds, rebuilt from shares (the recover step);
* deliver: their input is in the sum; they miss only its result.

On the plain backend (no key set-up, no consistency or unmask step) the same survivors come from a
crash at the input of the sum (victims out of it) or at its deliver (victims in it).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from secure_fedgraph.models import GRUSeq2Seq
from secure_fedgraph.papers import CNFGNN, FedAvgGRU, FedSTGD
from secure_fedgraph.papers.fedrel import FedRel, FedRelConfig, FedRelSums
from secure_fedgraph.papers.cnfgnn import CNFGNNConfig
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.papers.fedstgd import FedSTGDConfig, initial_weights
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.core.spec import SumSpec
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.training.forecasting import weights_of
from tests.helpers import HZMETRO_DIR, UEA_DIR, needs_hzmetro, needs_uea

STAGES = ("advertise", "share_keys", "input", "consistency", "unmask", "deliver")
CLIENTS, SURVIVORS, VICTIMS = 7, "0-4", (5, 6)
ROUND = 1  # the round the victims die in; rounds 0 and 1 are run
IN_THE_SUM = {"consistency", "unmask", "deliver"}  # stages at which the victims' input is already in the sum they die in
PLAIN_CRASH = {stage: "deliver" if stage in IN_THE_SUM else "input" for stage in STAGES}  # the same survivors on plain


def _crash_run(start_server, *, plan: str, options: dict, stage: str, client_args: tuple[str, ...] = (),
               replays: tuple[Callable[[], dict], ...]) -> tuple[dict, list[dict]]:
    """Run ``plan`` across three processes, the victims' crashing at ``stage`` of round 1; check
    that it finished with the survivors and that the victims died where they were told to.
    Returns its metrics and those of ``replays``, the comparison runs in this process, which run
    meanwhile (starting a process keeps one core busy importing torch; the other is free)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        references = pool.submit(lambda: [replay() for replay in replays])
        run = start_server(clients=CLIENTS, plan=plan, plan_options=tuple(f"{k}={v}" for k, v in options.items()))
        survivors = run.client(SURVIVORS, *client_args)
        victims = run.client(",".join(map(str, VICTIMS)), *client_args, "--crash-at", f"{stage}@{ROUND}")
        _, metrics = run.finish()
        assert survivors.wait(timeout=60) == 0, survivors.stdout.read()
        said = victims.communicate(timeout=60)[0]
        assert victims.returncode == -signal.SIGKILL, said
        assert f"crashing this process on purpose at {stage} in round {ROUND} (--crash-at {stage}@{ROUND})" in said
        events = "\n".join(metrics["events"])
        for victim in VICTIMS:
            assert f"client {victim} left at {stage}:" in events  # the server lost both at that stage ...
            assert metrics["dropped"][str(victim)].endswith(f"in round {ROUND}")  # ... of round 1
        assert set(metrics["dropped"]) == {str(v) for v in VICTIMS} and metrics["clients_finished"] == CLIENTS - len(VICTIMS)
        assert [r["round"] for r in metrics["rounds"]] == [0, ROUND] and metrics["rounds"][-1]["clients"] >= CLIENTS - len(VICTIMS)
        return metrics, references.result()


def _replays(plan, stage: str, *, plain_stage: str | None, data_dir=None) -> tuple[Callable[[], dict], ...]:
    """The comparison runs in one process: mask with the victims silent from the first ``stage``
    request of round 1 on, and (unless ``plain_stage`` is None) plain with them silent from the
    first ``plain_stage`` request of round 1 on."""
    def replay(backend: Backend, at: str) -> Callable[[], dict]:
        crash = {CrashPoint(Stage(at), ROUND): set(VICTIMS)}
        return lambda: simulate(plan, SecureSumConfig(backend=backend), drop=crash, data_dir=data_dir).metrics

    return (replay(Backend.MASK, stage),) + (() if plain_stage is None else (replay(Backend.PLAIN, plain_stage),))


def _round_one_fedavg_contributors(metrics: dict, weights: dict) -> int:
    """How many clients round 1's FedAvg sum held: the fedavg phase moved the weights of every
    contributor of round 0's sum (all of them) and of round 1's."""
    return metrics["elements_by_phase"]["fedavg"]["up"] // SumSpec.of("weights", weights).size - CLIENTS


def _assert_same_run(metrics: dict, reference: dict, numbers, *, exact: bool) -> None:
    """The same clients dropped, the same contributors and abandoned sums, the same numbers (bit for
    bit with ``exact``, else within the encoding error)."""
    assert metrics["dropped"] == reference["dropped"] if exact else set(metrics["dropped"]) == set(reference["dropped"])
    assert metrics["elements_by_phase"] == reference["elements_by_phase"]  # the same contributors in every sum
    assert metrics["abandoned_sums"] == reference["abandoned_sums"]
    if exact:
        assert numbers(metrics) == numbers(reference)
    else:
        assert numbers(metrics) == pytest.approx(numbers(reference), rel=1e-5)


def _fedavg_numbers(m: dict) -> list[float]:
    return [v for r in m["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [m["test_rmse"], m["test_mae"]]


@pytest.mark.parametrize("stage", STAGES)
def test_fedavg_survives_a_client_process_killed_at_each_stage(start_server, stage):
    """fedavg-gru: round 1 starts with its key set-up and then the FedAvg sum, which enters every
    stage. Compared with mask in one process (bit for bit) and with plain over the same survivors
    (within the encoding error: a crash at its input for advertise, share_keys and input, at its
    deliver for the later stages). Round 1's FedAvg holds the victims' models exactly when they
    died at consistency, unmask or deliver."""
    options = dict(rounds=2, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16)
    plan = FedAvgGRU(FedAvgGRUConfig(sensors=CLIENTS, **options))
    replays = _replays(plan, stage, plain_stage=PLAIN_CRASH[stage])
    metrics, (mask, plain) = _crash_run(start_server, plan="fedavg-gru", options=options, stage=stage, replays=replays)
    _assert_same_run(metrics, mask, _fedavg_numbers, exact=True)
    _assert_same_run(metrics, plain, _fedavg_numbers, exact=False)
    contributors = _round_one_fedavg_contributors(metrics, weights_of(GRUSeq2Seq(hidden_size=options["hidden_size"])))
    assert contributors == (CLIENTS if stage in IN_THE_SUM else CLIENTS - len(VICTIMS))


def _cnfgnn_numbers(m: dict) -> list[float]:
    return [v for r in m["rounds"] for v in (r["val_rmse"], r["val_mae"], r["clients"])] + [m["test_rmse"], m["test_mae"]]


@pytest.mark.parametrize("stage", STAGES)
def test_cnfgnn_survives_a_client_process_killed_at_each_stage(start_server, stage):
    """CNFGNN (AT + FedAvg): round 1 starts with its key set-up and the FedAvg sum (every stage),
    then split learning, where the dead sensors' nodes get zero h_c. Compared with mask in one
    process (bit for bit) and with plain over the same survivors (within the encoding error), as
    for fedavg-gru; the round's ``clients`` (its FedAvg's contributors) is 7 when the victims died
    at consistency, unmask or deliver, 5 before."""
    options = dict(rounds=2, hidden_size=8, gn_hidden=16, gn_update=8, max_windows=30, batch_size=16, server_batch_size=12,
                   max_local_steps=2, max_server_batches=1)
    no_dp = ("--min-dp-sigma", "0")  # the paper's split learning without noise: an explicit opt-in on every client
    plan = CNFGNN(CNFGNNConfig(sensors=CLIENTS, **options))
    replays = _replays(plan, stage, plain_stage=PLAIN_CRASH[stage])
    metrics, (mask, plain) = _crash_run(start_server, plan="cnfgnn", options=options, stage=stage, client_args=no_dp, replays=replays)
    _assert_same_run(metrics, mask, _cnfgnn_numbers, exact=True)
    _assert_same_run(metrics, plain, _cnfgnn_numbers, exact=False)
    assert metrics["rounds"][ROUND]["clients"] == (CLIENTS if stage in IN_THE_SUM else CLIENTS - len(VICTIMS))


def _fedstgd_numbers(m: dict) -> list[float]:
    return [v for r in m["rounds"] for v in (r["rmse"], r["mae"], r["mape"])] + [m["test_rmse"], m["test_mae"], m["test_mape"]]


@needs_hzmetro
@pytest.mark.parametrize("stage", STAGES)
def test_fedstgd_survives_a_client_process_killed_at_each_stage(start_server, stage):
    """FedSTGD: round 1 is its key set-up, one training batch of streaming P/Q sums (input and
    deliver only; M-STREAM), the FedAvg sum (the full protocol), and the evaluation. So the
    victims die at the first P/Q sum for input and deliver, and in the FedAvg sum for consistency
    and unmask. Compared with mask in one process, bit for bit, for every stage. Compared with
    plain (within the encoding error) only where plain can lose the same clients at the same
    point: at input (the P/Q sum is abandoned on both backends, and with it the batch) and at
    deliver (the P/Q sum holds the victims, nothing after it does). Plain has no key set-up in
    which to lose them before round 1's first sum, and its first deliver of round 1 is a P/Q sum's,
    so no plain crash point keeps them in the FedAvg sum alone. Round 1's FedAvg holds the
    victims' global parameters exactly when they died at consistency or unmask."""
    options = dict(rounds=2, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=8, batch_size=8, eval_batch_size=16)
    config = FedSTGDConfig(clients=CLIENTS, **options)
    plan = FedSTGD(config)
    replays = _replays(plan, stage, plain_stage=stage if stage in ("input", "deliver") else None, data_dir=HZMETRO_DIR)
    metrics, (mask, *plain) = _crash_run(start_server, plan="fedstgd", options=options, stage=stage,
                                         client_args=("--data-dir", str(HZMETRO_DIR)), replays=replays)
    _assert_same_run(metrics, mask, _fedstgd_numbers, exact=True)
    for reference in plain:
        _assert_same_run(metrics, reference, _fedstgd_numbers, exact=False)
    assert metrics["abandoned_sums"] == ({"pq": 1} if stage == "input" else {})
    contributors = _round_one_fedavg_contributors(metrics, initial_weights(config))
    assert contributors == (CLIENTS if stage in ("consistency", "unmask") else CLIENTS - len(VICTIMS))


def _fedrel_numbers(m: dict) -> list[float]:
    return [v for r in m["rounds"] for v in (r["acc"], r["f1"], r["clients"])] + [m["test_acc"], m["test_f1"]]


@needs_uea
@pytest.mark.parametrize("stage", STAGES)
def test_fedrel_survives_a_client_process_killed_at_each_stage(start_server, stage):
    """FedRel (relevance aggregation): round 1 is its key set-up, the sum of the d_hat_k (every
    stage), the relevance sum [e_k Theta_k, e_k] and the released confusion matrices. The victims'
    d_hat_k is in round 1's first sum exactly when they died at consistency, unmask or deliver, and
    never in its relevance sum: Theta = sum e_k Theta_k / sum e_k over the survivors, with d_tilde
    over whoever the first sum held. Compared with mask in one process (bit for bit) and with
    plain over the same survivors (within the encoding error), as for fedavg-gru."""
    options = dict(dataset="basicmotions", clients=CLIENTS, split="iid", rounds=2, local_steps=1, vae_rounds=1, vae_local_steps=1,
                   features=8, hidden=8)
    plan = FedRel(FedRelConfig(**options))
    replays = _replays(plan, stage, plain_stage=PLAIN_CRASH[stage], data_dir=UEA_DIR)
    del options["clients"]  # the server's --clients
    metrics, (mask, plain) = _crash_run(start_server, plan="fedrel", options=options, stage=stage,
                                        client_args=("--data-dir", str(UEA_DIR)), replays=replays)
    _assert_same_run(metrics, mask, _fedrel_numbers, exact=True)
    _assert_same_run(metrics, plain, _fedrel_numbers, exact=False)
    distribution = metrics["elements_by_phase"]["aggregation"]["up"]  # round 0: 7 x (m + relevance); round 1: its two sums
    sums = FedRelSums(FedRelConfig(**options, clients=CLIENTS))
    held = (distribution - CLIENTS * sums.elements_per_round() - (CLIENTS - len(VICTIMS)) * sums.relevance.size) // sums.distribution.size
    assert held == (CLIENTS if stage in IN_THE_SUM else CLIENTS - len(VICTIMS))
