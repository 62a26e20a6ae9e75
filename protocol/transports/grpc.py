"""The gRPC transport: each logical client holds one mutually authenticated bidirectional
stream (service ``FederatedSession.Session`` in proto/secure_fedgraph/wire/envelope.proto); the
server pushes each step's requests down the streams and waits, up to a deadline, for one
answer per client.

Streams carry Envelope bytes untouched by gRPC, so our codec (not gRPC's deserializer) decides
what is malformed and says why. A client is identified by its TLS certificate (SAN URI
``urn:secure-fedgraph:client:<id>``); its Hello must name the same id. A client that is silent
past the deadline, disconnects, or sends a message over the size limit is out of the step;
nothing a client sends can stop the server.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import grpc

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.messages import Hello
from secure_fedgraph.protocol.steps import Step, StepOutcome
from secure_fedgraph.protocol.transcript import RECEIVED, SENT, TranscriptWriter
from secure_fedgraph.protocol.transports.common import Traffic

SERVICE = "secure_fedgraph.wire.FederatedSession"
METHOD = f"/{SERVICE}/Session"
URI_PREFIX = "urn:secure-fedgraph:client:"
_CLOSE = object()


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
    ]


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
    alive: bool = True
    reason: str = ""

    def close(self, reason: str) -> None:
        if self.alive:
            self.alive, self.reason = False, reason
            self.outbound.put(_CLOSE)


class GrpcServerTransport:
    """Server side: the streams of the joined clients, and step execution over them."""

    def __init__(
        self,
        expected: Collection[int],
        *,
        step_timeout_s: float = 120.0,
        max_message_bytes: int = 256 * 2**20,
        transcript: TranscriptWriter | None = None,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.expected = set(expected)
        self.max_message_bytes = max_message_bytes
        self.step_timeout_s = step_timeout_s
        self.transcript = transcript
        self.log = log
        self.connections: dict[int, Connection] = {}
        self.inbound: queue.Queue = queue.Queue()
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._joined = threading.Condition(self._lock)

    # --- the stream handler (one per logical client) ------------------------------------
    def session(self, request_iterator: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        client = peer_client_id(context)
        if client is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no secure_fedgraph client certificate on this connection")
        try:
            hello = codec.decode(next(request_iterator))
        except (StopIteration, ProtocolError) as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the first message must be a Hello ({exc})")
        certified, client = client, stream_identity(client, hello)
        if client is None:
            client, claimed = certified, getattr(hello, "client", type(hello).__name__)
            self.log(f"refused a connection: certificate of client {client}, Hello claims {claimed}")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"this certificate is for client {client}, but the Hello claims {claimed}")
        with self._lock:
            if client not in self.expected:
                self.log(f"refused client {client}: not part of this run")
                context.abort(grpc.StatusCode.PERMISSION_DENIED, f"client {client} is not part of this run")
            if client in self.connections:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"client {client} is already connected")
            connection = Connection(client, queue.Queue())
            self.connections[client] = connection
            self._joined.notify_all()
        threading.Thread(target=self._read, args=(connection, request_iterator), daemon=True, name=f"read-{client}").start()
        while True:
            item = connection.outbound.get()
            if item is _CLOSE:
                if connection.reason and connection.reason != "done":
                    context.abort(grpc.StatusCode.CANCELLED, f"dropped from the run: {connection.reason}")
                return
            yield item

    def _read(self, connection: Connection, request_iterator: Iterator[bytes]) -> None:
        cancelled = (f"the stream was cancelled: the client went away, or sent a message over the "
                     f"{self.max_message_bytes} byte limit (--max-message-mb)")
        try:
            for data in request_iterator:
                self.inbound.put((connection.client, data))
            # gRPC ends the iterator instead of raising when it refused an oversized message before
            # this reader asked for it (the client heard RESOURCE_EXHAUSTED and closed): the two
            # cannot be told apart here, so the reason names both
            reason = (f"the client closed its stream (it left, or gRPC refused a message over the {self.max_message_bytes} "
                      f"byte limit, --max-message-mb)")
        except grpc.RpcError:
            # gRPC does not tell the handler which limit; the client gets RESOURCE_EXHAUSTED with the sizes.
            reason = cancelled
        except Exception as exc:  # the stream must never take the server down
            reason = f"stream failed ({exc})"
        self.inbound.put((connection.client, reason))

    # --- joining --------------------------------------------------------------------------
    def wait_for_clients(self, timeout_s: float, *, progress: Callable[[int], None] | None = None) -> list[int]:
        """Wait until every expected client joined, or the deadline; returns who joined."""
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
            return sorted(self.connections)

    # --- steps --------------------------------------------------------------------------
    def execute(self, step: Step) -> StepOutcome:
        begun_step = time.perf_counter()
        try:
            return self._execute(step)
        finally:
            self.traffic.wall_by_stage[step.stage] += time.perf_counter() - begun_step

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
                client, item = self.inbound.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if isinstance(item, str):  # the stream ended
                self.connections[client].close(item)
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

