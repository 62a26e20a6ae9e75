"""Sets of client ids shared by a host process's clients (protocol/sum_backends/interned.py)."""

from __future__ import annotations

from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.interned import interned
from tests.helpers import make_inputs


def test_equal_sets_are_one_object_and_unequal_ones_are_not():
    a, b = interned((1, 2, 3)), interned([3, 2, 1])
    assert a is b and a == frozenset({1, 2, 3})
    assert interned((1, 2)) is not a


def test_the_clients_of_one_process_share_each_set_of_ids_a_sum_is_about():
    """A host's clients keep one live set, one survivor set and one exposed set between them, not
    one each (n ids each: gigabytes a host at n = 10,000), and still each check their own."""
    n = 12
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(n))
    session.start_round()
    inputs = make_inputs(range(n), shapes={"v": (3,)})
    session.secure_sum("s", inputs)
    epochs = [session.clients[c]._epoch for c in range(n)]
    assert epochs[0].live == frozenset(range(n)) and epochs[0].exposed == frozenset(range(n))
    for attribute in ("live", "survivors", "exposed"):
        assert len({id(getattr(ep, attribute)) for ep in epochs}) == 1, attribute
