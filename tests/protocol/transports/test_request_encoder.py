"""How a transport encodes a step's requests (protocol/transports/common.py RequestEncoder):
one request object sent to many clients is encoded once, and requests built on read
(protocol/core/steps.py BuiltOnRead, a holder's share envelopes) each go to their own client,
although a freed request's id is soon another's."""

from __future__ import annotations

import weakref

from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import BuiltOnRead, Step
from secure_fedgraph.protocol.sum_backends import messages as m
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.transports.common import RequestEncoder

HEADER = m.Header(b"s" * 16, 3, 41, Stage.CONSISTENCY, 7)
CLIENTS = tuple(range(300))


def _own(client: int) -> m.ConsistencyRequest:
    return m.ConsistencyRequest(HEADER, (client, client + 1000))


def test_requests_built_on_read_each_reach_their_own_client():
    step = Step(Stage.CONSISTENCY, BuiltOnRead(CLIENTS, _own), lambda c, r: None)
    encode = RequestEncoder(step)
    sent = {c: encode(step.requests[c]) for c in CLIENTS}  # each request is freed once encoded
    assert all(codec.decode(sent[c]) == _own(c) for c in CLIENTS)


def test_requests_built_on_read_are_not_kept_once_encoded():
    """Holding each built request (as the cache does for a dict of requests, whose objects live
    anyway) would keep a step's every request: what building them on read is for."""
    built = []

    def tracked(client: int) -> m.ConsistencyRequest:
        request = _own(client)
        built.append(weakref.ref(request))
        return request

    step = Step(Stage.CONSISTENCY, BuiltOnRead(CLIENTS, tracked), lambda c, r: None)
    encode = RequestEncoder(step)
    for c in CLIENTS:
        encode(step.requests[c])
    assert all(ref() is None for ref in built)
    built.clear()
    kept = RequestEncoder(Step(Stage.CONSISTENCY, {}, lambda c, r: None))  # the dict-step encoder holds what it encoded
    for c in CLIENTS:
        kept(tracked(c))
    assert all(ref() is not None for ref in built)


def test_one_request_object_for_many_clients_is_encoded_once(monkeypatch):
    shared = m.ConsistencyRequest(HEADER, CLIENTS)
    step = Step(Stage.CONSISTENCY, dict.fromkeys(CLIENTS, shared), lambda c, r: None)
    calls = []
    real = codec.encode
    monkeypatch.setattr(codec, "encode", lambda request: calls.append(request) or real(request))
    encode = RequestEncoder(step)
    assert {encode(step.requests[c]) for c in CLIENTS} == {real(shared)}
    assert len(calls) == 1
