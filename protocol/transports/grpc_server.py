"""The server half of the gRPC transport: each client process holds one mutually authenticated bidirectional
stream per certificate (service ``FederatedSession.Session`` in
proto/secure_fedgraph/wire/envelope.proto): one for all the logical clients a host certificate
names, or one per client that has only its own certificate. The server pushes each step's
requests down the streams, one batch per stream (protocol/transports/batch.py: frames naming
each client; a request shared by many clients sent once), and waits, up to a deadline, for one
answer frame per client. Every client keeps its own outcome: accepted, rejected or silent.

Frames carry Envelope bytes untouched by gRPC, so our codec (not gRPC's deserializer) decides
what is malformed and says why. A stream is identified by its TLS certificate (SAN URIs naming
client ids, secure_fedgraph/identity_uris.py); its first batch holds one Hello per client it speaks for,
each of which the certificate must name, and a frame naming a client that did not join on that
stream is ignored. A client that is silent past the deadline, leaves, or sends a malformed
message is out of the step; a stream that ends or sends a message over the size limit takes its
clients out. Nothing a client sends can stop the server.

Bounds (threat_model.md R-STREAMS, R-FLOOD): a certificate that names no client of the run is
refused before anything it sends is read, and so is every stream once the run has started;
each client id is spoken for by at most one stream; a stream must send its Hellos within
``hello_timeout_s``; each stream's inbox holds at most ``queue_depth`` messages, and its
reader stops pulling from gRPC while the inbox is full, so HTTP/2 flow control holds the
sender back. A stream therefore holds at most ``queue_depth + 2`` messages of at most
``max_message_bytes`` in this process (the inbox, the one its reader waits to queue, the one
gRPC is receiving), whatever it sends; the server runtime bounds the streams at n + 8. A batch
carries at most one frame per client of its stream (protocol/transports/batch.py): any other is
refused at its first excess frame, before the rest are built, and its stream's clients are all
dropped with one line naming them, the repeated client and the count. Frames that answer
nothing (another stream's client, a client out of the run, a second answer) are ignored and
counted per stream, only the first logged, so the log grows with the run, not with a flood.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Collection, Iterator
from itertools import chain
from concurrent import futures
from dataclasses import dataclass

import grpc

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.identity_uris import uri_ranges
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import Hello
from secure_fedgraph.protocol.core.steps import Step, StepOutcome, StepProgress, reporting
from secure_fedgraph.protocol.transports.transcript import RECEIVED, SENT, TranscriptWriter
from secure_fedgraph.protocol.transports.batch import Frame, decode_batch, iter_batches
from secure_fedgraph.protocol.transports.common import RequestEncoder, Traffic
from secure_fedgraph.protocol.transports.grpc_service import SERVICE, server_options

_CLOSE = object()
OUTBOUND_DEPTH = 4  # batches queued per stream before the server encodes more: at most about 64 MiB (BATCH_TARGET_BYTES)
PUMP_POLL_S = 0.01  # while batches wait to be queued, how often the step loop looks for room between answers

def stream_identity(certified: frozenset[int], hello) -> int | None:
    """Whom a Hello on a stream speaks for: the client it claims, and only if the stream's TLS
    certificate names that client among the run's (``certified``; threat_model.md R-MTLS); None
    refuses the stream. One client (or host) cannot join as another."""
    return hello.client if isinstance(hello, Hello) and hello.client in certified else None


@dataclass(frozen=True)
class Certified:
    """The client ids a peer's verified TLS certificate names, as inclusive ranges (SAN URIs:
    one id for a client's own certificate, runs of ids for a host certificate)."""

    ranges: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, client: object) -> bool:
        return isinstance(client, int) and any(lo <= client <= hi for lo, hi in self.ranges)

    def count(self) -> int:
        """How many ids it names (at most: ranges may overlap)."""
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def among(self, clients: Collection[int]) -> frozenset[int]:
        """Those of ``clients`` the certificate names (without listing a range's every id)."""
        return frozenset(c for c in clients if c in self)

    def __str__(self) -> str:
        if len(self.ranges) == 1 and self.ranges[0][0] == self.ranges[0][1]:
            return f"client {self.ranges[0][0]}"
        return "clients " + ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)


def peer_certified(context: grpc.ServicerContext) -> Certified:
    """The client ids in the peer's verified TLS certificate (none without one)."""
    uris = [uri.decode(errors="replace") for uri in context.auth_context().get("x509_subject_alternative_name", [])]
    return Certified(tuple(uri_ranges(uris)))


def named(clients: Collection[int]) -> str:
    """'client 3', 'clients 0-249' (contiguous) or 'clients 0, 2, 5' (a few), for messages."""
    ordered = sorted(clients)
    if len(ordered) == 1:
        return f"client {ordered[0]}"
    if ordered and ordered[-1] - ordered[0] == len(ordered) - 1:
        return f"clients {ordered[0]}-{ordered[-1]}"
    shown = ", ".join(map(str, ordered[:6]))
    return f"clients {shown}{f' and {len(ordered) - 6} more' if len(ordered) > 6 else ''}"


class Refused(Exception):
    """Why a stream is refused before it joins: a gRPC status code and a one-line reason."""

    def __init__(self, code: grpc.StatusCode, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class HostConnection:
    """One stream: the clients that joined on it (each said Hello; its certificate names each),
    the batches waiting to go down, its bounded inbox, and which of its clients are out of the
    run (and why). The stream ends when the run does, or once none of its clients is left."""

    def __init__(self, inbox: Inbox) -> None:
        self.clients: frozenset[int] = frozenset()
        self.outbound: queue.Queue = queue.Queue()
        self.inbox = inbox  # bounded: what the host sent, not yet read by a step
        self.alive = True
        self.reason = ""
        self.out: dict[int, str] = {}  # client -> why it is out of the run
        self.notices: list[Frame] = []  # drops to tell the host about with the next batch
        self.ignored = 0  # frames it sent that answer nothing: the first is logged, all are counted (metrics)

    def max_frames(self) -> int:
        """The most frames a batch on this stream may carry: one per client (R-FLOOD)."""
        return len(self.clients)

    def speaks_for(self, client: int) -> bool:
        """Whether a frame naming ``client`` may come from this stream: one of the clients that
        joined on it, each named by its certificate (threat_model.md R-MTLS, per frame)."""
        return client in self.clients

    def serves(self, client: int) -> bool:
        return self.alive and client in self.clients and client not in self.out

    def drop(self, client: int, reason: str, *, tell: bool = True) -> None:
        """``client`` is out of the run: not asked again; its host hears why (``tell``) with the
        next batch, and the stream closes once none of its clients is left."""
        if client in self.out:
            return
        self.out[client] = reason
        if tell:
            self.notices.append(Frame(client, left=reason))
        if self.alive and self.out.keys() >= self.clients:
            self.close(reason)

    def drop_all(self, reason: str) -> None:
        """Every client of this stream is out of the run (its host broke the protocol, as a crash
        of its process would take them all): the stream closes, and the host hears ``reason``."""
        for client in self.clients:
            self.out.setdefault(client, reason)
        self.close(reason)

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
        progress: StepProgress | None = None,
    ) -> None:
        """``progress`` hears each step start, each answer as it is received and the step's end
        (protocol/engine/progress.py); None: nothing."""
        if queue_depth < 1:
            raise ConfigError(f"queue_depth must be at least 1, got {queue_depth}")
        self.expected = frozenset(expected)
        self.max_message_bytes = max_message_bytes
        self.step_timeout_s = step_timeout_s
        self.hello_timeout_s = hello_timeout_s
        self.queue_depth = queue_depth
        self.transcript = transcript
        self.log = log
        self.progress = progress
        self.connections: dict[int, HostConnection] = {}  # joined client -> the stream it joined on
        self.streams: set[int] = set()  # client ids claimed by a stream now (each by one at most)
        self.joining = True  # False once the run has started: later streams are refused
        # a connection once per message queued in its inbox: never longer than the inboxes together
        self.ready: queue.Queue = queue.Queue()
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._joined = threading.Condition(self._lock)
        self._server: grpc.Server | None = None  # once listening

    # --- the stream handler (one per certificate: a client process, or one logical client) --
    def session(self, request_iterator: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        certified = peer_certified(context)
        if not certified:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no secure_fedgraph client certificate on this connection")
        ours = certified.among(self.expected)
        if not ours:  # before reading anything it sends
            self.log(f"refused {certified}: not part of this run")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{certified} {'is' if str(certified).startswith('client ') else 'are'} not part of this run")
        if not self.joining:
            self.log(f"refused {named(ours)}: the run had started")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, self._started_without(ours))
        if not self._claim(ours):
            self.log(f"refused a second stream for the certificate of {certified}")
            context.abort(grpc.StatusCode.ALREADY_EXISTS, f"{named(ours)} already {'holds' if len(ours) == 1 else 'hold'} a stream to this server")
        try:
            yield from self._serve(certified, ours, request_iterator, context)
        finally:
            with self._lock:
                self.streams.difference_update(ours)

    def _started_without(self, clients: frozenset[int]) -> str:
        """Why a stream is refused once the run has started: it began without these clients, or
        (those that joined it, back after their stream failed) goes on without them."""
        with self._lock:
            dropped = clients & self.connections.keys()
        if dropped:
            return (f"the run is under way and takes no new stream for {named(dropped)}: a client joins a run once, and one whose "
                    "stream failed is out of it")
        return f"the run started without {named(clients)}"

    def _claim(self, clients: frozenset[int]) -> bool:
        """Take the one stream each client id may be spoken for on (threat_model.md R-STREAMS);
        False if a stream holds one of them, or one of them joined the run already."""
        with self._lock:
            if any(c in self.streams or c in self.connections for c in clients):
                return False
            self.streams.update(clients)
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

    def _hellos(self, certified: Certified, ours: frozenset[int], first: bytes | str) -> frozenset[int]:
        """The clients a stream's first batch joins: one Hello per client, each named by the
        certificate and part of the run.

        Raises:
            Refused: anything else.
        """
        if isinstance(first, str):
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, first)
        try:
            # one Hello per id the certificate names (its CA's word), so one for an id outside the run is refused by name below
            frames = decode_batch(first, max_frames=certified.count())
        except ProtocolError as exc:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"the first message must be a batch of Hellos: {exc}") from None
        if not frames:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a batch of Hellos, got an empty batch")
        clients = set()
        for frame in frames:
            try:
                hello = codec.decode(frame.body) if not frame.left else None
            except Exception:  # noqa: BLE001 a stream's first message may be anything at all (R-CRASH)
                hello = None
            if not isinstance(hello, Hello):
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                              f"the first message must be a Hello, got {type(hello).__name__ if hello else 'a malformed message'}")
            client = stream_identity(ours, hello)
            if client is None:
                self.log(f"refused a connection: certificate of {certified}, Hello claims {hello.client}")
                outside = " (not part of this run)" if hello.client in certified else ""
                raise Refused(grpc.StatusCode.PERMISSION_DENIED,
                              f"this certificate is for {named(ours)}{outside and ' in this run'}, but the Hello claims {hello.client}{outside}")
            if frame.client != client:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"a frame for client {frame.client} carries the Hello of client {client}")
            clients.add(client)  # once each: the batch names each client once
        return frozenset(clients)

    def _serve(self, certified: Certified, ours: frozenset[int], request_iterator: Iterator[bytes],
               context: grpc.ServicerContext) -> Iterator[bytes]:
        connection = HostConnection(self._inbox())
        hello_box: queue.Queue = queue.Queue(maxsize=1)
        threading.Thread(target=self._read, args=(connection, request_iterator, hello_box), daemon=True, name=f"read-{min(ours)}").start()
        first = self._await_hello(hello_box)
        if first is None:
            self.log(f"refused {named(ours)}: no Hello within {self.hello_timeout_s:g} s")
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"no Hello within {self.hello_timeout_s:g} s (the server's --hello-timeout)")
        try:
            clients = self._hellos(certified, ours, first)
        except Refused as refused:
            self.log(f"refused {named(ours)}: {refused.reason}")
            context.abort(refused.code, refused.reason)
        with self._lock:
            if not self.joining:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"the run started without {named(clients)}")
            connection.clients = clients
            for client in clients:
                self.connections[client] = connection
            self.streams.difference_update(ours - clients)  # ids the certificate names but this stream did not join: free again
            self._joined.notify_all()
        while True:
            item = connection.outbound.get()
            if item is _CLOSE:
                if connection.reason and connection.reason != "done":
                    context.abort(grpc.StatusCode.CANCELLED, f"dropped from the run: {connection.reason}")
                return
            yield item

    def _read(self, connection: HostConnection, request_iterator: Iterator[bytes], hello_box: queue.Queue) -> None:
        """Move the stream's messages into its inbox: the first to ``hello_box``, the rest
        blocking while the inbox is full, so gRPC stops reading from the socket."""
        inbox = connection.inbox
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
                self.ready.put(connection)
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
        self.ready.put(connection)

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

    def stream_count(self) -> int:
        """How many streams the joined clients came on (one per host certificate, else one each)."""
        return len({id(connection) for connection in self.connections.values()})

    def ignored_frames(self) -> dict[str, int]:
        """Per stream that sent any (named by its clients), how many frames that answer nothing it
        sent: frames for a client out of the run or another stream's, or past a client's answer."""
        streams = {id(connection): connection for connection in self.connections.values()}
        return {named(c.clients): c.ignored for c in streams.values() if c.ignored}

    def peak_inbox_bytes(self) -> dict[int, int]:
        """Per joined client, the most bytes the inbox of its stream held at once (metrics; R-FLOOD)."""
        return {c: connection.inbox.peak_bytes for c, connection in sorted(self.connections.items())}

    # --- steps --------------------------------------------------------------------------
    def execute(self, step: Step) -> StepOutcome:
        begun_step = time.perf_counter()
        try:
            with reporting(self.progress, step) as answered:
                return self._execute(step, answered)
        finally:
            self.traffic.timed(step, time.perf_counter() - begun_step)

    def _send(self, connection: HostConnection, frames: list[Frame]) -> None:
        """Frames for one stream now, after the drops its host has not heard of yet."""
        for batch in iter_batches([*self._notices(connection), *frames], max_bytes=self.max_message_bytes):
            self.traffic.wire_down += len(batch)
            connection.outbound.put(batch)

    @staticmethod
    def _notices(connection: HostConnection) -> list[Frame]:
        notices, connection.notices = connection.notices, []
        return notices

    def _frames(self, step: Step, encode: RequestEncoder, clients: list[int]) -> Iterator[Frame]:
        """``clients``' requests of ``step``, each encoded as its batch is built."""
        for client in clients:
            data = encode(step.requests[client])
            self.traffic.sent(step, client, data)
            if self.transcript is not None:
                self.transcript.record(SENT, client, data, at=time.time())
            yield Frame(client, data)

    def _pump(self, senders: dict[HostConnection, Iterator[bytes]]) -> None:
        """Encode and queue the next batch of each stream that has room (fewer than
        ``OUTBOUND_DEPTH`` waiting), round-robin, until none has: the server holds a few batches a
        stream, not a step's requests (at n = 10,000 the first INPUT's are 2 GB), and every host
        gets its first batch early."""
        started = time.perf_counter()
        queued = True
        while senders and queued:
            queued = False
            for connection in list(senders):
                if not connection.alive:
                    del senders[connection]  # its clients come back silent: the stream's end is in the inbox
                    continue
                if connection.outbound.qsize() >= OUTBOUND_DEPTH:
                    continue
                batch = next(senders[connection], None)
                if batch is None:
                    del senders[connection]
                    continue
                self.traffic.wire_down += len(batch)
                connection.outbound.put(batch)
                queued = True
        self.traffic.server_seconds += time.perf_counter() - started

    def _execute(self, step: Step, answered: Callable[[], None]) -> StepOutcome:
        accepted, rejected, silent = set(), {}, set()
        outgoing: dict[HostConnection, list[int]] = {}
        pending: set[int] = set()
        for client in step.requests:  # which stream each goes to; requests are encoded as their batches go
            connection = self.connections.get(client)
            if connection is None or not connection.serves(client):
                silent.add(client)
                continue
            outgoing.setdefault(connection, []).append(client)
            pending.add(client)
        encode = RequestEncoder(step)
        senders = {connection: iter_batches(chain(self._notices(connection), self._frames(step, encode, clients)),
                                            max_bytes=self.max_message_bytes)
                   for connection, clients in outgoing.items()}
        self._pump(senders)
        deadline = time.monotonic() + self.step_timeout_s
        while pending:
            self._pump(senders)
            wait = max(0.0, deadline - time.monotonic())
            try:
                connection = self.ready.get(timeout=min(wait, PUMP_POLL_S) if senders else wait)
            except queue.Empty:
                if time.monotonic() >= deadline:
                    break
                continue
            item = connection.inbox.get_nowait()
            if not connection.clients or not connection.alive:
                continue  # from a stream that never joined the run, or whose clients are all out of it
            if isinstance(item, str):  # the stream ended
                connection.close(item)
                for client in sorted(connection.clients & pending):
                    pending.discard(client)
                    silent.add(client)
                    self.log(f"client {client} left at {step.stage.value}: {item}")
                continue
            self.traffic.wire_up += len(item)
            try:
                frames = decode_batch(item, max_frames=connection.max_frames())
            except ProtocolError as exc:  # the whole stream is out, in one line (R-HOST, R-FLOOD)
                del item
                self.log(f"dropped {named(connection.clients)} (one stream) at {step.stage.value}: {exc}")
                for client in sorted(connection.clients & pending):
                    pending.discard(client)
                    rejected[client] = f"its stream sent a batch the server refused: {exc}"
                connection.drop_all(f"rejected at {step.stage.value}: {exc}")
                continue
            del item  # the frames hold what they need of it
            for frame in frames:
                client = frame.client
                if not connection.speaks_for(client):
                    self._ignore(connection, f"ignored a frame for client {client} from the stream of {named(connection.clients)}: its "
                                             f"certificate does not name that client, or it did not join on that stream")
                    continue
                if frame.left:
                    connection.drop(client, "it left the run", tell=False)
                    if client in pending:
                        pending.discard(client)
                        silent.add(client)
                        self.log(f"client {client} left at {step.stage.value}: its host says it left the run")
                    continue
                if client not in pending:
                    self._ignore(connection, f"ignored a message from client {client} that answers no pending request ({len(frame.body)} bytes)")
                    continue
                pending.discard(client)
                answered()
                if self.transcript is not None:
                    self.transcript.record(RECEIVED, client, frame.body, at=time.time())
                reason = self.traffic.answer(step, client, frame.body)
                if reason is None:
                    accepted.add(client)
                else:
                    rejected[client] = reason
                    self.log(f"rejected client {client} at {step.stage.value}: {reason}")
        for client in sorted(pending):  # past the deadline
            silent.add(client)
            self.connections[client].drop(client, f"no answer to {step.stage.value} within {self.step_timeout_s:g} s")
            self.log(f"client {client} timed out at {step.stage.value}")
        for client in rejected:
            self.connections[client].drop(client, f"rejected at {step.stage.value}: {rejected[client]}")
        return StepOutcome(frozenset(accepted), rejected, frozenset(silent))

    def _ignore(self, connection: HostConnection, line: str) -> None:
        """Count a frame that answers nothing; log only a stream's first (a host could send such
        frames batch after batch: the log and metrics.json must not grow with them)."""
        connection.ignored += 1
        if connection.ignored == 1:
            self.log(f"{line}; more such frames from this stream are counted (metrics: ignored_frames), not logged")

    # --- listening ----------------------------------------------------------------------
    def listen(self, bind: str, *, ca: bytes, cert: bytes, key: bytes, max_streams: int | None, workers: int | None = None) -> int:
        """Serve the FederatedSession service on ``bind`` with mutual TLS (a client certificate
        from ``ca`` required); at most ``max_streams`` streams at once (None: no limit), more are
        refused by gRPC at once (threat_model.md R-STREAMS), served by ``workers`` threads (default
        ``max_streams``: a stream holds its thread for the whole run). Returns the port.

        Raises:
            ConfigError: the address cannot be listened on (busy, or not this host's).
        """
        # no SO_REUSEPORT: a second server on a busy port must fail, not share the port's connections
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers or max_streams), maximum_concurrent_rpcs=max_streams,
                             options=[*server_options(self.max_message_bytes), ("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((make_server_handler(self),))
        credentials = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)
        try:
            port = server.add_secure_port(bind, credentials)
        except RuntimeError as exc:  # grpcio raises where older versions returned 0
            raise ConfigError(f"--bind {bind}: cannot listen there ({exc}); is another server running on that port?") from None
        if port == 0:
            raise ConfigError(f"--bind {bind}: cannot listen there; is another server running on that port?")
        server.start()
        self._server = server
        return port

    def stop(self, reason: str = "done", *, grace_s: float = 2.0) -> None:
        """End every stream (:meth:`close_all`) and stop listening, giving the streams
        ``grace_s`` to finish; the connections are closed once gRPC's stop event is set."""
        self.close_all(reason)
        if self._server is not None:
            self._server.stop(grace=grace_s).wait(timeout=grace_s + 3.0)
            self._server = None

    def close_all(self, reason: str = "done") -> None:
        """End every stream (``reason`` "done": the run is over), after telling each host which of
        its clients were dropped since its last batch."""
        for connection in set(self.connections.values()):
            if connection.alive and connection.notices:
                self._send(connection, [])
            connection.close(reason)


def make_server_handler(transport: GrpcServerTransport) -> grpc.GenericRpcHandler:
    """The FederatedSession service over raw Envelope bytes."""
    return grpc.method_handlers_generic_handler(
        SERVICE, {"Session": grpc.stream_stream_rpc_method_handler(transport.session)}
    )


