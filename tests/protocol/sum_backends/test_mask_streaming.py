"""The mask backend's streaming variant (threat_model.md M-STREAM): sums equal the plaintext
sum with two steps each (input, deliver), a dropout abandons the sum without revealing any
secret (its inputs are never masked again), later sums go on among the survivors, and the
variant is used only where the configuration allows it. The attack a redo allowed is in
test_attacks.py (streaming redo)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from secure_fedgraph.errors import ProtocolError, SumAbandoned
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, MaskConfig, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.messages import ConsistencyRequest, DeliverRequest
from tests.helpers import NO_COLLUDERS, ServerThatNeverRekeys, make_inputs, max_error, plain_sum, sparse_config

STREAMING = SecureSumConfig(backend=Backend.MASK)
FULL = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(streaming=False))


def _stages(session) -> list[str]:
    return [stage.value for stage, _, _ in session.runner.received]


@pytest.mark.parametrize("n", [2, 3, 8])
def test_streaming_sums_equal_the_plaintext_sum_in_two_steps_each(n):
    # a run of two holds only where the adversary counts no colluder (a third of two is one: B2)
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(adversary=NO_COLLUDERS)) if n == 2 else STREAMING
    session = local_session(config, range(n), record=True)
    session.start_round()
    set_up = len(session.runner.received)
    for s in range(3):
        inputs = make_inputs(range(n), seed=s)
        result = session.secure_sum(f"s{s}", inputs, streaming=True)
        assert result.contributors == frozenset(range(n))
        assert max_error(result.values, plain_sum(inputs, range(n))) <= result.error_bound
        for client in session.clients.values():  # every client got the same sum
            assert max_error(client.last_result.values, result.values) == 0
    assert _stages(session)[set_up:] == (["input"] * n + ["deliver"] * n) * 3
    uploads = [codec.decode(data).payload for stage, _, data in session.runner.received if stage is Stage.INPUT]
    assert all(u.dtype.kind == "u" for u in uploads)  # ring elements, never the float inputs
    assert session.server.revealed == {}


def test_streaming_and_full_sums_mix_in_one_epoch():
    session = local_session(STREAMING, range(4))
    session.start_round()
    for s, streaming in enumerate([True, False, True, False]):
        inputs = make_inputs(range(4), seed=s)
        result = session.secure_sum(f"s{s}", inputs, streaming=streaming)
        assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound


def test_a_dropout_in_a_streaming_sum_abandons_it_and_the_survivors_go_on_revealing_nothing():
    session = local_session(STREAMING, range(5), drop={Stage.INPUT: {3}}, record=True)
    session.start_round()
    inputs = make_inputs(range(5))
    with pytest.raises(SumAbandoned, match=r"streaming sum 's': clients \[3\] dropped"):
        session.secure_sum("s", inputs, streaming=True)
    assert session.server.revealed == {}  # no seed, no mask key: nothing recovered
    assert _stages(session).count("advertise") == 5  # no re-key: the pairwise keys with client 3 are simply unused
    later = make_inputs(range(5), seed=1)
    result = session.secure_sum("t", {c: later[c] for c in (0, 1, 2, 4)}, streaming=True)
    assert result.contributors == frozenset({0, 1, 2, 4})
    assert max_error(result.values, plain_sum(later, {0, 1, 2, 4})) <= result.error_bound
    with pytest.raises(ProtocolError, match="refusing to mask the same contribution again"):  # "s" with the same inputs
        session.secure_sum("s", {c: inputs[c] for c in (0, 1, 2, 4)}, streaming=True)


def test_after_a_streaming_sum_a_dropout_in_a_full_sum_reveals_pair_seeds_instead_of_a_mask_key():
    """Every live client of a streaming sum counts as having contributed: a later dropout keeps
    its mask key, and its neighbours reveal their pair seeds of that sum with it (no re-key)."""
    session = local_session(STREAMING, range(5))
    session.start_round()
    session.secure_sum("a", make_inputs(range(5)), streaming=True)
    epoch, session.runner.drop = session.server._epoch, {Stage.INPUT: {4}}
    inputs = make_inputs(range(5), seed=2)
    result = session.secure_sum("b", inputs)
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound
    assert {client: kinds for (_, _, client), kinds in session.server.revealed.items()} == {4: {"pair_seed"}}
    assert session.server._epoch == epoch


def test_streaming_contributors_mask_keys_are_never_revealed_even_if_the_server_asks():
    session = local_session(STREAMING, range(5))
    session.server.__class__ = ServerThatNeverRekeys
    session.start_round()
    session.secure_sum("a", make_inputs(range(5)), streaming=True)
    session.runner.drop = {Stage.INPUT: {4}}
    with pytest.raises(ProtocolError, match="refusing to reveal client 4's mask-key share"):
        session.secure_sum("b", make_inputs(range(5)))


@pytest.mark.parametrize("config", [FULL, sparse_config(4)], ids=["disabled", "sparse"])
def test_without_the_complete_graph_or_with_streaming_off_every_sum_takes_the_full_protocol(config):
    n = 12
    session = local_session(config, range(n), record=True)
    session.start_round()
    inputs = make_inputs(range(n))
    result = session.secure_sum("s", inputs, streaming=True)
    assert max_error(result.values, plain_sum(inputs, range(n))) <= result.error_bound
    assert {"consistency", "unmask"} <= set(_stages(session))


def _swap(stage: Stage, make):
    """An intercept that replaces the request of ``stage`` to client 0 by ``make(request)``."""

    def hook(direction, at, client, data):
        if (direction, at, client) == ("down", stage, 0):
            return codec.encode(make(codec.decode(data)))
        return data

    return hook


def test_a_full_sum_cannot_skip_to_deliver():
    """A server that sends DELIVER right after INPUT of a full sum (skipping the consistency
    check, whose signatures guard every revelation) is refused."""

    def deliver_instead(request):
        header = dataclasses.replace(request.header, stage=Stage.DELIVER)
        return DeliverRequest(header, 0, request.survivors, np.zeros(1, dtype=np.uint64), (), 0)

    session = local_session(STREAMING, range(3), intercept=_swap(Stage.CONSISTENCY, deliver_instead))
    session.start_round()
    with pytest.raises(ProtocolError, match="does not match the verified sum"):
        session.secure_sum("s", make_inputs(range(3)))


def test_a_streaming_sum_has_no_consistency_step():
    def consistency_instead(request):
        return ConsistencyRequest(dataclasses.replace(request.header, stage=Stage.CONSISTENCY), request.contributors)

    session = local_session(STREAMING, range(3), intercept=_swap(Stage.DELIVER, consistency_instead))
    session.start_round()
    with pytest.raises(ProtocolError, match="is a streaming sum: it has no consistency step"):
        session.secure_sum("s", make_inputs(range(3)), streaming=True)
