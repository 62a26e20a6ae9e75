"""Resuming a run after the server dies (protocol/engine/resume.py, protocol/sum_backends/signed.py, the
plans' checkpoints): a resumed run gives the uninterrupted run's numbers, what a client keeps of
its run, and the attacks a "restarting" server could try (threat_model.md R-RESUME)."""

from __future__ import annotations

import numpy as np
import pytest

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.papers import ENTRIES, PLAN_NAMES, CNFGNN, FedAvgGRU, FedAvgVector, LocalGRU
from secure_fedgraph.papers.cnfgnn import CNFGNNConfig
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.papers.synthetic import FedAvgVectorConfig
from secure_fedgraph.protocol.engine.contexts import ClientContext
from secure_fedgraph.protocol.core import session as session_module
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.engine.resume import RunMemory
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, GraphKind, SecureSumConfig, Stage, SumSpec, make_client, make_server
from secure_fedgraph.protocol.sum_backends.config import MaskPlan
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, new_session_id
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions
from secure_fedgraph.protocol.transports.inprocess import LocalRunner
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.papers.fedrel import FedRel, FedRelConfig
from tests.helpers import default_policy_session as local_session
from tests.helpers import UEA_DIR, WeakServer, close, defence_stops, make_inputs, needs_uea


TINY = FedAvgGRUConfig(rounds=3, sensors=5, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16)
MASK = SecureSumConfig(backend=Backend.MASK)


def _numbers(metrics: dict) -> list:
    """A run's numbers: every round's metrics (but wall-clock seconds) and the test errors."""
    rows = [{k: v for k, v in row.items() if k != "round_seconds"} for row in metrics["rounds"]]
    return rows + [metrics.get("test_rmse"), metrics.get("test_mae")]


# --- a resumed run gives the uninterrupted run's numbers --------------------------------------


@pytest.mark.parametrize(
    "plan,backend,crash_at",
    [
        (FedAvgGRU(TINY), Backend.MASK, CrashPoint(Stage.UNMASK, 1)),  # the clients had signed round 1's FedAvg sum: asked again, same set
        (FedAvgGRU(TINY), Backend.MASK, CrashPoint(Stage.CONSISTENCY, 2)),  # their masked inputs had left, unsigned
        (LocalGRU(TINY), Backend.PLAIN, CrashPoint(Stage.DELIVER, 1)),  # each client's own model, kept by the client
        # round 1 has no key set-up (its headers say round 0): the resumed session starts one
        (FedAvgVector(FedAvgVectorConfig(clients=4, length=64, rounds=4, fresh_keys_every=2)), Backend.MASK, CrashPoint(Stage.INPUT, 0, 2)),
        (FedAvgVector(FedAvgVectorConfig(clients=4, length=64, rounds=3)), Backend.CKKS, CrashPoint(Stage.CONSISTENCY, 1)),
    ],
    ids=["fedavg-gru-mask-unmask", "fedavg-gru-mask-consistency", "local-gru-plain", "fedavg-vector-mask-no-key-round", "fedavg-vector-ckks"],
)
def test_a_run_resumed_after_the_server_died_gives_the_uninterrupted_numbers(plan, backend, crash_at):
    """The server dies on entering a step mid-round; the run goes on in a new session (new keys)
    from the last checkpoint, every client from the state it kept: bit for bit the same numbers
    with mask and plain (exact sums), and element counts per phase too."""
    secure = SecureSumConfig(backend=backend)
    uninterrupted = simulate(plan, secure).metrics
    resumed = simulate(plan, secure, restart_at=crash_at).metrics
    assert resumed["resumed"] == [{"round": 1 if crash_at.nth == 2 else crash_at.round, "clients": len(plan.client_ids())}]
    assert _numbers(resumed) == _numbers(uninterrupted)
    assert resumed["elements_by_phase"] == uninterrupted["elements_by_phase"]


@needs_uea
@pytest.mark.parametrize("aggregation,crash_at", [("relevance", CrashPoint(Stage.UNMASK, 2)), ("uniform", CrashPoint(Stage.INPUT, 1))])
def test_a_fedrel_run_resumed_after_the_server_died_gives_the_uninterrupted_numbers(aggregation, crash_at):
    """FedRel: each participant keeps its model, Adam state, dropout generator, d_k and d_tilde
    at the round boundary; the server keeps the metrics so far. Resumed in round 2 (relevance:
    after the d_hat sum, in the relevance sum's unmask step) or round 1: the same numbers."""
    plan = FedRel(FedRelConfig(clients=3, rounds=3, local_steps=2, vae_rounds=1, vae_local_steps=1, features=8, hidden=8,
                               aggregation=aggregation))
    uninterrupted = simulate(plan, MASK, data_dir=UEA_DIR).metrics
    resumed = simulate(plan, MASK, data_dir=UEA_DIR, restart_at=crash_at).metrics
    assert resumed["resumed"] == [{"round": crash_at.round, "clients": 3}]
    assert resumed["rounds"] == uninterrupted["rounds"] and resumed["test_f1"] == uninterrupted["test_f1"]
    assert resumed["elements_by_phase"] == uninterrupted["elements_by_phase"]


def test_a_fedavg_gru_run_resumed_with_ckks_gives_the_numbers_within_the_stated_error():
    """ckks: the resumed session deals fresh keys, so its encryption noise differs; the released
    error totals are rounded to the stated precision, so the numbers agree within it."""
    config = FedAvgGRUConfig(rounds=2, sensors=4, hidden_size=8, max_windows=30, max_local_steps=2, batch_size=16)
    secure = SecureSumConfig(backend=Backend.CKKS)
    uninterrupted = simulate(FedAvgGRU(config), secure).metrics
    resumed = simulate(FedAvgGRU(config), secure, restart_at=CrashPoint(Stage.DELIVER, 1)).metrics
    flat = lambda m: [v for row in m["rounds"] for v in (row["val_rmse"], row["val_mae"])] + [m["test_rmse"], m["test_mae"]]  # noqa: E731
    assert flat(resumed) == pytest.approx(flat(uninterrupted), rel=1e-5)


def test_a_client_that_left_before_the_checkpoint_stays_out_and_the_numbers_still_agree():
    """Client 4 dies in round 0; the checkpoint of round 1 lists the four others, the resumed
    server waits for them only, and the floors still count the run's five."""
    drop = {Stage.INPUT: [4]}
    uninterrupted = simulate(FedAvgGRU(TINY), MASK, drop=drop).metrics
    resumed = simulate(FedAvgGRU(TINY), MASK, drop=drop, restart_at=CrashPoint(Stage.INPUT, 2)).metrics
    assert resumed["resumed"] == [{"round": 2, "clients": 4}] and set(resumed["dropped"]) == {"4"}
    assert _numbers(resumed) == _numbers(uninterrupted)


def test_only_the_plans_that_save_their_state_can_resume():
    """CNFGNN and FedSTGD are refused with their reason (docs/running.md, "Restarting the server")."""
    resumable = {entry.name for entry in ENTRIES if entry.resumable}
    assert resumable == {"fedavg-gru", "local-gru", "fedavg-vector", "fedrel"} and resumable < set(PLAN_NAMES)
    with pytest.raises(ConfigError, match="plan cnfgnn cannot be resumed: its server's Graph Network and Adam state"):
        simulate(CNFGNN(CNFGNNConfig(sensors=3, rounds=2)), MASK, restart_at=CrashPoint(Stage.INPUT, 1))


# --- what a client keeps of its run ------------------------------------------------------------


def _memory(n: int = 3) -> RunMemory:
    return RunMemory(client_id=0, run={"plan": "p"}, directory={c: bytes([c]) * 32 for c in range(n)}, data=None)


def test_a_client_keeps_copies_of_its_plans_state_and_lets_go_of_rounds_the_server_passed():
    memory = _memory()
    weights = np.zeros(3)
    context = memory.context(seed=0, resume_round=None)
    for r in range(3):
        context.checkpoint(r, {"weights": weights})
        weights += 1  # the plan trains on: what was kept must not change
    assert memory.rounds == [0, 1, 2]
    memory.server_at(1)  # the server has written its checkpoint of round 1: it cannot resume at 0 any more
    assert memory.rounds == [1, 2]
    resumed = memory.context(seed=0, resume_round=1)
    assert isinstance(resumed, ClientContext) and resumed.resume_from(None) == (1, {"weights": pytest.approx(np.ones(3))})
    resumed.resumed.state["weights"] += 5  # the plan's copy, not the kept one
    assert memory.context(seed=0, resume_round=1).resumed.state["weights"].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ProtocolError, match="resumes the run at round 0, but this client holds its plan's state at rounds 1, 2 only"):
        memory.context(seed=0, resume_round=0)


def test_a_resumed_welcome_must_announce_the_same_run_among_its_first_clients():
    memory = _memory()
    keys = dict(memory.directory)
    assert memory.resumed_directory({"plan": "p"}, {0: keys[0], 2: keys[2]}) == keys  # fewer came back: the run's directory stays
    with pytest.raises(ProtocolError, match="not the run this client took part in"):
        memory.resumed_directory({"plan": "q"}, keys)
    with pytest.raises(ProtocolError, match=r"lists clients \[7\] that the run did not start with"):
        memory.resumed_directory({"plan": "p"}, {**keys, 7: bytes(32)})
    with pytest.raises(ProtocolError, match=r"gives clients \[1\] other identity keys"):
        memory.resumed_directory({"plan": "p"}, {**keys, 1: bytes(32)})


def test_signed_contributions_go_only_into_the_same_set_in_a_later_session():
    signed, everyone, fewer = SignedContributions(), frozenset(range(4)), frozenset(range(3))
    first, second, third = new_session_id(), new_session_id(), new_session_id()
    signed.sign("s", b"x", everyone, session=first, client=0)
    signed.sign("s", b"x", fewer, session=first, client=0)  # a re-key inside a session (nothing revealed yet, M-ONCE)
    signed.sign("s", b"y", everyone, session=first, client=0)
    signed.sign("s", b"y", everyone, session=second, client=0)  # the same set again: nothing new to learn
    signed.sign("s", b"z", fewer, session=second, client=0)  # another contribution: never signed before
    with pytest.raises(ProtocolError, match=r"signed into a sum over clients \[0, 1, 2, 3\] before the server restarted; refusing to sign "
                                            r"it into a sum over \[0, 1, 2\]"):
        signed.sign("s", b"y", fewer, session=second, client=0)
    with pytest.raises(ProtocolError, match="asks again"):  # signed into two sets: no set is safe any more
        signed.sign("s", b"x", everyone, session=third, client=0)
    signed.plan_round = 2
    signed.sign("t", b"w", everyone, session=third, client=0)
    signed.forget_before(2)
    assert len(signed) == 1


def test_the_resume_refusal_lists_the_sets_the_client_signed_before_and_the_one_asked():
    """What the R-RESUME refusal tells the operator: every set signed before, in a fixed order,
    and the set asked for, with long sets cut after twelve ids and their size given."""
    signed, first, second = SignedContributions(), new_session_id(), new_session_id()
    signed.sign("s", b"x", frozenset({2}), session=first, client=2)
    signed.sign("s", b"x", frozenset({0, 2}), session=first, client=2)  # a re-key's set (listed first: [0, 2] sorts before [2])
    twelve, thirteen = ", ".join(map(str, range(12))), ", ".join(map(str, range(13)))
    with pytest.raises(ProtocolError) as refused:
        signed.sign("s", b"x", frozenset(range(13)), session=second, client=2)
    assert f"over clients [0, 2] and [2] before the server restarted; refusing to sign it into a sum over [{twelve}, ... (13 in all)]" \
        in str(refused.value)
    assert thirteen not in str(refused.value)
    with pytest.raises(ProtocolError) as refused:
        signed.sign("s", b"x", frozenset(range(12)), session=second, client=2)
    assert f"into a sum over [{twelve}] (the difference" in str(refused.value)


# --- attacks by a server that "restarts" (R-RESUME) ---------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["survivor set", "streaming live set"])
def test_attack_a_restarted_server_asks_for_the_same_contributions_without_one_client(monkeypatch, streaming):
    """Session 1 sums x_0..x_3 (every client signs {0, 1, 2, 3}; a streaming sum binds its live
    set when its input leaves). The server "restarts": a new session, new keys, and the plans
    recompute the same round, so 0, 1 and 2 hold the same contributions; it asks for them again
    without client 3. The difference of the two sums would be x_3: each client refuses to sign
    its contribution into another set than before."""
    n, victim = 4, 3
    inputs = make_inputs(range(n), shapes={"w": (16,)})
    spec = SumSpec.of("s", inputs[0], streaming=streaming)

    def attack() -> bool:
        identities = {c: IdentityKey.generate() for c in range(n)}
        directory = {c: k.public_bytes for c, k in identities.items()}
        signed = {c: SignedContributions() for c in range(n)}  # what each client process keeps across sessions

        def session(clients: list[int]):
            sid = new_session_id()
            server = make_server(MASK, session=sid, directory=directory, clients=list(range(n)))
            roles = {c: make_client(MASK, client_id=c, session=sid, identity=identities[c], directory=directory, signed=signed[c],
                                    policy=ClientPolicy()) for c in clients}
            runner = LocalRunner(server, roles)
            runner.run(server.setup(0, participants=clients))
            for c in clients:
                roles[c].contribute("s", inputs[c])
            return runner.run(server.aggregate(spec))

        everyone = session(list(range(n)))
        without = session([c for c in range(n) if c != victim])
        return close(everyone.values["w"] - without.values["w"], inputs[victim]["w"])

    defence_stops(attack, monkeypatch, ClientRole, "_bind", lambda self, name, digest, contributors: None)


@pytest.mark.parametrize("streaming", [False, True], ids=["survivor set", "streaming live set"])
def test_a_contribution_is_bound_per_sum_so_another_sums_equal_values_still_go_through(streaming):
    """What a client signs is bound to (sum, contribution): a plan whose sum "b" carries the same
    values as its sum "a" (zero gradients, say) can still have "b" summed over fewer clients
    after a restart. Nothing is given away by it that one session could not already ask for:
    within a session, "a" and "b" may go into any sets."""
    n = 4
    inputs = make_inputs(range(n), shapes={"w": (16,)})
    identities = {c: IdentityKey.generate() for c in range(n)}
    signed = {c: SignedContributions() for c in range(n)}

    def session(name: str, clients: list[int]):
        run = local_session(MASK, range(n), identities=identities, signed=signed, policy=ClientPolicy())
        run.runner.run(run.server.setup(0, participants=clients))
        return run.secure_sum(name, {c: inputs[c] for c in clients}, streaming=streaming)

    session("a", list(range(n)))
    fewer = session("b", [0, 1, 2])
    assert close(fewer.values["w"], sum(inputs[c]["w"] for c in (0, 1, 2)))
    assert all(len(signed[c]) == 2 for c in (0, 1, 2))  # one entry per sum: both were bound


def test_attack_a_restarted_server_reusing_its_session_id(monkeypatch):
    """The same attack by a server that "restarts" under the session id of the first session, so
    that each client's record of what it signed there would count as this session's (where a
    re-key may redo a sum among fewer clients). Every client adds a fresh nonce when a session
    opens (protocol/core/session.py): the resumed session's id is new to it whatever the server
    proposes, and the contribution it signed into {0, 1, 2, 3} goes into no other set."""
    n, victim, proposal = 4, 3, new_session_id()
    inputs = make_inputs(range(n), shapes={"w": (16,)})

    def attack() -> bool:
        identities = {c: IdentityKey.generate() for c in range(n)}
        signed = {c: SignedContributions() for c in range(n)}  # what each client process keeps across sessions

        def session(clients: list[int]):
            run = local_session(MASK, range(n), session=proposal, identities=identities, signed=signed, policy=ClientPolicy())
            run.runner.run(run.server.setup(0, participants=clients))
            return run.secure_sum("s", {c: inputs[c] for c in clients})

        everyone = session(list(range(n)))
        without = session([c for c in range(n) if c != victim])
        return close(everyone.values["w"] - without.values["w"], inputs[victim]["w"])

    defence_stops(attack, monkeypatch, session_module, "agreed_session", lambda *, proposal, **kw: proposal)


def test_key_epochs_are_counted_over_the_run_across_sessions():
    """A restarted server (a new session) does not reset a client's count of the run's key
    epochs (--max-key-epochs, C2): RunMemory hands one count to the client's role of every
    session, as it does the signed contributions."""
    n = 3
    identities = {c: IdentityKey.generate() for c in range(n)}
    directory = {c: k.public_bytes for c, k in identities.items()}
    memories = {c: RunMemory(client_id=c, run={"plan": "p"}, directory=directory, data=None) for c in range(n)}
    policy = ClientPolicy(max_key_epochs=3)

    def new_session():
        sid = new_session_id()
        server = make_server(MASK, session=sid, directory=directory, clients=list(range(n)))
        roles = {c: make_client(MASK, client_id=c, session=sid, identity=identities[c], directory=directory, policy=policy,
                                signed=memories[c].signed, key_epochs=memories[c].key_epochs) for c in range(n)}
        return server, LocalRunner(server, roles)

    server, runner = new_session()
    runner.run(server.setup(0))
    runner.run(server.setup(1))
    server, runner = new_session()  # the server "restarts"
    runner.run(server.setup(2))
    assert all(m.key_epochs.seen == 3 for m in memories.values())
    with pytest.raises(ProtocolError, match=r"key epoch 4 of this run, more than 3 .*--max-key-epochs"):
        runner.run(server.setup(3))


def test_attack_a_restart_that_shrinks_the_run_to_lower_the_floor(monkeypatch):
    """A run of ten; the server "restarts" announcing clients 1-4 only, then a round of three
    (2, 3, 4), 3 and 4 colluding: x_2 + x_3 + x_4 minus the colluders' own inputs is x_2. A
    resumed session's floors count the clients the run started with (ten: at least six
    contributors), not the four announced (three). (A restart down to two is refused anyway,
    by every client's --min-run-clients and colluder floor.)"""
    n = 10
    inputs = make_inputs(range(n), shapes={"w": (16,)})
    identities = {c: IdentityKey.generate() for c in range(n)}
    directory = {c: k.public_bytes for c, k in identities.items()}
    memories = {c: RunMemory(client_id=c, run={"plan": "p"}, directory=directory, data=None) for c in (2, 3, 4)}  # after session 1

    class ThreeServer(WeakServer):
        weak = MaskPlan(GraphKind.COMPLETE, 2, 3, 3, 2, False)  # what a run of four would need of a round of three

    def attack() -> bool:
        sid, four = new_session_id(), {c: directory[c] for c in (1, 2, 3, 4)}
        server = ThreeServer(MASK, session=sid, directory=four, clients=[1, 2, 3, 4])
        roles = {c: make_client(MASK, client_id=c, session=sid, identity=identities[c], policy=ClientPolicy(),
                                directory=memories[c].resumed_directory({"plan": "p"}, four), signed=memories[c].signed) for c in (2, 3, 4)}
        runner = LocalRunner(server, roles)
        runner.run(server.setup(0, participants=[2, 3, 4]))
        for c in (2, 3, 4):
            roles[c].contribute("s", inputs[c])
        total = runner.run(server.aggregate(SumSpec.of("s", inputs[2])))
        return close(total.values["w"] - inputs[3]["w"] - inputs[4]["w"], inputs[2]["w"])

    defence_stops(attack, monkeypatch, RunMemory, "run_directory", lambda self, announced: dict(announced))
