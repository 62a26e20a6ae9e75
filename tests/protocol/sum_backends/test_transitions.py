"""Every (client state, request stage) pair, for every backend: allowed pairs get past the
transition gate, all others are refused before the request's content is looked at."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.errors import SecureFedGraphError
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage, SumSpec
from secure_fedgraph.protocol.sum_backends import messages as m
from secure_fedgraph.protocol.core.stages import SECURE_SUM_STAGES
from secure_fedgraph.protocol.sum_backends.transitions import TRANSITIONS

_DEFAULTS = {
    bool: False,
    int: 0,
    str: "",
    bytes: b"",
    SumSpec: SumSpec.of("s", {"a": np.zeros(1)}),
    FixedPoint: FixedPoint(1.0, 1, 32),
    m.SignedKeys: m.SignedKeys(0, b"", b"", b"", b""),
    m.Sealed: m.Sealed(0, 0, b""),
}


def _dummy_request(stage: Stage, header: m.Header):
    cls = m.REQUESTS[stage]
    fields = {}
    for name, hint in typing.get_type_hints(cls, vars(m)).items():
        if name == "header":
            fields[name] = header
        elif typing.get_origin(hint) is tuple:
            fields[name] = ()
        elif hint in _DEFAULTS:
            fields[name] = _DEFAULTS[hint]
        else:  # optional arrays and encodings
            fields[name] = None
    return cls(**fields)


CASES = [(b, state, stage) for b in Backend for state in TRANSITIONS[b] for stage in sorted(SECURE_SUM_STAGES, key=lambda s: s.value)]


@pytest.mark.parametrize(
    "backend,state,stage", CASES, ids=[f"{b.value}-{s.value if s else 'start'}-{t.value}" for b, s, t in CASES]
)
def test_transition_gate(backend, state, stage):
    session = local_session(SecureSumConfig(backend=backend), range(3))
    client = session.clients[0]
    client.state, client.round = state, 0
    request = _dummy_request(stage, m.Header(client.session, 0, 1, stage, m.SERVER))
    allowed = stage in TRANSITIONS[backend][state]
    try:
        client.handle(request)
    except SecureFedGraphError as exc:
        assert ("unexpected stage" in str(exc)) is not allowed, str(exc)
    else:
        assert allowed


def test_every_backend_table_is_closed():
    """Every stage a table allows is itself a state of that table (no dead ends)."""
    for backend, table in TRANSITIONS.items():
        for state, nexts in table.items():
            assert nexts <= set(table), (backend, state)


def test_requests_for_another_session_or_from_a_client_are_refused():
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(3))
    client = session.clients[0]
    with pytest.raises(SecureFedGraphError, match="another session or not from the server"):
        client.handle(_dummy_request(Stage.ADVERTISE, m.Header(bytes(16), 0, 1, Stage.ADVERTISE, m.SERVER)))
    with pytest.raises(SecureFedGraphError, match="another session or not from the server"):
        client.handle(_dummy_request(Stage.ADVERTISE, m.Header(client.session, 0, 1, Stage.ADVERTISE, 2)))
    with pytest.raises(SecureFedGraphError, match="is not a request"):
        client.handle(m.Ack(m.Header(client.session, 0, 1, Stage.DELIVER, m.SERVER)))
