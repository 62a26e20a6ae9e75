"""Replay a run's transcripts (protocol/transports/transcript.py) into what the audit reasons about: the
run's configuration, every secure sum from its first input request to its delivery (or to the
point where the server gave it up), every individual upload, what the server sent to whom,
who went silent at which step, and the key set-ups of each round.

The server's transcript alone is what the server says it saw and could compute (server-only
mode): a deviating server writes its own transcript, and can write one of an honest run. The
clients' transcripts add ground truth: what each client received and sent, compared message by
message with the server's record of it at the same (session, step), byte for byte on the wire
encoding (:class:`WireCheck`, threat_model.md R-TRANSCRIPT), and (recorded with ``--audit`` on
the client's own disk) its plaintext contributions before masking and its uploads before the
DP hook. The comparison streams: the server's transcript leaves a 16-byte digest per message
(only when client transcripts are given), each client's transcript is read once, and matched
digests are dropped as they are compared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
from secure_fedgraph.protocol.core.messages import (
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
from secure_fedgraph.protocol.sum_backends import messages as sm
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.transports.transcript import AUDIT, RECEIVED, SENT, read_transcript

At = tuple[bytes, int]  # (session, step): where a message belongs (a resumed run's transcript holds several sessions)
_STAGES = list(Stage)
_DIGEST_BYTES = 16
EVEN_STAGES = frozenset({Stage.CONSISTENCY, Stage.DELIVER})  # every client asked at such a step gets the same request


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
        return self.request.spec.streaming and not self.request.dealt.records and bool(self.inputs) and not any(
            m.self_mask_commitment for m in self.inputs.values())


@dataclass(frozen=True)
class Reveal:
    """A client's answer that reveals secrets of a sum (threat_model.md M-BOTH): its pair seeds
    with dropped neighbours (PairSeedsResponse), its self-mask key and shares of dropped clients'
    mask keys (UnmaskResponse), or shares of silent survivors' seeds (RecoverResponse)."""

    epoch: tuple[bytes, int, int]  # (session, round, key epoch)
    sum_index: int  # of the sum the server last asked for in that session
    client: int
    message: Any


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


@dataclass(frozen=True)
class Mismatch:
    """One message on which a client's transcript and the server's disagree.

    ``direction``: "to the client" (the server sent, the client received) or "from the client";
    ``what``: how they disagree (a different message, one the server's transcript does not
    show, or one the client's transcript does not show)."""

    client: int
    session: int  # index into RunView.sessions; a proposal counts as the session it opened (-1: a session the server's transcript does not show at all)
    step: int
    stage: str
    direction: str
    what: str
    message: str = ""  # the kind of message, where a transcript shows it (e.g. "UploadResponse release:validation")

    @property
    def where(self) -> str:
        """Its stage; for an upload, with the upload's name (a release is "upload release:<sum>")."""
        return self.stage if self.stage != Stage.UPLOAD.value else f"upload {self.message.split(' ', 1)[-1] if ' ' in self.message else ''}".strip()

    def describe(self) -> str:
        kind = f": {self.message}" if self.message else ""
        return f"client {self.client}, session {self.session}, step {self.step} ({self.stage}{kind}): {self.what}"


@dataclass
class WireCheck:
    """The clients' transcripts against the server's (threat_model.md R-TRANSCRIPT).

    ``compared``: messages found alike, byte for byte. ``mismatches``: how many disagree, by
    stage (and by message kind for uploads, e.g. "upload release:..."), with the first
    ``EXAMPLES`` of them. ``unconfirmed``: messages a transcript lacks only where a party that
    stopped mid-step would lose them (the server's transcript of a session ends in the step a
    client saw last, with no End; a client's answer the server never recorded, after which the
    server sent it nothing more): they cannot be compared, and are counted, not failed."""

    EXAMPLES = 20

    clients: list[int] = field(default_factory=list)
    compared: int = 0
    mismatched: int = 0
    stages: Counter = field(default_factory=Counter)  # stage value (uploads: "upload <name>") -> mismatched messages
    examples: list[Mismatch] = field(default_factory=list)
    unconfirmed: int = 0
    unconfirmed_examples: list[Mismatch] = field(default_factory=list)

    def add(self, mismatch: Mismatch) -> None:
        self.mismatched += 1
        self.stages[mismatch.where] += 1
        if len(self.examples) < self.EXAMPLES:
            self.examples.append(mismatch)

    def tolerate(self, mismatch: Mismatch) -> None:
        self.unconfirmed += 1
        if len(self.unconfirmed_examples) < self.EXAMPLES:
            self.unconfirmed_examples.append(mismatch)


@dataclass
class Opening:
    """How one session opened (protocol/core/session.py), as the server's transcript shows it: the
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
    reveals: list[Reveal]
    received_bytes: dict[int, dict[At, bytes]]  # client -> (session, step) -> raw bytes of each message the server received from it
    clients: dict[int, ClientRecord]  # client transcripts given
    openings: list[Opening] = field(default_factory=list)  # one per session, in order
    wire_sessions: list[bytes] = field(default_factory=list)  # every session id a header carried, proposals included, in order
    metrics: dict[str, Any] | None = None  # the run folder's metrics.json, where there is one
    cache: dict[str, Any] = field(default_factory=dict, repr=False)  # what several checkers share (the plaintext probe)
    wire: WireCheck | None = None  # the clients' transcripts against the server's; None without client transcripts
    uneven_steps: list[tuple[int, int, str]] = field(default_factory=list)  # (session index, step, stage): clients asked at one
    # consistency or deliver step got different requests (every honest server sends each the same)
    client_reads: int = 0  # how often a checker used the clients' records (audit/run.py reports what each claim was checked from)

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
        if tensors is None:
            return None
        self.client_reads += 1
        return attempt.request.spec.flatten(tensors).astype(np.float64)

    def uploads_named(self, name: str) -> list[Upload]:
        return [u for u in self.uploads if u.name == name]

    def raw_upload(self, upload: Upload) -> dict[str, np.ndarray] | None:
        """The client's tensors of ``upload`` before its DP hook, from its audit records."""
        record = self.clients.get(upload.client)
        found = None if record is None else record.raw_uploads.get(upload.at)
        if found is None:
            return None
        self.client_reads += 1
        return found[1]


def run_plan(view: RunView) -> Any:
    """The run's plan, rebuilt from the configuration its Welcome announced (cached on the view)."""
    if "plan" not in view.cache:
        from secure_fedgraph.papers import plan_class

        announced = json.loads(json.dumps(view.config["plan"]))
        if view.plan == "nfedgnn":  # a Welcome from before the option (every Welcome since names it) drew from the run seed
            announced["config"].setdefault("user_randomness", "run_seed")
        view.cache["plan"] = plan_class(view.plan).from_config_json(json.dumps(announced))
    return view.cache["plan"]


def load_run(server_transcript: str | Path, client_transcripts: Iterable[str | Path] = (), *, metrics: str | Path | None = None) -> RunView:
    """Replay the server's transcript (and the clients', where given) into a :class:`RunView`.

    Raises:
        ConfigError: a transcript is missing, or the server's holds no run configuration.
    """
    path = Path(server_transcript)
    if not path.is_file():
        raise ConfigError(f"{path}: no such transcript (run the server with --transcript, or `run ... --transcript`)")
    client_paths = [Path(p) for p in client_transcripts]
    for client_path in client_paths:
        if not client_path.is_file():
            raise ConfigError(f"{client_path}: no such client transcript")
    wire = _ServerWire() if client_paths else None
    view = _replay_server(path, wire)
    if wire is not None:
        view.wire = WireCheck()
    for client_path in client_paths:
        record = _replay_client(client_path, view, wire)
        if record is not None:
            view.clients[record.client] = record
    if metrics is not None and Path(metrics).is_file():
        view.metrics = json.loads(Path(metrics).read_text())
    return view


def _key(session: int, step: int, sent_by_server: bool) -> int:
    """One message's place: (session index, step, which way), packed into one int (a small dict key)."""
    return (session << 42) | (step << 1) | int(sent_by_server)


def _chain(previous: bytes | None, data: bytes) -> bytes:
    """The digest of the messages at one place, in order (a place normally holds one)."""
    digest = hashlib.blake2b(data, digest_size=_DIGEST_BYTES).digest()
    return digest if previous is None else hashlib.blake2b(previous + digest, digest_size=_DIGEST_BYTES).digest()


@dataclass
class _ServerWire:
    """What the comparison keeps of the server's transcript: per client, per place, the digest of
    what the server recorded (and the stage, in one more byte); where each session's records end."""

    messages: dict[int, dict[int, bytes]] = field(default_factory=lambda: defaultdict(dict))
    last_step: dict[int, int] = field(default_factory=dict)  # session index -> last step its records show
    peer_last: dict[tuple[int, int], int] = field(default_factory=dict)  # (client, session index) -> last step with that client

    def note(self, peer: int, session: int, header: Header, sent: bool, data: bytes) -> None:
        key = _key(session, header.step, sent)
        old = self.messages[peer].get(key)
        self.messages[peer][key] = _chain(None if old is None else old[:-1], data) + bytes([_STAGES.index(header.stage)])
        self.last_step[session] = max(self.last_step.get(session, 0), header.step)
        self.peer_last[(peer, session)] = max(self.peer_last.get((peer, session), 0), header.step)


def _replay_server(path: Path, wire: _ServerWire | None = None) -> RunView:
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
    sum_index: dict[bytes, int] = {}  # session -> the sum index of its latest input request
    openings: dict[bytes, Opening] = {}
    session_index: dict[bytes, int] = {}  # every id a header carried, proposals included: how the wire comparison names sessions
    first_request: dict[At, bytes] = {}  # digest of the first request of each consistency and deliver step
    uneven: set[tuple[int, int, str]] = set()
    previous: tuple[bytes, Any] = (b"", None)
    for record in read_transcript(path):
        # a request sent to many clients is one body recorded once per client: decode it once (messages are immutable)
        message = previous[1] if record.data == previous[0] else record.message()
        previous = (record.data, message)
        header = getattr(message, "header", None)
        if header is None:  # a Hello
            continue
        where = at(header)
        session_index.setdefault(header.session, len(session_index))
        if header.session not in sessions and header.stage not in (Stage.WELCOME, Stage.SESSION):  # those two steps carry the proposal
            sessions.append(header.session)
        if wire is not None and record.direction in (SENT, RECEIVED):
            wire.note(record.peer, session_index[header.session], header, record.direction == SENT, record.data)
        if record.direction == SENT:
            step = steps.setdefault(where, StepRecord(header.session, header.round, header.step, header.stage))
            step.asked.add(record.peer)
            first = where not in requests
            requests.setdefault(where, message)
            if isinstance(message, SessionRequest) and first and header.session in openings:
                openings[header.session].request = message
            if header.stage in EVEN_STAGES:
                digest = hashlib.blake2b(record.data, digest_size=_DIGEST_BYTES).digest()
                if first_request.setdefault(where, digest) != digest:
                    uneven.add((sessions.index(header.session), header.step, header.stage.value))
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
                    sum_index[header.session] = message.sum_index
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
            elif isinstance(message, sm.PairSeedsResponse | sm.UnmaskResponse | sm.RecoverResponse):
                reveals.append(Reveal((header.session, header.round, epoch.get(header.session, 0)), sum_index.get(header.session, -1),
                                      record.peer, message))
    if config is None:
        raise ConfigError(f"{path}: the transcript holds no Welcome, so not the run's configuration; is it a server's transcript?")
    return RunView(config=config, sessions=sessions, steps=list(steps.values()), sums=list(attempts.values()), uploads=uploads,
                   sent={k: dict(v) for k, v in sent.items()}, downloads={k: dict(v) for k, v in downloads.items()},
                   received_kinds=dict(received_kinds), advertised=advertised, key_deals=key_deals, reveals=reveals,
                   received_bytes=dict(received_bytes), clients={}, openings=list(openings.values()), uneven_steps=sorted(uneven),
                   wire_sessions=list(session_index))


def _open_sum(message: sm.InputRequest, header: Header, epoch: int, attempts: dict, open_sums: dict) -> None:
    """A new input request: a sum starts, or (same name, same round) the server asks again."""
    for earlier in attempts.values():  # undelivered, and a key set-up since: the server re-keyed and asks again
        if (earlier.session, earlier.round, earlier.name, earlier.status) == (header.session, header.round, message.spec.name, "abandoned") \
                and earlier.epoch < epoch:
            earlier.status = "redone"
    attempt = SumAttempt(header.session, header.round, epoch, message.sum_index, message.spec.name, message, tuple(message.live))
    attempts[at(header)] = attempt
    open_sums[(header.session, header.round, message.sum_index)] = attempt


def _kind_of(cls: type, name: str) -> str:
    """How a report names a kind of message: its class, and its name where it has one."""
    return f"{cls.__name__}{' ' + name if name else ''}"


def _replay_client(path: Path, view: RunView, wire: _ServerWire | None = None) -> ClientRecord | None:
    """One client's transcript: what it received, and its audit records (plaintext inputs,
    uploads before the DP hook), keyed by the step of the request they answer; with ``wire``,
    every message it received or sent compared with the server's record of it (:func:`compare_wire`).
    Only small things are kept per message (its kind, a digest), never the message."""
    client: int | None = None
    received: Counter = Counter()
    audits: list[Any] = []
    places: dict[tuple[bytes, int, bool], list] = {}  # (session, step, sent by the server) -> [digest, stage, kind]
    for entry in read_transcript(path):
        if entry.direction == AUDIT:
            audits.append(entry.message())
            if client is None:
                client = entry.peer
            continue
        peeked = codec.peek(entry.data)  # the rest of the message is the server's, decoded in full there (and compared byte for byte)
        header, kind = peeked.header, _kind_of(peeked.cls, peeked.name)
        if entry.direction == SENT and header is not None and client is None:
            client = header.sender
        if entry.direction == RECEIVED:
            received[kind] += 1
        if wire is not None and header is not None and entry.direction in (SENT, RECEIVED):
            place = (header.session, header.step, entry.direction == RECEIVED)
            old = places.get(place)
            places[place] = [_chain(None if old is None else old[0], entry.data), header.stage, kind]
    if client is None:
        return None
    record = ClientRecord(client)
    record.received.update(received)
    for message in audits:
        if message.header.stage is Stage.UPLOAD:
            record.raw_uploads[at(message.header)] = (message.name, tensors_of(message.tensors))
        else:
            record.contributions[at(message.header)] = tensors_of(message.tensors)
    if wire is not None and client not in view.wire.clients:
        compare_wire(client, places, view, wire)
    return record


def _session_number(view: RunView, session: bytes) -> int:
    """How a report names a session: its place among the run's sessions; a proposal (the id a
    Welcome and its opening steps carry) by the session it opened; -1 for one the server's
    transcript does not show."""
    if session in view.sessions:
        return view.sessions.index(session)
    return next((i for i, opening in enumerate(view.openings) if opening.proposal == session), -1)


def compare_wire(client: int, places: dict[tuple[bytes, int, bool], list], view: RunView, wire: _ServerWire) -> None:
    """Every message ``client`` received or sent against the server's record of it at the same
    (session, step), byte for byte (as digests), into ``view.wire`` (threat_model.md R-TRANSCRIPT).

    A message fails when the two differ; when the client received one the server's transcript
    does not show; when the server's transcript shows one from the client, or to it while it
    went on receiving, that the client's does not; and when the client's answer is missing from
    the server's transcript although the server went on with that client. What a party stopped
    mid-step loses is counted as unconfirmed instead: the server's records of the step a client
    saw last in a session that ends without End (the server was killed while sending it), and a
    client's last answers of a session the server recorded nothing after."""
    check = view.wire
    check.clients.append(client)
    sessions = {s: i for i, s in enumerate(view.wire_sessions)}
    server = wire.messages.get(client, {})
    last_received: dict[int, int] = defaultdict(int)  # session index -> the last step this client received in it
    ended: set[int] = set()
    for (session, step, to_client), (_, stage, _) in places.items():
        index = sessions.get(session, -1)
        if to_client:
            last_received[index] = max(last_received[index], step)
            if stage is Stage.END:
                ended.add(index)
    for (session, step, to_client), (digest, stage, kind) in places.items():
        index = sessions.get(session, -1)
        found = server.pop(_key(index, step, to_client), None) if index >= 0 else None
        direction = "to the client" if to_client else "from the client"
        mismatch = Mismatch(client, _session_number(view, session), step, stage.value, direction, "", kind)
        if found is not None and found[:-1] == digest:
            check.compared += 1
        elif found is not None:
            check.add(dataclasses.replace(mismatch, what=f"the server's transcript shows a different message {direction}"))
        elif to_client and index >= 0 and index not in ended and step == last_received[index] >= wire.last_step.get(index, 0):
            check.tolerate(dataclasses.replace(mismatch, what="received in the step the server's transcript of this session ends in, "
                                                               "without End (a server stopped mid-step)"))
        elif not to_client and index >= 0 and wire.peer_last.get((client, index), 0) <= step:
            check.tolerate(dataclasses.replace(mismatch, what="answered, and the server's transcript shows nothing of this client after "
                                                               "(lost with a stopped server or stream)"))
        else:
            check.add(dataclasses.replace(mismatch, what=f"the client's transcript shows it {'received' if to_client else 'sent'}; "
                                                         "the server's transcript does not"))
    for key, value in server.items():  # what the server says it exchanged with this client, never matched
        index, step, sent = key >> 42, (key >> 1) & ((1 << 41) - 1), bool(key & 1)
        if sent and step >= last_received.get(index, 0):
            continue  # sent while the client had stopped reading: it never arrived
        stage = _STAGES[value[-1]].value
        what = ("the server's transcript shows it sent this while the client went on receiving; the client's transcript does not show it"
                if sent else "the server's transcript shows the client sent this; the client's transcript does not")
        check.add(Mismatch(client, _session_number(view, view.wire_sessions[index]), step, stage, "to the client" if sent else "from the client", what))
    wire.messages.pop(client, None)
