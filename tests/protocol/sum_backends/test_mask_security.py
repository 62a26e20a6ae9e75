"""Mask backend: what the server can and cannot learn or forge (threat_model.md M-* claims)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from scipy import stats

from secure_fedgraph.errors import CapacityError, ProtocolError
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, MaskConfig, SecureSumConfig, Stage, SumSpec
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends.messages import InputResponse, UnmaskRequest
from tests.helpers import default_policy_session as local_session
from tests.helpers import ServerThatNeverRekeys, make_inputs, max_error, plain_sum, sparse_config


N = 5
MASK = SecureSumConfig(backend=Backend.MASK)


def _edit(direction: str, stage: Stage, client: int, change):
    """An intercept hook that rewrites one message in flight with ``change(message) -> message``."""

    def hook(d, s, c, data):
        if (d, s, c) == (direction, stage, client):
            return codec.encode(change(codec.decode(data)))
        return data

    return hook


def test_server_swapping_a_public_key_is_detected():
    attacker = X25519PrivateKey.generate().public_key().public_bytes_raw()

    def swap(request):
        peers = list(request.peers)  # every member's keys; [0] is client 0's own, [1] a neighbour's
        peers[1] = dataclasses.replace(peers[1], mask_public=attacker)
        return dataclasses.replace(request, peers=tuple(peers))

    session = local_session(MASK, range(N), intercept=_edit("down", Stage.SHARE_KEYS, 0, swap))
    with pytest.raises(ProtocolError, match="do not carry its signature") as info:
        session.start_round()
    assert isinstance(info.value.__cause__, InvalidSignature)


def test_forged_advertisement_from_a_client_is_rejected_by_the_server():
    def forge(response):
        return dataclasses.replace(response, keys=dataclasses.replace(response.keys, signature=bytes(64)))

    session = local_session(MASK, range(N), intercept=_edit("up", Stage.ADVERTISE, 2, forge))
    session.start_round()
    assert any("rejected 2:" in line and "signature" in line for line in session.server.log)
    inputs = make_inputs(range(N))
    result = session.secure_sum("s", inputs)
    assert result.contributors == frozenset(range(N)) - {2}


def test_replayed_response_from_an_earlier_round_is_rejected():
    captured = {}

    def hook(direction, stage, client, data):
        if (direction, stage, client) == ("up", Stage.INPUT, 1):
            if session.round == 0:
                captured["old"] = data
            else:
                return captured["old"]  # an attacker replays round 0's masked input in round 1
        return data

    session = local_session(MASK, range(N), intercept=hook)
    for _ in range(2):
        session.start_round()
        inputs = make_inputs(range(N), seed=session.round)
        result = session.secure_sum("s", inputs)
    assert result.contributors == frozenset(range(N)) - {1}
    assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound + 1e-12
    assert any("rejected 1:" in line and "replay" in line for line in session.server.log)


def test_replayed_request_is_rejected_by_the_client():
    sent = {}

    def hook(direction, stage, client, data):
        if direction == "down" and client == 3:
            sent.setdefault(stage, data)
        return data

    session = local_session(MASK, range(N), intercept=hook)
    session.start_round()
    session.secure_sum("s", make_inputs(range(N)))
    session.start_round()
    for stage in (Stage.ADVERTISE, Stage.INPUT, Stage.UNMASK):
        with pytest.raises(ProtocolError, match="not after step"):
            session.clients[3].handle(codec.decode(sent[stage]))


def test_masked_uploads_are_uniform_and_uncorrelated_with_inputs():
    size = 100_000
    ramp = {c: {"v": np.linspace(-1, 1, size) * (c + 1) / N} for c in range(N)}  # strongly structured
    session = local_session(SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(clip_range=1.0)), range(N), record=True)
    session.start_round()
    session.secure_sum("s", ramp)
    uploads = {c: codec.decode(data).payload for stage, c, data in session.runner.received if stage is Stage.INPUT}
    assert set(uploads) == set(range(N))
    for c, y in uploads.items():
        assert y.dtype == np.uint32  # the 32-bit ring fits: as many bytes as float32
        counts = np.bincount(np.frombuffer(y.tobytes(), dtype=np.uint8), minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-6  # structured data gives p ~ 0; random masks cannot be seeded
        r = np.corrcoef(y[:size].astype(np.float64), ramp[c]["v"])[0, 1]
        assert abs(r) < 0.02
    # The same checks catch a backend that uploads in the clear.
    plain = local_session(SecureSumConfig(backend=Backend.PLAIN), range(N), record=True)
    plain.start_round()
    plain.secure_sum("s", ramp)
    clear = [codec.decode(d).payload for s, c, d in plain.runner.received if s is Stage.INPUT]
    assert np.corrcoef(clear[0].astype(np.float64), ramp[0]["v"])[0, 1] > 0.99


def _reachable_arrays(obj, seen=None):
    """Every numpy array reachable from an object's attributes, containers and generator frames."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _reachable_arrays(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from _reachable_arrays(v, seen)
    elif hasattr(obj, "gi_frame"):  # a generator: its local variables, and the one it delegates to
        if obj.gi_frame is not None:
            yield from _reachable_arrays(dict(obj.gi_frame.f_locals), seen)
        if obj.gi_yieldfrom is not None:
            yield from _reachable_arrays(obj.gi_yieldfrom, seen)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("secure_fedgraph"):
        yield from _reachable_arrays(vars(obj), seen)


def _server_state_holds_plaintext(backend: Backend) -> bool:
    """Snapshot the server's whole state (objects and running generators) at every message and
    report whether any array in it equals one client's individual input (or its encoding)."""
    size = 64
    inputs = make_inputs(range(N), seed=7, shapes={"v": (size,)})
    session = local_session(SecureSumConfig(backend=backend), range(N))
    found = []

    def probe(direction, stage, client, data):
        for array in _reachable_arrays([session.server, generator]):
            if array.size < size:
                continue
            head = np.asarray(array).ravel()[:size]
            for c in range(N):
                x = inputs[c]["v"]
                codes, _ = MASK.mask.encoding(N, size).encode(x)
                if (head.dtype.kind == "f" and np.allclose(head, x, atol=1e-6)) or (head.dtype == codes.dtype and np.array_equal(head, codes)):
                    found.append((stage, c))
        return data

    session.runner.intercept = probe
    generator = session.server.setup(0)
    session.runner.run(generator)
    for c in range(N):
        session.clients[c].contribute("s", inputs[c])
    generator = session.server.aggregate(SumSpec.of("s", inputs[0]))
    result = session.runner.run(generator)
    assert result.contributors == frozenset(range(N))
    return bool(found)


def test_server_never_holds_an_individual_plaintext():
    assert not _server_state_holds_plaintext(Backend.MASK)
    assert _server_state_holds_plaintext(Backend.PLAIN)  # the probe does find plaintext where it exists


def test_clients_refuse_to_reveal_a_contributed_clients_mask_key():
    session = local_session(MASK, range(N))
    session.server.__class__ = ServerThatNeverRekeys
    session.start_round()
    session.secure_sum("a", make_inputs(range(N)))
    session.runner.drop = {Stage.INPUT: {4}}
    with pytest.raises(ProtocolError, match="refusing to reveal client 4's mask-key share"):
        session.secure_sum("b", make_inputs(range(N)))


def test_unmask_needs_a_quorum_of_valid_consistency_signatures():
    def too_few(request: UnmaskRequest):
        return dataclasses.replace(request, signatures=request.signatures[:2])

    session = local_session(MASK, range(N), intercept=_edit("down", Stage.UNMASK, 0, too_few))
    session.start_round()
    with pytest.raises(ProtocolError, match="only 2 consistency signatures from client 0 and its neighbours, need 4"):
        session.secure_sum("s", make_inputs(range(N)))

    def forged(request: UnmaskRequest):
        bad = dataclasses.replace(request.signatures[1], signature=bytes(64))
        return dataclasses.replace(request, signatures=(request.signatures[0], bad) + request.signatures[2:])

    session = local_session(MASK, range(N), intercept=_edit("down", Stage.UNMASK, 0, forged))
    session.start_round()
    with pytest.raises(ProtocolError, match="does not verify: the server showed clients different sets"):
        session.secure_sum("s", make_inputs(range(N)))


def test_sparse_graph_quorum_comes_from_the_clients_own_neighbourhood():
    """Signatures from far-away clients do not vouch for client 0; a server offering only those
    is refused, however many there are."""
    config = sparse_config(4)
    holder = {}

    def far_only(request: UnmaskRequest):
        near = holder["session"].server._graph.closed(0)
        return dataclasses.replace(request, signatures=tuple(s for s in request.signatures if s.client not in near))

    session = local_session(config, range(30), intercept=_edit("down", Stage.UNMASK, 0, far_only),
                            policy=ClientPolicy.accepting(config))  # a graph this small holds against a weaker adversary only
    holder["session"] = session
    session.start_round()
    with pytest.raises(ProtocolError, match="only 0 consistency signatures from client 0 and its neighbours, need 3"):
        session.secure_sum("s", make_inputs(range(30)))


def test_unmask_requests_carry_only_the_signatures_a_client_needs():
    """Sparse graph, no dropout: each client gets the signatures of its own neighbourhood only
    (O(log n) per client instead of n), and verifies just t of them."""
    config = sparse_config(6)
    seen = {}

    def count(direction, stage, client, data):
        if direction == "down" and stage is Stage.UNMASK:
            seen[client] = len(codec.decode(data).signatures)
        return data

    session = local_session(config, range(40), intercept=count,
                            policy=ClientPolicy.accepting(config))  # a graph this small holds against a weaker adversary only
    session.start_round()
    session.secure_sum("s", make_inputs(range(40)))
    assert set(seen.values()) == {7}  # the client and its 6 neighbours
    assert all(len(c._epoch.vouched) == 4 for c in session.clients.values())  # t = majority of 7


def test_malformed_wrong_shape_and_impersonating_uploads_are_rejected_and_the_sum_goes_on():
    def garbage(d, s, c, data):
        return b"\x0a\xff\xff garbage" if (d, s, c) == ("up", Stage.INPUT, 1) else data

    def short(response: InputResponse):
        return dataclasses.replace(response, payload=response.payload[:-1])

    def impersonate(response: InputResponse):
        return dataclasses.replace(response, header=dataclasses.replace(response.header, sender=0))

    cases = [(garbage, "malformed"), (_edit("up", Stage.INPUT, 1, short), "expected"), (_edit("up", Stage.INPUT, 1, impersonate), "claiming")]
    for hook, reason in cases:
        session = local_session(MASK, range(N), intercept=hook)
        session.start_round()
        inputs = make_inputs(range(N))
        result = session.secure_sum("s", inputs)
        assert result.contributors == frozenset(range(N)) - {1}
        assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound + 1e-12
        assert any("rejected 1:" in line and reason in line for line in session.server.log), session.server.log


def test_capacity_error_is_raised_before_anything_is_sent():
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(clip_range=8.0, precision_bits=24, ring_bits=32))
    session = local_session(config, range(100))
    session.start_round()
    with pytest.raises(CapacityError, match=r"set ring_bits=64 or lower precision_bits or clip_range"):
        session.secure_sum("s", make_inputs(range(100)))
    assert session.runner.traffic.down_by_stage[Stage.INPUT] == 0


def test_values_at_and_beyond_the_range_are_clipped_and_counted_never_wrapped():
    """32-bit ring filled to the brim: n * round(R * 2^p) = 2^30 < 2^31."""
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(clip_range=1.0, precision_bits=28, ring_bits=32))
    session = local_session(config, range(4))
    session.start_round()
    extreme = {c: {"v": np.array([1.0, -1.0, 1e6, -1e9, 0.5])} for c in range(4)}
    result = session.secure_sum("s", extreme)
    np.testing.assert_allclose(result.values["v"], [4.0, -4.0, 4.0, -4.0, 2.0], atol=result.error_bound)
    assert result.clipped == 8
    assert session.clients[0].last_result.clipped == 8
