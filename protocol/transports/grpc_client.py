"""The client half of the gRPC transport: one mutually authenticated stream under one
certificate (a host's for all the logical clients it names, or one client's own), the Hellos,
the server's batches decoded into requests, and the answers encoded back as batches.

The client runtime (clients/runtime.py) sees requests and answers as messages, as the server
runtime does through grpc_server.py; framing, batches and the codec live here. A request body
that several frames share (the Welcome every client of a host receives, a broadcast) is decoded
once: its arrays are read-only, so the clients share it safely.

Connecting: a stream the server cannot take yet (nobody listens: UNAVAILABLE; or it runs as many
streams as it allows at once: RESOURCE_EXHAUSTED) is tried again with backoff for up to the
caller's :class:`Waiting`; a refusal (a certificate the server does not accept, a server
certificate without the name the client checks, a message over a size limit, a drop) is
reported at once, a mistake in the client's TLS set-up in one line that says what to fix
(``Waiting.mistake``: tls_mistakes.py).
"""

from __future__ import annotations

import itertools
import queue
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.core.messages import Hello
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.transports.batch import Frame, decode_batch, encode_batches
from secure_fedgraph.protocol.transports.grpc_service import METHOD, channel_options, describe_rpc_error
from secure_fedgraph.protocol.transports.tls_mistakes import TlsMistake, name_mismatch
from secure_fedgraph.protocol.transports.transcript import RECEIVED, SENT, TranscriptWriter

_CLOSE = object()


class ConnectionFailed(Exception):
    """The server did not come up (or come back) within the time the client waits for it."""


class ClientStream:
    """Client side of one stream: send batches of frames, iterate the server's batches."""

    def __init__(self, channel: grpc.Channel, *, timeout_s: float | None, max_message_bytes: int = 256 * 2**20) -> None:
        self._outbound: queue.Queue = queue.Queue()
        self.max_message_bytes = max_message_bytes
        self.clients: tuple[int, ...] = ()  # those its Hellos named: a batch from the server has at most one frame each
        rpc = channel.stream_stream(METHOD)
        self._call = rpc(iter(self._outbound.get, _CLOSE), timeout=timeout_s)

    def send(self, data: bytes) -> None:
        """One message as it is (a batch, or anything at all: tests and the fuzzer send junk)."""
        self._outbound.put(data)

    def send_frames(self, frames: Iterable[Frame]) -> None:
        """Frames as batches under the size limit."""
        for batch in encode_batches(frames, max_bytes=self.max_message_bytes):
            self.send(batch)

    def hello(self, clients: Iterable[int], version: str) -> None:
        """The first batch: a Hello for each client this stream speaks for."""
        self.clients = tuple(clients)
        self.send_frames(Frame(c, codec.encode(Hello(c, version))) for c in self.clients)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._call)

    def batches(self) -> Iterator[list[Frame]]:
        """The server's batches, decoded (at most one frame per client its Hellos named)."""
        return (decode_batch(data, max_frames=len(self.clients)) for data in self._call)

    def close(self) -> None:
        self._outbound.put(_CLOSE)

    def cancel(self) -> None:
        self._call.cancel()


@dataclass(frozen=True)
class Incoming:
    """One frame of a server batch for a client of this stream: the server's drop notice
    (``left``), or a request (``request``: the decoded message, or the ProtocolError decoding
    raised, which the client answers by leaving)."""

    client: int
    request: Any = None
    left: str = ""


STILL_WAITING_S = 10.0  # how often a client that waits for the server says so again


@dataclass(frozen=True)
class Waiting:
    """How long :func:`connect` retries a server that cannot take the stream yet, the option
    that sets it (named when it gives up), what it calls once before its first wait, and what
    it calls every STILL_WAITING_S while it waits (the seconds so far, the last failure)."""

    seconds: float
    option: str
    gave_up: str  # why it stopped waiting; "{s}" is the seconds
    announce: Callable[[], None] = lambda: None
    still: Callable[[float, str], None] = lambda waited, why: None
    mistake: Callable[[grpc.RpcError], str | None] = lambda exc: None  # the line for a failure that is a TLS set-up mistake


def last_reason(why: str) -> str:
    """The end of a gRPC failure's chain of causes ("... getsockopt(SO_ERROR): No route to host"
    gives "No route to host"): what a periodic line needs to say."""
    return why.rsplit(": ", 1)[-1].strip() or why


def server_not_up(exc: grpc.RpcError) -> bool:
    """Whether a failed stream means the server cannot take it now (worth waiting for), not a
    refusal: nobody listens (UNAVAILABLE: not yet, or no longer), or the server runs as many
    streams as it allows at once (RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded": n + 8,
    threat_model.md R-STREAMS; one frees within the server's --hello-timeout of a stream that
    says nothing). A failed certificate check, a message over a size limit (RESOURCE_EXHAUSTED
    too, "larger than max") or an answer from the server (a refusal, a drop) is reported at once.
    A handshake cut by a dying server ("Connection reset") is not a refusal, and neither is a
    network that cannot reach the server now ("No route to host", "Network is unreachable"):
    both are worth waiting for. A server certificate that does not carry the name the client
    checks (tls_mistakes.py) is a mistake to fix, not to wait out."""
    details = (exc.details() or "").lower() if hasattr(exc, "details") else ""
    if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return "larger than max" not in details
    refused = any(word in details for word in ("ssl_error", "certificate", "tsi_", "alert")) or name_mismatch(exc)
    return exc.code() == grpc.StatusCode.UNAVAILABLE and not refused


class ClientConnection:
    """One stream of a client process once its Hellos are sent: the server's batches as
    :class:`Incoming` frames, and the clients' answers as frames (encoded on the caller's
    thread, so many clients encode in parallel) sent back as batches. Each client's transcript,
    if it keeps one, records every request it receives and every answer it sends."""

    def __init__(self, stream: ClientStream, batches: Iterator[bytes], transcripts: Mapping[int, TranscriptWriter]) -> None:
        self.stream = stream
        self._batches = batches
        self._transcripts = transcripts

    def incoming(self, wanted: Callable[[int], bool]) -> Iterator[list[Incoming]]:
        """Each server batch's frames for the clients ``wanted`` still answers for, until the
        server ends the stream (gRPC errors propagate: the caller decides whether to reconnect)."""
        for data in self._batches:
            decoded: dict[int, Any] = {}  # one body shared by many frames is decoded once
            batch = []
            for frame in decode_batch(data, max_frames=len(self.stream.clients)):  # one request or notice per client at most
                if frame.client not in self.stream.clients or not wanted(frame.client):
                    continue
                if frame.left:
                    batch.append(Incoming(frame.client, left=frame.left))
                    continue
                self._record(frame.client, RECEIVED, frame.body)
                if id(frame.body) not in decoded:
                    try:
                        decoded[id(frame.body)] = codec.decode(frame.body)
                    except ProtocolError as exc:
                        decoded[id(frame.body)] = exc
                batch.append(Incoming(frame.client, decoded[id(frame.body)]))
            del data, decoded
            yield batch

    def answer(self, client: int, message: Any) -> Frame:
        """``client``'s answer as a frame: encoded, and recorded in its transcript."""
        data = codec.encode(message)
        self._record(client, SENT, data)
        return Frame(client, data)

    @staticmethod
    def left(client: int) -> Frame:
        """The frame that tells the server ``client`` left the run."""
        return Frame(client, left="it left the run")

    def send(self, frames: Sequence[Frame]) -> None:
        if frames:
            self.stream.send_frames(frames)

    def close(self) -> None:
        self.stream.close()

    def _record(self, client: int, direction: bytes, data: bytes) -> None:
        transcript = self._transcripts.get(client)
        if transcript is not None:
            transcript.record(direction, -1, data, at=time.time())


def connect(channel: grpc.Channel, clients: Sequence[int], *, version: str, waiting: Waiting, timeout_s: float | None,
            max_message_bytes: int, transcripts: Mapping[int, TranscriptWriter] | None = None) -> ClientConnection:
    """Open a stream and send the Hellos of ``clients``, retrying with backoff while nobody
    listens or the server has no stream free (up to ``waiting.seconds``); returns the connection,
    the first batch (the Welcomes) already received.

    Raises:
        grpc.RpcError: the server refused the stream.
        TlsMistake: the failure is a mistake in the client's TLS set-up (``waiting.mistake``).
        ConnectionFailed: the server did not take it within ``waiting.seconds``.
    """
    began = time.monotonic()
    deadline, pause, announced, said = began + waiting.seconds, 0.1, False, 0
    while True:
        stream = ClientStream(channel, timeout_s=timeout_s, max_message_bytes=max_message_bytes)
        stream.hello(clients, version)
        requests = iter(stream)
        try:
            batches = itertools.chain((next(requests),), requests)
            return ClientConnection(stream, batches, transcripts or {})
        except StopIteration:  # a server shutting down closed the stream before its Welcome
            why = "the server closed the stream before its Welcome"
        except grpc.RpcError as exc:
            mistake = waiting.mistake(exc)
            if mistake is not None:
                stream.close()
                raise TlsMistake(mistake) from None
            if not server_not_up(exc):
                stream.close()
                raise
            why = describe_rpc_error(exc)
        stream.close()
        if time.monotonic() + pause > deadline:
            raise ConnectionFailed(f"{why} ({waiting.gave_up.format(s=waiting.seconds)}; {waiting.option})")
        if not announced:
            waiting.announce()
            announced = True
        waited = time.monotonic() - began
        if waited + pause >= (said + 1) * STILL_WAITING_S:  # at the mark the pause would pass: 10 s, 20 s, ...
            said = int((waited + pause) // STILL_WAITING_S)
            waiting.still(said * STILL_WAITING_S, why)
        time.sleep(pause)
        pause = min(2 * pause, 2.0)


def secure_channel(server: str, *, ca: bytes, cert: bytes, key: bytes, server_name: str, max_message_bytes: int) -> grpc.Channel:
    """A mutually authenticated channel to ``server``: this side's certificate ``cert``, the
    server's checked against ``ca`` under the name ``server_name``; it reconnects within 2 s of a
    server restart."""
    credentials = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    options = channel_options(max_message_bytes) + [("grpc.ssl_target_name_override", server_name),
                                                    ("grpc.max_reconnect_backoff_ms", 2000)]
    return grpc.secure_channel(server, credentials, options=options)
