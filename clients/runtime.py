"""A client process: hosts one or many logical clients, each with its own identity key,
secure-sum role, plan and data, over one mutually authenticated stream per certificate: one
stream for all of them when the keys folder holds a host certificate for exactly these ids
(``hosts/host-<ids>.pem``, ``keys init --hosts`` / ``keys host``), else one per client under its
own certificate. Every stream carries batches of frames, each naming its client
(protocol/transports/batch.py); a dispatcher hands each client its request, at most
``--parallel`` at a time, and sends their answers back as one batch.

Per logical client: on Welcome, check the run's configuration against this process's own
security policy (ClientPolicy: the backends, the streaming variant, the survivor floor, the
least DP noise on uploaded activations; the thresholds and graph are checked again at every key
set-up) and every participant's certificate against the CA (once per process: every client of
a host receives the same Welcome, sent once), then build the client's host; answer each request
in order until the run ends, the client is dropped (the server says why), or the stream ends.
A client whose handling fails leaves the run (its host says so at once) and the others go on.

A stream the server cannot take yet (nobody listens: UNAVAILABLE; or it runs as many streams as it
allows at once: RESOURCE_EXHAUSTED) is tried again with backoff for up to ``connect_timeout_s``.
A mistake in the TLS set-up is not waited for: a server certificate that does not carry
``server_name`` or is not from the CA in the keys folder, or a certificate of this process that
the server does not accept (gRPC calls that "Socket closed", as it does a server going away). The
process stops at once, exit 2, with one line saying what to fix (tls_mistakes.TlsMistake).
When the server goes away mid-run, or the network to it does (its process died or was stopped,
or this host's link is down: not a refusal or a drop, which the server says with another
status), every client still in the run reconnects with backoff for up to
``reconnect_timeout_s`` (said once per process, and every STILL_WAITING_S while it waits). A resumed
server's Welcome is checked like the first (the whole policy again), and must announce the same
run, among clients the run started with, under the same identity keys, at a round whose state
the client kept (protocol/engine/resume.py); the client then starts a new session with new secure-sum
keys (threat_model.md R-RESUME).

``crash_at`` (``--crash-at STAGE[@ROUND][:N]``) is a fault-injection aid for tests: the process
kills itself with SIGKILL, with every client it hosts, on receiving the request at that crash
point (protocol/core/crash_point.py), before answering it.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import torch

from secure_fedgraph import __version__
from secure_fedgraph.clients.dataset_choice import own_dataset
from secure_fedgraph.clients.ids import format_ids
from secure_fedgraph.crypto.pki import VALIDITY_DAYS, KeyDirectory, client_of, load_identity
from secure_fedgraph.errors import ConfigError, ProtocolError, SecureFedGraphError
from secure_fedgraph.papers import is_resumable, plan_class
from secure_fedgraph.protocol.engine.contexts import ClientHost
from secure_fedgraph.protocol.core.messages import SessionRequest, Welcome
from secure_fedgraph.protocol.core.crash_point import CrashPoint, crash_by_sigkill
from secure_fedgraph.protocol.engine.resume import RunMemory
from secure_fedgraph.protocol.core.session import ClientOpening, welcome_digest
from secure_fedgraph.protocol.sum_backends.config import config_from_dict
from secure_fedgraph.protocol.sum_backends.factory import make_client
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.protocol.sum_backends.roles import IdentityDirectory
from secure_fedgraph.protocol.transports.transcript import TranscriptWriter
from secure_fedgraph.protocol.transports.batch import Frame
from secure_fedgraph.protocol.transports.grpc_client import (STILL_WAITING_S, ClientConnection, ConnectionFailed, Waiting, connect,
                                                              last_reason, secure_channel, server_not_up)
from secure_fedgraph.protocol.transports.grpc_service import describe_rpc_error
from secure_fedgraph.protocol.transports.tls_mistakes import TlsMistake, tls_mistake
from secure_fedgraph.resources import ensure_client_files, usage


@dataclass(frozen=True)
class ClientOptions:
    """Options of ``secure-fedgraph client`` (see its --help)."""

    server: str
    ids: Sequence[int]
    keys: Path
    data_dir: Path | None = None
    dataset: str | None = None  # the folder read where the server's plan names one (never the server's path)
    policy: ClientPolicy = field(default_factory=ClientPolicy)  # this process's own security minimums (M-POLICY)
    transcript_dir: Path | None = None
    audit: bool = False
    server_name: str = "localhost"
    session_timeout_s: float = 24 * 3600.0
    connect_timeout_s: float = 60.0  # how long to wait for a server that is not listening yet
    reconnect_timeout_s: float = 60.0  # how long to wait for a server that went away mid-run to come back (0: not at all)
    max_message_bytes: int = 256 * 2**20
    parallel: int = 2  # hosted clients that may handle a request at the same time (bounds memory)
    crash_at: CrashPoint | None = None  # fault injection: SIGKILL this process on the request at this point
    reproducible_dp_noise: bool = False  # DP noise from the run seed (tests: compare with an in-process run); the server could remove it


@dataclass
class ClientOutcome:
    client: int
    finished: bool = False
    error: str = ""
    steps: int = 0


@dataclass(frozen=True)
class _Announced:
    """What one Welcome announces, read once per process (every client of a host receives the same)."""

    config: dict[str, Any]  # the run, without "resume"
    resume: dict[str, Any] | None
    secure: Any  # SecureSumConfig
    plan: Any  # the plan object, shared by this process's clients (as one process shares it in-process)
    directory: Mapping[int, bytes]  # participant -> identity key, each certificate checked against the CA
    digest: bytes  # of what the Welcome announces, which the session id covers (protocol/core/session.py)


@dataclass
class _Shared:
    """What the logical clients of one process share: the CA, the workers that handle requests,
    their outcomes, and what each Welcome announced."""

    ca: bytes
    pool: ThreadPoolExecutor | None = None  # --parallel workers: many hosted clients, a few at work, so memory stays bounded
    dataset: str | None = None  # --dataset: the folder these clients read where the server names one (dataset_choice.py)
    outcomes: dict[int, ClientOutcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    verified: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)  # certificate -> (id, identity key)
    announced: dict[Welcome, _Announced | Exception] = field(default_factory=dict)
    said: set[object] = field(default_factory=set)
    mistake: ConfigError | None = None  # an option or a file to fix, not a run to wait for (tls_mistakes.py): the process stops with it, exit 2

    def once(self, key: object, say: Callable[[str], None], line: str) -> None:
        """Say ``line`` once per process for ``key`` (waiting for the server; the server gone, or
        back, in some session), not once per hosted client."""
        with self.lock:
            if key in self.said:
                return
            self.said.add(key)
        say(line)

    def check_certificate(self, pem: bytes) -> tuple[int, bytes]:
        """Verify a certificate against the CA once per process (every hosted client needs them all)."""
        with self.lock:
            found = self.verified.get(pem)
        if found is None:
            found = client_of(pem, self.ca)
            with self.lock:
                self.verified[pem] = found
        return found

    def announced_by(self, welcome: Welcome) -> _Announced:
        """The run ``welcome`` announces, its plan and its participants' identity keys, each
        certificate checked against the CA (R-PKI): once per process for a Welcome its clients
        share. Raises what reading it raised, for every client that asks."""
        with self.lock:
            found = self.announced.get(welcome)
        if found is None:
            try:
                found = self._read(welcome)
            except (SecureFedGraphError, ValueError, KeyError, TypeError) as exc:
                found = exc if isinstance(exc, SecureFedGraphError) else ProtocolError(f"the Welcome's configuration is malformed ({exc})")
            with self.lock:
                self.announced[welcome] = found
        if isinstance(found, Exception):
            raise found
        return found

    def _read(self, welcome: Welcome) -> _Announced:
        config = json.loads(welcome.config_json)
        resume = config.pop("resume", None)
        secure = config_from_dict(config["secure_sum"])
        config["plan"] = own_dataset(config["plan"], self.dataset)  # before the plan's checks read any data
        plan = plan_class(config["plan"]["plan"]).from_config_json(json.dumps(config["plan"]))
        if len(welcome.participants) != len(welcome.certificates):
            raise ProtocolError("the Welcome's participants and certificates do not match")
        directory = {}
        for listed, pem in zip(welcome.participants, welcome.certificates, strict=True):
            cert_client, identity = self.check_certificate(pem)  # the CA vouches for every identity key
            if cert_client != listed:
                raise ProtocolError(f"the certificate listed for client {listed} is client {cert_client}'s")
            directory[listed] = identity
        return _Announced(config, resume, secure, plan, IdentityDirectory(directory), welcome_digest(welcome))


def stop_reasons(outcomes: dict[int, ClientOutcome]) -> list[str]:
    """One line per distinct reason the hosted clients stopped early, naming who ("clients 0-68:
    UNAVAILABLE: ..."), so 69 clients refused the same way read as one line."""
    by_reason: dict[str, list[int]] = {}
    for outcome in outcomes.values():
        if not outcome.finished:
            by_reason.setdefault(outcome.error or "the stream ended before the run did", []).append(outcome.client)
    return [f"client{'s' if len(ids) > 1 else ''} {format_ids(ids)}: {reason}" for reason, ids in by_reason.items()]


@dataclass(frozen=True)
class _Link:
    """One stream's certificate, its key, and the clients it speaks for."""

    cert: Path
    key: Path
    clients: tuple[int, ...]


def links_of(keys: KeyDirectory, ids: Sequence[int]) -> list[_Link]:
    """The streams of a process hosting ``ids``: one under the host certificate for exactly these
    ids when the keys folder holds one, else one per client under its own certificate."""
    label = format_ids(ids)
    if keys.host_cert(label).is_file():
        return [_Link(keys.host_cert(label), keys.host_key(label), tuple(ids))]
    return [_Link(keys.client_cert(c), keys.client_key(c), (c,)) for c in ids]


def run_clients(options: ClientOptions, *, say: Callable[[str], None] = print) -> dict[int, ClientOutcome]:
    """Run every hosted logical client to the end of the run; returns each one's outcome."""
    keys = KeyDirectory(options.keys)
    links = links_of(keys, options.ids)
    keys.require(keys.ca, *(p for link in links for p in (link.cert, link.key)), *(keys.identity_key(c) for c in options.ids))
    torch.set_num_threads(1)  # many logical clients per process; and the same numbers in every process
    if options.parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {options.parallel}")
    ensure_client_files(len(links), clients=len(options.ids), transcripts=len(options.ids) if options.transcript_dir is not None else 0)
    before = usage()
    with ThreadPoolExecutor(max_workers=options.parallel, thread_name_prefix="handle") as pool:
        shared = _Shared(keys.ca.read_bytes(), pool, options.dataset)
        hosts = [_HostLink(link, options, keys, shared, say) for link in links]
        threads = [threading.Thread(target=host.run, name=f"stream-{link.clients[0]}") for host, link in zip(hosts, links, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if shared.mistake is not None:
        raise shared.mistake
    after = usage()
    streams = "one stream (host certificate)" if len(links) == 1 and len(options.ids) > 1 else f"{len(links)} stream{'s' * (len(links) > 1)}"
    say(f"clients {format_ids(options.ids)}: {streams}; open files {before.open_files} before connecting, {after.open_files} after the run; "
        f"threads {before.threads}, {after.threads}; peak RSS {after.peak_rss_bytes / 2**20:.0f} MiB")
    return shared.outcomes


class _HostLink:
    """One stream and the logical clients it speaks for, across the sessions of their run: it
    reads the server's batches, has each client answer its own frame (on the shared workers),
    and sends the answers back as one batch."""

    def __init__(self, link: _Link, options: ClientOptions, keys: KeyDirectory, shared: _Shared, say) -> None:
        self.link, self.options, self.shared, self.say = link, options, shared, say
        self.ca_file = keys.ca
        self.clients: dict[int, _LogicalClient] = {}
        for client in link.clients:
            outcome = ClientOutcome(client)
            with shared.lock:
                shared.outcomes[client] = outcome
            transcript = TranscriptWriter(options.transcript_dir / f"client-{client}.bin") if options.transcript_dir else None
            self.clients[client] = _LogicalClient(client, options, keys, shared, say, outcome, transcript)

    def run(self) -> None:
        try:
            self._run()
        except TlsMistake as exc:  # an option or a file to fix: the process stops with its line (exit 2), once
            with self.shared.lock:
                self.shared.mistake = self.shared.mistake or exc
            self._stop_all(str(exc))
        except grpc.RpcError as exc:
            self._stop_all(describe_rpc_error(exc))
        except (SecureFedGraphError, ConnectionFailed) as exc:
            self._stop_all(str(exc))
        finally:
            for client in self.clients.values():
                if client.transcript is not None:
                    client.transcript.close()

    def _tls_mistake(self, exc: grpc.RpcError) -> str | None:
        """The line this stream stops with when its failure comes of the TLS set-up (tls_mistakes.py):
        a server certificate without ``--server-name`` or not from the CA in the keys folder, or a
        certificate of this stream's that the server does not accept."""
        return tls_mistake(exc, self.options.server, self.options.server_name, ca=self.shared.ca, cert=self.link.cert,
                           key=self.link.key, ca_file=self.ca_file, validity_days=VALIDITY_DAYS)

    def _stop_all(self, error: str) -> None:
        for client in self.clients.values():
            if not client.outcome.finished and not client.outcome.error:
                client.outcome.error = error

    def _run(self) -> None:
        options, link, shared = self.options, self.link, self.shared
        ids = format_ids(options.ids)
        announce = partial(shared.once, ("connect",), self.say, f"clients: waiting for the server at {options.server} "
                           f"(up to {options.connect_timeout_s:g} s, --connect-timeout)")
        waiting = Waiting(options.connect_timeout_s, "--connect-timeout", "waited {s:g} s for the server", announce,
                          self._still("connect", f"clients {ids}: still no server at {options.server}", options.connect_timeout_s,
                                      "--connect-timeout"), mistake=self._tls_mistake)
        transcripts = {c: client.transcript for c, client in self.clients.items() if client.transcript is not None}
        taking_part = list(self.clients.values())
        lost = ""  # how the last stream ended, while reconnecting
        with secure_channel(options.server, ca=shared.ca, cert=link.cert.read_bytes(), key=link.key.read_bytes(),
                            server_name=options.server_name, max_message_bytes=options.max_message_bytes) as channel:
            while True:
                try:
                    connection = connect(channel, [c.client for c in taking_part], version=__version__, waiting=waiting,
                                         timeout_s=options.session_timeout_s, max_message_bytes=options.max_message_bytes, transcripts=transcripts)
                except grpc.RpcError as exc:
                    if lost:  # back, but the server will not have them (it went on without them)
                        raise ConnectionFailed(f"{lost}; reconnected, the server refused them ({describe_rpc_error(exc)})") from None
                    raise
                for client in taking_part:
                    client.begin_session()
                try:
                    self._serve(connection)
                    taking_part = [c for c in taking_part if c.may_resume]  # the server ended the stream: only a resumed run goes on
                    if not taking_part:
                        return
                except grpc.RpcError as exc:
                    taking_part = reconnecting(exc, taking_part)
                    if not taking_part:  # refused or dropped: the server said why
                        raise
                    lost = f"the stream ended with {describe_rpc_error(exc)}"
                finally:
                    connection.close()
                for client in taking_part:
                    client.host = None  # its session's keys go with it
                seconds = options.reconnect_timeout_s
                sessions = max(c.sessions for c in taking_part)
                announce = partial(shared.once, ("away", sessions), self.say, f"clients {ids}: the server went away; "
                                   f"reconnecting for up to {seconds:g} s (--reconnect-timeout); {lost}")
                waiting = Waiting(seconds, "--reconnect-timeout", "the server went away and did not come back within {s:g} s", announce,
                                  self._still(("away", sessions), f"clients {ids}: still reconnecting to {options.server}", seconds,
                                              "--reconnect-timeout"), mistake=self._tls_mistake)

    def _still(self, key: object, line: str, seconds: float, option: str) -> Callable[[float, str], None]:
        """What a :class:`Waiting` says every STILL_WAITING_S while it waits: how long so far, of
        how long, and the last failure (once per process, whatever its streams)."""

        def still(waited: float, why: str) -> None:
            self.shared.once((key, "still", round(waited / STILL_WAITING_S)), self.say,
                             f"{line} after {waited:.0f} s of up to {seconds:g} s ({option}): {last_reason(why)}")

        return still

    def _serve(self, connection: ClientConnection) -> None:
        """Answer the stream's batches until it ends, or none of its clients is left in the run."""
        for batch in connection.incoming(lambda client: self.clients[client].taking_part):
            work = []
            for item in batch:
                client = self.clients[item.client]
                if item.left:
                    client.leave(f"dropped from the run: {item.left}")
                else:
                    work.append((client, item.request))
            del batch
            answers = [a for a in self.shared.pool.map(lambda w: w[0].answer(connection, w[1]), work) if a is not None]
            del work
            connection.send(answers)
            if all(c.left for c in self.clients.values()):
                return  # nobody here is in the run any more (a finished client keeps reading: the server ends the stream)


def reconnecting(exc: grpc.RpcError, clients: Sequence[_LogicalClient]) -> list[_LogicalClient]:
    """Who waits for the server after a stream failed with ``exc``: every client still taking
    part, when the failure is one of a server or a network gone for now (server_not_up: nobody
    listens, no route to host, a network unreachable, a connection reset or timed out), so a
    host whose link went down retries for ``--reconnect-timeout`` rather than stopping at once;
    nobody after a refusal or a drop, which the server said (or with ``--reconnect-timeout 0``).
    What a reconnected client finds is checked as ever: a resumed run is rejoined by the clients
    holding its state, a run that went on without them refuses them, and a new run is refused
    by every client holding a part of the old one."""
    if not server_not_up(exc):
        return []
    return [c for c in clients if c.taking_part and c.options.reconnect_timeout_s > 0]


class _LogicalClient:
    """One hosted client across the sessions of its run: its host in the current session, and its
    memory of the run (protocol/engine/resume.py), which outlives a server restart."""

    def __init__(self, client: int, options: ClientOptions, keys: KeyDirectory, shared: _Shared, say, outcome: ClientOutcome,
                 transcript: TranscriptWriter | None) -> None:
        self.client, self.options, self.keys, self.shared, self.say = client, options, keys, shared, say
        self.outcome, self.transcript = outcome, transcript
        self.memory: RunMemory | None = None
        self.host: ClientHost | None = None
        self.sessions = 0  # Welcomes taken
        self.crash_hits = 0  # requests at options.crash_at's stage and round so far
        self.first = True  # the next request is this session's first (the Welcome)
        self.left = False  # out of the run: refused it, failed, or dropped by the server

    @property
    def taking_part(self) -> bool:
        """Whether this client still answers on its stream (a finished client keeps reading: the
        server ends the stream once it has every Ack)."""
        return not self.left and not self.outcome.finished

    @property
    def may_resume(self) -> bool:
        """Whether waiting for a restarted server makes sense: the run is under way, this client
        kept its plan's state at some round boundary, and the option allows it."""
        return (self.taking_part and self.memory is not None and bool(self.memory.rounds)
                and self.options.reconnect_timeout_s > 0)

    def begin_session(self) -> None:
        self.first, self.opening = True, None

    def leave(self, error: str) -> None:
        self.left = True
        if not self.outcome.error:
            self.outcome.error = error

    def answer(self, connection: ClientConnection, request: Any) -> Frame | None:
        """This client's answer to one request (or to why it could not be decoded) as a frame;
        a frame saying it left if handling it failed (the others go on); None if it already left."""
        if self.left:
            return None
        try:
            return connection.answer(self.client, self._answer(request))
        except SecureFedGraphError as exc:
            self.leave(str(exc))
        except Exception as exc:  # noqa: BLE001 one client's failure (a bug included: named with its type) must not stop the others
            self.leave(f"{type(exc).__name__}: {exc}")
        return connection.left(self.client)

    def _answer(self, request: Any) -> Any:
        if isinstance(request, Exception):
            raise request
        self._maybe_crash(getattr(request, "header", None))
        if self.first and isinstance(request, Welcome):
            resumed = self.memory is not None
            self.opening, self.build, self.memory = _welcome(self.client, request, self.options, self.keys, self.shared, self.transcript,
                                                             self.memory)
            self.sessions += 1
            if resumed:
                self.shared.once(("resumed", self.sessions), self.say, f"clients {format_ids(self.options.ids)}: the server "
                                                                      f"resumed the run at round {self.shared.announced_by(request).resume['round']}")
            response = self.opening.joined(request)
        elif self.opening is not None and isinstance(request, SessionRequest):
            self.host = self.build(self.opening.agree(request))  # the session id holds this client's fresh nonce
            response, self.opening = self.opening.ack(request), None
        elif self.first or self.host is None or isinstance(request, Welcome | SessionRequest):
            where = "before the Welcome" if self.first else ("before its session was opened" if self.host is None else
                                                              "on a stream that had its Welcome (a new session needs a new stream)")
            raise ProtocolError(f"client {self.client}: a {type(request).__name__} arrived {where}")
        else:
            response = self.host.handle(request)
            self.memory.server_at(request.header.round)
        self.first = False
        self.outcome.steps += 1
        if self.host is not None and self.host.ended:
            self.outcome.finished = True  # keep reading: the server ends the stream once it has every Ack
        return response

    def _maybe_crash(self, header: Any) -> None:
        """``--crash-at``: die as a crash does, before answering: SIGKILL, so nothing is cleaned
        up and no stream says goodbye; every client this process hosts goes with it."""
        point = self.options.crash_at
        if point is None or header is None or not point.hits(header):
            return
        self.crash_hits += 1
        if self.crash_hits == point.nth:
            self.say(f"client {self.client}: crashing this process on purpose at {header.stage.value} in round {header.round} "
                     f"(--crash-at {point})")
            sys.stdout.flush()
            crash_by_sigkill()


def _welcome(client: int, welcome: Welcome, options: ClientOptions, keys: KeyDirectory, shared: _Shared, transcript,
             memory: RunMemory | None = None) -> tuple[ClientOpening, Callable[[bytes], ClientHost], RunMemory]:
    """Check the run against this process's policy and the CA (a resumed run also against
    ``memory``, what this client kept of it), before anything is sent. Returns this client's
    side of opening the session, what builds its host once the session id is agreed, and its
    memory of the run (new for a new run)."""
    try:
        announced = shared.announced_by(welcome)
    except ProtocolError as exc:
        raise ProtocolError(f"client {client}: {exc}") from None
    plan, resume = announced.plan, announced.resume
    n_run = len(welcome.participants) if memory is None else len(memory.directory)  # floors count the clients the run started with
    try:
        options.policy.check_run(announced.secure, n_run=n_run, uploads_activations=plan.uploads_activations, dp_sigma=plan.dp_sigma,
                                 ddp_noise=plan.ddp_noise, ddp_clip=plan.ddp_clip, dpsgd_sigma=plan.dpsgd_sigma,
                                 seeded_randomness=plan.seeded_randomness)
    except ProtocolError as exc:
        raise ConfigError(f"client {client}: {exc}") from None
    if client not in announced.directory:
        raise ProtocolError(f"client {client}: the Welcome's participants and certificates do not match")
    if memory is None:
        if resume is not None:
            raise ConfigError(f"client {client}: the server resumes a run at round {resume.get('round')} that this client process holds "
                              "nothing of (it did not take part, or it restarted); only the processes that took part rejoin it")
        memory = RunMemory(client_id=client, run=announced.config, directory=announced.directory, data=plan.load_client_data(client, options.data_dir),
                           resumable=is_resumable(plan.name), reproducible_noise=options.reproducible_dp_noise)
        directory, resume_round = announced.directory, None
    else:
        if resume is None:
            raise ProtocolError(f"client {client}: the server started a new run, but this client is in a run the server left mid-way; "
                                "only `server --resume` continues it (start new client processes for a new run)")
        directory, resume_round = memory.resumed_directory(announced.config, announced.directory), int(resume["round"])
    context = memory.context(seed=plan.seed, resume_round=resume_round)  # checks now that this client holds that round's state
    build = partial(_host, client=client, announced=announced, directory=directory, memory=memory, context=context, options=options,
                    keys=keys, transcript=transcript, resume_round=resume_round)
    return ClientOpening(client, welcome, digest=announced.digest), build, memory


def _host(session: bytes, *, client: int, announced: _Announced, directory, memory: RunMemory, context, options: ClientOptions,
          keys: KeyDirectory, transcript, resume_round: int | None) -> ClientHost:
    """The logical client's host for the session ``session`` (agreed when it opened)."""
    identity = load_identity(keys.identity_key(client))
    role = make_client(announced.secure, client_id=client, session=session, identity=identity, directory=directory,
                       policy=options.policy, signed=memory.signed, key_epochs=memory.key_epochs)
    host = ClientHost(role=role, plan=announced.plan.client, context=context)
    if options.audit and transcript is not None:
        host.on_contribute = partial(transcript.contributed, client)  # this client's own input, on its own disk
    return host
