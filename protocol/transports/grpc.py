"""The gRPC transport: each logical client holds one mutually authenticated bidirectional
stream (service ``FederatedSession.Session`` in proto/secure_fedgraph/wire/envelope.proto); the
server pushes each step's requests down the streams and waits, up to a deadline, for one
answer per client.

Streams carry Envelope bytes untouched by gRPC, so our codec (not gRPC's deserializer) decides
what is malformed and says why. A client is identified by its TLS certificate (SAN URI
``urn:secure-fedgraph:client:<id>``); its Hello must name the same id. A client that is silent
past the deadline, disconnects, or sends a message over the size limit is out of the step;
nothing a client sends can stop the server.

Bounds (threat_model.md R-STREAMS, R-FLOOD): a certificate whose client is not in the run is
refused before anything it sends is read, and so is every stream once the run has started;
each certificate identity holds at most one stream; a stream must send its Hello within
``hello_timeout_s``; each connection's inbox holds at most ``queue_depth`` messages, and its
reader stops pulling from gRPC while the inbox is full, so HTTP/2 flow control holds the
sender back. A connection therefore holds at most ``queue_depth + 2`` messages of at most
``max_message_bytes`` in this process (the inbox, the one its reader waits to queue, the one
gRPC is receiving), whatever it sends; the server runtime bounds the streams at n + 8.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import grpc

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.messages import Hello
from secure_fedgraph.protocol.steps import Step, StepOutcome
from secure_fedgraph.protocol.transcript import RECEIVED, SENT, TranscriptWriter
from secure_fedgraph.protocol.transports.common import Traffic

SERVICE = "secure_fedgraph.wire.FederatedSession"
METHOD = f"/{SERVICE}/Session"
URI_PREFIX = "urn:secure-fedgraph:client:"
_CLOSE = object()


KEEPALIVE_MS = 30_000  # both sides ping an idle connection this often


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
    ]


def server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """The channel options plus a ping allowance the clients' keepalive stays within: gRPC's
    server default accepts a ping without data every 5 minutes at most and answers more with
    GOAWAY ``too_many_pings``, which cut clients that had joined and were waiting."""
    return [*channel_options(max_message_bytes), ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2)]


def stream_identity(certified: int, hello) -> int | None:
    """Whom a stream speaks for: the client its TLS certificate names, and only if its Hello
    claims the same (threat_model.md R-MTLS); None refuses the stream. One client cannot join
    as another."""
    return certified if isinstance(hello, Hello) and hello.client == certified else None


def peer_client_id(context: grpc.ServicerContext) -> int | None:
    """The client id in the peer's verified TLS certificate (None without one)."""
    auth = context.auth_context()
    for uri in auth.get("x509_subject_alternative_name", []):
        text = uri.decode(errors="replace")
        if text.startswith(URI_PREFIX) and text[len(URI_PREFIX) :].isdigit():
            return int(text[len(URI_PREFIX) :])
    return None


@dataclass
class Connection:
    client: int
    outbound: queue.Queue
    inbox: Inbox  # bounded: what the client sent, not yet read by a step
    alive: bool = True
    reason: str = ""

    def close(self, reason: str) -> None:
        if self.alive:
            self.alive, self.reason = False, reason
            self.outbound.put(_CLOSE)


class Inbox:
    """One connection's inbound messages, bounded (threat_model.md R-FLOOD): ``put`` blocks
    while ``depth`` messages wait, so the connection's reader stops pulling from gRPC and HTTP/2
    flow control holds the sender back. Counts the bytes it holds and their peak."""

    def __init__(self, depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._lock = threading.Lock()
        self.held_bytes = 0
        self.peak_bytes = 0

    def put(self, item: bytes | str, timeout: float | None = None) -> None:
        self._queue.put(item, timeout=timeout)
        if isinstance(item, bytes):
            with self._lock:
                self.held_bytes += len(item)
                self.peak_bytes = max(self.peak_bytes, self.held_bytes)

    def get_nowait(self) -> bytes | str:
        item = self._queue.get_nowait()
        if isinstance(item, bytes):
            with self._lock:
                self.held_bytes -= len(item)
        return item


class GrpcServerTransport:
    """Server side: the streams of the joined clients, and step execution over them."""

    def __init__(
        self,
        expected: Collection[int],
        *,
        step_timeout_s: float = 120.0,
        max_message_bytes: int = 256 * 2**20,
        hello_timeout_s: float = 10.0,
        queue_depth: int = 1,
        transcript: TranscriptWriter | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        if queue_depth < 1:
            raise ConfigError(f"queue_depth must be at least 1, got {queue_depth}")
        self.expected = set(expected)
        self.max_message_bytes = max_message_bytes
        self.step_timeout_s = step_timeout_s
        self.hello_timeout_s = hello_timeout_s
        self.queue_depth = queue_depth
        self.transcript = transcript
        self.log = log
        self.connections: dict[int, Connection] = {}
        self.streams: set[int] = set()  # certificate identities holding a stream now (one each)
        self.joining = True  # False once the run has started: later streams are refused
        # (client, its inbox) once per message queued: never longer than the inboxes together
        self.ready: queue.Queue = queue.Queue()
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._joined = threading.Condition(self._lock)

    # --- the stream handler (one per logical client) ------------------------------------
    def session(self, request_iterator: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        certified = peer_client_id(context)
        if certified is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no secure_fedgraph client certificate on this connection")
        if certified not in self.expected:  # before reading anything it sends
            self.log(f"refused client {certified}: not part of this run")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"client {certified} is not part of this run")
        if not self.joining:
            self.log(f"refused client {certified}: the run had started")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"the run started without client {certified}")
        if not self._claim(certified):
            self.log(f"refused a second stream for the certificate of client {certified}")
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"client {certified} already holds a stream to this server")
        try:
            yield from self._serve(certified, request_iterator, context)
        finally:
            with self._lock:
                self.streams.discard(certified)

    def _claim(self, certified: int) -> bool:
        """Take the one stream a certificate identity may hold (threat_model.md R-STREAMS);
        False if it holds one, or joined the run already."""
        with self._lock:
            if certified in self.streams or certified in self.connections:
                return False
            self.streams.add(certified)
            return True

    def _inbox(self) -> Inbox:
        return Inbox(self.queue_depth)

    def _await_hello(self, hello_box: queue.Queue) -> bytes | str | None:
        """The stream's first message (or why it ended), or None past ``hello_timeout_s``
        (threat_model.md R-STREAMS): a silent stream does not hold a server thread for long."""
        try:
            return hello_box.get(timeout=self.hello_timeout_s)
        except queue.Empty:
            return None

    def _serve(self, certified: int, request_iterator: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        inbox = self._inbox()
        hello_box: queue.Queue = queue.Queue(maxsize=1)
        threading.Thread(target=self._read, args=(certified, request_iterator, inbox, hello_box), daemon=True, name=f"read-{certified}").start()
        first = self._await_hello(hello_box)
        if first is None:
            self.log(f"refused client {certified}: no Hello within {self.hello_timeout_s:g} s")
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"no Hello within {self.hello_timeout_s:g} s (the server's --hello-timeout)")
        try:
            hello = codec.decode(first) if isinstance(first, bytes) else None
        except Exception:  # noqa: BLE001 a stream's first message may be anything at all (R-CRASH)
            hello = None
        if not isinstance(hello, Hello):
            reason = first if isinstance(first, str) else f"the first message must be a Hello, got {type(hello).__name__ if hello else 'a malformed message'}"
            self.log(f"refused client {certified}: {reason}")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
        client = stream_identity(certified, hello)
        if client is None:
            self.log(f"refused a connection: certificate of client {certified}, Hello claims {hello.client}")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"this certificate is for client {certified}, but the Hello claims {hello.client}")
        with self._lock:
            if not self.joining:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"the run started without client {certified}")
            connection = Connection(client, queue.Queue(), inbox)
            self.connections[client] = connection
            self._joined.notify_all()
        while True:
            item = connection.outbound.get()
            if item is _CLOSE:
                if connection.reason and connection.reason != "done":
                    context.abort(grpc.StatusCode.CANCELLED, f"dropped from the run: {connection.reason}")
                return
            yield item

    def _read(self, client: int, request_iterator: Iterator[bytes], inbox: Inbox, hello_box: queue.Queue) -> None:
        """Move the client's messages into its inbox: the first to ``hello_box``, the rest
        blocking while the inbox is full, so gRPC stops reading from the socket."""
        cancelled = (f"the stream was cancelled: the client went away, or sent a message over the "
                     f"{self.max_message_bytes} byte limit (--max-message-mb)")
        first = True
        try:
            for data in request_iterator:
                if first:
                    hello_box.put(data)
                    first = False
                    continue
                inbox.put(data)  # blocks while full: flow control, not memory, absorbs a flood
                self.ready.put((client, inbox))
            # gRPC ends the iterator instead of raising when it refused an oversized message before
            # this reader asked for it (the client heard RESOURCE_EXHAUSTED and closed): the two
            # cannot be told apart here, so the reason names both
            reason = (f"the client closed its stream (it left, or gRPC refused a message over the {self.max_message_bytes} "
                      f"byte limit, --max-message-mb)")
        except grpc.RpcError:
            # gRPC does not tell the handler which limit; the client gets RESOURCE_EXHAUSTED with the sizes.
            reason = cancelled
        except Exception as exc:  # noqa: BLE001 the stream must never take the server down
            reason = f"stream failed ({type(exc).__name__}: {exc})"
        if first:
            hello_box.put(reason)
            return
        try:  # a stream refused after its Hello may leave a full inbox nobody reads: do not wait forever
            inbox.put(reason, timeout=self.step_timeout_s)
        except queue.Full:
            return
        self.ready.put((client, inbox))

    # --- joining --------------------------------------------------------------------------
    def wait_for_clients(self, timeout_s: float, *, progress: Callable[[int], None] | None = None) -> list[int]:
        """Wait until every expected client joined, or the deadline; returns who joined. No
        stream joins after this returns (the run starts with these clients)."""
        deadline = time.monotonic() + timeout_s
        last = -1
        with self._joined:
            while len(self.connections) < len(self.expected):
                if progress is not None and len(self.connections) != last:
                    last = len(self.connections)
                    progress(last)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._joined.wait(min(remaining, 1.0))
            self.joining = False
            return sorted(self.connections)

    def peak_inbox_bytes(self) -> dict[int, int]:
        """Per joined client, the most bytes its inbox held at once (metrics; R-FLOOD)."""
        return {c: connection.inbox.peak_bytes for c, connection in sorted(self.connections.items())}

    # --- steps --------------------------------------------------------------------------
    def execute(self, step: Step) -> StepOutcome:
        begun_step = time.perf_counter()
        try:
            return self._execute(step)
        finally:
            self.traffic.timed(step, time.perf_counter() - begun_step)

    def _execute(self, step: Step) -> StepOutcome:
        accepted, rejected, silent = set(), {}, set()
        encoded: dict[int, bytes] = {}
        pending: set[int] = set()
        started = time.perf_counter()
        for client, request in step.requests.items():
            connection = self.connections.get(client)
            if connection is None or not connection.alive:
                silent.add(client)
                continue
            data = encoded.get(id(request))
            if data is None:
                data = encoded[id(request)] = codec.encode(request)
            self.traffic.sent(step, client, data)
            if self.transcript is not None:
                self.transcript.record(SENT, client, data, at=time.time())
            connection.outbound.put(data)
            pending.add(client)
        self.traffic.server_seconds += time.perf_counter() - started
        deadline = time.monotonic() + self.step_timeout_s
        while pending:
            try:
                client, inbox = self.ready.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            item = inbox.get_nowait()
            connection = self.connections.get(client)
            if connection is None or connection.inbox is not inbox:
                continue  # from a stream that never joined the run
            if isinstance(item, str):  # the stream ended
                connection.close(item)
                if client in pending:
                    pending.discard(client)
                    silent.add(client)
                    self.log(f"client {client} left at {step.stage.value}: {item}")
                continue
            if client not in pending:
                self.log(f"ignored a message from client {client} that answers no pending request ({len(item)} bytes)")
                continue
            pending.discard(client)
            if self.transcript is not None:
                self.transcript.record(RECEIVED, client, item, at=time.time())
            reason = self.traffic.answer(step, client, item)
            if reason is None:
                accepted.add(client)
            else:
                rejected[client] = reason
                self.log(f"rejected client {client} at {step.stage.value}: {reason}")
        for client in pending:  # past the deadline
            silent.add(client)
            self.connections[client].close(f"no answer to {step.stage.value} within {self.step_timeout_s:g} s")
            self.log(f"client {client} timed out at {step.stage.value}")
        for client in rejected:
            self.connections[client].close(f"rejected at {step.stage.value}: {rejected[client]}")
        return StepOutcome(frozenset(accepted), rejected, frozenset(silent))

    def close_all(self, reason: str = "done") -> None:
        for connection in list(self.connections.values()):
            connection.close(reason)


def make_server_handler(transport: GrpcServerTransport) -> grpc.GenericRpcHandler:
    """The FederatedSession service over raw Envelope bytes."""
    return grpc.method_handlers_generic_handler(
        SERVICE, {"Session": grpc.stream_stream_rpc_method_handler(transport.session)}
    )


class ClientStream:
    """Client side of one logical client's stream: send bytes, iterate the server's requests."""

    def __init__(self, channel: grpc.Channel, *, timeout_s: float | None) -> None:
        self._outbound: queue.Queue = queue.Queue()
        rpc = channel.stream_stream(METHOD)
        self._call = rpc(iter(self._outbound.get, _CLOSE), timeout=timeout_s)

    def send(self, data: bytes) -> None:
        self._outbound.put(data)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._call)

    def close(self) -> None:
        self._outbound.put(_CLOSE)

    def cancel(self) -> None:
        self._call.cancel()


def describe_rpc_error(exc: grpc.RpcError) -> str:
    """A one-line explanation of why a stream ended."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE and ("ssl" in (details or "").lower() or "handshake" in (details or "").lower()):
        hint = " (TLS handshake failed: is this client's certificate signed by the run's CA, and the server's by the CA this client trusts?)"
    return f"{getattr(code, 'name', code)}: {details}{hint}"

