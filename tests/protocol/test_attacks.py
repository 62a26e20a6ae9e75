"""Attacks on the mask backend by a deviating server, a server with colluding clients, and
malicious clients, run as an attacker would against the real roles in one process.

Every test runs its attack twice through :func:`tests.helpers.defence_stops`: against the
real code, where it must fail, and against the same code with the one defence that stops it
switched off, where it must succeed (threat_model.md names each test beside its claim).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from secure_fedgraph.crypto import shamir
from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.crypto.prg import MaskPRG
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.engine import ClientContext, ClientHost
from secure_fedgraph.protocol.local import local_session
from secure_fedgraph.protocol.secure_sum import (
    Backend,
    ClientPolicy,
    GraphKind,
    MaskConfig,
    SecureSumConfig,
    Stage,
    SumSpec,
    make_client,
)
from secure_fedgraph.protocol.secure_sum import keyring, mask_client, mask_format, policy
from secure_fedgraph.protocol.secure_sum.adversary import majority
from secure_fedgraph.protocol.secure_sum.config import MaskPlan
from secure_fedgraph.protocol.secure_sum.mask_client import MaskClient
from secure_fedgraph.protocol.secure_sum.mask_server import MaskServer
from secure_fedgraph.protocol.secure_sum.messages import (
    ConsistencyRequest,
    InputResponse,
    Signature,
    UnmaskRequest,
    UnmaskResponse,
)
from secure_fedgraph.protocol.secure_sum.neighbours import NeighbourGraph
from secure_fedgraph.protocol.secure_sum.roles import ClientRole
from secure_fedgraph.protocol.spec import SumResult
from secure_fedgraph.protocol.transports.inprocess import LocalRunner
from tests.helpers import NO_COLLUDERS, WeakServer, defence_stops, make_inputs

MASK = SecureSumConfig(backend=Backend.MASK)
SHAPE = {"w": (16,)}


def _close(guess: np.ndarray, truth: np.ndarray) -> bool:
    return bool(np.allclose(guess, truth, atol=1e-4))


def _strip(y: np.ndarray, *, encoding, self_key: bytes | None, pair_keys: dict[int, bytes], client: int, stream: int) -> np.ndarray:
    """One client's input from its masked upload, given every key that masks it (what the
    attacker must collect): y - PRG(K_self) - sum over v of +-PRG(K_uv)."""
    acc = y.copy()
    prg = MaskPRG()
    if self_key is not None:
        prg.add_into(acc, self_key, stream_id=0, sign=-1)
    for v, key in pair_keys.items():
        prg.add_into(acc, key, stream_id=stream, sign=-1 if client < v else 1)
    return encoding.decode_sum(np.ascontiguousarray(acc[:-1]))


class WithholdingServer(MaskServer):
    """Runs a sum through unmask, computes it, and never sends DELIVER."""

    def _deliver(self, index, spec, encoding, acc, contributors):
        return SumResult(spec, spec.unflatten(encoding.decode_sum(np.ascontiguousarray(acc[:-1]))), frozenset(contributors), 0, 0.0)
        yield  # a generator with no steps


# --- A. withheld delivery, then the same sum again without one client (M-ONCE) -----------------


@pytest.mark.parametrize("how", ["re-key", "new round"])
def test_attack_withheld_delivery_then_ask_again_without_one_client(monkeypatch, how):
    """The server unmasks a sum, withholds it, then asks the others for it again (after a re-key
    without client 4, or in a new round): the difference of the two sums would be x_4."""
    n, u = 6, 4

    def attack() -> bool:
        session = local_session(MASK, range(n))
        session.server.__class__ = WithholdingServer
        session.start_round()
        inputs = make_inputs(range(n), shapes=SHAPE)
        first = session.secure_sum("s", inputs)
        others = set(range(n)) - {u}
        if how == "re-key":
            session.runner.run(session.server._key_setup(others))
        else:
            session.runner.run(session.server.setup(1, participants=sorted(others)))
        second = session.secure_sum("s", {c: inputs[c] for c in others})  # the clients' staged contributions, again
        return _close(first.values["w"] - second.values["w"], inputs[u]["w"])

    defence_stops(attack, monkeypatch, ClientRole, "_expose", lambda self, spec: None)


def _hosts(config: SecureSumConfig, n: int, plan, server_class):
    """A server of ``server_class`` and n client hosts running ``plan``, in one process."""
    identities = {c: IdentityKey.generate() for c in range(n)}
    directory = {c: k.public_bytes for c, k in identities.items()}
    session = os.urandom(16)
    server = server_class(config, session=session, directory=directory, clients=list(range(n)))
    hosts = {c: ClientHost(role=make_client(config, client_id=c, session=session, identity=identities[c], directory=directory),
                           plan=plan, context=ClientContext(c, 0)) for c in range(n)}
    return server, hosts


def test_attack_withheld_delivery_then_ask_again_through_client_hosts(monkeypatch):
    """The same attack against ClientHost, which the gRPC client runs, with plans that even
    retry with the same contribution when told the sum was abandoned: the role refuses it."""
    n, u = 6, 4
    inputs = make_inputs(range(n), shapes=SHAPE)

    def stubborn(ctx: ClientContext):
        from secure_fedgraph.errors import SumAbandoned

        try:
            yield ctx.secure_sum("s", inputs[ctx.client_id])
        except SumAbandoned:
            yield ctx.secure_sum("s", inputs[ctx.client_id])  # a careless plan: the same tensors again

    def attack() -> bool:
        server, hosts = _hosts(MASK, n, stubborn, WithholdingServer)
        runner = LocalRunner(server, hosts)
        spec = SumSpec.of("s", inputs[0])
        runner.run(server.setup(0))
        first = runner.run(server.aggregate(spec))
        runner.run(server._key_setup(set(range(n)) - {u}))
        second = runner.run(server.aggregate(spec))
        return _close(first.values["w"] - second.values["w"], inputs[u]["w"])

    defence_stops(attack, monkeypatch, ClientRole, "_expose", lambda self, spec: None)


# --- D. streaming redo: a faked dropout, then the sum again (M-STREAM, M-ONCE) -----------------


def test_attack_streaming_redo_after_a_faked_dropout(monkeypatch):
    """The server keeps client 3's streaming input aside, claims 3 dropped, and asks the others
    for the sum again: with every first input in hand, the difference would be x_3."""

    def attack() -> bool:
        kept: dict[int, np.ndarray] = {}

        def keep_first_inputs(direction, stage, client, data):
            if direction == "up" and stage is Stage.INPUT and client not in kept:
                kept[client] = codec.decode(data).payload.copy()
                if client == 3:
                    return None  # the server "did not receive" it
            return data

        session = local_session(MASK, range(5), intercept=keep_first_inputs)
        session.start_round()
        inputs = make_inputs(range(5), shapes=SHAPE)
        try:
            session.secure_sum("s", inputs, streaming=True)  # abandoned by the (honest) aggregation code
        except Exception:
            pass
        redone = session.secure_sum("s", {c: inputs[c] for c in (0, 1, 2, 4)}, streaming=True)
        everyone = session.server.config.mask.encoding(5, 16).decode_sum(sum(kept.values())[:-1])
        return _close(everyone - redone.values["w"], inputs[3]["w"])

    defence_stops(attack, monkeypatch, ClientRole, "_expose", lambda self, spec: None)


# --- B. the server sets the security parameters (M-POLICY) -------------------------------------


def test_attack_a_round_of_two_with_a_colluder_releases_the_other(monkeypatch):
    """A run of 5; the server starts a round with clients 3 and 4 only, 4 colluding: the sum it
    releases is x3 + x4, so x3 follows. Clients keep their own floor (a majority of the run)."""

    def attack() -> bool:
        session = local_session(MASK, range(5), policy=ClientPolicy())
        session.server.__class__ = WeakServer
        session.runner.run(session.server.setup(0, participants=[3, 4]))
        inputs = make_inputs(range(5), shapes=SHAPE)
        total = session.secure_sum("s", {3: inputs[3], 4: inputs[4]})
        return _close(total.values["w"] - inputs[4]["w"], inputs[3]["w"])  # the colluder knows its own input

    defence_stops(attack, monkeypatch, ClientPolicy, "check_mask_round", lambda self, plan, **kw: None)


def test_attack_a_run_of_two_releases_the_victims_input_to_its_colluder(monkeypatch):
    """B2: a run of two clients, 0 the victim and 1 colluding with the server. The server's own
    configuration counts no colluder, so it announces floor 2 and threshold 2 and releases
    x0 + x1; the colluder subtracts its own input. A client with the default policy refuses the
    run. Two conditions refuse it, each on its own: the colluder floor (a corrupt fraction above
    0 counts at least one colluder, so a sum needs 3 clients, more than the run has), shown for a
    client that lowered --min-run-clients to 2; and --min-run-clients (3), shown for a client
    that assumes no colluders at all (the other client still reads its input from the sum)."""
    import math

    from secure_fedgraph.protocol.secure_sum import Adversary

    def attack(client_policy: ClientPolicy) -> bool:
        session = local_session(SecureSumConfig(mask=MaskConfig(adversary=NO_COLLUDERS)), range(2), policy=client_policy)
        session.start_round()
        inputs = make_inputs(range(2), shapes=SHAPE)
        total = session.secure_sum("s", inputs)
        return _close(total.values["w"] - inputs[1]["w"], inputs[0]["w"])  # the colluder knows its own input

    from secure_fedgraph.errors import ProtocolError

    with pytest.raises(ProtocolError, match=r"the run has 2 clients, fewer than 3 .*\(--min-run-clients\)"):
        attack(ClientPolicy())  # the default policy
    with pytest.raises(ProtocolError, match=r"a run of 2 clients with 1 colluding cannot put two honest inputs .*--corrupt-fraction"):
        attack(ClientPolicy(min_run_clients=2))
    defence_stops(lambda: attack(ClientPolicy(min_run_clients=2)), monkeypatch, Adversary, "colluders",
                  lambda self, n_run: math.floor(self.corrupt_fraction * n_run))  # rounded down only: none in a run of two
    defence_stops(lambda: attack(ClientPolicy(adversary=NO_COLLUDERS)), monkeypatch, ClientPolicy, "_check_run_size",
                  lambda self, n_run: None)


def test_attack_grinding_key_epochs_until_the_server_likes_the_graph(monkeypatch):
    """C2: the server aborts every key epoch once its graph is fixed (its keys shared) and starts
    another, hoping for a graph it likes. The graph's bounds hold over the 1,024 key epochs a
    run may hold (2^-40 for all of them together), so a client that has taken part in 1,020
    (a long run) takes part in four more, and refuses the fifth (--max-key-epochs); without the
    cap it goes on, each try another chance at a failing graph. (The count and the refusal are
    the same for complete and sparse epochs: one code path, ADVERTISE.)"""
    from secure_fedgraph.errors import ProtocolError

    cap = ClientPolicy().max_key_epochs

    def attack() -> bool:
        session = local_session(MASK, range(5), policy=ClientPolicy())
        for role in session.clients.values():
            role.key_epochs.seen = cap - 4
        for _ in range(5):  # abort the epoch after its graph is fixed, start the next
            session.start_round()
        return all(role.key_epochs.seen == cap + 1 for role in session.clients.values())

    with pytest.raises(ProtocolError, match=r"key epoch 1025 of this run, more than 1024 .*\(--max-key-epochs\)"):
        attack()
    defence_stops(attack, monkeypatch, ClientPolicy, "_check_key_epochs", lambda self, key_epoch: None)


def test_the_welcome_cannot_lower_a_clients_dp_noise_or_enable_what_it_refuses():
    """What a Welcome announces is checked against the client's policy before anything is sent
    (the gRPC runtime calls check_run on every Welcome; integration tests run it end to end)."""
    from secure_fedgraph.errors import ProtocolError

    mine = ClientPolicy()
    with pytest.raises(ProtocolError, match=r"dp_sigma=0, below 1 .*--min-dp-sigma"):
        mine.check_run(MASK, n_run=4, uploads_activations=True, dp_sigma=0.0)
    with pytest.raises(ProtocolError, match=r"the server runs the ckks backend, and this client accepts mask.*--backend"):
        mine.check_run(SecureSumConfig(backend=Backend.CKKS), n_run=4)
    with pytest.raises(ProtocolError, match=r"min_survivors=2 is below 3 .*--min-survivors-fraction"):
        mine.check_run(dataclasses.replace(MASK, min_survivors=2), n_run=4)
    with pytest.raises(ProtocolError, match="streaming variant.*--no-streaming"):
        ClientPolicy(allow_streaming=False).check_run(MASK, n_run=4)
    mine.check_run(MASK, n_run=4, uploads_activations=True, dp_sigma=1.0)  # enough noise: accepted


# --- G. colluders help the server equivocate (M-CONSISTENCY, M-THRESHOLD) ----------------------


def test_attack_two_survivor_sets_with_colluders(monkeypatch):
    """n = 10, clients 8 and 9 collude. The server announces t = 6 (a majority), shows client 0
    and clients 1-3 a survivor set with 0 in it, clients 4-7 one without 0. Client 0 gets 6
    signatures (0-3 and the colluders) and reveals its self-mask key; 4-7 get 6 signatures and
    reveal their shares of 0's mask key, the colluders add theirs: x0 in one sum. Clients
    require 2t > n + colluders (t = 7 for 3 colluders of 10), which neither set can gather."""
    n, colluders, group_a, group_b = 10, {8, 9}, {0, 1, 2, 3}, {4, 5, 6, 7}

    class Equivocating(WeakServer):
        weak = MaskPlan(GraphKind.COMPLETE, 9, majority(10), 6, 9, False)

    def attack() -> bool:
        seen: dict = {}
        session = local_session(MASK, range(n), policy=ClientPolicy(), record=True)
        session.server.__class__ = Equivocating
        session.runner.run(session.server.setup(0))
        server, clients = session.server, session.clients
        inputs = make_inputs(range(n), shapes=SHAPE)
        for c in range(n):
            clients[c].contribute("s", inputs[c])
        spec = SumSpec.of("s", inputs[0])
        encoding = server.config.mask.encoding(n, spec.size)
        live = tuple(range(n))

        def steps():
            from secure_fedgraph.protocol.secure_sum.messages import InputRequest

            pending = server._pending_shares
            yield server._step(Stage.INPUT, lambda h: {
                c: InputRequest(h, 0, spec, encoding, live, tuple(s for s, _ in pending[c]), tuple(k for _, k in pending[c])) for c in live},
                lambda c, r: seen.setdefault("y", {}).__setitem__(c, r.payload.copy()))
            sets = {c: live if c in group_a | colluders else tuple(x for x in live if x != 0) for c in live}
            statements = {name: keyring.consistency_statement(**server._labels(), view=server._view, sum_index=0, live=live, survivors=s)
                          for name, s in (("a", live), ("b", sets[4]))}
            signed: dict = {"a": {}, "b": {}}
            yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, sets[c]) for c in group_a | group_b},
                               lambda c, r: signed["a" if c in group_a else "b"].__setitem__(c, r.signature))
            for c in colluders:  # colluders sign both statements with their own identity keys
                for name in ("a", "b"):
                    signed[name][c] = clients[c].identity.sign(statements[name])
            vouch = {name: tuple(Signature(c, s) for c, s in sorted(sig.items())) for name, sig in signed.items()}
            yield server._step(Stage.UNMASK, lambda h: {c: UnmaskRequest(h, vouch["a" if c in group_a else "b"]) for c in group_a | group_b},
                               lambda c, r: seen.setdefault("unmask", {}).__setitem__(c, r))

        session.runner.run(steps())
        answers = seen.get("unmask", {})
        if 0 not in answers:
            return False
        shares = {c + 1: s.value for c, r in answers.items() for s in r.mask_key_shares if s.owner == 0}
        shares |= {c + 1: clients[c]._epoch.held[0][1] for c in colluders}
        mask_key = shamir.combine(shares, threshold=6)
        lab = server._labels()
        pair_keys = {v: keyring.pair_key(mask_key, server._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **lab, a=0, b=v)
                     for v in range(1, n)}
        guess = _strip(seen["y"][0], encoding=encoding, self_key=answers[0].self_mask_key, pair_keys=pair_keys, client=0, stream=0)
        return _close(guess, inputs[0]["w"])

    def majority_rule(n, colluders, threat):
        return majority(n)

    defence_stops(attack, monkeypatch, policy, "complete_threshold", majority_rule)


# --- a split ring: the server "drops" the clients around two others (M-GRAPH-SPARSE) ------------


def test_attack_splitting_the_ring_to_learn_the_sum_of_two_clients(monkeypatch):
    """Sparse graph of degree 2 (a ring): the server ignores the inputs of the clients on either
    side of clients u and w and has their mask keys rebuilt (their other neighbours vouch that
    they dropped). Every mask between {u, w} and the rest comes off: the server learns
    x_u + x_w, a sum of two. Clients refuse to reveal anything about a client that lost more
    than max_dropped of its neighbours (the connectivity condition of adversary.py)."""
    n, u = 30, 0
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=2,
                             adversary=dataclasses.replace(NO_COLLUDERS, dropout_fraction=0.02)))

    class Splitting(MaskServer):
        def _rekey_reason(self, live, survivors, vouchers):
            return None

        def _rebuild(self, client, shares, kind):
            secret = super()._rebuild(client, shares, kind)
            self.rebuilt = {**getattr(self, "rebuilt", {}), client: secret}
            return secret

    def attack() -> bool:
        seen: dict = {"y": {}, "key": {}, "cut": ()}

        def spy(direction, stage, client, data):
            if direction == "up" and stage is Stage.INPUT:
                if client in seen["cut"]:
                    return None  # these inputs "never arrive"
                seen["y"][client] = codec.decode(data).payload.copy()
            if direction == "up" and stage is Stage.UNMASK:
                seen["key"][client] = codec.decode(data).self_mask_key
            return data

        session = local_session(config, range(n), intercept=spy)
        session.server.__class__ = Splitting
        session.start_round()
        server = session.server
        a, b = sorted(server._graph.of(u))
        w = a  # the component {u, w}; cut the ring on its two sides
        (w_out,) = server._graph.of(w) - {u}
        seen["cut"] = (b, w_out)
        inputs = make_inputs(range(n), shapes=SHAPE)
        session.secure_sum("s", inputs)
        acc = seen["y"][u] + seen["y"][w]  # their mask with each other cancels here
        prg, lab = MaskPRG(), server._labels()
        for client, dropped in ((u, b), (w, w_out)):
            prg.add_into(acc, seen["key"][client], stream_id=0, sign=-1)
            k = keyring.pair_key(server.rebuilt[dropped], server._keys[client].mask_public, purpose=Purpose.PAIRWISE_MASK, **lab, a=client, b=dropped)
            prg.add_into(acc, k, stream_id=0, sign=-1 if client < dropped else 1)
        guess = server.config.mask.encoding(n, 16).decode_sum(np.ascontiguousarray(acc[:-1]))
        return _close(guess, inputs[u]["w"] + inputs[w]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_not_isolated", lambda self, ep, client: None)


# --- C. grinding the sparse graph (M-GRAPH-SPARSE) --------------------------------------------


def test_attack_grinding_session_ids_for_a_graph_of_colluders(monkeypatch):
    """20 clients, 8 of them colluding, a sparse graph of degree 6 where all 6 shares are needed.
    Offline, the server tries session ids until the graph it predicts gives client 0 six
    colluding neighbours (about one id in a thousand); in that session the colluders' shares
    rebuild client 0's mask key and its revealed self-mask key does the rest. The graph hashes
    nonces the clients commit to before any is revealed, so the server's prediction fails (the
    attack counts only if the clients build the very graph it ground for)."""
    n, u, colluders, degree = 20, 0, set(range(12, 20)), 6
    adversary = dataclasses.replace(NO_COLLUDERS, dropout_fraction=0.02)  # the clients believe nobody colludes
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=degree, threshold=degree, adversary=adversary))
    participants = tuple(range(n))

    def predicted_graph(session: bytes) -> NeighbourGraph:
        """The graph, if every client's nonce were the all-zero one (what the attacker assumes)."""
        nonce = bytes(32)
        lab = {"session": session, "round": 0, "epoch": 0}
        commitments = tuple(keyring.graph_commitment(nonce, **lab, client=c) for c in participants)
        view = keyring.view_digest(**lab, participants=participants, members=participants, commitments=commitments, nonces=(nonce,) * n)
        return NeighbourGraph.build(kind=GraphKind.SPARSE, participants=participants, degree=degree, seed=view)

    def attack() -> bool:
        rng = np.random.default_rng(0)
        while True:  # grind
            session_id = rng.bytes(16)
            predicted = predicted_graph(session_id)
            if predicted.of(u) <= colluders:
                break
        seen: dict = {}

        def spy(direction, stage, client, data):
            if direction == "up" and client == u and stage in (Stage.INPUT, Stage.UNMASK):
                seen[stage] = codec.decode(data)
            return data

        session = local_session(config, range(n), intercept=spy, session=session_id)
        session.start_round()
        inputs = make_inputs(range(n), shapes=SHAPE)
        session.secure_sum("s", inputs)
        server, clients = session.server, session.clients
        if any(server._graph.of(c) != predicted.of(c) for c in range(n)):
            return False  # the clients' graph is not the one the server ground for
        neighbours = server._graph.of(u)
        shares = {c + 1: clients[c]._epoch.held[u][1] for c in neighbours}
        mask_key = shamir.combine(shares, threshold=degree)
        pair_keys = {v: keyring.pair_key(mask_key, server._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(), a=u, b=v)
                     for v in neighbours}
        guess = _strip(seen[Stage.INPUT].payload, encoding=server.config.mask.encoding(n, 16), self_key=seen[Stage.UNMASK].self_mask_key,
                       pair_keys=pair_keys, client=u, stream=0)
        return _close(guess, inputs[u]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_graph_nonce", staticmethod(lambda: bytes(32)))


# --- F. a malicious client (M-LIAR) -----------------------------------------------------------


def _tamper(stage: Stage, client: int, change):
    def hook(direction, at, who, data):
        if (direction, at, who) == ("up", stage, client):
            return codec.encode(change(codec.decode(data)))
        return data

    return hook


def _sum_spoiled(n: int, liar: int, stage: Stage, change, *, contributors: set[int], config=MASK, drop=None) -> bool:
    """One sum in which client ``liar`` rewrites its answer at ``stage``: True when the sum is
    lost or wrong, False when the honest clients get the right sum over ``contributors``."""
    session = local_session(config, range(n), drop=drop, intercept=_tamper(stage, liar, change))
    session.start_round()
    inputs = make_inputs(range(n), shapes=SHAPE)
    try:
        result = session.secure_sum("s", inputs)
    except Exception:
        return True  # the sum is lost
    return not (result.contributors == frozenset(contributors) and _close(result.values["w"], sum(inputs[c]["w"] for c in contributors)))


def test_attack_a_wrong_shamir_share_costs_the_liar_not_the_sum(monkeypatch):
    """Client 2 reveals a wrong share of dropped client 4's mask key. Checked against 4's
    commitment, it is set aside and 2 is excluded; without the check the rebuilt key is wrong
    and the sum is lost (an honest client, 4, even takes the blame)."""

    def wrong_share(response: UnmaskResponse) -> UnmaskResponse:
        bad = tuple(dataclasses.replace(s, value=bytes(shamir.SHARE_BYTES)) for s in response.mask_key_shares)
        return dataclasses.replace(response, mask_key_shares=bad)

    def attack() -> bool:
        return _sum_spoiled(7, 2, Stage.UNMASK, wrong_share, contributors=set(range(7)) - {4}, drop={Stage.INPUT: {4}})

    defence_stops(attack, monkeypatch, MaskServer, "_share_verified", lambda self, owner, holder, kind, value: True)


def test_attack_a_wrong_self_mask_key_costs_the_liar_not_the_sum(monkeypatch):
    """Client 2 reveals a random self-mask key. It fails the commitment sent with its input, so
    2's seed is rebuilt from its holders' shares instead, the sum is right and 2 is named;
    without the check the released sum is garbage or lost."""

    def wrong_key(response: UnmaskResponse) -> UnmaskResponse:
        return dataclasses.replace(response, self_mask_key=os.urandom(32))

    def attack() -> bool:
        return _sum_spoiled(7, 2, Stage.UNMASK, wrong_key, contributors=set(range(7)))  # 2's input counts: its seed is rebuilt

    defence_stops(attack, monkeypatch, MaskServer, "_self_key_verified", lambda self, client, key, committed, index: True)


def test_attack_a_garbage_upload_is_caught_before_it_is_released(monkeypatch):
    """Client 2 uploads random ring elements. Nothing tells a sum with a value added inside the
    range from an honest one (threat_model.md, Not claimed), but random garbage makes the
    clipped-count lane impossible: the sum is abandoned instead of released to everyone."""

    def garbage(response: InputResponse) -> InputResponse:
        y = np.random.default_rng(1).integers(0, 2**32, size=response.payload.shape, dtype=np.uint64).astype(response.payload.dtype)
        return dataclasses.replace(response, payload=y)

    def attack() -> bool:
        session = local_session(MASK, range(5), intercept=_tamper(Stage.INPUT, 2, garbage))
        session.start_round()
        result = session.secure_sum("s", make_inputs(range(5), shapes=SHAPE))
        return result.values is not None  # a corrupt sum was released

    defence_stops(attack, monkeypatch, mask_format, "clipped_count_is_possible", lambda clipped, **kw: True)


def test_attack_a_dealer_framing_an_honest_holder(monkeypatch):
    """Client 4 commits to one share for holder 1 and seals it another, then drops: when 1
    reveals what it holds, the server would see a share that fails 4's commitment and blame 1.
    Holders check what they were dealt against the commitments and withhold mismatches."""

    def deal_other(response):
        fake = tuple(dataclasses.replace(c, key_hash=bytes(32)) if c.holder == 1 else c for c in response.commitments)
        return dataclasses.replace(response, commitments=fake)

    def attack() -> bool:
        hooks = _tamper(Stage.SHARE_KEYS, 4, deal_other)
        session = local_session(MASK, range(7), intercept=hooks)
        session.start_round()
        session.runner.drop = {Stage.INPUT: {4}}
        try:
            session.secure_sum("s", make_inputs(range(7), shapes=SHAPE))
        except Exception:
            pass
        return 1 in session.server.excluded  # an honest client was framed

    defence_stops(attack, monkeypatch, MaskClient, "_dealt_as_committed", lambda self, ep, committed, seed, key: True)


# --- E. ckks: the decryption oracle, and releases (C-CHECK, C-RELEASE, C-LIAR) ------------------

CKKS = SecureSumConfig(backend=Backend.CKKS)




def test_attack_ckks_decryption_oracle_with_copies_of_one_ciphertext(monkeypatch):
    """At DELIVER the server sends client 0 four copies of client 3's ciphertext, labelled as the
    sum of clients 0-3, then asks it to release the (releasable) sum: x3 times four. The count
    lane reads 4 and passes; the check lanes, which only key holders can compute, do not add up."""
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine import RELEASE_PREFIX
    from secure_fedgraph.protocol.secure_sum.ckks import CkksClient, CkksServer
    from secure_fedgraph.protocol.secure_sum.messages import DeliverRequest, InputRequest

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("v", inputs[ctx.client_id], releasable=True)

    class Oracle(CkksServer):
        def aggregate(self, spec):
            kept: dict = {}
            signatures: dict = {}
            live = tuple(sorted(self.live))
            yield self._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, None, live, ()) for c in live},
                             lambda c, r: kept.__setitem__(c, [self.context.load(b) for b in r.ciphertexts]))
            yield self._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, live) for c in live},
                             lambda c, r: signatures.__setitem__(c, r.signature))  # an honest contributor set, honestly signed
            copies = kept[3]
            for _ in range(3):
                copies = PublicContext.add(copies, kept[3])
            blobs = tuple(v.serialize() for v in copies)
            signed = tuple(Signature(c, sig) for c, sig in sorted(signatures.items()))
            yield self._step(Stage.DELIVER, lambda h: {0: DeliverRequest(h, 0, live, None, blobs, None, signed)}, lambda c, r: None)
            return (yield from collectives.upload(self.seq, [0], RELEASE_PREFIX + spec.name, spec))

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, Oracle)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        released = runner.run(server.aggregate(SumSpec.of("v", inputs[0])))
        return 0 in released and _close(released[0]["w"] / 4, inputs[3]["w"])

    defence_stops(attack, monkeypatch, CkksClient, "_matches", lambda self, *args: True)


def test_attack_ckks_two_contributor_sets_released_by_two_clients(monkeypatch):
    """The server shows clients 0, 1 and 3 the contributor set of all five, clients 2 and 4 the
    set without client 3, delivers each group the (genuine) sum over its set, and has client 0
    and client 2 release them: the difference is x3. Each client signs one set per sum and needs
    a majority of the run to have signed its own, which two different sets cannot both have."""
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine import RELEASE_PREFIX
    from secure_fedgraph.protocol.secure_sum.ckks import CkksClient, CkksServer
    from secure_fedgraph.protocol.secure_sum.messages import DeliverRequest, InputRequest

    n, groups = 5, {"all": (0, 1, 3), "without 3": (2, 4)}
    inputs = make_inputs(range(n), shapes={"w": (8,)})
    sets = {"all": tuple(range(n)), "without 3": (0, 1, 2, 4)}

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("v", inputs[ctx.client_id], releasable=True)

    class Differencing(CkksServer):
        def aggregate(self, spec):
            kept: dict = {}
            live = tuple(sorted(self.live))
            yield self._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, None, live, ()) for c in live},
                             lambda c, r: kept.__setitem__(c, [self.context.load(b) for b in r.ciphertexts]))
            shown = {c: name for name, members in groups.items() for c in members}
            signatures: dict = {"all": {}, "without 3": {}}
            yield self._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, sets[shown[c]]) for c in live},
                             lambda c, r: signatures[shown[c]].__setitem__(c, r.signature))
            blobs = {}
            for name, members in sets.items():
                total = None
                for c in members:
                    total = PublicContext.add(total, kept[c])
                blobs[name] = tuple(v.serialize() for v in total)
            signed = {name: tuple(Signature(c, sig) for c, sig in sorted(sigs.items())) for name, sigs in signatures.items()}
            yield self._step(Stage.DELIVER, lambda h: {c: DeliverRequest(h, 0, sets[shown[c]], None, blobs[shown[c]], None, signed[shown[c]])
                                                       for c in live}, lambda c, r: None)
            return (yield from collectives.upload(self.seq, [0, 2], RELEASE_PREFIX + spec.name, spec))

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, Differencing)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        released = runner.run(server.aggregate(SumSpec.of("v", inputs[0])))
        return {0, 2} <= set(released) and _close(released[0]["w"] - released[2]["w"], inputs[3]["w"])

    defence_stops(attack, monkeypatch, CkksClient, "_vouched", lambda self, request: None)


def test_attack_ckks_release_of_a_sum_the_plan_did_not_mark(monkeypatch):
    """The server asks clients to release the FedAvg sum of their weights, which with ckks it
    must never see. Clients release only sums their plan marked releasable (error statistics)."""
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine import RELEASE_PREFIX

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("weights", inputs[ctx.client_id])  # not releasable

    def attack() -> bool:
        from secure_fedgraph.protocol.secure_sum.ckks import CkksServer

        server, hosts = _hosts(CKKS, n, plan, CkksServer)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        spec = SumSpec.of("weights", inputs[0])
        runner.run(server.aggregate(spec))
        released = runner.run(collectives.upload(server.seq, [0], RELEASE_PREFIX + "weights", spec))
        return 0 in released and _close(released[0]["w"], sum(inputs[c]["w"] for c in range(n)))

    defence_stops(attack, monkeypatch, ClientHost, "_may_release", lambda self, name, spec: self._held[name][0])


def test_attack_ckks_a_ciphertext_under_another_key_costs_its_sender(monkeypatch):
    """Client 2 encrypts under a key of its own. Every honest client's check fails; instead of
    leaving, each says so, the server has every contribution checked by another contributor,
    excludes client 2 and abandons that sum; the next sum succeeds without it. Without finding
    the sender, client 2 spoils every sum of the run."""
    from secure_fedgraph.crypto.ckks import SecretContext
    from secure_fedgraph.errors import SumAbandoned
    from secure_fedgraph.protocol.secure_sum.ckks import CkksServer

    stranger = SecretContext.generate(CKKS.ckks.params)

    def other_key(response: InputResponse) -> InputResponse:
        blobs, _ = stranger.encrypt(np.zeros(16), params=CKKS.ckks.params, clip_range=CKKS.ckks.clip_range)
        return dataclasses.replace(response, ciphertexts=tuple(blobs))

    def attack() -> bool:
        session = local_session(CKKS, range(5), intercept=_tamper(Stage.INPUT, 2, other_key))
        session.start_round()
        with pytest.raises(SumAbandoned):
            session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
        inputs = make_inputs(range(5), seed=1, shapes=SHAPE)
        try:
            session.secure_sum("b", {c: inputs[c] for c in range(5)})
        except SumAbandoned:
            return True  # the liar spoiled this sum too
        result = session.clients[0].last_result
        assert session.server.excluded.keys() == {2} and result.contributors == frozenset({0, 1, 3, 4})
        return not _close(result.values["w"], sum(inputs[c]["w"] for c in result.contributors))

    defence_stops(attack, monkeypatch, CkksServer, "_find_bad_senders", lambda self, index, kept: (yield from ()) or set())


# --- the older mask claims, attacked the same way (M-SIGN, M-BOTH, M-ONCE, M-INPUT) ---------------


def test_attack_swapping_the_relayed_public_keys_of_a_clients_peers(monkeypatch):
    """The server relays its own mask keys to client 0 in place of its peers': it then knows
    every pairwise mask of client 0, and client 0's revealed self-mask key does the rest. Peers'
    keys carry their identity signatures, which client 0 checks."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    n = 5
    fake = {v: X25519PrivateKey.generate() for v in range(1, n)}

    def swap(request):
        peers = tuple(dataclasses.replace(p, mask_public=fake[p.client].public_key().public_bytes_raw()) for p in request.peers)
        return dataclasses.replace(request, peers=peers)

    def attack() -> bool:
        seen: dict = {}

        def hook(direction, stage, client, data):
            if (direction, stage, client) == ("down", Stage.SHARE_KEYS, 0):
                return codec.encode(swap(codec.decode(data)))
            if direction == "up" and client == 0 and stage in (Stage.INPUT, Stage.UNMASK):
                seen[stage] = codec.decode(data)
            return data

        session = local_session(MASK, range(n), intercept=hook)
        session.start_round()
        inputs = make_inputs(range(n), shapes=SHAPE)
        try:
            session.secure_sum("s", inputs)  # the others' masks do not cancel: the sum is lost, but client 0 revealed its key
        except Exception:
            pass
        if Stage.UNMASK not in seen:
            return False
        server = session.server
        pair_keys = {v: keyring.pair_key(fake[v], server._keys[0].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(), a=0, b=v)
                     for v in range(1, n)}
        guess = _strip(seen[Stage.INPUT].payload, encoding=server.config.mask.encoding(n, 16), self_key=seen[Stage.UNMASK].self_mask_key,
                       pair_keys=pair_keys, client=0, stream=0)
        return _close(guess, inputs[0]["w"])

    defence_stops(attack, monkeypatch, mask_client, "verify_keys", lambda keys, **kw: None)


def test_attack_asking_for_the_mask_key_of_a_client_that_contributed(monkeypatch):
    """Client 4 contributes to sum "a" (its self-mask key for it is revealed), then drops before
    sum "b". A server that asks for 4's mask-key shares instead of re-keying would hold both of
    4's secrets for "a": its input. Clients refuse (the server must re-key)."""
    from tests.helpers import ServerThatNeverRekeys

    n, u = 5, 4

    class Keeping(ServerThatNeverRekeys):
        def _rebuild(self, client, shares, kind):
            secret = super()._rebuild(client, shares, kind)
            self.rebuilt = {**getattr(self, "rebuilt", {}), client: secret}
            return secret

    def attack() -> bool:
        seen: dict = {}

        def spy(direction, stage, client, data):
            if direction == "up" and client == u and stage in (Stage.INPUT, Stage.UNMASK):
                seen.setdefault(stage, codec.decode(data))  # sum "a"'s only
            return data

        session = local_session(MASK, range(n), intercept=spy)
        session.server.__class__ = Keeping
        session.start_round()
        inputs = make_inputs(range(n), shapes=SHAPE)
        session.secure_sum("a", inputs)
        session.runner.drop = {Stage.INPUT: {u}}
        session.secure_sum("b", make_inputs(range(n), seed=1, shapes=SHAPE))
        server = session.server
        pair_keys = {v: keyring.pair_key(server.rebuilt[u], server._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(), a=u, b=v)
                     for v in range(n) if v != u}
        guess = _strip(seen[Stage.INPUT].payload, encoding=server.config.mask.encoding(n, 16), self_key=seen[Stage.UNMASK].self_mask_key,
                       pair_keys=pair_keys, client=u, stream=0)
        return _close(guess, inputs[u]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_may_reveal_mask_key", lambda self, ep, owner, exposed_before: None)


def test_attack_two_inputs_under_one_sum_index(monkeypatch):
    """The server asks for sum "a" and then for sum "b" under the same sum index of the same key
    epoch: every mask would repeat, and the difference of a client's two uploads would be the
    difference of its two inputs, with nothing unmasked."""
    from secure_fedgraph.protocol.secure_sum.messages import InputRequest

    n = 4

    def attack() -> bool:
        session = local_session(MASK, range(n))
        session.start_round()
        server, clients = session.server, session.clients
        a, b = make_inputs(range(n), shapes=SHAPE), make_inputs(range(n), seed=1, shapes=SHAPE)
        uploads: dict = {"a": {}, "b": {}}
        for name, inputs in (("a", a), ("b", b)):
            for c in range(n):
                clients[c].contribute(name, inputs[c])
        encoding = server.config.mask.encoding(n, 16)
        live = tuple(range(n))

        def steps():
            pending = server._pending_shares
            for name in ("a", "b"):
                spec = SumSpec.of(name, a[0])
                routed = {c: pending[c] if name == "a" else () for c in live}
                yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, encoding, live, tuple(s for s, _ in routed[c]),
                                                                          tuple(k for _, k in routed[c])) for c in live},
                                   lambda c, r: uploads[name].__setitem__(c, r.payload.copy()))

        session.runner.run(steps())
        if 0 not in uploads["b"]:
            return False
        difference = encoding.decode_sum(np.ascontiguousarray((uploads["a"][0] - uploads["b"][0])[:-1]))
        return _close(difference, a[0]["w"] - b[0]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_new_sum_index", lambda self, ep, s: None)


def test_attack_a_wrongly_shaped_upload_takes_its_sender_out_not_the_sum(monkeypatch):
    """A malicious client uploads one ring element where the sum has many. It is rejected and
    the sum goes on with the others; accepted, numpy would broadcast it into every element of
    the server's running sum, and the sum released would be wrong."""

    def short(response: InputResponse) -> InputResponse:
        return dataclasses.replace(response, payload=response.payload[:1])

    def attack() -> bool:
        return _sum_spoiled(5, 1, Stage.INPUT, short, contributors={0, 2, 3, 4})

    defence_stops(attack, monkeypatch, MaskServer, "_check_upload", staticmethod(lambda client, y, acc: None))


def test_attack_malformed_bytes_from_a_client_do_not_stop_the_server(monkeypatch):
    """A malicious client answers with bytes that decode to no message. The codec's error rejects
    that client and the step goes on; were it not caught, one client would stop the run."""
    from secure_fedgraph.protocol import codec as wire
    from secure_fedgraph.protocol.transports.common import Traffic

    def garbage(direction, stage, client, data):
        return b"\x0a\xff\xff garbage" if (direction, stage, client) == ("up", Stage.INPUT, 1) else data

    def unguarded(self, step, client, data):
        step.accept(client, wire.decode(data))

    def attack() -> bool:
        session = local_session(MASK, range(5), intercept=garbage)
        session.start_round()
        try:
            result = session.secure_sum("s", make_inputs(range(5), shapes=SHAPE))
        except Exception:
            return True
        return result.contributors != frozenset({0, 2, 3, 4})

    defence_stops(attack, monkeypatch, Traffic, "answer", unguarded)


def test_attack_a_welcome_relaying_a_certificate_of_another_ca(monkeypatch, tmp_path):
    """The server relays, for client 1, a certificate its own CA issued: the identity key in it
    is the server's, which could then sign as client 1 (consistency signatures, adverts). Every
    certificate in a Welcome must be signed by the run's CA."""
    import json

    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.crypto import pki
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.protocol.messages import SERVER, Header, Welcome
    from secure_fedgraph.protocol.secure_sum.config import config_to_dict

    keys, other = pki.init_keys(tmp_path / "run", clients=3), pki.init_keys(tmp_path / "attacker", clients=3)
    config = json.dumps({"plan": json.loads(FedAvgVector().config_json()), "secure_sum": config_to_dict(MASK)})
    certs = (keys.client_cert(0).read_bytes(), other.client_cert(1).read_bytes(), keys.client_cert(2).read_bytes())
    welcome = Welcome(Header(bytes(16), -1, 1, Stage.WELCOME, SERVER), config, (0, 1, 2), certs)
    attacker_key = pki.load_identity(other.identity_key(1)).public_bytes

    def attack() -> bool:
        shared = _Shared(keys.ca.read_bytes())
        host, _ = _welcome(0, welcome, ClientOptions(server="x", ids=[0], keys=keys.root), keys, shared, None)
        return host.role.directory[1] == attacker_key

    defence_stops(attack, monkeypatch, pki, "verify_issuer", lambda cert, ca: None)


def test_liars_are_excluded_and_named_in_the_runs_metrics():
    """threat_model.md M-LIAR: the run's metrics name each excluded client and why, and the
    rounds after the lie go on without it."""
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.papers.synthetic import FedAvgVectorConfig
    from secure_fedgraph.runs.simulate import simulate

    def wrong_key(response: UnmaskResponse) -> UnmaskResponse:
        return dataclasses.replace(response, self_mask_key=os.urandom(32))

    result = simulate(FedAvgVector(FedAvgVectorConfig(clients=6, length=16, rounds=2)), MASK, intercept=_tamper(Stage.UNMASK, 2, wrong_key))
    assert set(result.metrics["excluded"]) == {"2"} and "fails its commitment" in result.metrics["excluded"]["2"]
    assert "excluded" in result.metrics["dropped"]["2"]
    assert [r["clients"] for r in result.metrics["rounds"]] == [6, 5]  # the lie still counted its (rebuilt) input once
