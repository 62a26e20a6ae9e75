"""Opening a session (protocol/core/session.py, threat_model.md R-SESSION), check by check: each test
fails when one condition of the client's checks is removed (`make mutate` finds the ones that
have none). The attacks these checks stop, run end to end, are in test_attacks.py (A2) and
test_resume.py (A1)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.core.messages import SERVER, Ack, Header, Joined, SessionRequest, Welcome
from secure_fedgraph.protocol.core.session import NONCE_BYTES, ClientOpening, OpeningClient, Sequencer, agreed_session, new_proposal, welcome_digest
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import StepOutcome

CLIENTS = (0, 1, 2)


def _welcome(**changes) -> Welcome:
    welcome = Welcome(Header(b"p" * 16, 0, 1, Stage.WELCOME, SERVER), '{"plan": "x"}', CLIENTS, (b"cert-0", b"cert-1", b"cert-2"))
    return dataclasses.replace(welcome, **changes)


def test_the_session_id_covers_the_proposal_the_welcome_and_every_clients_nonce():
    """Change any part and the id changes: clients shown different Welcomes (another
    configuration, participant list or certificate), different client sets or nonces derive
    different ids, so none of their signatures verify for each other."""
    nonces = {c: os.urandom(NONCE_BYTES) for c in CLIENTS}
    digest = welcome_digest(_welcome())
    base = agreed_session(proposal=b"p" * 16, welcome=digest, nonces=nonces)
    variants = [
        agreed_session(proposal=b"q" * 16, welcome=digest, nonces=nonces),
        agreed_session(proposal=b"p" * 16, welcome=welcome_digest(_welcome(config_json='{"plan": "y"}')), nonces=nonces),
        agreed_session(proposal=b"p" * 16, welcome=welcome_digest(_welcome(participants=(0, 1, 3))), nonces=nonces),
        agreed_session(proposal=b"p" * 16, welcome=welcome_digest(_welcome(certificates=(b"cert-0", b"cert-1", b"cert-X"))), nonces=nonces),
        agreed_session(proposal=b"p" * 16, welcome=digest, nonces={c + 10: n for c, n in nonces.items()}),  # same nonces, other clients
        agreed_session(proposal=b"p" * 16, welcome=digest, nonces={**nonces, 1: os.urandom(NONCE_BYTES)}),
    ]
    assert len({base, *variants}) == 1 + len(variants)
    assert base == agreed_session(proposal=b"p" * 16, welcome=welcome_digest(_welcome()), nonces=dict(reversed(nonces.items())))


def _request(opening: ClientOpening, clients=CLIENTS, *, nonces: dict | None = None, **header) -> SessionRequest:
    """The SessionRequest an honest server sends ``opening``'s client, with ``header`` fields changed."""
    listed = {c: (opening.nonce if c == opening.client else bytes([c]) * NONCE_BYTES) for c in clients} if nonces is None else nonces
    h = dataclasses.replace(Header(opening.proposal, 0, 2, Stage.SESSION, SERVER), **header)
    return SessionRequest(h, tuple(clients), b"".join(listed[c] for c in clients))


def test_a_client_takes_the_id_of_a_request_that_lists_its_nonce():
    opening = ClientOpening(1, _welcome())
    request = _request(opening)
    nonces = {c: request.nonces[i * NONCE_BYTES : (i + 1) * NONCE_BYTES] for i, c in enumerate(CLIENTS)}
    assert opening.agree(request) == agreed_session(proposal=b"p" * 16, welcome=welcome_digest(_welcome()), nonces=nonces)


@pytest.mark.parametrize(
    ("case", "match"),
    [
        ("another proposal", "does not answer this client's Welcome"),
        ("not from the server", "does not answer this client's Welcome"),
        ("another stage", "does not answer this client's Welcome"),
        ("clients out of order", "sorted, unique participants"),
        ("a client twice", "sorted, unique participants"),
        ("a client the Welcome did not name", "sorted, unique participants"),
        ("a nonce short", "32 bytes per client"),
        ("without this client's nonce", "does not carry this client's nonce"),
        ("without this client", "does not carry this client's nonce"),
    ],
)
def test_a_client_refuses_a_session_request_that_breaks_one_rule(case, match):
    """One rule broken at a time, so each condition of ClientOpening.agree has its own test."""
    opening = ClientOpening(1, _welcome())
    honest = _request(opening)
    request = {
        "another proposal": lambda: _request(opening, session=b"o" * 16),
        "not from the server": lambda: _request(opening, sender=0),
        "another stage": lambda: _request(opening, stage=Stage.WELCOME),
        "clients out of order": lambda: _request(opening, (0, 2, 1)),
        "a client twice": lambda: _request(opening, (0, 1, 1)),
        "a client the Welcome did not name": lambda: _request(opening, (0, 1, 7)),
        "a nonce short": lambda: dataclasses.replace(honest, nonces=honest.nonces[:-1]),
        "without this client's nonce": lambda: _request(opening, nonces={c: bytes([c]) * NONCE_BYTES for c in CLIENTS}),
        "without this client": lambda: _request(opening, (0, 2)),
    }[case]()
    with pytest.raises(ProtocolError, match=match):
        opening.agree(request)


class _Endpoint:
    """What OpeningClient builds for the agreed session: here, a record of what reached it."""

    def __init__(self, session: bytes) -> None:
        self.session, self.seen = session, []

    def handle(self, request):
        self.seen.append(request)
        return Ack(request.header)


def _opened() -> tuple[OpeningClient, list[_Endpoint], Welcome]:
    built: list[_Endpoint] = []
    client = OpeningClient(1, lambda session: built.append(_Endpoint(session)) or built[-1])
    welcome = _welcome()
    joined = client.handle(welcome)
    assert isinstance(joined, Joined) and len(joined.nonce) == NONCE_BYTES
    return client, built, welcome


def test_an_opening_client_hands_requests_to_its_session_only_after_it_opened():
    client, built, welcome = _opened()
    ack = client.handle(_request(client.opening))
    assert isinstance(ack, Ack) and len(built) == 1 and built[0].session == client.opening.agree(_request(client.opening))
    later = Ack(Header(built[0].session, 0, 3, Stage.ADVERTISE, SERVER))
    client.handle(later)
    assert built[0].seen == [later]


@pytest.mark.parametrize("case", ["a request before the Welcome", "a session request before the Welcome", "a second Welcome",
                                  "a request before the session request"])
def test_nothing_but_the_opening_reaches_a_client_before_its_session_is_open(case):
    built: list[_Endpoint] = []
    client = OpeningClient(1, lambda session: built.append(_Endpoint(session)) or built[-1])
    welcome = _welcome()
    if case in ("a second Welcome", "a request before the session request"):
        client.handle(welcome)
    request = {
        "a request before the Welcome": Ack(Header(b"p" * 16, 0, 3, Stage.ADVERTISE, SERVER)),
        "a session request before the Welcome": SessionRequest(Header(b"p" * 16, 0, 2, Stage.SESSION, SERVER), CLIENTS, b"\0" * 96),
        "a second Welcome": welcome,
        "a request before the session request": Ack(Header(b"p" * 16, 0, 3, Stage.ADVERTISE, SERVER)),
    }[case]
    with pytest.raises(ProtocolError, match="before its session was opened"):
        client.handle(request)
    assert built == []


@pytest.mark.parametrize("again", ["Welcome", "SessionRequest"])
def test_a_client_whose_session_is_open_refuses_to_open_another(again):
    """A second Welcome or session request after the session opened would re-key the client's
    identity into a session of the server's making: refused, and nothing is built again."""
    client, built, welcome = _opened()
    request = _request(client.opening)
    client.handle(request)
    with pytest.raises(ProtocolError, match="after its session was opened"):
        client.handle(welcome if again == "Welcome" else request)
    assert len(built) == 1 and built[0].seen == []


def test_the_server_opens_with_the_clients_that_answered_and_agrees_on_their_id():
    """Sequencer.open: a client whose nonce has the wrong length is left out (with the reason);
    the others take the same id the server then heads every request with, and step numbers go
    on increasing from the opening."""
    seq = Sequencer(new_proposal())
    proposal = seq.session
    gen = seq.open(list(CLIENTS), lambda h: Welcome(h, '{"plan": "x"}', CLIENTS, ()))
    step = next(gen)
    assert step.stage is Stage.WELCOME and {w.header.session for w in step.requests.values()} == {proposal}
    openings = {c: ClientOpening(c, step.requests[c]) for c in CLIENTS}
    rejected = {}
    for c in CLIENTS:
        joined = openings[c].joined(step.requests[c])
        if c == 2:
            with pytest.raises(ProtocolError, match="nonce of 31 bytes"):
                step.accept(c, dataclasses.replace(joined, nonce=joined.nonce[:-1]))
            rejected[c] = "short nonce"
        else:
            step.accept(c, joined)
    step = gen.send(StepOutcome(frozenset({0, 1}), rejected))
    assert step.stage is Stage.SESSION and set(step.requests) == {0, 1}
    ids = set()
    for c in (0, 1):
        ids.add(openings[c].agree(step.requests[c]))
        step.accept(c, openings[c].ack(step.requests[c]))
    with pytest.raises(StopIteration) as stopped:
        gen.send(StepOutcome(frozenset({0, 1})))
    assert stopped.value.value == ([0, 1], {2: "rejected at welcome: short nonce"})
    assert ids == {seq.session} and seq.session != proposal
    after = seq.step(Stage.ADVERTISE, lambda h: {0: h}, lambda c, r: None, Ack)
    assert after.requests[0].session == seq.session and after.requests[0].step == 3 == seq.current


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"type": Joined}, "expected Ack, got Joined"),
        ({"session": b"o" * 16}, "belongs to another session"),
        ({"round": 1}, "a replay or a late answer"),
        ({"step": 0}, "a replay or a late answer"),
        ({"stage": Stage.UNMASK}, "a replay or a late answer"),
        ({"sender": 1}, "claiming to be from 1"),
    ],
)
def test_the_server_accepts_only_answers_to_its_current_step(change, match):
    """Sequencer.step's check, one condition at a time: the answer's type, session, round, step,
    stage and sender must be those of the request in progress."""
    seq = Sequencer(new_proposal())
    seq.round = 0
    accepted = []
    step = seq.step(Stage.ADVERTISE, lambda h: {0: h}, lambda c, r: accepted.append(c), Ack)
    header = dataclasses.replace(step.requests[0], sender=0)
    step.accept(0, Ack(header))
    assert accepted == [0]
    kind = change.get("type", Ack)
    wrong = dataclasses.replace(header, **{k: v for k, v in change.items() if k != "type"})
    with pytest.raises(ProtocolError, match=match):
        step.accept(0, kind(wrong, os.urandom(NONCE_BYTES)) if kind is Joined else kind(wrong))
    assert accepted == [0]


def test_every_step_carries_the_phase_the_plan_set_for_traffic_by_phase():
    """Traffic is reported by the plan's phase (metrics.json, "traffic by phase"): a step made
    before the plan names a phase is unlabelled (""), and every later one carries the name."""
    from secure_fedgraph.protocol.core.stages import Stage

    seq = Sequencer(new_proposal())
    assert seq.step(Stage.INPUT, lambda h: {}, lambda c, r: None, object).phase == ""
    seq.phase = "split learning"
    assert seq.step(Stage.INPUT, lambda h: {}, lambda c, r: None, object).phase == "split learning"
