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
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.local import local_session
from secure_fedgraph.protocol.secure_sum import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from tests.helpers import make_inputs, plain_sum

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
