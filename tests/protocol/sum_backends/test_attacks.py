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

from secure_fedgraph.crypto import merkle, shamir
from secure_fedgraph.crypto.keys import IdentityKey, RoundKeys
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.crypto.prg import MaskPRG
from secure_fedgraph.errors import ProtocolError, SecureFedGraphError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core import session as session_module
from secure_fedgraph.protocol.engine.contexts import ClientContext, ClientHost
from secure_fedgraph.protocol.sum_backends import (
    Backend,
    ClientPolicy,
    GraphKind,
    MaskConfig,
    SecureSumConfig,
    Stage,
    SumSpec,
    make_client,
)
from secure_fedgraph.protocol.sum_backends import keyring, mask_client, mask_format, mask_server, policy
from secure_fedgraph.protocol.sum_backends.adversary import majority
from secure_fedgraph.protocol.sum_backends.config import MaskPlan
from secure_fedgraph.protocol.sum_backends.mask_client import MaskClient
from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer
from secure_fedgraph.protocol.sum_backends.messages import (
    Complaint,
    ConsistencyRequest,
    DealtShares,
    DealtToNeighbours,
    InputResponse,
    PairSeed,
    Signature,
    UnmaskRequest,
    RecoverResponse,
    UnmaskResponse,
)
from secure_fedgraph.protocol.sum_backends.neighbours import NeighbourGraph
from secure_fedgraph.protocol.sum_backends.roles import ClientRole
from secure_fedgraph.protocol.core.spec import SumResult
from secure_fedgraph.protocol.transports.inprocess import LocalRunner
from tests.helpers import default_policy_session as local_session
from tests.helpers import NO_COLLUDERS, WeakServer, close, defence_stops, make_inputs


MASK = SecureSumConfig(backend=Backend.MASK)
SHAPE = {"w": (16,)}


def _strip(y: np.ndarray, *, encoding, self_key: bytes | None, client: int, sum_index: int, labels: dict | None = None,
           pair_keys: dict[int, bytes] | None = None, pair_seeds: dict[int, bytes] | None = None) -> np.ndarray:
    """One client's input from its masked upload, given every key that masks it (what the
    attacker must collect): y - PRG(K_self,s) - sum over v of +-PRG(k_uv,s), the pair seeds of
    sum s either given or derived from the pair keys K_uv (keyring.pair_seed)."""
    acc = y.copy()
    prg = MaskPRG()
    if self_key is not None:
        prg.add_into(acc, self_key, stream_id=0, sign=-1)
    seeds = dict(pair_seeds or {})
    for v, key in (pair_keys or {}).items():
        seeds[v] = keyring.pair_seed(key, **labels, sum_index=sum_index, a=client, b=v)
    for v, seed in seeds.items():
        prg.add_into(acc, seed, stream_id=0, sign=-1 if client < v else 1)
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
        return close(first.values["w"] - second.values["w"], inputs[u]["w"])

    defence_stops(attack, monkeypatch, ClientRole, "_expose", lambda self, spec: None)


# --- A2. the same session id twice (R-SESSION) -------------------------------------------------


def _the_same_session_id_twice(patch: pytest.MonkeyPatch) -> bool:
    """A deviating server runs a sum under session id S among ten clients, claims that clients 1,
    2 and 3 dropped before their input, and so rebuilds their mask keys from the survivors'
    shares. Then it starts a new run under the same S among clients 0 to 3 and relays to client 0
    the signed key advertisements 1, 2 and 3 made in the first run (it passes consistency
    signatures on unchecked, and keeps back the share envelopes between them and client 0, which
    would not open under the old keys). Were their signatures to verify, client 0 would mask its input with
    pair keys the server can compute, and its revealed self-mask key would do the rest."""
    patch.setattr(mask_server, "verify_signature", lambda *args: None)
    victim, ghosts, proposal = 0, (1, 2, 3), os.urandom(16)
    identities = {c: IdentityKey.generate() for c in range(10)}
    inputs = make_inputs(range(10), shapes=SHAPE)
    old_keys: dict = {}
    rebuilt: dict = {}

    def keep_adverts(direction, stage, client, data):
        if direction == "up" and stage is Stage.ADVERTISE and client in ghosts:
            old_keys[client] = codec.decode(data).keys
        return data

    first = local_session(MASK, range(10), session=proposal, identities=identities, policy=ClientPolicy(), intercept=keep_adverts,
                          drop={Stage.INPUT: ghosts})
    rebuild = first.server._rebuild

    def keeping(client, shares, kind):
        rebuilt[client] = rebuild(client, shares, kind)
        return rebuilt[client]

    first.server._rebuild = keeping
    first.start_round()
    first.secure_sum("s", inputs)
    seen: dict = {}

    def relay_old_keys(direction, stage, client, data):
        if (direction, stage, client) == ("down", Stage.SHARE_KEYS, victim):
            request = codec.decode(data)
            return codec.encode(dataclasses.replace(request, peers=tuple(old_keys.get(p.client, p) for p in request.peers)))  # the ghosts'
        if direction == "down" and stage is Stage.INPUT and client in (victim, *ghosts):  # envelopes between them would not open
            request, between = codec.decode(data), {victim} if client in ghosts else set(ghosts)
            return codec.encode(dataclasses.replace(request, dealt=DealtShares.of(p for p in request.dealt.pairs() if p[0].owner not in between)))
        if direction == "up" and client == victim and stage in (Stage.INPUT, Stage.UNMASK):
            seen[stage] = codec.decode(data)
        return data

    second = local_session(MASK, range(4), session=proposal, identities={c: identities[c] for c in range(4)}, policy=ClientPolicy(),
                           intercept=relay_old_keys)
    second.start_round()
    try:
        second.secure_sum("s", {c: inputs[c] for c in range(4)})  # the ghosts' masks do not cancel: the sum is garbage
    except SecureFedGraphError:
        pass
    if Stage.UNMASK not in seen:
        return False
    server = second.server
    pair_keys = {v: keyring.pair_key(rebuilt[v], server._keys[victim].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(),
                                     a=victim, b=v) for v in ghosts}
    guess = _strip(seen[Stage.INPUT].payload, encoding=server.config.mask.encoding(4, 16), self_key=seen[Stage.UNMASK].self_mask_key,
                   pair_keys=pair_keys, client=victim, sum_index=0, labels=server._labels())
    return close(guess, inputs[victim]["w"])


def test_attack_the_same_session_id_twice(monkeypatch):
    """Every client adds a fresh nonce to the session id when a session opens, so client 0's
    second session id is new to it and the first run's advertisements do not verify there. The
    attack runs with the view digest blind to keys (that defence stops it on its own: the
    ghosts' own views hold their new keys), so the fresh session id alone must stop it."""

    def attack() -> bool:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mask_client, "keys_hash", lambda keys: b"")
            return _the_same_session_id_twice(patch)

    defence_stops(attack, monkeypatch, session_module, "agreed_session", lambda *, proposal, **kw: proposal)


def _hosts(config: SecureSumConfig, n: int, plan, server_class):
    """A server of ``server_class`` and n client hosts running ``plan``, in one process."""


def _hosts(config: SecureSumConfig, n: int, plan, server_class, policy: ClientPolicy | None = None):
    """A server of ``server_class`` and n client hosts running ``plan``, in one process; the
    clients' own ``policy`` (default: they accept ``config``)."""
    identities = {c: IdentityKey.generate() for c in range(n)}
    directory = {c: k.public_bytes for c, k in identities.items()}
    session = os.urandom(16)
    server = server_class(config, session=session, directory=directory, clients=list(range(n)))
    hosts = {c: ClientHost(role=make_client(config, client_id=c, session=session, identity=identities[c], directory=directory, policy=policy),
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
        return close(first.values["w"] - second.values["w"], inputs[u]["w"])

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
        return close(everyone - redone.values["w"], inputs[3]["w"])

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
        return close(total.values["w"] - inputs[4]["w"], inputs[3]["w"])  # the colluder knows its own input

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

    from secure_fedgraph.protocol.sum_backends import Adversary

    def attack(client_policy: ClientPolicy) -> bool:
        session = local_session(SecureSumConfig(mask=MaskConfig(adversary=NO_COLLUDERS)), range(2), policy=client_policy)
        session.start_round()
        inputs = make_inputs(range(2), shapes=SHAPE)
        total = session.secure_sum("s", inputs)
        return close(total.values["w"] - inputs[1]["w"], inputs[0]["w"])  # the colluder knows its own input

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
            from secure_fedgraph.protocol.sum_backends.messages import InputRequest

            pending = {c: server._envelopes.routed(c) for c in live}
            yield server._step(Stage.INPUT, lambda h: {
                c: InputRequest(h, 0, spec, encoding, live, pending[c]) for c in live},
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
        guess = _strip(seen["y"][0], encoding=encoding, self_key=answers[0].self_mask_key, pair_keys=pair_keys, client=0, sum_index=0,
                       labels=server._labels())
        return close(guess, inputs[0]["w"])

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

        session = local_session(config, range(n), intercept=spy, policy=ClientPolicy.accepting(config))  # a graph this small holds against a weaker adversary only
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
            prg.add_into(acc, keyring.pair_seed(k, **lab, sum_index=0, a=client, b=dropped), stream_id=0, sign=-1 if client < dropped else 1)
        guess = server.config.mask.encoding(n, 16).decode_sum(np.ascontiguousarray(acc[:-1]))
        return close(guess, inputs[u]["w"] + inputs[w]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_not_isolated", lambda self, ep, client: None)


def test_attack_a_live_set_without_a_clients_neighbours_then_its_seed(monkeypatch):
    """Sparse graph, no colluders. At the first sum the server shows client 0 a live set without
    any of its neighbours (padded with others past the survivor floor), so 0 masks its input
    with its self-mask alone; every other client is shown everyone live. It then tells 0's
    neighbours that 0 survived and went silent after its input: they vouch for 0 (their own sets
    agree) and reveal shares of 0's seed, and the self-mask comes off: x_0. A client refuses a
    live set that leaves out more than max_dropped of its neighbours (found by a colleague while
    building the pair-seed step)."""
    n, u = 30, 0
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=6,
                             adversary=dataclasses.replace(NO_COLLUDERS, dropout_fraction=0.02)))

    def attack() -> bool:
        seen: dict = {"y": {}, "shares": {}}
        session = local_session(config, range(n), policy=ClientPolicy.accepting(config))  # a graph this small holds against a weaker adversary only
        session.start_round()
        server, clients = session.server, session.clients
        inputs = make_inputs(range(n), shapes=SHAPE)
        for c in range(n):
            clients[c].contribute("s", inputs[c])
        spec = SumSpec.of("s", inputs[0])
        encoding = server.config.mask.encoding_of(spec, n)
        everyone = tuple(range(n))
        shown = {c: everyone for c in everyone} | {u: tuple(c for c in everyone if c not in server._graph.of(u))}
        others = tuple(c for c in everyone if c != u)

        def steps():
            from secure_fedgraph.protocol.sum_backends.messages import InputRequest, RecoverRequest

            routed = {c: server._envelopes.routed(c) for c in everyone}
            yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, encoding, shown[c], routed[c]) for c in everyone},
                               lambda c, r: seen["y"].__setitem__(c, r.payload.copy()))
            if u not in seen["y"]:
                return
            signatures: dict[int, bytes] = {}
            yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, everyone) for c in others},
                               lambda c, r: signatures.__setitem__(c, r.signature))
            offered = tuple(Signature(c, signatures[c]) for c in sorted(signatures))
            yield server._step(Stage.UNMASK, lambda h: {c: UnmaskRequest(h, offered) for c in others}, lambda c, r: None)
            yield server._step(Stage.RECOVER, lambda h: {c: RecoverRequest(h, (u,), offered) for c in sorted(server._graph.of(u))},
                               lambda c, r: seen["shares"].update({c + 1: s.value for s in r.self_seed_shares if s.owner == u}))

        session.runner.run(steps())
        if u not in seen["y"] or len(seen["shares"]) < server._plan.threshold:
            return False
        seed = shamir.combine(seen["shares"], threshold=server._plan.threshold)
        y = seen["y"][u].copy()
        MaskPRG().add_into(y, keyring.self_mask_key(seed, **server._labels(), sum_index=0), stream_id=0, sign=-1)
        return close(encoding.decode_sum(np.ascontiguousarray(y[:-1])), inputs[u]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_masked_by_enough", lambda self, ep, members: None)


# --- C. grinding the sparse graph (M-GRAPH-SPARSE) --------------------------------------------


def test_attack_a_colluder_grinding_its_keys_for_a_graph_of_colluders(monkeypatch):
    """20 clients, 8 of them colluding, a sparse graph of degree 6 where all 6 shares are needed.
    The last colluder to advertise sees every other member's signed keys (the server relays
    them) and tries fresh keys of its own until the graph it predicts gives client 0 six
    colluding neighbours (about one try in a thousand); then the colluders' shares rebuild
    client 0's mask key and its revealed self-mask key does the rest. The graph's seed also
    hashes a nonce every member committed to before any was revealed, so the prediction fails
    (the attack counts only if the clients build the very graph it ground for)."""
    n, u, colluders, degree = 20, 0, set(range(12, 20)), 6
    last = max(colluders)
    adversary = dataclasses.replace(NO_COLLUDERS, dropout_fraction=0.02)  # the clients believe nobody colludes
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=degree, threshold=degree, adversary=adversary))
    participants = tuple(range(n))
    identities = {c: IdentityKey.generate() for c in range(n)}

    def attack() -> bool:
        adverts, found, seen, held = {}, {}, {}, {}

        def predict(lab: dict, keys: dict):
            """The graph, if every member's nonce were the all-zero one (what the attacker assumes)."""
            nonce = bytes(32)
            hashes = tuple(keyring.keys_hash(keys[c]) for c in participants)
            commitments = tuple(keyring.graph_commitment(nonce, h, **lab, client=c) for c, h in zip(participants, hashes, strict=True))
            view = keyring.view_digest(**lab, participants=participants, members=participants, keys=hashes, commitments=commitments,
                                       nonces=(nonce,) * n)
            return NeighbourGraph.build(kind=GraphKind.SPARSE, participants=participants, degree=degree, seed=view)

        def intercept(direction, stage, client, data):
            if direction == "up" and client == u and stage in (Stage.INPUT, Stage.UNMASK):
                seen[stage] = codec.decode(data)
            if direction != "up" or stage is not Stage.ADVERTISE:
                return data
            response = codec.decode(data)
            adverts[client] = response.keys
            if client != last:  # every other member has advertised when the last colluder answers
                return data
            lab = {"session": response.header.session, "round": 0, "epoch": 0}
            for _ in range(20_000):  # the colluder grinds its own round keys
                keys = RoundKeys.generate()
                adverts[last] = keyring.sign_keys(identities[last], **lab, client=last, share_public=keys.share_public,
                                                  mask_public=keys.mask_public, seed_commitment=response.keys.seed_commitment)
                found["graph"] = predict(lab, adverts)
                if found["graph"].of(u) <= colluders:
                    break
            epoch = held["session"].clients[last]._epoch  # it deals its shares under the keys it ground
            epoch.keys, epoch.own_keys = keys, adverts[last]
            commitment = keyring.graph_commitment(epoch.nonce, keyring.keys_hash(adverts[last]), **lab, client=last)
            return codec.encode(dataclasses.replace(response, keys=adverts[last], graph_commitment=commitment))

        session = held["session"] = local_session(config, range(n), intercept=intercept, identities=identities, policy=ClientPolicy.accepting(config))  # a graph this small holds against a weaker adversary only
        session.start_round()
        inputs = make_inputs(range(n), shapes=SHAPE)
        session.secure_sum("s", inputs)
        server, clients = session.server, session.clients
        if any(server._graph.of(c) != found["graph"].of(c) for c in range(n)):
            return False  # the clients' graph is not the one the colluder ground for
        neighbours = server._graph.of(u)
        shares = {c + 1: clients[c]._epoch.held[u][1] for c in neighbours}
        mask_key = shamir.combine(shares, threshold=degree)
        pair_keys = {v: keyring.pair_key(mask_key, server._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(), a=u, b=v)
                     for v in neighbours}
        guess = _strip(seen[Stage.INPUT].payload, encoding=server.config.mask.encoding(n, 16), self_key=seen[Stage.UNMASK].self_mask_key,
                       pair_keys=pair_keys, client=u, sum_index=0, labels=server._labels())
        return close(guess, inputs[u]["w"])

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
    return not (result.contributors == frozenset(contributors) and close(result.values["w"], sum(inputs[c]["w"] for c in contributors)))


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


def test_attack_a_wrong_seed_share_costs_the_liar_not_the_dealer(monkeypatch):
    """Client 4 goes silent after its input, so its self-mask seed is rebuilt from its holders'
    shares; client 2 reveals a wrong one. Checked against 4's commitment it is set aside, 2 is
    excluded and the seed rebuilt from the others; without the seed check the rebuilt seed fails
    4's commitment, the honest dealer 4 is blamed and the sum is lost."""

    def wrong_share(response: RecoverResponse) -> RecoverResponse:
        bad = tuple(dataclasses.replace(s, value=bytes(shamir.SHARE_BYTES)) for s in response.self_seed_shares)
        return dataclasses.replace(response, self_seed_shares=bad)

    def attack() -> bool:
        return _sum_spoiled(7, 2, Stage.RECOVER, wrong_share, contributors=set(range(7)), drop={Stage.UNMASK: {4}})

    real = MaskServer._share_verified
    defence_stops(attack, monkeypatch, MaskServer, "_share_verified",
                  lambda self, owner, holder, kind, value: kind == "seed" or real(self, owner, holder, kind, value))


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
    """Client 4 commits to one share for holder 1 and seals it another (sealing what it commits
    to, as a liar would), then drops: when 1 reveals what it holds, the server would see a share that
    fails 4's commitment and blame 1. Holders check what they were dealt against the commitments
    and withhold mismatches."""

    def attack() -> bool:
        held: dict = {}

        def hook(direction, stage, client, data):
            if (direction, stage, client) == ("up", Stage.SHARE_KEYS, 4):
                other = lambda c: dataclasses.replace(c, key_hash=bytes(len(c.key_hash))) if c.holder == 1 else c  # noqa: E731
                return codec.encode(_resealed(held["session"].clients[4], codec.decode(data), commit=other))
            return data

        session = held["session"] = local_session(MASK, range(7), intercept=hook)
        session.start_round()
        session.runner.drop = {Stage.INPUT: {4}}
        try:
            session.secure_sum("s", make_inputs(range(7), shapes=SHAPE))
        except Exception:
            pass
        return 1 in session.server.excluded  # an honest client was framed

    defence_stops(attack, monkeypatch, MaskClient, "_dealt_as_committed", lambda self, ep, committed, seed, key: True)


# --- F4/F5. one malicious client must not end the round for everyone (M-LIAR) -----------------


def _resealed(role, response, change=lambda shares: shares, commit=lambda c: c, key_for=lambda holder, key: key, only=None) -> object:
    """A dealer's ShareKeysResponse with each envelope's shares replaced by ``change(shares)`` and
    its commitments by ``commit(commitments)``, every envelope sealed again by the dealer itself
    (a malicious dealer seals what it sends), under ``key_for(holder, the envelope's key)``;
    ``only``: the holder whose envelope changes (default: every one)."""
    ep = role._epoch
    lab = {"session": response.header.session, "round": response.header.round, "epoch": ep.epoch, "view": ep.view}
    pairs = []
    for e, c in _dealt_pairs(role, response):
        key = keyring.envelope_key(ep.sealing[e.holder], **{k: v for k, v in lab.items() if k != "view"}, owner=e.owner, holder=e.holder)
        shares = keyring.open_shares(key, e, seed_hash=c.seed_hash, key_hash=c.key_hash, **lab)
        if only is not None and e.holder != only:
            pairs.append((e, c))
            continue
        c = commit(c)
        pairs.append((keyring.seal_shares(key_for(e.holder, key), change(shares), seed_hash=c.seed_hash, key_hash=c.key_hash, **lab,
                                          owner=e.owner, holder=e.holder), c))
    return dataclasses.replace(response, dealt=DealtToNeighbours.of(pairs))


def _dealt_pairs(role, response) -> tuple:
    """A dealer's ShareKeysResponse records as (envelope, commitments), addressed as the server
    addresses them: from the dealer to its neighbours, in id order."""
    return response.dealt.addressed(role.client_id, sorted(role._epoch.peers)).pairs()


def _one_liar_runs(liar: int, lie, *, n: int = 7) -> tuple[bool, set[int], object]:
    """A run of n clients, default policy, where ``liar`` tampers with its own ShareKeys answer
    (``lie``, given the role and the response). Returns (the sum was delivered with the honest
    clients' total, the clients excluded, the session)."""
    identities = {c: IdentityKey.generate() for c in range(n)}
    held: dict = {}

    def hook(direction, stage, client, data):
        if (direction, stage, client) == ("up", Stage.SHARE_KEYS, liar):
            return codec.encode(lie(identities[liar], held["session"].clients[liar], codec.decode(data)))
        return data

    session = held["session"] = local_session(MASK, range(n), intercept=hook, identities=identities, policy=ClientPolicy())
    session.start_round()
    inputs = make_inputs(range(n), shapes=SHAPE)
    try:
        result = session.secure_sum("s", inputs)
    except SecureFedGraphError:
        return False, set(session.server.excluded), session
    honest = set(range(n)) - {liar}
    delivered = result.contributors == frozenset(honest) and close(result.values["w"], sum(inputs[c]["w"] for c in honest))
    return delivered, set(session.server.excluded), session


def test_attack_a_dealer_sealing_garbage_envelopes_costs_the_dealer_not_the_sum(monkeypatch):
    """F4. Client 4 seals random bytes to every neighbour (under the keys they share, as a liar
    would, so the envelopes open): before,
    every honest holder that found no committed shares in its envelope raised and left the run (6
    of 6 gone, no aggregate). Now each complains with the envelope's key, the server opens the
    envelope and sees garbage, excludes 4, re-keys, and the sum is delivered over the six honest
    clients."""

    def garbage(identity, role, response):
        return _resealed(role, response, lambda shares: os.urandom(len(shares)))

    def attack() -> bool:
        delivered, excluded, session = _one_liar_runs(4, garbage)
        if excluded == {4}:  # the run names the liar and the lie
            assert session.server.excluded[4].startswith("sealed an envelope for client ") and \
                session.server.excluded[4].endswith(" that does not hold the shares it committed to")
        return not delivered or excluded != {4}

    real = MaskClient._opened

    def raising(self, ep, committed, payload):  # the holder of before: an envelope without its shares ends its run
        shares = real(self, ep, committed, payload)
        if shares is None:
            raise ProtocolError(f"the envelope from client {committed.owner} does not hold the shares it committed to")
        return shares

    defence_stops(attack, monkeypatch, MaskClient, "_opened", raising)


@pytest.mark.parametrize("half", ["seed", "mask key"])
def test_attack_a_dealer_sealing_one_wrong_half_of_a_share_costs_the_dealer(monkeypatch, half):
    """Client 4 seals a share envelope that holds the right share of one secret but a wrong share
    of the other (committing to the right ones, sealing it all): a holder that kept it would
    reveal the wrong share at RECOVER or UNMASK and be blamed for the dealer's lie. Each holder
    checks both halves against the dealer's commitments, complains, and the dealer alone is
    excluded; the sum is delivered over the honest clients. Without the check of that half, the
    holders keep the share and the liar stays in."""
    offset = 0 if half == "seed" else shamir.SHARE_BYTES

    def wrong_half(identity, role, response):
        return _resealed(role, response, lambda shares: shares[:offset] + bytes([shares[offset] ^ 1]) + shares[offset + 1:])

    def attack() -> bool:
        delivered, excluded, _ = _one_liar_runs(4, wrong_half)
        return not delivered or excluded != {4}

    def one_half_only(self, ep, committed, seed_share, key_share):  # the check of ``half`` removed
        if committed is None:
            return False
        lab, owner = self._labels(ep), committed.owner
        if half == "seed":
            return committed.key_hash == keyring.share_commitment(key_share, kind="mask_key", **lab, owner=owner, holder=self.client_id)
        return committed.seed_hash == keyring.share_commitment(seed_share, kind="seed", **lab, owner=owner, holder=self.client_id)

    defence_stops(attack, monkeypatch, MaskClient, "_dealt_as_committed", one_half_only)


def test_attack_a_client_advertising_one_public_key_twice_costs_only_itself(monkeypatch):
    """F5. Client 4 advertises the same public key as its share key and its mask key: before,
    every honest neighbour refused the relayed keys and left the run. Now the server refuses the
    advertisement, so 4 is out and the sum is delivered over the six honest clients."""
    n, liar = 7, 4
    identities = {c: IdentityKey.generate() for c in range(n)}
    inputs = make_inputs(range(n), shapes=SHAPE)

    def twice(direction, stage, client, data):
        if (direction, stage, client) == ("up", Stage.ADVERTISE, liar):
            response = codec.decode(data)
            h = response.header
            keys = keyring.sign_keys(identities[liar], session=h.session, round=h.round, epoch=0, client=liar,
                                     share_public=response.keys.share_public, mask_public=response.keys.share_public,
                                     seed_commitment=response.keys.seed_commitment)
            return codec.encode(dataclasses.replace(response, keys=keys))
        return data

    def attack() -> bool:
        session = local_session(MASK, range(n), intercept=twice, identities=identities, policy=ClientPolicy())
        try:
            session.start_round()
            result = session.secure_sum("s", inputs)
        except SecureFedGraphError:
            return True  # honest clients left the run
        honest = set(range(n)) - {liar}
        return not (result.contributors == frozenset(honest) and close(result.values["w"], sum(inputs[c]["w"] for c in honest)))

    defence_stops(attack, monkeypatch, MaskServer, "_check_fresh_keys", lambda self, client, keys: None)


@pytest.mark.parametrize("key", ["reused", "low-order"])
def test_the_server_refuses_reused_and_low_order_public_keys_at_advertise(key):
    """A key an earlier epoch (or another client) advertised, or a low-order point (whose shared
    secret is all zeros), is refused at ADVERTISE: its sender is out, the others go on."""
    session = local_session(MASK, range(4))
    session.start_round()
    server = session.server
    fresh = RoundKeys.generate()
    used, low = next(iter(server._public_keys)), bytes(32)  # bytes(32): the point of order 1
    keys = dataclasses.replace(server._keys[0], share_public=used if key == "reused" else low, mask_public=fresh.mask_public)
    with pytest.raises(ProtocolError, match="twice or one already in use" if key == "reused" else "low-order"):
        server._check_fresh_keys(0, keys)


@pytest.mark.parametrize("lie", ["true key", "wrong key"])
def test_attack_a_holder_complaining_about_an_honest_dealer_is_the_one_excluded(monkeypatch, lie):
    """Client 1 complains about client 4's valid envelope, with the envelope's true key or with
    any other: the server opens it with the key 4 committed to and finds the shares 4 committed
    to, or sees the key is not that one, and excludes 1, not 4; the sum goes on over the others."""
    n, holder, dealer = 7, 1, 4
    inputs = make_inputs(range(n), shapes=SHAPE)

    def run():
        session = local_session(MASK, range(n), policy=ClientPolicy())
        role = session.clients[holder]
        original = role._on_input

        def complain(request):
            response = original(request)
            if dealer not in role._epoch.sealing:  # a later key epoch, without the dealer
                return response
            ep = role._epoch
            key = keyring.envelope_key(ep.sealing[dealer], **role._labels(ep), owner=dealer, holder=holder) if lie == "true key" else os.urandom(32)
            return dataclasses.replace(response, complaints=(Complaint(dealer, key),))

        role._on_input = complain
        session.start_round()
        return session.secure_sum("s", inputs), session.server.excluded

    def attack() -> bool:
        result, excluded = run()
        assert result.contributors == frozenset(range(n)) - {holder if holder in excluded else dealer}
        return dealer in excluded  # an honest dealer framed

    if lie == "true key":
        defence_stops(attack, monkeypatch, MaskServer, "_holds_committed_shares", lambda self, *args: False)
    else:
        defence_stops(attack, monkeypatch, MaskServer, "_key_committed", lambda self, *args: True)
    result, excluded = run()  # and the run goes on, naming the liar and the lie
    said = "envelope, which holds the shares 4 committed to" if lie == "true key" else "envelope with a key 4 did not commit to"
    assert excluded == {holder: f"complained about client 4's {said}"} and result.contributors == frozenset(range(n)) - {holder}


def test_attack_a_dealer_committing_to_another_envelope_key_to_frame_a_complaining_holder(monkeypatch):
    """Client 4 seals garbage to client 1 under a key other than the one they share: were 1 to
    complain, the key it reveals would not open 4's envelope and the server would exclude 1. A
    holder complains only about an envelope that opens under the key it derives; else it sets
    the envelope aside and stays in the run."""
    holder, dealer = 1, 4

    def lie(identity, role, response):
        return _resealed(role, response, lambda shares: os.urandom(len(shares)), key_for=lambda h, key: os.urandom(32), only=holder)

    def attack() -> bool:
        _, excluded, _ = _one_liar_runs(dealer, lie)
        return holder in excluded

    defence_stops(attack, monkeypatch, MaskClient, "_sealed_by_dealer", staticmethod(lambda payload: True))


def test_attack_a_server_asking_a_dealer_for_its_shares_twice_in_one_key_epoch(monkeypatch):
    """The server sends client 0's SHARE_KEYS request again in the same key epoch. Each
    direction's envelope key seals one envelope with a nonce of zero: a second dealing
    would seal new shares under the same keystream, and the two envelopes to one holder would XOR
    to the XOR of the two share sets. The client refuses the second request."""
    n, dealer = 5, 0

    def attack() -> bool:
        seen: dict = {}

        def hook(direction, stage, client, data):
            if (direction, stage, client) == ("down", Stage.SHARE_KEYS, dealer):
                seen["request"] = codec.decode(data)
            if (direction, stage, client) == ("up", Stage.SHARE_KEYS, dealer) and "again" not in seen:
                role = session.clients[dealer]
                seen["first"] = _dealt_pairs(role, codec.decode(data))
                seen["again"] = _dealt_pairs(role, role._on_share_keys(seen["request"]))
            return data

        session = local_session(MASK, range(n), intercept=hook)
        try:
            session.start_round()
        except SecureFedGraphError:
            pass
        if "again" not in seen:
            return False
        (e1, _), (e2, _) = seen["first"][0], seen["again"][0]
        ep, header = session.clients[dealer]._epoch, seen["request"].header
        lab = {"session": header.session, "round": header.round, "epoch": ep.epoch}
        key = keyring.envelope_key(ep.sealing[e1.holder], **lab, owner=dealer, holder=e1.holder)
        lab["view"] = ep.view
        (_, c1), (_, c2) = seen["first"][0], seen["again"][0]
        s1 = keyring.open_shares(key, e1, seed_hash=c1.seed_hash, key_hash=c1.key_hash, **lab)
        s2 = keyring.open_shares(key, e2, seed_hash=c2.seed_hash, key_hash=c2.key_hash, **lab)
        xor = lambda a, b: bytes(x ^ y for x, y in zip(a, b))  # noqa: E731
        return s1 != s2 and xor(e1.data[:72], e2.data[:72]) == xor(s1, s2)  # one keystream: the server has the XOR of two share sets

    defence_stops(attack, monkeypatch, MaskClient, "_deal_once", lambda self, ep: None)


def test_attack_a_server_altering_an_envelope_to_make_an_honest_holder_reveal_its_key(monkeypatch):
    """The server alters client 4's envelope to client 1 in transit: were 1 to complain, the key
    it reveals would open 4's real envelope, and the server would hold 1's shares of 4's secrets.
    The altered envelope does not open under the key, so 1 sets it aside without complaining."""
    n, holder, dealer = 7, 1, 4
    inputs = make_inputs(range(n), shapes=SHAPE)

    def attack() -> bool:
        kept, complaints = {}, []

        def hook(direction, stage, client, data):
            if (direction, stage, client) == ("down", Stage.INPUT, holder):
                request = codec.decode(data)
                pairs = []
                for e, c in request.dealt.pairs():
                    if e.owner == dealer and "envelope" not in kept:
                        kept.update(envelope=e, commitments=c, labels=session.server._labels(), view=session.server._view)
                        e = dataclasses.replace(e, data=e.data[:-1] + bytes([e.data[-1] ^ 1]))
                    pairs.append((e, c))
                return codec.encode(dataclasses.replace(request, dealt=DealtShares.of(pairs)))
            if (direction, stage, client) == ("up", Stage.INPUT, holder):
                complaints.extend(codec.decode(data).complaints)
            return data

        session = local_session(MASK, range(n), intercept=hook, policy=ClientPolicy())
        session.start_round()
        try:
            session.secure_sum("s", inputs)
        except SecureFedGraphError:
            pass
        keys = [c.key for c in complaints if c.dealer == dealer]
        if not keys:
            return False
        c = kept["commitments"]  # the server holds client 1's shares of client 4's seed and mask key:
        opened = keyring.open_shares(keys[0], kept["envelope"], seed_hash=c.seed_hash, key_hash=c.key_hash, **kept["labels"], view=kept["view"])
        if opened is None:
            return False
        seed, mask_key = opened[:shamir.SHARE_BYTES], opened[shamir.SHARE_BYTES:]
        lab = {**kept["labels"], "owner": dealer, "holder": holder}
        return (keyring.share_commitment(seed, kind="seed", **lab), keyring.share_commitment(mask_key, kind="mask_key", **lab)) == (
            kept["commitments"].seed_hash, kept["commitments"].key_hash)

    defence_stops(attack, monkeypatch, MaskClient, "_sealed_by_dealer", staticmethod(lambda payload: True))


# --- E. ckks: the decryption oracle, and releases (C-CHECK, C-RELEASE, C-LIAR) ------------------

CKKS = SecureSumConfig(backend=Backend.CKKS)




def test_attack_ckks_decryption_oracle_with_copies_of_one_ciphertext(monkeypatch):
    """At DELIVER the server sends client 0 four copies of client 3's ciphertext, labelled as the
    sum of clients 0-3, then asks it to release the (releasable) sum: x3 times four. The count
    lane reads 4 and passes; the check lanes, which only key holders can compute, do not add up."""
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
    from secure_fedgraph.protocol.sum_backends.ckks import CkksClient, CkksServer
    from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest, InputRequest

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("v", inputs[ctx.client_id], releasable=True)

    class Oracle(CkksServer):
        def aggregate(self, spec):
            kept: dict = {}
            signatures: dict = {}
            live = tuple(sorted(self.live))
            yield self._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, None, live) for c in live},
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
        return 0 in released and close(released[0]["w"] / 4, inputs[3]["w"])

    defence_stops(attack, monkeypatch, CkksClient, "_matches", lambda self, *args: True)


def test_attack_ckks_two_contributor_sets_released_by_two_clients(monkeypatch):
    """The server shows clients 0, 1 and 3 the contributor set of all five, clients 2 and 4 the
    set without client 3, delivers each group the (genuine) sum over its set, and has client 0
    and client 2 release them: the difference is x3. Each client signs one set per sum and needs
    a majority of the run to have signed its own, which two different sets cannot both have."""
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
    from secure_fedgraph.protocol.sum_backends.ckks import CkksClient, CkksServer
    from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest, InputRequest

    n, groups = 5, {"all": (0, 1, 3), "without 3": (2, 4)}
    inputs = make_inputs(range(n), shapes={"w": (8,)})
    sets = {"all": tuple(range(n)), "without 3": (0, 1, 2, 4)}

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("v", inputs[ctx.client_id], releasable=True)

    class Differencing(CkksServer):
        def aggregate(self, spec):
            kept: dict = {}
            live = tuple(sorted(self.live))
            yield self._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, None, live) for c in live},
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
        return {0, 2} <= set(released) and close(released[0]["w"] - released[2]["w"], inputs[3]["w"])

    defence_stops(attack, monkeypatch, CkksClient, "_vouched", lambda self, request: None)


def test_attack_ckks_release_of_a_sum_the_plan_did_not_mark(monkeypatch):
    """The server asks clients to release the FedAvg sum of their weights, which with ckks it
    must never see. Clients release only sums their plan marked releasable (error statistics)."""
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("weights", inputs[ctx.client_id])  # not releasable

    def attack() -> bool:
        from secure_fedgraph.protocol.sum_backends.ckks import CkksServer

        server, hosts = _hosts(CKKS, n, plan, CkksServer)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        spec = SumSpec.of("weights", inputs[0])
        runner.run(server.aggregate(spec))
        released = runner.run(collectives.upload(server.seq, [0], RELEASE_PREFIX + "weights", spec))
        return 0 in released and close(released[0]["w"], sum(inputs[c]["w"] for c in range(n)))

    defence_stops(attack, monkeypatch, ClientHost, "_may_release", lambda self, name, spec: self._held[name][0])


def test_attack_ckks_a_ciphertext_under_another_key_costs_its_sender(monkeypatch):
    """Client 2 encrypts under a key of its own. Every honest client's check fails; instead of
    leaving, each says so, the server has every contribution checked by another contributor,
    excludes client 2 and abandons that sum; the next sum succeeds without it. Without finding
    the sender, client 2 spoils every sum of the run."""
    from secure_fedgraph.crypto.ckks import SecretContext
    from secure_fedgraph.errors import SumAbandoned
    from secure_fedgraph.protocol.sum_backends.ckks import CkksServer

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
        return not close(result.values["w"], sum(inputs[c]["w"] for c in result.contributors))

    defence_stops(attack, monkeypatch, CkksServer, "_find_bad_senders", lambda self, index, kept: (yield from ()) or (set(), set(), {}))


def _ckks_liar_run(liar: int, *, sends_garbage: bool, lies_at_verify: bool, complains: bool):
    """Five ckks clients on their default policy; ``liar`` may encrypt under a key of its own,
    answer every VERIFY "invalid", and complain about every delivered sum. Returns the session
    and the first sum's outcome (its result, or the SumAbandoned it raised)."""
    from secure_fedgraph.crypto.ckks import SecretContext
    from secure_fedgraph.errors import SumAbandoned
    from secure_fedgraph.protocol.sum_backends.messages import DeliverResponse, VerifyResponse

    stranger = SecretContext.generate(CKKS.ckks.params)

    def hook(direction, stage, client, data):
        if direction != "up" or client != liar:
            return data
        response = codec.decode(data)
        if stage is Stage.INPUT and sends_garbage:
            blobs, _ = stranger.encrypt(np.zeros(16), params=CKKS.ckks.params, clip_range=CKKS.ckks.clip_range)
            response = dataclasses.replace(response, ciphertexts=tuple(blobs))
        elif stage is Stage.VERIFY and lies_at_verify:
            response = VerifyResponse(response.header, response.owner, False)
        elif stage is Stage.DELIVER and complains:
            response = DeliverResponse(response.header, False, "the aggregate is not the sum of its contributors' ciphertexts")
        return codec.encode(response)

    session = local_session(CKKS, range(5), intercept=hook, policy=CKKS_ONLY)
    session.start_round()
    try:
        return session, session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    except SumAbandoned as abandoned:
        return session, abandoned


def test_attack_a_ckks_checker_answering_invalid_to_frame_an_honest_contributor(monkeypatch):
    """Client 3 encrypts under a key of its own (spoiling the sum) and, asked to check another
    contributor's ciphertexts, always answers "invalid": with one checker per contribution, the
    honest client it checks would be excluded beside it. Each contribution is checked by 2C + 1
    contributors and decided by C + 1 agreeing verdicts, so only 3 is excluded (for its
    ciphertexts and its lies) and the run goes on without it (threat_model.md C-LIAR)."""
    from secure_fedgraph.protocol.sum_backends.ckks import CkksServer

    def attack() -> bool:
        session, _ = _ckks_liar_run(3, sends_garbage=True, lies_at_verify=True, complains=False)
        assert 3 in session.server.excluded, "the liar was not caught"
        inputs = make_inputs(range(5), seed=1, shapes=SHAPE)
        others = sorted(session.server.live)
        session.secure_sum("b", {c: inputs[c] for c in others})
        assert close(session.clients[others[0]].last_result.values["w"], sum(inputs[c]["w"] for c in others))
        return set(session.server.excluded) != {3}  # an honest client was framed

    defence_stops(attack, monkeypatch, CkksServer, "_verdicts_needed", lambda self: 1)


def test_attack_a_false_ckks_complaint_costs_the_complainer_not_the_sum(monkeypatch):
    """Client 3 says "the check failed" about an honest aggregate. Its complaint alone must not
    abandon the sum or make honest clients leave: every contribution is checked by 2C + 1
    others and found valid, so the aggregate (their sum) is right: client 3 is excluded for its
    lie and the sum stands (threat_model.md C-LIAR)."""
    from secure_fedgraph.errors import SumAbandoned
    from secure_fedgraph.protocol.sum_backends.ckks import CkksServer

    def attack() -> bool:
        session, outcome = _ckks_liar_run(3, sends_garbage=False, lies_at_verify=False, complains=True)
        if isinstance(outcome, SumAbandoned):
            return True  # one client's word lost the sum
        inputs = make_inputs(range(5), shapes=SHAPE)
        assert set(session.server.excluded) == {3} and "complained about sum 'a'" in session.server.excluded[3]
        assert all(close(session.clients[c].last_result.values["w"], sum(inputs[c]["w"] for c in range(5))) for c in (0, 1, 2, 4))
        return False

    defence_stops(attack, monkeypatch, CkksServer, "_complaints_refuted", staticmethod(lambda bad, valid, contributors: False))


CKKS_ONLY = ClientPolicy(backends=frozenset({Backend.CKKS}))  # the clients' default policy, but for the backend (the option a ckks run needs)


def _ckks_sum_by_hand(server, index: int, specs: dict, live: dict, contributors: tuple[int, ...], *, deliver_to: tuple[int, ...]):
    """One ckks sum as a deviating server runs it: each client asked with its own spec and live
    set, every contributor asked to sign ``contributors``, and the sum of their ciphertexts
    delivered to ``deliver_to`` with every signature; returns (signatures, responses to the delivery)."""
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest, InputRequest

    kept, signatures, answers = {}, {}, {}
    yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, index, specs[c], None, live[c]) for c in specs},
                       lambda c, r: kept.__setitem__(c, [server.context.load(b) for b in r.ciphertexts]))
    yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, contributors) for c in contributors},
                       lambda c, r: signatures.__setitem__(c, r.signature))
    signed = tuple(Signature(c, sig) for c, sig in sorted(signatures.items()))
    if not deliver_to:
        return signed, answers
    total = None
    for c in contributors:
        total = PublicContext.add(total, kept[c])
    blobs = tuple(v.serialize() for v in total)
    yield server._step(Stage.DELIVER, lambda h: {c: DeliverRequest(h, index, contributors, None, blobs, None, signed) for c in deliver_to},
                       lambda c, r: answers.__setitem__(c, r))
    return signed, answers


def test_attack_ckks_splicing_an_earlier_rounds_ciphertexts_into_a_later_sum(monkeypatch):
    """Issue 29, E2. Round A: the releasable sum "v" of clients 0-3, honestly delivered and
    released, but the server keeps every ciphertext. Round B: it labels its sum "round 0, sum 0"
    again, asks every client for its round-B input (the same live set, the same name), claims
    client 3 dropped, has 0-2 sign their set, and delivers round A's ciphertexts of 0-2: genuine
    ciphertexts whose check lanes were made for that very label. Released, round A's total minus
    it is x3 of round A. Clients require (round, sum index) to advance within a session, so no
    label covers two contributions of one client (threat_model.md C-CHECK)."""
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
    from secure_fedgraph.protocol.sum_backends.ckks import CkksClient
    from tests.helpers import splicing_ckks_server

    n, victim = 4, 3
    inputs = {r: make_inputs(range(n), seed=seed, shapes={"w": (8,)}) for seed, r in enumerate(("A", "B"))}

    def plan(ctx: ClientContext):
        for r in ("A", "B"):
            yield ctx.secure_sum("v", inputs[r][ctx.client_id], releasable=True)

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, splicing_ckks_server("v", victim), policy=CKKS_ONLY)
        runner = LocalRunner(server, hosts)
        spec = SumSpec.of("v", inputs["A"][0])
        released = {}
        for round_index, r in enumerate(("A", "B")):
            runner.run(server.setup(round_index))
            runner.run(server.aggregate(spec))
            released[r] = runner.run(collectives.upload(server.seq, [0], RELEASE_PREFIX + "v", spec))[0]["w"]
        return close(released["A"] - released["B"], inputs["A"][victim]["w"])

    defence_stops(attack, monkeypatch, CkksClient, "_advance", lambda self, round_index, sum_index: None)


def test_attack_ckks_splice_on_the_fedavg_gru_plan_gives_one_sensors_validation_totals(monkeypatch, tmp_path):
    """E2 on the real fedavg-gru plan, in process (4 sensors, 2 rounds): round 1's validation sum
    is labelled as round 0's and delivered as round 0's ciphertexts without sensor 3; the clients
    release it, and round 0's released totals minus it are sensor 3's own validation totals
    (squared and absolute errors, window count), which only the sensor holds."""
    from secure_fedgraph.papers.fedavg import FedAvgGRU, FedAvgGRUConfig
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
    from secure_fedgraph.protocol.core.messages import UploadResponse, tensors_of
    from secure_fedgraph.protocol.sum_backends.ckks import CkksClient
    from secure_fedgraph.protocol.transports.transcript import AUDIT, read_transcript
    from secure_fedgraph.runs import simulate as simulate_module
    from tests.helpers import splicing_ckks_server

    plan = FedAvgGRU(FedAvgGRUConfig(sensors=4, rounds=2, hidden_size=8, max_windows=30, max_local_steps=1, batch_size=16))
    monkeypatch.setattr(simulate_module, "make_server", lambda config, **kw: splicing_ckks_server("validation", 3)(config, **kw))

    def attack() -> bool:
        result = simulate_module.simulate(plan, CKKS, policy=CKKS_ONLY, record=True, transcripts=tmp_path)
        releases = [codec.decode(d) for s, c, d in result.received if s is Stage.UPLOAD and c == 0]
        totals = [tensors_of(m.tensors) for m in releases if isinstance(m, UploadResponse) and m.name == RELEASE_PREFIX + "validation"]
        own = [tensors_of(r.message().tensors) for r in read_transcript(tmp_path / "clients" / "client-3.bin")
               if r.direction == AUDIT and r.message().name == "validation"]
        return all(np.allclose(totals[0][k] - totals[1][k], own[0][k], rtol=1e-6, atol=1e-3) for k in own[0])

    defence_stops(attack, monkeypatch, CkksClient, "_advance", lambda self, round_index, sum_index: None)


def test_attack_ckks_mixing_two_sums_under_one_round_and_index(monkeypatch):
    """Clients at different points of their plans can be asked for different sums under one
    (round, sum index), which the advance (per client) allows. Clients 0-2 finish the plan's
    "weights" sum without client 3; then, at sum index 1, client 3 is asked for its "weights"
    (never releasable) and 0-2 for their "err" (releasable), all shown the same live set; client
    0 is delivered the sum of the four as "err", signed by 0-2, and releases client 3's model
    blurred only by three error terms. The check lanes are keyed by the sum's name: client 3's
    part was made for "weights" and does not add up as "err" (threat_model.md C-CHECK, C-RELEASE)."""
    from secure_fedgraph.protocol import collectives
    from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
    from secure_fedgraph.protocol.sum_backends.ckks import CheckLanes, CkksServer

    n, victim, others = 4, 3, (0, 1, 2)
    weights = make_inputs(range(n), seed=0, shapes={"w": (8,)})
    errors = make_inputs(range(n), seed=1, shapes={"w": (8,)}, scale=0.01)

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("weights", weights[ctx.client_id], private=True)
        yield ctx.secure_sum("err", errors[ctx.client_id], releasable=True)

    class Mixer(CkksServer):
        def aggregate(self, spec):
            err = SumSpec.of("err", errors[0])
            yield from _ckks_sum_by_hand(self, 0, dict.fromkeys(others, spec), dict.fromkeys(others, others), others, deliver_to=others)
            everyone = tuple(range(n))  # 0-2 moved on to "err"; client 3 still waits for "weights"
            yield from _ckks_sum_by_hand(self, 1, {c: spec if c == victim else err for c in everyone}, dict.fromkeys(everyone, everyone),
                                         everyone, deliver_to=(0,))
            return (yield from collectives.upload(self.seq, [0], RELEASE_PREFIX + "err", err))

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, Mixer, policy=CKKS_ONLY)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        released = runner.run(server.aggregate(SumSpec.of("weights", weights[0])))
        return close(released[0]["w"] - sum(errors[c]["w"] for c in others), weights[victim]["w"])

    unnamed = CheckLanes.__init__
    defence_stops(attack, monkeypatch, CheckLanes, "__init__", lambda self, key, *, name, **kw: unnamed(self, key, name="", **kw))


def test_check_lanes_bind_the_live_set_each_contributor_was_shown(monkeypatch):
    """The server shows client 0 the live set {0, 1, 2} and clients 1-3 the set of all four, then
    delivers client 0 the sum of 0-2. The lanes are keyed by the live set, so contributions made
    under another live set do not add up: a client decrypts only a sum whose contributors were
    all shown what it was shown (threat_model.md C-CHECK; the ckks backend's docstring says why,
    given the advance, this adds no protection of its own)."""
    from secure_fedgraph.protocol.sum_backends.ckks import CheckLanes, CkksServer

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("v", inputs[ctx.client_id], releasable=True)

    class Showing(CkksServer):
        def aggregate(self, spec):
            shown = {c: (0, 1, 2) if c == 0 else (0, 1, 2, 3) for c in range(n)}
            _, answers = yield from _ckks_sum_by_hand(self, 0, dict.fromkeys(range(n), spec), shown, (0, 1, 2), deliver_to=(0,))
            return answers[0].accepted

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, Showing, policy=CKKS_ONLY)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        return runner.run(server.aggregate(SumSpec.of("v", inputs[0])))

    blind = CheckLanes.__init__
    defence_stops(attack, monkeypatch, CheckLanes, "__init__", lambda self, key, *, live, **kw: blind(self, key, live=(), **kw))


def test_a_signature_on_one_sums_contributor_set_does_not_vouch_for_another_sum(monkeypatch):
    """Under one (round, sum index) the server asks client 0 for sum "b" and clients 1-3 for
    sum "a", has all four sign the set of all four, and hands client 0 the signatures. The
    statement names the sum, so the signatures made for "a" do not count towards the majority
    client 0 needs for "b" (threat_model.md C-CONSISTENCY; the check lanes, keyed by the name,
    refuse such a mix too: this makes what a signature vouches for unambiguous)."""
    from secure_fedgraph.protocol.sum_backends import ckks
    from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest

    n = 4
    inputs = make_inputs(range(n), shapes={"w": (8,)})

    def plan(ctx: ClientContext):
        yield ctx.secure_sum("b" if ctx.client_id == 0 else "a", inputs[ctx.client_id])

    class Signing(ckks.CkksServer):
        def aggregate(self, spec):
            everyone = tuple(range(n))
            specs = {c: SumSpec.of("b" if c == 0 else "a", inputs[0]) for c in everyone}
            signed, _ = yield from _ckks_sum_by_hand(self, 0, specs, dict.fromkeys(everyone, everyone), everyone, deliver_to=())
            return signed

    def attack() -> bool:
        server, hosts = _hosts(CKKS, n, plan, Signing, policy=CKKS_ONLY)
        runner = LocalRunner(server, hosts)
        runner.run(server.setup(0))
        signed = runner.run(server.aggregate(None))
        hosts[0].role._vouched(DeliverRequest(None, 0, tuple(range(n)), None, (), None, signed))  # raises unless a majority signed client 0's own sum
        return True

    def unnamed(session, round_index, epoch, sum_index, name, contributors):
        return named(session, round_index, epoch, sum_index, "", contributors)

    named = ckks.contributor_statement
    defence_stops(attack, monkeypatch, ckks, "contributor_statement", unnamed)


# --- the older mask claims, attacked the same way (M-SIGN, M-BOTH, M-ONCE, M-INPUT) ---------------


def _swapped_peer_keys_give_a_clients_input_away(patch: pytest.MonkeyPatch) -> bool:
    """The server relays its own mask keys to client 0 in place of its peers': it would then know
    every pairwise mask of client 0, and client 0's revealed self-mask key would do the rest. It
    passes consistency signatures on without checking them (a deviating server)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    patch.setattr(mask_server, "verify_signature", lambda *args: None)
    n = 5
    fake = {v: X25519PrivateKey.generate() for v in range(1, n)}
    seen: dict = {}

    def hook(direction, stage, client, data):
        if (direction, stage, client) == ("down", Stage.SHARE_KEYS, 0):
            request = codec.decode(data)
            peers = tuple(dataclasses.replace(p, mask_public=fake[p.client].public_key().public_bytes_raw()) if p.client in fake else p
                          for p in request.peers)  # every peer's; client 0's own entry as it advertised it
            return codec.encode(dataclasses.replace(request, peers=peers))
        if direction == "up" and client == 0 and stage in (Stage.INPUT, Stage.UNMASK):
            seen[stage] = codec.decode(data)
        return data

    session = local_session(MASK, range(n), intercept=hook, policy=ClientPolicy())
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
                   pair_keys=pair_keys, client=0, sum_index=0, labels=server._labels())
    return close(guess, inputs[0]["w"])


def test_attack_swapping_the_relayed_public_keys_of_a_clients_peers(monkeypatch):
    """Peers' keys carry their identity signatures, which client 0 checks (M-SIGN). The attack
    runs with the view digest blind to keys, so the signatures alone must stop it."""

    def attack() -> bool:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mask_client, "keys_hash", lambda keys: b"")  # the clients' views blind to keys
            return _swapped_peer_keys_give_a_clients_input_away(patch)

    defence_stops(attack, monkeypatch, mask_client, "verify_keys", lambda keys, **kw: None)


def test_attack_swapped_keys_that_verify_are_caught_by_the_view(monkeypatch):
    """Were a swapped key to verify (a signature the server got in another epoch, or a peer that
    signs two key sets), the view digest still covers every member's keys: the peers that saw
    the real keys sign another view, so client 0 never gathers the consistency signatures it
    needs to reveal its self-mask key (M-CONSISTENCY). The attack runs with signatures unchecked,
    so the view alone must stop it."""

    def attack() -> bool:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mask_client, "verify_keys", lambda keys, **kw: None)
            return _swapped_peer_keys_give_a_clients_input_away(patch)

    defence_stops(attack, monkeypatch, mask_client, "keys_hash", lambda keys: b"")


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
                       pair_keys=pair_keys, client=u, sum_index=0, labels=server._labels())
        return close(guess, inputs[u]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_may_reveal_mask_key", lambda self, ep, owner: None)


def _skipped_unmask_gives_a_contributors_input_away() -> bool:
    """Sum "a": every client sends its input and signs the survivor set {0, .., 4}; the server
    sends UNMASK to client 4 only, which reveals its self-mask key for "a", and to nobody else.
    Sum "b" of the same key epoch: 4 is listed live and "drops" after the others' inputs, and
    the server asks 0..3 for their shares of 4's mask key, which none of them saw revealed a
    self-mask. With 4's mask key and its self-mask key for "a", its masked input to "a" opens."""
    from secure_fedgraph.protocol.sum_backends.messages import InputRequest

    n, u = 5, 4
    session = local_session(MASK, range(n))
    session.start_round()
    server, everyone = session.server, tuple(range(n))
    a, b = make_inputs(range(n), shapes=SHAPE), make_inputs(range(n), seed=1, shapes=SHAPE)
    for c in everyone:
        session.clients[c].contribute("a", a[c])
        session.clients[c].contribute("b", b[c])
    encoding = server.config.mask.encoding(n, 16)
    seen: dict = {"inputs": {}, "signatures": {}, "shares": {}}

    def one_sum(index: int, name: str, inputs, senders: tuple[int, ...], survivors: tuple[int, ...], unmasked: tuple[int, ...]):
        spec, pending = SumSpec.of(name, inputs[0]), {c: server._envelopes.routed(c) for c in senders} if index == 0 else {}
        yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, index, spec, encoding, everyone, pending.get(c, DealtShares()))
                                                   for c in senders},
                           lambda c, r: seen["inputs"].setdefault((index, c), r.payload.copy()))
        signatures: dict[int, bytes] = {}
        yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, survivors) for c in survivors},
                           lambda c, r: signatures.__setitem__(c, r.signature))
        offered = tuple(Signature(c, signatures[c]) for c in sorted(signatures))
        yield server._step(Stage.UNMASK, lambda h: {c: UnmaskRequest(h, offered) for c in unmasked},
                           lambda c, r: seen["shares"].setdefault(index, {}).__setitem__(c, r))

    holders = tuple(c for c in everyone if c != u)
    session.runner.run(one_sum(0, "a", a, everyone, everyone, (u,)))
    session.runner.run(one_sum(1, "b", b, holders, holders, holders))
    answers = seen["shares"].get(1, {})
    shares = {c + 1: s.value for c, r in answers.items() for s in r.mask_key_shares if s.owner == u}
    if len(shares) < server._plan.threshold:
        return False
    mask_private = shamir.combine(shares, threshold=server._plan.threshold)
    pair_keys = {v: keyring.pair_key(mask_private, server._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **server._labels(), a=u, b=v)
                 for v in holders}
    guess = _strip(seen["inputs"][(0, u)], encoding=encoding, self_key=seen["shares"][0][u].self_mask_key, pair_keys=pair_keys, client=u,
                   sum_index=0, labels=server._labels())
    return close(guess, a[u]["w"])


def test_attack_a_skipped_unmask_then_the_mask_key_of_a_client_that_contributed(monkeypatch):
    """A client that signed a survivor set counts every survivor as exposed from then on (its
    signature is what lets them reveal their self-mask keys), not only once it is asked to
    unmask: a server that never sends it UNMASK cannot then have it reveal a share of a
    survivor's mask key (threat_model.md M-BOTH)."""
    defence_stops(_skipped_unmask_gives_a_contributors_input_away, monkeypatch, MaskClient, "_signing_exposes",
                  lambda self, ep, survivors: None)


# --- partial re-key: pair seeds of a contributor said to have dropped (M-BOTH, M-LIAR) ----------


class KeepingRebuilt(MaskServer):
    """Keeps every secret it rebuilds from shares (``rebuilt``: client -> secret)."""

    def _rebuild(self, client, shares, kind):
        secret = super()._rebuild(client, shares, kind)
        self.rebuilt = {**getattr(self, "rebuilt", {}), **({client: secret} if secret is not None else {})}
        return secret


def _pair_seeds_then_the_seed(order: str) -> bool:
    """Client 4 contributes to sum "a" (its self-mask for "a" is revealed: its mask key must stay
    secret). ``order`` "pair seeds first": in sum "b" the server sets 4's input aside and says it
    dropped, so its neighbours reveal their pair seeds of "b" with it (4b); in sum "c" it lists 4
    live again, skips 4's unmask as if 4 had gone silent, and asks the others for shares of 4's
    seed. "seed first": in "b" it skips 4's unmask and rebuilds 4's seed from the others' shares
    (as for any survivor gone silent); in "c" it lists 4 live again, sets its input aside and
    asks for the pair seeds. Either way: 4's seed gives its self-mask of every sum of the epoch,
    so the target sum's input opens."""
    n, u = 5, 4
    seen: dict = {"seeds": {}}

    def spy(direction, stage, client, data):
        if direction == "up" and stage is Stage.INPUT and client == u and seen.get("set aside"):
            seen["y"], seen["set aside"] = codec.decode(data).payload.copy(), False
            return None  # the server says it never came
        if direction == "down" and stage is Stage.UNMASK and client == u and seen.get("skip unmask"):
            seen["skip unmask"] = False
            return None
        if direction == "up" and stage is Stage.PAIR_SEEDS:
            seen["seeds"].update({client: p.seed for p in codec.decode(data).pair_seeds if p.peer == u})
        return data

    session = local_session(MASK, range(n), intercept=spy)
    session.server.__class__ = KeepingRebuilt
    server = session.server
    session.start_round()
    session.secure_sum("a", make_inputs(range(n), shapes=SHAPE))
    b, c = make_inputs(range(n), seed=1, shapes=SHAPE), make_inputs(range(n), seed=2, shapes=SHAPE)
    seen["set aside" if order == "pair seeds first" else "skip unmask"] = True
    try:
        session.secure_sum("b", b)
    except SecureFedGraphError:
        return False
    server.live |= {u}  # 4 is listed live again
    seen["skip unmask" if order == "pair seeds first" else "set aside"] = True
    try:
        session.secure_sum("c", c)
    except SecureFedGraphError:
        pass
    seed = getattr(server, "rebuilt", {}).get(u)
    if seed is None or len(seen["seeds"]) < n - 1:
        return False
    # the sum whose pair seeds with 4 the server holds, and 4's input to it
    index, target = (1, b) if order == "pair seeds first" else (2, c)
    self_key = keyring.self_mask_key(seed, **server._labels(), sum_index=index)
    guess = _strip(seen["y"], encoding=server.config.mask.encoding(n, 16), self_key=self_key, client=u, sum_index=index,
                   pair_seeds=seen["seeds"])
    return close(guess, target[u]["w"])


def test_attack_pair_seeds_of_a_client_said_to_have_dropped_then_its_seed(monkeypatch):
    """A client that signed a survivor set leaving out a live neighbour never reveals a share of
    that neighbour's seed in the key epoch, whether or not it was asked for its pair seed with it
    (threat_model.md M-BOTH): here every neighbour of 4 refuses, so 4's seed is never rebuilt."""
    defence_stops(lambda: _pair_seeds_then_the_seed("pair seeds first"), monkeypatch, MaskClient, "_signing_leaves_out",
                  lambda self, ep, survivors: None)


def test_attack_the_seed_of_a_client_then_its_pair_seeds(monkeypatch):
    """The reverse order: a client that revealed a share of 4's seed refuses any later live set
    listing 4 (it never masks with 4 again, so it holds no pair seed with 4 to reveal)."""
    defence_stops(lambda: _pair_seeds_then_the_seed("seed first"), monkeypatch, MaskClient, "_none_revealed", lambda self, ep, members: None)


def test_attack_pair_seeds_without_a_quorum_then_the_seed_of_a_client_shown_a_small_live_set(monkeypatch):
    """n = 15 (t = 11, at least 8 survivors), clients 10-14 collude. Client 0 contributes to sum
    "a". In sum "b" the server shows 0 the live set {0, 1, 2, 10, .., 14} (8 clients, enough), so
    0 masks its input with 1, 2 and the colluders only; it shows 1 and 2 a survivor set without
    0 and asks them for their pair seeds with 0, offering only their own and the colluders'
    signatures (7). In sum "c" it says 0 survived and went silent, and 3-9 (who never signed 0
    out) and the colluders hold 12 shares of 0's seed, enough. Clients reveal a pair seed only
    after t signatures from the dropped client's group: t signers each bar 0's seed, and the
    holders left are too few."""
    from secure_fedgraph.protocol.sum_backends.messages import InputRequest, PairSeedsRequest, RecoverRequest

    n, u, few, colluders = 15, 0, (1, 2), tuple(range(10, 15))
    others = tuple(c for c in range(3, 10))

    def attack() -> bool:
        session = local_session(MASK, range(n))
        session.start_round()
        server, clients = session.server, session.clients
        session.secure_sum("a", make_inputs(range(n), shapes=SHAPE))
        b, c_inputs = make_inputs(range(n), seed=1, shapes=SHAPE), make_inputs(range(n), seed=2, shapes=SHAPE)
        for c in range(n):
            clients[c].contribute("b", b[c])
            clients[c].contribute("c", c_inputs[c])
        encoding, lab = server.config.mask.encoding(n, 16), server._labels()
        everyone, small = tuple(range(n)), tuple(sorted((u, *few, *colluders)))
        seen: dict = {"seeds": {}, "shares": {}}

        def sign(signers, statement) -> tuple[Signature, ...]:
            return tuple(Signature(c, clients[c].identity.sign(statement)) for c in sorted(signers))

        def steps():
            spec = SumSpec.of("b", b[0])
            yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, 1, spec, encoding, small if c == u else everyone)
                                                         for c in everyone},
                               lambda c, r: seen.__setitem__("y", r.payload.copy()) if c == u else None)
            without = tuple(c for c in everyone if c != u)
            yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, without) for c in few}, lambda c, r: None)
            statement = keyring.consistency_statement(**lab, view=server._view, sum_index=1, live=everyone, survivors=without)
            offered = sign(few + colluders, statement)
            yield server._step(Stage.PAIR_SEEDS, lambda h: {c: PairSeedsRequest(h, offered) for c in few},
                               lambda c, r: seen["seeds"].update({c: p.seed for p in r.pair_seeds if p.peer == u}))
            spec = SumSpec.of("c", c_inputs[0])
            live = tuple(sorted((u, *others, *colluders)))
            yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, 2, spec, encoding, live) for c in others + colluders},
                               lambda c, r: None)
            yield server._step(Stage.CONSISTENCY, lambda h: {c: ConsistencyRequest(h, live) for c in others}, lambda c, r: None)
            statement = keyring.consistency_statement(**lab, view=server._view, sum_index=2, live=live, survivors=live)
            offered = sign(others + colluders, statement)
            yield server._step(Stage.UNMASK, lambda h: {c: UnmaskRequest(h, offered) for c in others}, lambda c, r: None)
            yield server._step(Stage.RECOVER, lambda h: {c: RecoverRequest(h, (u,), offered) for c in others},
                               lambda c, r: seen["shares"].update({c + 1: s.value for s in r.self_seed_shares if s.owner == u}))

        session.runner.run(steps())
        if len(seen["seeds"]) < len(few):
            return False
        shares = {**seen["shares"], **{c + 1: clients[c]._epoch.held[u][0] for c in colluders}}
        seed = shamir.combine(shares, threshold=server._plan.threshold)
        pair_seeds = {**seen["seeds"], **{c: keyring.pair_seed(clients[c]._epoch.pairwise[u], **lab, sum_index=1, a=c, b=u) for c in colluders}}
        guess = _strip(seen["y"], encoding=encoding, self_key=keyring.self_mask_key(seed, **lab, sum_index=1), client=u, sum_index=1,
                       pair_seeds=pair_seeds)
        return close(guess, b[u]["w"])

    defence_stops(attack, monkeypatch, MaskClient, "_may_reveal_pair_seed", lambda self, ep, v: None)


def _a_wrong_pair_seed_spoils_the_sum(lie, *, named: bool) -> bool:
    """Client 4 contributes to sum "a", then drops before sum "b"'s input; client 2 rewrites its
    answer at 4b (``lie``). True when sum "b" is lost or wrong, False when the honest clients get
    the right sum without 2 and 4 (the sum asked again after a re-key; with ``named``, 2 excluded
    and named in the run's metrics)."""
    n, liar, u = 7, 2, 4

    def tamper(direction, stage, client, data):
        if (direction, stage, client) == ("up", Stage.PAIR_SEEDS, liar):
            return codec.encode(lie(codec.decode(data), session))
        return data

    session = local_session(MASK, range(n), intercept=tamper)
    session.start_round()
    session.secure_sum("a", make_inputs(range(n), shapes=SHAPE))
    session.runner.drop = {Stage.INPUT: {u}}
    inputs = make_inputs(range(n), seed=1, shapes=SHAPE)
    try:
        result = session.secure_sum("b", inputs)
    except SecureFedGraphError:
        return True  # the sum is lost
    honest = set(range(n)) - {liar, u}
    right = result.contributors == frozenset(honest) and close(result.values["w"], sum(inputs[c]["w"] for c in honest))
    return not (right and (liar in session.server.excluded or not named))


def test_attack_a_wrong_pair_seed_costs_the_liar_not_the_sum(monkeypatch):
    """Client 2 reveals a random pair seed with dropped client 4. It fails the Merkle root 2 sent
    with its input, so 2 is excluded; no self-mask key has left yet, so the server re-keys the
    others and the sum is asked again and delivered. Without the check the server removes a mask
    nobody added: the sum is garbage (here caught by its clipped-count lane and abandoned, with
    nobody named)."""

    def wrong_seed(response, session):
        return dataclasses.replace(response, pair_seeds=tuple(dataclasses.replace(p, seed=os.urandom(32)) for p in response.pair_seeds))

    defence_stops(lambda: _a_wrong_pair_seed_spoils_the_sum(wrong_seed, named=True), monkeypatch, MaskServer, "_pair_seed_verified",
                  lambda self, *args: True)


def test_attack_a_pair_seed_with_a_neighbour_that_survived_costs_the_liar_not_the_sum(monkeypatch):
    """Client 2 adds its true pair seed with client 3, a survivor, opened against its own
    commitment: taking that mask out would leave 3's half of it in the sum. Only seeds with the
    dropped are accepted; 2's answer is refused (a malformed answer: M-INPUT) and the sum is asked
    again, after a re-key, of the others."""

    def extra_seed(response, session):
        lab = session.server._labels()
        seeds = {v: keyring.pair_seed(session.clients[2]._epoch.pairwise[v], **lab, sum_index=1, a=2, b=v) for v in range(7) if v != 2}
        tree = merkle.levels(keyring.pair_seed_leaves(seeds, **lab, sum_index=1, owner=2))
        extra = PairSeed(3, seeds[3], merkle.opening(tree, sorted(seeds).index(3)))
        return dataclasses.replace(response, pair_seeds=(*response.pair_seeds, extra))

    defence_stops(lambda: _a_wrong_pair_seed_spoils_the_sum(extra_seed, named=False), monkeypatch, MaskServer, "_one_seed_per_drop",
                  staticmethod(lambda client, response, expected: None))


def test_attack_two_inputs_under_one_sum_index(monkeypatch):
    """The server asks for sum "a" and then for sum "b" under the same sum index of the same key
    epoch: every mask would repeat, and the difference of a client's two uploads would be the
    difference of its two inputs, with nothing unmasked."""
    from secure_fedgraph.protocol.sum_backends.messages import InputRequest

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
            pending = {c: server._envelopes.routed(c) for c in live}
            for name in ("a", "b"):
                spec = SumSpec.of(name, a[0])
                routed = {c: pending[c] if name == "a" else DealtShares() for c in live}
                yield server._step(Stage.INPUT, lambda h: {c: InputRequest(h, 0, spec, encoding, live, routed[c]) for c in live},
                                   lambda c, r: uploads[name].__setitem__(c, r.payload.copy()))

        session.runner.run(steps())
        if 0 not in uploads["b"]:
            return False
        difference = encoding.decode_sum(np.ascontiguousarray((uploads["a"][0] - uploads["b"][0])[:-1]))
        return close(difference, a[0]["w"] - b[0]["w"])

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
    from secure_fedgraph.protocol.transports import codec as wire
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
