"""A client process: hosts one or many logical clients, each on its own mutually authenticated
stream to the server, each with its own identity key, secure-sum role, plan and data.

Per logical client: connect with its TLS certificate; send Hello; on Welcome, check the run's
configuration against this process's own security policy (ClientPolicy: the backends, the
streaming variant, the survivor floor, the least DP noise on uploaded activations; the
thresholds and graph are checked again at every key set-up) and every participant's
certificate against the CA, then build the client's host; answer each request in order until
the run ends or the stream does.

``crash_at`` (``--crash-at STAGE[@ROUND]``) is a fault-injection aid for tests: the process
kills itself with SIGKILL, with every client it hosts, on receiving the first request at that
crash point (protocol/crash_point.py), before answering it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import grpc
import torch

from secure_fedgraph import __version__
from secure_fedgraph.clients.ids import format_ids
from secure_fedgraph.crypto.pki import KeyDirectory, client_of, load_identity
from secure_fedgraph.errors import ConfigError, ProtocolError, SecureFedGraphError
from secure_fedgraph.papers import plan_class
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.engine import ClientContext, ClientHost
from secure_fedgraph.protocol.crash_point import CrashPoint
from secure_fedgraph.protocol.messages import Ack, Header, Hello, UploadResponse, Welcome, named
from secure_fedgraph.protocol.secure_sum.config import config_from_dict
from secure_fedgraph.protocol.secure_sum.factory import make_client
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from secure_fedgraph.protocol.transcript import AUDIT, RECEIVED, SENT, TranscriptWriter
from secure_fedgraph.protocol.transports.grpc import ClientStream, channel_options, describe_rpc_error
from secure_fedgraph.runs.resources import ensure_client_files, usage


class ConnectionFailed(Exception):
    """The server did not come up within the connect timeout."""


@dataclass(frozen=True)
class ClientOptions:
    """Options of ``secure-fedgraph client`` (see its --help)."""

    server: str
    ids: Sequence[int]
    keys: Path
    data_dir: Path | None = None
    policy: ClientPolicy = field(default_factory=ClientPolicy)  # this process's own security minimums (M-POLICY)
    transcript_dir: Path | None = None
    audit: bool = False
    server_name: str = "localhost"
    session_timeout_s: float = 24 * 3600.0
    connect_timeout_s: float = 60.0  # how long to wait for a server that is not listening yet
    max_message_bytes: int = 256 * 2**20
    parallel: int = 2  # hosted clients that may handle a request at the same time (bounds memory)
    crash_at: CrashPoint | None = None  # fault injection: SIGKILL this process on the first request at this point


@dataclass
class ClientOutcome:
    client: int
    finished: bool = False
    error: str = ""
    steps: int = 0


@dataclass
class _Shared:
    """What the logical clients of one process share: the CA and their outcomes."""

    ca: bytes
    working: threading.BoundedSemaphore
    outcomes: dict[int, ClientOutcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    verified: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)  # certificate -> (id, identity key)
    said_waiting: bool = False

    def waiting(self, say: Callable[[str], None], line: str) -> None:
        """Say once per process that the clients wait for the server (not once per client)."""
        with self.lock:
            if self.said_waiting:
                return
            self.said_waiting = True
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


def stop_reasons(outcomes: dict[int, ClientOutcome]) -> list[str]:
    """One line per distinct reason the hosted clients stopped early, naming who ("clients 0-68:
    UNAVAILABLE: ..."), so 69 clients refused the same way read as one line."""
    by_reason: dict[str, list[int]] = {}
    for outcome in outcomes.values():
        if not outcome.finished:
            by_reason.setdefault(outcome.error or "the stream ended before the run did", []).append(outcome.client)
    return [f"client{'s' if len(ids) > 1 else ''} {format_ids(ids)}: {reason}" for reason, ids in by_reason.items()]


def run_clients(options: ClientOptions, *, say: Callable[[str], None] = print) -> dict[int, ClientOutcome]:
    """Run every hosted logical client to the end of the run; returns each one's outcome."""
    keys = KeyDirectory(options.keys)
    keys.require(keys.ca, *(p for c in options.ids for p in (keys.client_cert(c), keys.client_key(c), keys.identity_key(c))))
    torch.set_num_threads(1)  # many logical clients per process; and the same numbers in every process
    if options.parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {options.parallel}")
    ensure_client_files(len(options.ids), transcripts=options.transcript_dir is not None)
    shared = _Shared(keys.ca.read_bytes(), threading.BoundedSemaphore(options.parallel))
    before = usage()
    threads = [threading.Thread(target=_run_one, args=(c, options, keys, shared, say), name=f"client-{c}") for c in options.ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = usage()
    say(f"clients {format_ids(options.ids)}: open files {before.open_files} before connecting, {after.open_files} after the run; "
        f"threads {before.threads}, {after.threads}; peak RSS {after.peak_rss_bytes / 2**20:.0f} MiB")
    return shared.outcomes


def _run_one(client: int, options: ClientOptions, keys: KeyDirectory, shared: _Shared, say) -> None:
    outcome = ClientOutcome(client)
    with shared.lock:
        shared.outcomes[client] = outcome
    transcript = TranscriptWriter(options.transcript_dir / f"client-{client}.bin") if options.transcript_dir else None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=shared.ca, private_key=keys.client_key(client).read_bytes(), certificate_chain=keys.client_cert(client).read_bytes()
    )
    opts = channel_options(options.max_message_bytes) + [("grpc.ssl_target_name_override", options.server_name)]
    host: ClientHost | None = None
    try:
        with grpc.secure_channel(options.server, credentials, options=opts) as channel:
            stream, requests = _connect(client, channel, options, shared, say)
            try:
                for data in requests:
                    if transcript is not None:
                        transcript.record(RECEIVED, -1, data, at=time.time())  # before the bytes are decoded and dropped
                    with shared.working:  # many hosted clients, a few at work: memory stays bounded
                        request = codec.decode(data)
                        del data
                        header = getattr(request, "header", None)
                        if options.crash_at is not None and header is not None and options.crash_at.hits(header):
                            _crash(client, header, options.crash_at, say)
                        if isinstance(request, Welcome):
                            host = _welcome(client, request, options, keys, shared, transcript)
                            response = Ack(Header(request.header.session, request.header.round, request.header.step, request.header.stage, client))
                        elif host is None:
                            raise ProtocolError(f"client {client}: a request arrived before the Welcome")
                        else:
                            response = host.handle(request)
                        reply = codec.encode(response)
                        del request, response
                    if transcript is not None:
                        transcript.record(SENT, -1, reply, at=time.time())
                    stream.send(reply)
                    outcome.steps += 1
                    if host is not None and host.ended:
                        outcome.finished = True  # keep reading: the server ends the stream once it has every Ack
            finally:
                stream.close()
    except grpc.RpcError as exc:
        outcome.error = describe_rpc_error(exc)
    except (SecureFedGraphError, ConnectionFailed) as exc:
        outcome.error = str(exc)
    finally:
        if transcript is not None:
            transcript.close()


def _crash(client: int, header: Any, point: CrashPoint, say: Callable[[str], None]) -> NoReturn:
    """``--crash-at``: die as a crash does, before answering: SIGKILL, so nothing is cleaned up
    and no stream says goodbye; every client this process hosts goes with it."""
    say(f"client {client}: crashing this process on purpose at {header.stage.value} in round {header.round} (--crash-at {point})")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("SIGKILL returned")  # unreachable: the process is gone


def _server_not_up(exc: grpc.RpcError) -> bool:
    """Whether a failed stream means nobody listens yet (worth waiting for), not a refusal: a
    TLS failure or an answer from the server is reported at once."""
    details = (exc.details() or "").lower() if hasattr(exc, "details") else ""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and not any(word in details for word in ("ssl", "handshake", "certificate", "tls"))


def _connect(client: int, channel: grpc.Channel, options: ClientOptions, shared: _Shared, say) -> tuple[ClientStream, Iterator[bytes]]:
    """Open this client's stream and send its Hello, retrying with backoff while the server is
    not up yet (up to ``connect_timeout_s``); returns the stream and its requests, the first
    one (the Welcome) already received."""
    deadline, pause = time.monotonic() + options.connect_timeout_s, 0.1
    while True:
        stream = ClientStream(channel, timeout_s=options.session_timeout_s)
        stream.send(codec.encode(Hello(client, __version__)))
        requests = iter(stream)
        try:
            first = next(requests)
        except StopIteration:
            return stream, iter(())
        except grpc.RpcError as exc:
            stream.close()
            if not _server_not_up(exc):
                raise
            if time.monotonic() + pause > deadline:
                raise ConnectionFailed(f"{describe_rpc_error(exc)} (waited {options.connect_timeout_s:g} s for the server; --connect-timeout)") from None
            shared.waiting(say, f"clients: waiting for the server at {options.server} (up to {options.connect_timeout_s:g} s, --connect-timeout)")
            time.sleep(pause)
            pause = min(2 * pause, 2.0)
            continue
        return stream, itertools.chain((first,), requests)


def _welcome(client: int, welcome: Welcome, options: ClientOptions, keys: KeyDirectory, shared: _Shared, transcript) -> ClientHost:
    """Check the run against this process's policy and the CA; build the logical client."""
    config = json.loads(welcome.config_json)
    secure = config_from_dict(config["secure_sum"])
    plan = plan_class(config["plan"]["plan"]).from_config_json(json.dumps(config["plan"]))
    try:
        options.policy.check_run(secure, n_run=len(welcome.participants), uploads_activations=plan.uploads_activations, dp_sigma=plan.dp_sigma)
    except ProtocolError as exc:
        raise ConfigError(f"client {client}: {exc}") from None
    if len(welcome.participants) != len(welcome.certificates) or client not in welcome.participants:
        raise ProtocolError(f"client {client}: the Welcome's participants and certificates do not match")
    directory = {}
    for listed, pem in zip(welcome.participants, welcome.certificates, strict=True):
        cert_client, identity = shared.check_certificate(pem)  # the CA vouches for every identity key
        if cert_client != listed:
            raise ProtocolError(f"client {client}: the certificate listed for client {listed} is client {cert_client}'s")
        directory[listed] = identity
    identity = load_identity(keys.identity_key(client))
    role = make_client(secure, client_id=client, session=welcome.header.session, identity=identity, directory=directory, policy=options.policy)
    data = plan.load_client_data(client, options.data_dir)
    host = ClientHost(role=role, plan=plan.client, context=ClientContext(client, plan.seed, data))
    if options.audit and transcript is not None:
        def record(header: Header, name: str, tensors) -> None:  # this client's own input, on its own disk
            transcript.record(AUDIT, client, codec.encode(UploadResponse(header, name, named(tensors))), at=time.time())

        host.on_contribute = record
    return host
