"""Replay a run's transcripts (protocol/transcript.py) into what the audit reasons about: the
run's configuration, every secure sum from its first input request to its delivery (or to the
point where the server gave it up), every individual upload, what the server sent to whom,
who went silent at which step, and the key set-ups of each round.

The server's transcript alone is what the server saw and could compute (server-only mode);
the clients' transcripts add ground truth: what each client received, and (recorded with
``--audit`` on the client's own disk) its plaintext contributions before masking and its
uploads before the DP hook.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.engine import RELEASE_PREFIX
from secure_fedgraph.protocol.messages import (
    Joined,
    SessionRequest,
    BroadcastRequest,
    Header,
    ScatterRequest,
    UploadRequest,
    UploadResponse,
    Welcome,
    tensors_of,
)
from secure_fedgraph.protocol.secure_sum import messages as sm
from secure_fedgraph.protocol.stages import Stage
from secure_fedgraph.protocol.transcript import AUDIT, RECEIVED, SENT, read_transcript

At = tuple[bytes, int]  # (session, step): where a message belongs (a resumed run's transcript holds several sessions)


def at(header: Header) -> At:
    return header.session, header.step


@dataclass
class SumAttempt:
    """One secure sum as the server ran it: from its input request to its delivery, or not.

    ``status``: "delivered"; "redone" (the server asked for the same sum again in the same round:
    a re-key after a dropout); "abandoned" (never delivered, never asked again)."""

    session: bytes
    round: int
    epoch: int
    sum_index: int
    name: str
    request: sm.InputRequest
    asked: tuple[int, ...]
    inputs: dict[int, sm.InputResponse] = field(default_factory=dict)
    deliver: sm.DeliverRequest | None = None
    released: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # ckks: the values clients released to the server
    status: str = "abandoned"

    @property
    def at(self) -> At:
        return at(self.request.header)

    @property
    def contributors(self) -> tuple[int, ...]:
        return tuple(self.deliver.contributors) if self.deliver is not None else ()

    @property
    def streaming(self) -> bool:
        return self.request.spec.streaming and not self.request.shares and bool(self.inputs) and not any(
            m.self_mask_commitment for m in self.inputs.values())


@dataclass
class StepRecord:
    """One step of the server: its stage, round, whom it asked and who answered."""

    session: bytes
    round: int
    step: int
    stage: Stage
    asked: set[int] = field(default_factory=set)
    answered: set[int] = field(default_factory=set)


@dataclass
class Upload:
    """One individual upload the server received (split learning, window counts)."""

    round: int
    name: str
    client: int
    tensors: dict[str, np.ndarray]
    at: At


@dataclass
class ClientRecord:
    """What one client's own transcript holds."""

    client: int
    received: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # what it received, by kind
    contributions: dict[At, dict[str, np.ndarray]] = field(default_factory=dict)  # (session, step of the input request) -> plaintext
    raw_uploads: dict[At, tuple[str, dict[str, np.ndarray]]] = field(default_factory=dict)  # (session, step) -> upload before the DP hook


@dataclass
class Opening:
    """How one session opened (protocol/session.py), as the server's transcript shows it: the
    Welcome it proposed, each client's nonce, and the nonces it sent back."""

    proposal: bytes
    welcome: Welcome
    joined: dict[int, bytes] = field(default_factory=dict)  # client -> the nonce it answered the Welcome with
    request: SessionRequest | None = None


@dataclass
class RunView:
    """Everything the transcripts show, in the terms the claims use."""

    config: dict[str, Any]
    sessions: list[bytes]
    steps: list[StepRecord]
    sums: list[SumAttempt]
    uploads: list[Upload]
    sent: dict[str, dict[str, int]]  # kind -> name -> messages the server sent
    downloads: dict[str, dict[int, list[tuple[int, dict[str, np.ndarray]]]]]  # scatter name -> client -> (round, tensors), in order
    received_kinds: dict[str, int]  # message type -> count, everything the server received
    advertised: list[tuple[bytes, int, sm.AdvertiseRequest]]  # (session, round, request) per key set-up
    key_deals: list[sm.KeyDealResponse]
    reveals: list[tuple[tuple[bytes, int, int], int, object]]  # ((session, round, key epoch), client, UnmaskResponse | RecoverResponse)
    received_bytes: dict[int, dict[At, bytes]]  # client -> (session, step) -> raw bytes of each message the server received from it
    clients: dict[int, ClientRecord]  # client transcripts given
    openings: list[Opening] = field(default_factory=list)  # one per session, in order
    metrics: dict[str, Any] | None = None  # the run folder's metrics.json, where there is one
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # what several checkers share (the plaintext probe)

    @property
    def backend(self) -> str:
        return self.config["secure_sum"]["backend"]

    @property
    def plan(self) -> str:
        return self.config["plan"]["plan"]

    @property
    def plan_config(self) -> dict[str, Any]:
        return self.config["plan"]["config"]

    @property
    def run_clients(self) -> list[int]:
        """The clients the run started with (those its first step addressed)."""
        return sorted(self.steps[0].asked) if self.steps else []

    @property
    def with_clients(self) -> bool:
        return bool(self.clients)

    def contribution(self, attempt: SumAttempt, client: int) -> np.ndarray | None:
        """A client's plaintext input to ``attempt``, flattened (float64), from its audit records."""
        record = self.clients.get(client)
        tensors = None if record is None else record.contributions.get(attempt.at)
        return None if tensors is None else attempt.request.spec.flatten(tensors).astype(np.float64)

    def uploads_named(self, name: str) -> list[Upload]:
        return [u for u in self.uploads if u.name == name]

    def raw_upload(self, upload: Upload) -> dict[str, np.ndarray] | None:
        """The client's tensors of ``upload`` before its DP hook, from its audit records."""
        record = self.clients.get(upload.client)
        found = None if record is None else record.raw_uploads.get(upload.at)
        return None if found is None else found[1]


def load_run(server_transcript: str | Path, client_transcripts: Iterable[str | Path] = (), *, metrics: str | Path | None = None) -> RunView:
    """Replay the server's transcript (and the clients', where given) into a :class:`RunView`.

    Raises:
        ConfigError: a transcript is missing, or the server's holds no run configuration.
    """
    path = Path(server_transcript)
    if not path.is_file():
        raise ConfigError(f"{path}: no such transcript (run the server with --transcript, or `run ... --transcript`)")
    view = _replay_server(path)
    for client_path in client_transcripts:
        client_path = Path(client_path)
        if not client_path.is_file():
            raise ConfigError(f"{client_path}: no such client transcript")
        record = _replay_client(client_path, view)
        if record is not None:
            view.clients[record.client] = record
    if metrics is not None and Path(metrics).is_file():
        view.metrics = json.loads(Path(metrics).read_text())
    return view


def _replay_server(path: Path) -> RunView:
    config: dict[str, Any] | None = None
    sessions: list[bytes] = []
    steps: dict[At, StepRecord] = {}
    attempts: dict[At, SumAttempt] = {}
    open_sums: dict[tuple[bytes, int, int], SumAttempt] = {}  # (session, round, sum_index) -> the attempt awaiting delivery
    requests: dict[At, Any] = {}  # the request of each step (one per step is enough: they differ per client only for scatters)
    uploads: list[Upload] = []
    sent: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    downloads: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    received_kinds: dict[str, int] = defaultdict(int)
    advertised: list = []
    key_deals: list = []
    reveals: list = []
    received_bytes: dict[int, dict[At, bytes]] = defaultdict(dict)
    epoch: dict[bytes, int] = {}
    openings: dict[bytes, Opening] = {}
    for record in read_transcript(path):
        message = record.message()
        header = getattr(message, "header", None)
        if header is None:  # a Hello
            continue
        where = at(header)
        if header.session not in sessions and header.stage not in (Stage.WELCOME, Stage.SESSION):  # those two steps carry the proposal
            sessions.append(header.session)
        if record.direction == SENT:
            step = steps.setdefault(where, StepRecord(header.session, header.round, header.step, header.stage))
            step.asked.add(record.peer)
            first = where not in requests
            requests.setdefault(where, message)
            if isinstance(message, SessionRequest) and first and header.session in openings:
                openings[header.session].request = message
            if isinstance(message, Welcome):
                openings.setdefault(header.session, Opening(header.session, message))
                if config is None:
                    config = json.loads(message.config_json)
                    config.pop("resume", None)
            elif isinstance(message, sm.AdvertiseRequest) and first:
                advertised.append((header.session, header.round, message))
                epoch[header.session] = message.epoch
            elif isinstance(message, sm.InputRequest):
                if first:
                    _open_sum(message, header, epoch.get(header.session, 0), attempts, open_sums)
                attempts[where].asked = tuple(message.live)
            elif isinstance(message, sm.DeliverRequest) and first:
                attempt = open_sums.pop((header.session, header.round, message.sum_index), None)
                if attempt is not None:
                    attempt.deliver, attempt.status = message, "delivered"
            elif isinstance(message, ScatterRequest):
                sent["scatter"][message.name] += 1
                downloads[message.name][record.peer].append((header.round, tensors_of(message.tensors)))
            elif isinstance(message, BroadcastRequest) and first:
                sent["broadcast"][message.name] += 1
            elif isinstance(message, UploadRequest) and first:
                sent["upload request"][message.name] += 1
        elif record.direction == RECEIVED:
            received_kinds[type(message).__name__] += 1
            received_bytes[record.peer][where] = received_bytes[record.peer].get(where, b"") + record.data
            step = steps.get(where)
            if step is not None:
                step.answered.add(record.peer)
            if isinstance(message, Joined) and header.session in openings:
                openings[header.session].joined[record.peer] = message.nonce
            elif isinstance(message, sm.InputResponse):
                attempt = attempts.get(where)
                if attempt is not None:
                    attempt.inputs[record.peer] = message
            elif isinstance(message, UploadResponse) and message.name.startswith(RELEASE_PREFIX):
                name = message.name[len(RELEASE_PREFIX):]
                for attempt in reversed(list(attempts.values())):
                    if attempt.session == header.session and attempt.name == name and attempt.status == "delivered":
                        attempt.released[record.peer] = tensors_of(message.tensors)
                        break
            elif isinstance(message, UploadResponse):
                uploads.append(Upload(header.round, message.name, record.peer, tensors_of(message.tensors), where))
            elif isinstance(message, sm.KeyDealResponse):
                key_deals.append(message)
            elif isinstance(message, sm.UnmaskResponse | sm.RecoverResponse):
                reveals.append(((header.session, header.round, epoch.get(header.session, 0)), record.peer, message))
    if config is None:
        raise ConfigError(f"{path}: the transcript holds no Welcome, so not the run's configuration; is it a server's transcript?")
    return RunView(config=config, sessions=sessions, steps=list(steps.values()), sums=list(attempts.values()), uploads=uploads,
                   sent={k: dict(v) for k, v in sent.items()}, downloads={k: dict(v) for k, v in downloads.items()},
                   received_kinds=dict(received_kinds), advertised=advertised, key_deals=key_deals, reveals=reveals,
                   received_bytes=dict(received_bytes), clients={}, openings=list(openings.values()))


def _open_sum(message: sm.InputRequest, header: Header, epoch: int, attempts: dict, open_sums: dict) -> None:
    """A new input request: a sum starts, or (same name, same round) the server asks again."""
    for earlier in attempts.values():  # undelivered, and a key set-up since: the server re-keyed and asks again
        if (earlier.session, earlier.round, earlier.name, earlier.status) == (header.session, header.round, message.spec.name, "abandoned") \
                and earlier.epoch < epoch:
            earlier.status = "redone"
    attempt = SumAttempt(header.session, header.round, epoch, message.sum_index, message.spec.name, message, tuple(message.live))
    attempts[at(header)] = attempt
    open_sums[(header.session, header.round, message.sum_index)] = attempt


def _replay_client(path: Path, view: RunView) -> ClientRecord | None:
    """One client's transcript: what it received, and its audit records (plaintext inputs,
    uploads before the DP hook), keyed by the step of the request they answer."""
    record: ClientRecord | None = None
    pending: list[tuple[int, Any]] = []
    for entry in read_transcript(path):
        message = entry.message()
        header = getattr(message, "header", None)
        if entry.direction == SENT and header is not None and record is None:
            record = ClientRecord(header.sender)
        if entry.direction == RECEIVED:
            pending.append((0, message))
        elif entry.direction == AUDIT:
            pending.append((1, message))
            if record is None:
                record = ClientRecord(entry.peer)
    if record is None:
        return None
    for kind, message in pending:
        if kind == 0:
            name = getattr(message, "name", "")
            record.received[f"{type(message).__name__}{' ' + name if name else ''}"] += 1
        elif message.header.stage is Stage.UPLOAD:
            record.raw_uploads[at(message.header)] = (message.name, tensors_of(message.tensors))
        else:
            record.contributions[at(message.header)] = tensors_of(message.tensors)
    return record
