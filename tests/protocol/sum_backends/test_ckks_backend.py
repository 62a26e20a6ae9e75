"""CKKS backend: the server holds no secret key; keys are fresh per run; wrong keys fail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tenseal as ts

from secure_fedgraph.crypto.ckks import SecretContext
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, Stage
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends.ckks import _Pending
from secure_fedgraph.protocol.sum_backends.messages import KeyDealResponse
from tests.helpers import make_inputs, max_error, plain_sum

CKKS = SecureSumConfig(backend=Backend.CKKS)


def test_server_context_has_no_secret_key():
    session = local_session(CKKS, range(4), record=True)
    session.start_round()
    assert session.server.context.has_secret_key is False
    (deal,) = [codec.decode(d) for s, _, d in session.runner.received if s is Stage.KEY_DEAL]
    assert isinstance(deal, KeyDealResponse)
    received = ts.context_from(deal.public_context)
    assert not received.has_secret_key() and not received.is_private()
    with pytest.raises(ValueError, match="doesn't support encryption"):  # parameters only: no key at all
        ts.ckks_vector(received, [1.0])


def test_secret_context_never_crosses_the_server_in_clear():
    session = local_session(CKKS, range(4), record=True)
    session.start_round()
    dealer = session.clients[0]
    secret = dealer._context.secret_bytes()
    key_material = secret[len(secret) // 2 : len(secret) // 2 + 64]  # a slice of the serialised secret key
    for _, _, data in session.runner.received:
        assert key_material not in data
    # and every client ended up with the same key: all decrypt the same aggregate
    inputs = make_inputs(range(4))
    session.secure_sum("s", inputs)
    reference = plain_sum(inputs, range(4))
    for client in session.clients.values():
        assert max_error(client.last_result.values, reference) <= client.last_result.error_bound


def test_decrypting_with_a_wrong_key_fails():
    session = local_session(CKKS, range(3), record=True)
    session.start_round()
    inputs = make_inputs(range(3))
    session.secure_sum("s", inputs)
    (ciphertexts,) = [codec.decode(d).ciphertexts for s, c, d in session.runner.received if s is Stage.INPUT and c == 2]
    values, _ = session.clients[1]._context.decrypt_sum(ciphertexts, n_values=27, n_contributors=1)
    assert max_error({"all": values}, {"all": np.concatenate([v.ravel() for v in inputs[2].values()])}) < 1e-6
    other = SecretContext.generate(CKKS.ckks.params)  # a client holding a different key
    with pytest.raises(ProtocolError, match="integrity check"):
        other.decrypt_sum(ciphertexts, n_values=27, n_contributors=1)


def test_keys_are_fresh_per_run():
    runs = []
    for _ in range(2):
        session = local_session(CKKS, range(3), record=True)
        session.start_round()
        session.secure_sum("s", make_inputs(range(3)))
        blobs = [codec.decode(d).ciphertexts for s, c, d in session.runner.received if s is Stage.INPUT and c == 0]
        runs.append((session, blobs[0]))
    (first, ciphertexts), (second, _) = runs
    with pytest.raises(ProtocolError, match="integrity check"):
        second.clients[0]._context.decrypt_sum(ciphertexts, n_values=27, n_contributors=1)
    values, _ = first.clients[1]._context.decrypt_sum(ciphertexts, n_values=27, n_contributors=1)
    assert np.isfinite(values).all()


def test_dealer_dropping_hands_the_deal_to_the_next_client():
    session = local_session(CKKS, range(5), drop={Stage.KEY_DEAL: {0}})
    session.start_round()
    inputs = make_inputs(range(5))
    session.secure_sum("s", inputs)
    result = session.clients[1].last_result
    assert result.contributors == frozenset({1, 2, 3, 4})
    assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound


@pytest.mark.parametrize("stage", [Stage.ADVERTISE, Stage.KEY_INSTALL, Stage.INPUT], ids=lambda s: s.value)
def test_dropouts(stage):
    session = local_session(CKKS, range(5), drop={stage: {3, 4}})
    session.start_round()
    inputs = make_inputs(range(5))
    session.secure_sum("s", inputs)
    result = session.clients[0].last_result
    assert result.contributors == frozenset({0, 1, 2})
    assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound


def test_a_malformed_ciphertext_is_rejected_and_the_sum_goes_on():
    def corrupt(direction, stage, client, data):
        if (direction, stage, client) == ("up", Stage.INPUT, 2):
            response = codec.decode(data)
            return codec.encode(dataclasses.replace(response, ciphertexts=(b"not a ciphertext",) * len(response.ciphertexts)))
        return data

    session = local_session(CKKS, range(4), intercept=corrupt)
    session.start_round()
    inputs = make_inputs(range(4))
    session.secure_sum("s", inputs)
    result = session.clients[0].last_result
    assert result.contributors == frozenset({0, 1, 3})
    assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound
    assert any("rejected 2:" in line and "malformed CKKS ciphertext" in line for line in session.server.log)


def test_a_plaintext_offset_passes_the_count_lane_but_not_the_check_lanes():
    """threat_model.md C-CHECK: a deviating server can shift the encrypted sum by a plaintext
    offset without the key; the count lane alone still reads 3, but the check lanes (a linear
    MAC under a key the server lacks) do not match, and the client refuses the aggregate."""
    session = local_session(CKKS, range(3), record=True)
    session.start_round()
    inputs = make_inputs(range(3))
    session.secure_sum("s", inputs)
    params = CKKS.ckks.params
    uploads = [codec.decode(d).ciphertexts for s, c, d in session.runner.received if s is Stage.INPUT]
    total = None
    for blobs in uploads:
        total = session.server.context.add(total, [session.server.context.load(b) for b in blobs])
    shifted = [v + ([100.0] * 27 + [0.0] * (v.size() - 27)) for v in total]  # the data slots only
    client = session.clients[0]
    values, _ = client._context.decrypt_sum([v.serialize() for v in shifted], n_values=27, n_contributors=3)
    reference = np.concatenate([plain_sum(inputs, range(3))[k].ravel() for k in ("weight", "bias", "cube")])
    np.testing.assert_allclose(values, reference + 100.0, atol=params.error_bound(3, clip_range=8.0))
    _, _, chunks = client._context.decrypt_checked([v.serialize() for v in shifted], n_values=27, n_contributors=3)
    pending = _Pending(0, 0, client.last_result.spec, (0, 1, 2), 8.0, params.scale_bits)  # what the clients' lanes were keyed by
    bound = params.error_bound(3, clip_range=8.0)
    assert not client._matches(chunks, {0, 1, 2}, pending, bound)
    _, _, honest = client._context.decrypt_checked([v.serialize() for v in total], n_values=27, n_contributors=3)
    assert client._matches(honest, {0, 1, 2}, pending, bound)


def test_every_chunks_check_lanes_are_checked_not_only_the_first():
    """C-CHECK over a sum of several ciphertexts: a plaintext offset in the second chunk only
    (the first untouched) is refused as surely as one in the first."""
    session = local_session(CKKS, range(3), record=True)
    session.start_round()
    params = CKKS.ckks.params
    size = params.data_slots + 100  # two chunks
    inputs = make_inputs(range(3), shapes={"w": (size,)})
    session.secure_sum("s", inputs)
    uploads = [codec.decode(d).ciphertexts for s, c, d in session.runner.received if s is Stage.INPUT]
    total = None
    for blobs in uploads:
        total = session.server.context.add(total, [session.server.context.load(b) for b in blobs])
    assert len(total) == 2
    client = session.clients[0]
    pending = _Pending(0, 0, client.last_result.spec, (0, 1, 2), 8.0, params.scale_bits)
    bound = params.error_bound(3, clip_range=8.0)
    _, _, honest = client._context.decrypt_checked([v.serialize() for v in total], n_values=size, n_contributors=3)
    assert client._matches(honest, {0, 1, 2}, pending, bound)
    for shifted_chunk in (0, 1):
        shifted = [v + ([100.0] * 50 + [0.0] * (v.size() - 50)) if j == shifted_chunk else v for j, v in enumerate(total)]
        _, _, chunks = client._context.decrypt_checked([v.serialize() for v in shifted], n_values=size, n_contributors=3)
        assert not client._matches(chunks, {0, 1, 2}, pending, bound), shifted_chunk


def test_dealer_uploads_the_secret_context_once_not_once_per_peer():
    session = local_session(CKKS, range(10))
    session.start_round()
    traffic = session.runner.traffic
    per_peer_download = traffic.down_by_stage[Stage.KEY_INSTALL] / 9  # the sealed context plus a small envelope
    assert per_peer_download > 50_000
    assert traffic.up_by_stage[Stage.KEY_DEAL] < per_peer_download + 9 * 300


def test_a_contributor_set_reaching_outside_the_live_set_is_refused_in_one_line(monkeypatch):
    """threat_model.md C-CONSISTENCY: client 3 never installed the keys, so the live set of the sum
    is {0, 1, 2}; the server then asks client 0 to sign a contributor set that includes client 3.
    Client 0 refuses, naming the stray. (Without this check nothing is signed wrongly: the check
    lanes, keyed by the live set, would refuse such a sum at delivery; the check names it first.)"""
    def stray(direction, stage, client, data):
        if (direction, stage, client) == ("down", Stage.CONSISTENCY, 0):
            return codec.encode(dataclasses.replace(codec.decode(data), survivors=(0, 1, 2, 3)))
        return data

    session = local_session(CKKS, range(4), drop={Stage.KEY_INSTALL: {3}}, intercept=stray,
                            policy=ClientPolicy(backends=frozenset({Backend.CKKS})))
    session.start_round()
    with pytest.raises(ProtocolError, match=r"client 0: sum 0 lists contributors \[3\] outside the live set its input request showed"):
        session.secure_sum("s", make_inputs(range(4)))
