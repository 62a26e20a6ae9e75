"""One session's bookkeeping on the server (id, round, the step number of every request), and how
a session id comes to be: from the server's proposal and fresh randomness of every client.

Step numbers strictly increase over the whole session, across every collective and every
secure-sum stage, so a client can refuse any request that is not newer than the last one it
answered (a replay or a reordering), and the server accepts only answers to its current step.

Session ids the server cannot reuse (threat_model.md R-SESSION). Everything a client signs or
derives (key advertisements, pair keys, share envelopes, consistency statements, check lanes)
is labelled with the session id. Were the server to choose it, it could run a sum under id S,
learn some clients' recovery secrets there, and start another run under the same S, where those
clients' old signed keys still verify. So the id is agreed: the server proposes one in its
Welcome (``proposal``), every client answers with 32 fresh random bytes (:class:`Joined`), the
server sends every answering client's nonce back (:class:`SessionRequest`), and each client
checks that its own nonce is among them before it takes

    session = SHA-256(label(SESSION, proposal, Welcome digest, clients, nonces))[:16].

A client's own nonce is fresh, so the id is one it never saw before, whatever the server
proposes and whatever nonces it claims the others sent: no signature a client made in an
earlier session, and none made by anybody before this client's nonce existed, carries this id.
Clients shown different nonce lists or Welcomes derive different ids, and then none of their
signatures verify for each other. A resumed run opens a new session the same way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from secure_fedgraph.crypto.labels import Purpose, label
from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol.core.messages import SERVER, Ack, Header, Joined, SessionRequest, Welcome
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import Step, StepGen

SESSION_BYTES = 16
NONCE_BYTES = 32


def new_proposal() -> bytes:
    """A fresh random proposal for a session id (the server's part of it)."""
    return os.urandom(SESSION_BYTES)


def welcome_digest(welcome: Welcome) -> bytes:
    """What a Welcome announces (the run's configuration, its participants and their
    certificates), hashed once per process: the session id covers it."""
    certificates = hashlib.sha256()
    for pem in welcome.certificates:
        certificates.update(len(pem).to_bytes(8, "big") + pem)
    return hashlib.sha256(label(Purpose.WELCOME, welcome.config_json, welcome.participants, certificates.digest())).digest()


def agreed_session(*, proposal: bytes, welcome: bytes, nonces: Mapping[int, bytes]) -> bytes:
    """The session id of a proposal, a Welcome digest and every answering client's nonce."""
    clients = sorted(nonces)
    return hashlib.sha256(label(Purpose.SESSION, proposal, welcome, clients, *(nonces[c] for c in clients))).digest()[:SESSION_BYTES]


class ClientOpening:
    """One client's side of opening a session: a fresh nonce for its answer to the Welcome, then
    the session id, once it has checked that the server's list holds that nonce."""

    def __init__(self, client: int, welcome: Welcome, *, digest: bytes | None = None) -> None:
        self.client = client
        self.proposal = welcome.header.session
        self.participants = frozenset(welcome.participants)
        self.digest = welcome_digest(welcome) if digest is None else digest
        self.nonce = os.urandom(NONCE_BYTES)

    def joined(self, welcome: Welcome) -> Joined:
        """This client's answer to the Welcome."""
        h = welcome.header
        return Joined(Header(h.session, h.round, h.step, h.stage, self.client), self.nonce)

    def agree(self, request: SessionRequest) -> bytes:
        """The session id (checked: the request belongs to this proposal and lists this client's
        own nonce, once, among participants the Welcome named).

        Raises:
            ProtocolError: the request does not carry this client's nonce, or is malformed.
        """
        h = request.header
        if h.session != self.proposal or h.sender != SERVER or h.stage is not Stage.SESSION:
            raise ProtocolError(f"client {self.client}: the session request does not answer this client's Welcome")
        clients = request.clients
        if list(clients) != sorted(set(clients)) or not set(clients) <= self.participants:
            raise ProtocolError(f"client {self.client}: the session request's clients must be sorted, unique participants of the Welcome")
        if len(request.nonces) != NONCE_BYTES * len(clients):
            raise ProtocolError(f"client {self.client}: the session request must carry {NONCE_BYTES} bytes per client")
        nonces = {c: request.nonces[i * NONCE_BYTES : (i + 1) * NONCE_BYTES] for i, c in enumerate(clients)}
        if nonces.get(self.client) != self.nonce:
            raise ProtocolError(f"client {self.client}: the session request does not carry this client's nonce, so the session id "
                                "would not be fresh to it (a server reusing an earlier session's id); refusing the session")
        return agreed_session(proposal=self.proposal, welcome=self.digest, nonces=nonces)

    def ack(self, request: SessionRequest) -> Ack:
        h = request.header
        return Ack(Header(h.session, h.round, h.step, h.stage, self.client))


class OpeningClient:
    """A client endpoint that opens its session (:class:`ClientOpening`), then hands every request
    to what ``build`` made for the agreed session id: how a client joins a run in one process
    (``local_session``, ``simulate``); the gRPC client runtime does the same per hosted client."""

    def __init__(self, client: int, build: Callable[[bytes], Any]) -> None:
        self.client, self.build = client, build
        self.opening: ClientOpening | None = None
        self.endpoint: Any = None

    def handle(self, request: Any) -> Any:
        if isinstance(request, Welcome) and self.opening is None and self.endpoint is None:
            self.opening = ClientOpening(self.client, request)
            return self.opening.joined(request)
        if isinstance(request, SessionRequest) and self.opening is not None and self.endpoint is None:
            self.endpoint = self.build(self.opening.agree(request))
            return self.opening.ack(request)
        if self.endpoint is None or isinstance(request, Welcome | SessionRequest):
            raise ProtocolError(f"client {self.client}: a {type(request).__name__} arrived "
                                f"{'before its session was opened' if self.endpoint is None else 'after its session was opened'}")
        return self.endpoint.handle(request)


class Sequencer:
    """Hands out headers and checks that answers belong to the step in progress."""

    def __init__(self, session: bytes) -> None:
        if len(session) != SESSION_BYTES:
            raise ConfigError(f"session id must be {SESSION_BYTES} bytes, got {len(session)}")
        self.session = session
        self.round = -1
        self._last = 0
        self.current = -1
        self.phase = ""  # set by the plan (ServerContext.phase); stamped on every step

    def step(self, stage: Stage, build: Callable[[Header], Mapping[int, Any]], accept: Callable[[int, Any], None], expected: type) -> Step:
        """A step with a fresh step number; ``accept`` runs only for well-formed, current answers."""
        self._last += 1
        self.current = self._last
        header = Header(self.session, self.round, self._last, stage, SERVER)
        step_no, round_no, session = self._last, self.round, self.session

        def checked(client: int, response: Any) -> None:
            if type(response) is not expected:
                raise ProtocolError(f"{stage.value}: expected {expected.__name__}, got {type(response).__name__}")
            h = response.header
            if h.session != session:
                raise ProtocolError(f"{stage.value}: response from client {client} belongs to another session")
            if (h.round, h.step, h.stage) != (round_no, step_no, stage):
                raise ProtocolError(
                    f"{stage.value}: response from client {client} is for round {h.round} step {h.step} "
                    f"({h.stage.value}), expected round {round_no} step {step_no} (a replay or a late answer)"
                )
            if h.sender != client:
                raise ProtocolError(f"{stage.value}: client {client} sent a message claiming to be from {h.sender}")
            accept(client, response)

        return Step(stage, build(header), checked, self.phase)

    def open(self, clients: list[int], welcome: Callable[[Header], Welcome]) -> StepGen[tuple[list[int], dict[int, str]]]:
        """Open the session with ``clients`` (the server's side): send the Welcome (``welcome``
        builds it for a header; its session field is this sequencer's proposal), collect each
        client's nonce, send every nonce back, and from then on head every request with the agreed
        session id. Returns the clients that took both steps, and why each other one did not."""
        nonces: dict[int, bytes] = {}
        made: list[Welcome] = []

        def build(header: Header) -> dict[int, Welcome]:
            made.append(welcome(header))
            return dict.fromkeys(clients, made[0])  # one object for all: a transport encodes it once

        def accept(client: int, response: Joined) -> None:
            if len(response.nonce) != NONCE_BYTES:
                raise ProtocolError(f"welcome: client {client} answered with a nonce of {len(response.nonce)} bytes, not {NONCE_BYTES}")
            nonces[client] = response.nonce

        left: dict[int, str] = {}
        welcomed = yield self.step(Stage.WELCOME, build, accept, Joined)
        joined = sorted(nonces)
        listed = b"".join(nonces[c] for c in joined)
        opened = yield self.step(Stage.SESSION, lambda h: dict.fromkeys(joined, SessionRequest(h, tuple(joined), listed)), lambda c, r: None, Ack)
        for stage, outcome in ((Stage.WELCOME, welcomed), (Stage.SESSION, opened)):
            left.update({c: f"silent at {stage.value}" for c in outcome.silent})
            left.update({c: f"rejected at {stage.value}: {reason}" for c, reason in outcome.rejected.items()})
        self.session = agreed_session(proposal=self.session, welcome=welcome_digest(made[0]), nonces=nonces)
        return sorted(opened.accepted), left
