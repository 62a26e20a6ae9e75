"""The ckks backend's bindings and the server's checks of the key set-up, one field or one rule at
a time (issue 29; `make mutate`). A field left out of the contributor statement or of a check-lane
stream is one the server can change unseen, so each field has a case in which changing it alone
changes the value, and the own and weights streams never coincide (a splice between any two
labels must be caught). The check lanes' values are pinned to their spec: uniform over [-1, 1)
from the AES-CTR stream of a key, scaled by the clip range floored at 1. The key set-up is checked
by what the server sends at ADVERTISE, KEY_DEAL and KEY_INSTALL and to whom, and by a lying
client or dealer breaking one rule of one answer: the server refuses it, naming the sender, and
the honest clients' sum is still delivered. The attacks a missing binding allows, end to end,
are in test_attacks.py; the backend's honest behaviour is in test_ckks_backend.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from secure_fedgraph.crypto.ckks import CHECK_LANES
from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.errors import DropoutError
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.ckks import CheckLanes, _uniform, contributor_statement
from secure_fedgraph.protocol.sum_backends.keyring import sign_keys
from secure_fedgraph.protocol.sum_backends.messages import AdvertiseRequest, Sealed
from tests.helpers import make_inputs, max_error, plain_sum

CKKS = SecureSumConfig(backend=Backend.CKKS)
SHAPE = {"w": (6,)}
KEY = bytes(range(32))  # fixed check keys: the statistics below are of one known stream, not a random one
OTHER_KEY = bytes(range(1, 33))
LANES = {"session": b"s" * 16, "round": 3, "sum_index": 2, "name": "s", "live": (1, 2, 3)}


def _distinct(values) -> bool:
    values = [v.tobytes() if isinstance(v, np.ndarray) else v for v in values]
    return len(set(values)) == len(values)


# --- what is bound -------------------------------------------------------------------------------

def test_the_contributor_statement_changes_with_each_field_it_binds():
    """threat_model.md C-CONSISTENCY: a signature vouches for one sum of one key epoch of one
    session and for one contributor set. Were any field left out, a signature made for one sum
    (another round's, another epoch's, another index's, another name's, another set) would count
    for this one, and two clients could decrypt sums over sets that differ by one client."""
    base = {"session": b"s" * 16, "round_index": 3, "epoch": 1, "sum_index": 2, "name": "s", "contributors": (1, 2, 3)}
    changes = {"session": b"t" * 16, "round_index": 4, "epoch": 2, "sum_index": 3, "name": "t", "contributors": (1, 2, 4)}
    statement = contributor_statement(**base)
    variants = [contributor_statement(**{**base, field: value}) for field, value in changes.items()]
    variants.append(contributor_statement(**{**base, "contributors": (1, 2)}))  # a subset is another set
    assert _distinct([statement, *variants])
    assert len(statement) == 32  # a digest: signing costs the same for any number of clients
    assert contributor_statement(**{**base, "contributors": (3, 1, 2)}) == statement  # a set, whatever order it is listed in


def _own(lanes: CheckLanes, client: int, chunks: int) -> np.ndarray:
    """The first values of the stream behind a contributor's own tags (unscaled: the clip is 1 here)."""
    return lanes.own(client, chunks)[0]


def _weights(lanes: CheckLanes, chunk: int, length: int) -> np.ndarray:
    """The first values of the stream behind a chunk's weights (r times the chunk length)."""
    return lanes.weights(chunk, length)[0, :CHECK_LANES] * length


def test_every_check_lane_stream_changes_with_each_field_it_binds():
    """threat_model.md C-CHECK: a contributor's tags are keyed by (session, round, sum index, sum
    name, live set, contributor, number of chunks) and each chunk's weights by the same label and
    (chunk, length). A field left out lets the server move a ciphertext across it unseen: an
    earlier round's or another sum's piece into this sum (issue 29, E2), one contributor's tags
    for another's, the first chunks of a longer contribution for a shorter one, one chunk's lanes
    for another's. The own and the weights streams of equal numbers differ too: each stream is
    used for one purpose only."""
    base = CheckLanes(KEY, **LANES, clip_range=1.0)
    others = [CheckLanes(OTHER_KEY, **LANES, clip_range=1.0)]
    changes = {"session": b"t" * 16, "round": 4, "sum_index": 3, "name": "t", "live": (1, 2, 4)}
    others += [CheckLanes(KEY, **{**LANES, field: value}, clip_range=1.0) for field, value in changes.items()]
    others.append(CheckLanes(KEY, **{**LANES, "live": (1, 2, 3, 4)}, clip_range=1.0))  # a superset is another live set
    own = [_own(lanes, 1, 2) for lanes in (base, *others)] + [_own(base, 2, 2), _own(base, 1, 3)]
    weights = [_weights(lanes, 1, 8) for lanes in (base, *others)] + [_weights(base, 0, 8), _weights(base, 1, 9)]
    assert _distinct(own)
    assert _distinct(weights)
    assert _distinct([_own(base, 1, 8), _weights(base, 1, 8)])  # the same numbers, for each purpose
    assert np.array_equal(base.own(1, 2), CheckLanes(KEY, **{**LANES, "live": (3, 1, 2)}, clip_range=1.0).own(1, 2))  # a set


def test_check_values_are_uniform_over_minus_one_to_one_from_the_aes_ctr_stream_of_their_key():
    """The tags are m_i + <r, lanes> with m_i and r from ``_uniform``: the server's chance of
    guessing a tag is the error bound over its spread, so the values must cover [-1, 1) evenly
    and be the documented stream of their key (and no other): the AES-256-CTR keystream from
    counter 0 (prg.mask_vector's stream 0), read as little-endian 64-bit words whose top 53 bits
    are a fraction in [0, 1), mapped to [-1, 1)."""
    count = 200_000
    values = _uniform(KEY, count)
    assert values.dtype == np.float64 and values.shape == (count,)
    assert -1.0 <= values.min() < -0.999 and 0.999 < values.max() < 1.0
    assert abs(values.mean()) < 0.01 and abs(values.std() - 3 ** -0.5) < 0.01
    assert np.all(np.abs(np.quantile(values, [0.25, 0.5, 0.75]) - [-0.5, 0.0, 0.5]) < 0.01)
    keystream = Cipher(algorithms.AES(KEY), modes.CTR(bytes(16))).encryptor().update(bytes(8 * count))
    fraction = (np.frombuffer(keystream, dtype="<u8") >> np.uint64(11)) / 2.0**53  # exact: 53 bits fit a float64
    np.testing.assert_array_equal(values, 2 * fraction - 1)
    other = _uniform(OTHER_KEY, count)
    assert abs(np.corrcoef(values, other)[0, 1]) < 0.01 and not np.any(values == other)


@pytest.mark.parametrize("clip_range", [0.25, 1.0, 1.5, 8.0])
def test_own_tags_span_the_clip_range_floored_at_one(clip_range):
    """m_i is uniform in [-c, c) with c = max(clip_range, 1): the spread a forger is up against
    never shrinks below 1 with a small clip range, and never exceeds what the CKKS scale was
    chosen for (CkksParams.scale_for and error_bound floor the clip range at 1 the same way)."""
    c = max(clip_range, 1.0)
    lanes = CheckLanes(KEY, **LANES, clip_range=clip_range)
    own = lanes.own(1, 5000)
    assert -c <= own.min() < -0.999 * c and 0.999 * c < own.max() < c
    np.testing.assert_array_equal(own, c * CheckLanes(KEY, **LANES, clip_range=0.5).own(1, 5000))
    weights = lanes.weights(0, 5000) * 5000  # r does not depend on the clip range: entries in [-1, 1) / length
    assert -1.0 <= weights.min() < -0.999 and 0.999 < weights.max() < 1.0


def test_an_aggregate_whose_check_lanes_are_its_contributors_tags_passes_and_any_other_fails():
    """``holds`` is the client's decision to keep a decrypted sum. Check lanes that are exactly the
    contributors' tags pass even with no tolerance at all (the tolerance is an error bound: an
    error equal to it is within it); a deviation beyond the tolerance, another contributor's tags,
    or a contributor missing fail."""
    lanes = CheckLanes(KEY, **LANES, clip_range=4.0)
    rng = np.random.default_rng(0)
    data = {c: [rng.uniform(-4, 4, 10), rng.uniform(-4, 4, 3)] for c in (1, 2)}
    tagged = {c: [(x, lanes.tagger(c, 2)(j, x)) for j, x in enumerate(data[c])] for c in (1, 2)}
    assert lanes.holds(tagged[1], [1], tolerance=0.0)
    assert not lanes.holds(tagged[1], [2], tolerance=1e-6)
    shifted = [(x, t + np.array([2e-6, 0.0])) if j == 1 else (x, t) for j, (x, t) in enumerate(tagged[1])]
    assert lanes.holds(shifted, [1], tolerance=3e-6) and not lanes.holds(shifted, [1], tolerance=1e-6)
    both = [(tagged[1][j][0] + tagged[2][j][0], tagged[1][j][1] + tagged[2][j][1]) for j in range(2)]
    assert lanes.holds(both, [1, 2], tolerance=1e-9)
    assert not lanes.holds(both, [1], tolerance=1e-6) and not lanes.holds(tagged[1], [1, 2], tolerance=1e-6)


# --- the key set-up: what the server sends, and to whom --------------------------------------

def _recording(log: list, change=None):
    """An intercept that records every request and answer, decoded, as (direction, stage, client,
    message); ``change(direction, stage, client, message)`` may return a message to deliver
    instead, or None to drop it."""

    def hook(direction, stage, client, data):
        message = codec.decode(data)
        log.append((direction, stage, client, message))
        if change is None:
            return data
        changed = change(direction, stage, client, message)
        return None if changed is None else data if changed is message else codec.encode(changed)

    return hook


def _sent(log, direction: str, stage: Stage) -> dict[int, object]:
    return {c: m for d, s, c, m in log if (d, s) == (direction, stage)}


def test_the_key_set_up_sends_each_party_its_part_and_only_the_participants_take_part():
    """Setting up round 0 among participants 0-3 of a run of 5 clients: ADVERTISE goes to each
    participant, announcing key epoch 0 (the first of the session), no neighbour graph (graph
    "none", degree 0), no Shamir threshold (0; the audit's key set-up table reports the graph and
    the threshold of each set-up) and the floor; KEY_DEAL only to
    the lowest id, with every other participant's keys exactly as it signed them; KEY_INSTALL to
    each of those, with the dealer's signed keys, the envelope sealed to that client and the one
    sealed context. Client 4, not a participant, is asked nothing and is not in the sum."""
    log: list = []
    session = local_session(CKKS, range(5), intercept=_recording(log))
    session.runner.run(session.server.setup(0, participants=[0, 1, 2, 3]))
    needed = CKKS.survivors_needed(5)
    advertise = _sent(log, "down", Stage.ADVERTISE)
    assert sorted(advertise) == [0, 1, 2, 3]
    for request in advertise.values():
        assert request == AdvertiseRequest(request.header, 0, (0, 1, 2, 3), "none", 0, 0, needed, 0, False)
    adverts = {c: r.keys for c, r in _sent(log, "up", Stage.ADVERTISE).items()}
    (deal,) = _sent(log, "down", Stage.KEY_DEAL).items()
    assert deal[0] == 0 and deal[1].peers == (adverts[1], adverts[2], adverts[3])
    dealt = _sent(log, "up", Stage.KEY_DEAL)[0]
    install = _sent(log, "down", Stage.KEY_INSTALL)
    assert sorted(install) == [1, 2, 3]
    for client, request in install.items():
        assert request.dealer == adverts[0]
        assert request.sealed == next(s for s in dealt.sealed if s.holder == client) and request.sealed.owner == 0
        assert request.sealed_context == dealt.sealed_context
    assert session.server.live == {0, 1, 2, 3}
    inputs = make_inputs(range(4), shapes=SHAPE)
    session.secure_sum("s", inputs)
    result = session.clients[0].last_result
    assert result.contributors == frozenset({0, 1, 2, 3})
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound
    assert not any(c == 4 for _, _, c, _ in log)


def test_a_key_set_up_too_few_clients_answer_is_abandoned_and_the_next_one_is_a_new_key_epoch():
    """Round 0: only client 0 gets the advertise request through, so the server stops, saying
    which step too few clients took; round 1 deals the keys afresh under key epoch 1, the next
    number (what the clients sign their keys and contributor sets under, and what the audit
    attributes the round's sums to), and the sum goes through."""
    log: list = []
    cut = _recording(log, lambda d, s, c, m: None if (d, s, m.header.round) == ("down", Stage.ADVERTISE, 0) and c != 0 else m)
    session = local_session(CKKS, range(4), intercept=cut)
    with pytest.raises(DropoutError, match=r"round 0: only 1 clients advertised keys, fewer than the 3 required"):
        session.start_round()
    session.start_round()
    epochs = sorted({(m.header.round, m.epoch) for d, s, c, m in log if (d, s) == ("down", Stage.ADVERTISE)})
    assert epochs == [(0, 0), (1, 1)]
    inputs = make_inputs(range(4), shapes=SHAPE)
    session.secure_sum("s", inputs)
    result = session.clients[3].last_result
    assert result.contributors == frozenset(range(4))
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound


def test_a_key_set_up_too_few_clients_install_is_abandoned_naming_the_step():
    """Clients 2 and 3 never get their install request: only the dealer and client 1 hold the
    keys, fewer than the 3 the sum needs, and the server stops, saying which step fell short."""
    cut = _recording([], lambda d, s, c, m: None if (d, s) == ("down", Stage.KEY_INSTALL) and c in (2, 3) else m)
    session = local_session(CKKS, range(4), intercept=cut)
    with pytest.raises(DropoutError, match=r"round 0: only 2 clients installed the CKKS keys, fewer than the 3 required"):
        session.start_round()
    assert session.server.log[-1] == "round 0: abort: installed the CKKS keys: 2 < 3"


# --- the key set-up: what the server refuses -------------------------------------------------

LIAR = 3


@pytest.mark.parametrize("case", ["a mask key too", "a seed commitment too", "a short share key", "another client's keys"])
def test_the_server_refuses_an_advertisement_that_is_not_the_clients_own_ckks_key(case):
    """ADVERTISE: LIAR signs, with its own identity key, keys of another shape than a ckks
    client's (one 32-byte share key, nothing else), or answers with another client's signed keys.
    The server refuses the answer there, naming LIAR, and deals among the others: relayed to the
    dealer, the short key or the second copy of a client's keys would make the honest dealer
    refuse the whole deal (one lying client stopping the key set-up), and an extra key is no
    part of a ckks key set-up."""
    identities = {c: IdentityKey.generate() for c in range(4)}
    epoch: list[int] = []

    def lie(direction, stage, client, message):
        if (direction, stage) == ("down", Stage.ADVERTISE):
            epoch.append(message.epoch)
        if (direction, stage, client) != ("up", Stage.ADVERTISE, LIAR):
            return message
        if case == "another client's keys":
            return dataclasses.replace(message, keys=_sent(log, "up", Stage.ADVERTISE)[2].keys)
        keys = message.keys
        fields = {"client": LIAR, "share_public": keys.share_public, "mask_public": b"", "seed_commitment": b""}
        fields.update({"a mask key too": {"mask_public": b"m" * 32}, "a seed commitment too": {"seed_commitment": b"c" * 32},
                       "a short share key": {"share_public": keys.share_public[:31]}}[case])
        signed = sign_keys(identities[LIAR], session=message.header.session, round=message.header.round, epoch=epoch[-1], **fields)
        return dataclasses.replace(message, keys=signed)

    log: list = []
    session = local_session(CKKS, range(4), identities=identities, intercept=_recording(log, lie))
    session.start_round()
    assert f"rejected {LIAR}: advertise: malformed keys from client {LIAR}" in "\n".join(session.server.log)
    assert session.server.live == {0, 1, 2}
    inputs = make_inputs(range(3), shapes=SHAPE)
    session.secure_sum("s", inputs)
    result = session.clients[0].last_result
    assert result.contributors == frozenset({0, 1, 2})
    assert max_error(result.values, plain_sum(inputs, range(3))) <= result.error_bound


@pytest.mark.parametrize("case", ["an envelope left out", "one envelope twice", "an envelope from another owner"])
def test_the_server_refuses_a_deal_that_does_not_seal_the_key_once_to_each_peer_from_its_dealer(case):
    """KEY_DEAL: the dealer (client 0) answers with its content key sealed to one peer too few, to
    one peer twice, or in an envelope naming another owner. The server refuses the deal there,
    naming the dealer, and hands the deal to the next client: relayed, such a deal would leave a
    peer without the keys, or have an honest peer refuse an envelope not from the dealer to it.
    (A refused dealer answered its KEY_DEAL, so it cannot take an install; a real one leaves the
    run on that request: here it is silent.)"""

    def lie(direction, stage, client, message):
        if (direction, stage, client) == ("down", Stage.KEY_INSTALL, 0):
            return None
        if (direction, stage, client) != ("up", Stage.KEY_DEAL, 0):
            return message
        sealed = list(message.sealed)
        if case == "an envelope left out":
            sealed.pop()
        elif case == "one envelope twice":
            sealed[-1] = sealed[0]
        else:
            sealed[-1] = Sealed(1, sealed[-1].holder, sealed[-1].data)
        return dataclasses.replace(message, sealed=tuple(sealed))

    log: list = []
    session = local_session(CKKS, range(4), intercept=_recording(log, lie))
    session.start_round()
    assert "rejected 0: key_deal: dealer 0 must seal the content key to each of its 3 peers once" in "\n".join(session.server.log)
    assert [c for d, s, c, _ in log if (d, s) == ("down", Stage.KEY_DEAL)] == [0, 1]
    assert session.server.live == {1, 2, 3}
    inputs = make_inputs(range(1, 4), shapes=SHAPE)
    session.secure_sum("s", inputs)
    result = session.clients[1].last_result
    assert result.contributors == frozenset({1, 2, 3})
    assert max_error(result.values, plain_sum(inputs, range(1, 4))) <= result.error_bound
