"""The mask client's checks on what a deviating server sends, one condition at a time (issue 29
item 9; `make mutate`): each test breaks exactly one rule of one request to one client, with every
client on its default policy, and asserts that the client refuses it, naming the rule. Removing
that one condition from the client makes its test fail. The attacks the checks stop, end to
end, are in test_attacks.py and test_mask_security.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends import mask_client as mask_client_module
from secure_fedgraph.protocol.sum_backends.messages import DealtShares
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from tests.helpers import make_inputs, moved_record, plain_sum

N = 5
VICTIM = 0
MASK = SecureSumConfig(backend=Backend.MASK)
SHAPE = {"w": (6,)}


def _session(stage: Stage, change, *, direction: str = "down"):
    """A session of N clients on their default policy in which the server rewrites its request
    at ``stage`` to VICTIM with ``change(request) -> request``."""

    def hook(d, s, c, data):
        if (d, s, c) == (direction, stage, VICTIM):
            return codec.encode(change(codec.decode(data)))
        return data

    return local_session(MASK, range(N), policy=ClientPolicy(), intercept=hook)


def _sum(session):
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    return session.secure_sum("s", inputs), inputs


def test_an_untouched_sum_passes_every_check():
    result, inputs = _sum(_session(Stage.DELIVER, lambda r: r))
    assert np.allclose(result.values["w"], plain_sum(inputs, range(N))["w"], atol=1e-5)


@pytest.mark.parametrize(
    ("case", "match"),
    [
        ("below the floor", "below min_survivors"),
        ("without the client", "excludes this client"),
        ("out of order", "sorted, unique and within the live set"),
        ("outside the live set", "sorted, unique and within the live set"),
    ],
)
def test_a_client_signs_no_survivor_set_that_breaks_one_rule(case, match):
    """The consistency step: a survivor set below the policy's floor would let the server learn
    the sum of a few clients; one without the client, or outside the live set, is no set it
    contributed to."""
    floor = MASK.mask.resolve(N, None).min_survivors
    survivors = {
        "below the floor": tuple(range(floor - 1)),
        "without the client": tuple(range(1, N)),
        "out of order": tuple(reversed(range(N))),
        "outside the live set": (*range(N), N + 3),
    }[case]
    assert VICTIM in survivors or case == "without the client"
    with pytest.raises(ProtocolError, match=match):
        _sum(_session(Stage.CONSISTENCY, lambda r: dataclasses.replace(r, survivors=survivors)))


def _ring(request, values):
    return dataclasses.replace(request, aggregate=values)


@pytest.mark.parametrize(
    ("case", "match"),
    [
        ("another sum index", "does not match the verified sum"),
        ("other contributors", "does not match the verified sum"),
        ("a wrong shape", "wrong shape or dtype"),
        ("a wrong dtype", "wrong shape or dtype"),
        ("garbage", "impossible"),
    ],
)
def test_a_client_refuses_a_delivered_sum_that_breaks_one_rule(case, match):
    """DELIVER: the sum must be the one the client verified (index, contributors), of the shape
    and ring it was masked in, and decode to a possible clipped count (a server that adds garbage
    to the ring sum gives itself away there)."""
    rng = np.random.default_rng(0)
    change = {
        "another sum index": lambda r: dataclasses.replace(r, sum_index=r.sum_index + 1),
        "other contributors": lambda r: dataclasses.replace(r, contributors=r.contributors[1:]),
        "a wrong shape": lambda r: _ring(r, r.aggregate[:-1]),
        "a wrong dtype": lambda r: _ring(r, r.aggregate.astype(np.float64)),
        "garbage": lambda r: _ring(r, r.aggregate + rng.integers(0, np.iinfo(r.aggregate.dtype).max, r.aggregate.shape, dtype=r.aggregate.dtype)),
    }[case]
    with pytest.raises(ProtocolError, match=match):
        _sum(_session(Stage.DELIVER, change))


def test_a_rekey_among_the_same_clients_is_refused():
    """A re-key follows a dropout, so it is among fewer clients: one among the same clients is a
    server grinding key epochs (or asking for a second self-mask seed) with nobody gone."""
    session = local_session(MASK, range(N), policy=ClientPolicy())
    session.start_round()
    with pytest.raises(ProtocolError, match="a re-key must be among fewer participants"):
        session.runner.run(session.server._key_setup(set(range(N))))  # the server's re-key step, with nobody dropped


def test_a_key_epoch_that_does_not_advance_is_refused():
    session = local_session(MASK, range(N), policy=ClientPolicy())
    session.start_round()
    epoch = session.clients[VICTIM]._epoch.epoch
    def hook(d, s, c, data):
        if (d, s, c) == ("down", Stage.ADVERTISE, VICTIM):
            return codec.encode(dataclasses.replace(codec.decode(data), epoch=epoch))
        return data

    session.runner.intercept = hook
    with pytest.raises(ProtocolError, match=f"key epoch {epoch} does not follow epoch {epoch}"):
        session.runner.run(session.server._key_setup(set(range(N - 1))))  # fewer clients: only the epoch is wrong


def _sums(session, count: int):
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    return [session.secure_sum(f"s{i}", inputs) for i in range(count)]


def _rewriting(rules, *, drop=None):
    """A session whose server rewrites requests to VICTIM: ``rules`` maps (stage, sum_index or
    None) to ``change(request) -> request``; the sum index is counted per stage, from 0."""
    seen: dict = {}

    def hook(d, s, c, data):
        if d != "down" or c != VICTIM:
            return data
        index = seen[s] = seen.get(s, -1) + 1
        change = rules.get((s, index)) or rules.get((s, None))
        return codec.encode(change(codec.decode(data))) if change else data

    return local_session(MASK, range(N), policy=ClientPolicy(), intercept=hook, drop=drop)


def test_a_graph_step_in_a_complete_graph_epoch_is_refused():
    from secure_fedgraph.protocol.core.messages import Header
    from secure_fedgraph.protocol.sum_backends.messages import GraphRequest

    session = local_session(MASK, range(N), policy=ClientPolicy())
    session.start_round()
    client = session.clients[VICTIM]
    with pytest.raises(ProtocolError, match="a graph step belongs to a sparse key epoch, once"):
        client._on_graph(GraphRequest(Header(client.session, 0, 99, Stage.GRAPH, -1), b"\0" * 32 * N))


def test_share_envelopes_sent_again_in_a_later_sum_are_refused():
    """Shares are dealt once per key epoch: a server sending envelopes again (to have a client
    open, and complain about, another set) is refused."""
    first: dict = {}

    def keep(request):
        first["dealt"] = request.dealt
        return request

    def again(request):
        return dataclasses.replace(request, dealt=first["dealt"])

    with pytest.raises(ProtocolError, match="shares arrived again"):
        _sums(_rewriting({(Stage.INPUT, 0): keep, (Stage.INPUT, 1): again}), 2)


@pytest.mark.parametrize("case", ["to another holder", "from a client that is not a neighbour", "twice from one dealer",
                                  "again from a dealer whose envelope did not open"])
def test_a_client_refuses_a_share_envelope_it_was_not_dealt(case):
    def change(request):
        pairs = list(request.dealt.pairs())
        first = pairs[0]
        if case == "to another holder":
            pairs[0] = moved_record(first, holder=first[0].holder + 1)
        elif case == "from a client that is not a neighbour":
            pairs.append(moved_record(first, owner=N + 7))
        elif case == "twice from one dealer":
            pairs.append(first)
        else:
            pairs[0] = (dataclasses.replace(first[0], data=bytes(len(first[0].data))), first[1])
            pairs.append(first)
        return dataclasses.replace(request, dealt=DealtShares.of(pairs))

    with pytest.raises(ProtocolError, match="unexpected share envelope"):
        _sums(_rewriting({(Stage.INPUT, 0): change}), 1)


@pytest.mark.parametrize("case", ["a signature from a non-survivor", "a second, different signature of one survivor"])
def test_a_client_refuses_consistency_signatures_that_are_not_one_per_survivor(case):
    from secure_fedgraph.protocol.sum_backends.messages import Signature

    def change(request):
        if case == "a signature from a non-survivor":
            extra = Signature(4, bytes(64))  # client 4 dropped before its input
        else:
            extra = Signature(request.signatures[0].client, bytes(64))
        return dataclasses.replace(request, signatures=(*request.signatures, extra))

    with pytest.raises(ProtocolError, match="not a survivor, or a second, different one"):
        _sums(_rewriting({(Stage.UNMASK, 0): change}, drop={Stage.INPUT: {4}}), 1)


def test_a_client_whose_mask_key_share_left_is_never_live_again_in_its_epoch():
    """Client 4 drops before its input to sum 0, so client 0 reveals its share of 4's mask key.
    The server then lists 4 as live for sum 1 of the same key epoch: client 0 refuses, since
    masking with 4's pairwise key, which the server can now rebuild, would unmask its input."""

    def readmit(request):
        return dataclasses.replace(request, live=tuple(range(N)))

    with pytest.raises(ProtocolError, match="whose recovery secrets were revealed"):
        _sums(_rewriting({(Stage.INPUT, 1): readmit}, drop={Stage.INPUT: {4}}), 2)


@pytest.mark.parametrize(("case", "match"), [("a client twice", "once each"), ("a client that is not a survivor", "verified survivors"),
                                            ("this client", "other than this client")])
def test_a_client_refuses_a_recovery_request_that_breaks_one_rule(case, match):
    """Client 4 goes silent after its input, so the others reveal their shares of its seed. The
    request must name verified survivors other than the client asked, once each."""

    def change(request):
        missing = {"a client twice": (*request.missing, *request.missing), "a client that is not a survivor": (*request.missing, N + 3),
                   "this client": (VICTIM, *request.missing)}[case]
        return dataclasses.replace(request, missing=missing)

    with pytest.raises(ProtocolError, match=match):
        _sums(_rewriting({(Stage.RECOVER, 0): change}, drop={Stage.UNMASK: {4}}), 1)


@pytest.mark.parametrize(("case", "match"), [("without this client", "include this client"), ("out of order", "sorted, unique"),
                                            ("a client twice", "sorted, unique"), ("a client without an identity", "not in the identity directory")])
def test_a_client_refuses_an_advertise_request_whose_participants_break_one_rule(case, match):
    participants = {"without this client": tuple(range(1, N)), "out of order": tuple(reversed(range(N))), "a client twice": (0, 1, 1, 2, 3, 4),
                    "a client without an identity": (*range(N), N + 5)}[case]
    with pytest.raises(ProtocolError, match=match):
        _sums(_rewriting({(Stage.ADVERTISE, 0): lambda r: dataclasses.replace(r, participants=participants)}), 1)


def test_re_keys_per_round_are_counted_by_the_client():
    """--max-rekeys 1: a round may have one re-key (among fewer clients, after a dropout); the
    client refuses the second, whatever the server counts."""
    session = local_session(MASK, range(N), policy=ClientPolicy(max_rekeys_per_round=1))
    session.start_round()
    session.runner.run(session.server._key_setup(set(range(N - 1))))
    assert session.clients[VICTIM]._epoch.rekeys == 1
    with pytest.raises(ProtocolError, match="re-key 2 of this round, more than 1"):
        session.runner.run(session.server._key_setup(set(range(N - 2))))


@pytest.mark.parametrize(("case", "match"), [("a neighbour's keys twice", "one entry per member, in id order"),
                                            ("a neighbour's keys twice, side by side", "one entry per member, in id order"),
                                            ("two neighbours' keys swapped", "one entry per member, in id order"),
                                            ("one key as both of a client's keys", "a public key already in use"),
                                            ("one client's key as another's", "a public key already in use")])
def test_a_client_refuses_relayed_keys_that_break_one_rule(case, match):
    """Keys are relayed once per neighbour, and no public key is two clients' or serves as a
    client's share and mask key both (with the server's keys relayed twice, one pair key would
    be known to it). The server's own check at ADVERTISE is bypassed here: this is the client's."""
    from secure_fedgraph.protocol.sum_backends import mask_server

    def change(request):
        peers = list(request.peers)  # every member's, in id order: [0] is client 0's own (the one changed), the rest its neighbours'
        if case == "a neighbour's keys twice":
            peers.append(peers[1])
        elif case == "a neighbour's keys twice, side by side":
            peers.insert(2, peers[1])
        elif case == "two neighbours' keys swapped":  # out of order only where two neighbours meet
            peers[1], peers[2] = peers[2], peers[1]
        elif case == "one key as both of a client's keys":
            peers[1] = dataclasses.replace(peers[1], mask_public=peers[1].share_public)
        else:
            peers[3] = dataclasses.replace(peers[3], share_public=peers[1].share_public)  # not the previous one: every key seen counts
        return dataclasses.replace(request, peers=tuple(peers))

    session = _rewriting({(Stage.SHARE_KEYS, 0): change})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mask_server, "verify_keys", lambda *a, **k: None)
        patch.setattr(mask_client_module, "verify_keys", lambda *a, **k: None)  # the signature is not what is tested here
        with pytest.raises(ProtocolError, match=match):
            _sums(session, 1)


@pytest.mark.parametrize(("case", "match"), [("out of order", "sorted, unique"), ("a client outside the epoch", "within the members")])
def test_a_client_refuses_a_live_set_that_breaks_one_rule(case, match):
    live = tuple(reversed(range(N))) if case == "out of order" else (*range(N), N + 2)
    with pytest.raises(ProtocolError, match=match):
        _sums(_rewriting({(Stage.INPUT, 0): lambda r: dataclasses.replace(r, live=live)}), 1)


def test_a_sum_delivered_before_the_client_verified_it_is_refused():
    """A server that skips the consistency and unmask steps and delivers at once: the client
    verified nothing about the survivors, so it releases nothing."""
    from secure_fedgraph.protocol.sum_backends.messages import DeliverRequest

    captured = {}

    def keep(request):
        captured["input"] = request
        return request

    session = _rewriting({(Stage.INPUT, 0): keep})
    _sums(session, 1)
    client = session.clients[VICTIM]
    client._done_sum = (-1, -1)
    epoch = client._epoch
    epoch.verified = False
    request = DeliverRequest(dataclasses.replace(captured["input"].header, stage=Stage.DELIVER), epoch.sum_index, tuple(sorted(epoch.survivors)),
                             np.zeros(7, dtype=np.uint64), (), 0)
    with pytest.raises(ProtocolError, match="does not match the verified sum"):
        client._on_deliver(request)


@pytest.mark.parametrize(("case", "match"), [("key hashes one short", "one per participant"), ("nonces one short", "one per participant"),
                                            ("another nonce", "graph nonce and keys do not match its commitment"),
                                            ("another key hash", "graph nonce and keys do not match its commitment")])
def test_a_client_refuses_sparse_graph_nonces_and_key_hashes_that_break_one_rule(case, match):
    """The sparse graph's view: one nonce and one key hash per participant, each matching the
    commitment it made before any nonce was revealed (a server swapping one would steer the
    graph, or show clients different keys). Small graph: the clients opt into a weaker adversary."""
    from tests.helpers import NO_COLLUDERS, sparse_config

    n, config = 12, sparse_config(4)

    def change(request):
        nonces, hashes = request.nonces, request.key_hashes
        if case == "key hashes one short":
            hashes = hashes[:-32]
        elif case == "nonces one short":
            nonces = nonces[:-32]
        elif case == "another nonce":
            nonces = nonces[:32] + bytes(32) + nonces[64:]
        else:
            hashes = hashes[:32] + bytes(32) + hashes[64:]
        return dataclasses.replace(request, nonces=nonces, key_hashes=hashes)

    def hook(d, s, c, data):
        return codec.encode(change(codec.decode(data))) if (d, s, c) == ("down", Stage.SHARE_KEYS, VICTIM) else data

    assert NO_COLLUDERS is config.mask.adversary
    session = local_session(config, range(n), policy=ClientPolicy.accepting(config), intercept=hook)
    with pytest.raises(ProtocolError, match=match):
        session.start_round()


@pytest.mark.parametrize("sent", ["nonces", "key hashes"])
def test_a_complete_graph_epoch_takes_no_graph_nonces_or_key_hashes(sent):
    field = "nonces" if sent == "nonces" else "key_hashes"
    with pytest.raises(ProtocolError, match="graph nonces sent for a complete-graph epoch"):
        _sums(_rewriting({(Stage.SHARE_KEYS, 0): lambda r: dataclasses.replace(r, **{field: bytes(32 * N)})}), 1)


def test_a_delivery_without_an_aggregate_is_refused_for_a_sum_the_clients_get():
    with pytest.raises(ProtocolError, match="wrong shape or dtype"):
        _sums(_rewriting({(Stage.DELIVER, 0): lambda r: dataclasses.replace(r, aggregate=None)}), 1)


def test_a_client_whose_seed_share_left_is_never_live_again_in_its_epoch():
    """Client 4 goes silent after its input to sum 0, so client 0 reveals its share of 4's seed.
    Listed as live for sum 1 of the same epoch, 4 is refused: its self-mask seed is known."""

    def readmit(request):
        return dataclasses.replace(request, live=tuple(range(N)))

    with pytest.raises(ProtocolError, match="whose recovery secrets were revealed"):
        _sums(_rewriting({(Stage.INPUT, 1): readmit}, drop={Stage.UNMASK: {4}}), 2)


def test_a_finished_sum_is_never_masked_again_after_a_re_key():
    """Sum 0 of the round is delivered; the server re-keys (among fewer clients) and asks client 0
    for sum 0 again. The new key epoch has fresh masks, but the contribution was already released
    in a sum: masking it again into another set would let the two sums' difference show it."""
    session = local_session(MASK, range(N), policy=ClientPolicy())
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    session.secure_sum("s0", inputs)
    session.runner.run(session.server._key_setup(set(range(N - 1))))

    def again(d, s, c, data):
        if (d, s, c) == ("down", Stage.INPUT, VICTIM):
            return codec.encode(dataclasses.replace(codec.decode(data), sum_index=0))
        return data

    session.runner.intercept = again
    with pytest.raises(ProtocolError, match="sum 0 was already masked in this epoch or finished"):
        session.secure_sum("s1", {c: inputs[c] for c in range(N - 1)})


def test_a_sparse_neighbour_whose_keys_were_withheld_is_refused_as_live():
    """Sparse graph: the server withholds the other members' signed keys from client 0 at
    SHARE_KEYS (the honest server then drops client 0, which could not seal to its neighbours),
    and a deviating one asks client 0 for its input anyway, listing a neighbour live. Client 0
    has no pair key with it, so it could not mask against it: it refuses the live set, naming
    the neighbour. Small graph: the clients opt into a weaker adversary."""
    from tests.helpers import sparse_config

    n, config = 12, sparse_config(4)
    seen: dict = {}

    def hook(d, s, c, data):
        if (d, s, c) == ("down", Stage.SHARE_KEYS, VICTIM):
            request = codec.decode(data)
            return codec.encode(dataclasses.replace(request, peers=tuple(p for p in request.peers if p.client == VICTIM)))
        if (d, s) == ("down", Stage.INPUT):
            seen.setdefault("input", codec.decode(data))
        return data

    session = local_session(config, range(n), policy=ClientPolicy.accepting(config), intercept=hook)
    session.start_round()
    session.secure_sum("s", make_inputs(range(n), shapes=SHAPE))  # the honest server goes on without client 0
    request = seen["input"]
    asked = dataclasses.replace(request, live=tuple(sorted({*request.live, VICTIM})), dealt=DealtShares())
    withheld = sorted(session.clients[VICTIM]._epoch.graph.of(VICTIM) & set(asked.live))[:8]  # the message names at most 8
    assert withheld
    with pytest.raises(ProtocolError, match=rf"live set lists neighbours \[{', '.join(map(str, withheld))}\] whose signed keys never arrived"):
        session.clients[VICTIM].handle(asked)


def test_a_client_takes_its_own_keys_from_itself_not_from_the_relay():
    """The server relays every member's keys, this client's own among them; the client builds the
    epoch's view from its own keys, so a relayed copy the server changed does not change its view:
    the sum goes through with it, over every client."""
    from secure_fedgraph.crypto.keys import RoundKeys

    def change(request):
        peers = list(request.peers)  # [0] is VICTIM's own
        peers[0] = dataclasses.replace(peers[0], share_public=RoundKeys.generate().share_public)
        return dataclasses.replace(request, peers=tuple(peers))

    session = _rewriting({(Stage.SHARE_KEYS, 0): change})
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    result = session.secure_sum("s", inputs)
    assert result.contributors == frozenset(range(N))
    assert np.allclose(result.values["w"], plain_sum(inputs, result.contributors)["w"], atol=1e-5)


def test_a_sparse_client_refuses_relayed_keys_other_than_those_committed_to():
    """On the sparse graph each member commits to its keys' hash before the graph is drawn. A
    server relaying other keys for a neighbour, signed by it (a colluding neighbour that signed
    two sets), is refused: the keys a client pairs with are the ones the graph was drawn over."""
    from secure_fedgraph.crypto.keys import IdentityKey, RoundKeys
    from secure_fedgraph.protocol.sum_backends import keyring
    from tests.helpers import sparse_config

    n = 12
    identities = {c: IdentityKey.generate() for c in range(n)}

    def hook(d, s, c, data):
        if (d, s, c) != ("down", Stage.SHARE_KEYS, VICTIM):
            return data
        request = codec.decode(data)
        h = request.header
        resigned = []
        for peer in request.peers:  # every other member's keys, signed again by that member
            keys = RoundKeys.generate()
            resigned.append(peer if peer.client == VICTIM else keyring.sign_keys(
                identities[peer.client], session=h.session, round=h.round, epoch=0, client=peer.client,
                share_public=keys.share_public, mask_public=keys.mask_public, seed_commitment=peer.seed_commitment))
        return codec.encode(dataclasses.replace(request, peers=tuple(resigned)))

    config = sparse_config(4)
    session = local_session(config, range(n), intercept=hook, identities=identities, policy=ClientPolicy.accepting(config))
    with pytest.raises(ProtocolError, match="are not the keys it committed to"):  # the key set-up opens the round
        session.start_round()
