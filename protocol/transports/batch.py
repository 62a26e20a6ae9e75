"""Batches: what a stream carries both ways (``Batch`` in proto/secure_fedgraph/wire/envelope.proto).

One stream serves every logical client its certificate names (a client process's host stream),
so each message on it is a batch of frames, each naming the client it is to or from and
carrying one Envelope (the codec's bytes, untouched here). A body that several frames share
(the Welcome every client of a host receives, a broadcast) travels once per batch, not once per
client: the Welcome's n participant certificates go to each host once, not to each of its
clients (n x n). Batches are cut to stay under the stream's message size limit, so a host of
many clients never needs a larger ``--max-message-mb`` than one client does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.wire import envelope_pb2

FRAME_OVERHEAD_BYTES = 32  # a frame's client, body index and tags, and its body's length prefix, at most
BATCH_MARGIN_BYTES = 1024  # what a batch keeps free below the size limit


@dataclass(frozen=True)
class Frame:
    """One logical client's message: ``body`` (Envelope bytes), or ``left`` (why the client is
    out of the run; no body). A frame whose body index points nowhere decodes with an empty body,
    which the codec refuses as that client's malformed message."""

    client: int
    body: bytes = b""
    left: str = ""


def encode_batches(frames: Iterable[Frame], *, max_bytes: int) -> list[bytes]:
    """The frames as batches of at most about ``max_bytes`` each, in order; bodies that are the
    same object (one request encoded once for many clients) are sent once per batch. A single
    body larger than the limit still goes, alone: the receiver's limit refuses it."""
    frames = list(frames)  # holds every body while batching: ids are compared only among live objects
    budget = max(1, max_bytes - BATCH_MARGIN_BYTES)
    batches: list[bytes] = []
    current, index, size = envelope_pb2.Batch(), {}, 0
    for frame in frames:
        new_body = not frame.left and id(frame.body) not in index
        cost = FRAME_OVERHEAD_BYTES + (len(frame.body) + FRAME_OVERHEAD_BYTES if new_body else 0) + len(frame.left)
        if current.frames and size + cost > budget:
            batches.append(current.SerializeToString())
            current, index, size = envelope_pb2.Batch(), {}, 0
            new_body = not frame.left
        if frame.left:
            current.frames.add(client=frame.client, left=frame.left)
        else:
            if new_body:
                index[id(frame.body)] = len(current.bodies)
                current.bodies.append(frame.body)
            current.frames.add(client=frame.client, body=index[id(frame.body)])
        size += cost
    if current.frames:
        batches.append(current.SerializeToString())
    return batches


def decode_batch(data: bytes) -> list[Frame]:
    """The frames of one batch, in order.

    Raises:
        ProtocolError: the bytes are not a batch.
    """
    batch = envelope_pb2.Batch()
    try:
        batch.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(f"malformed batch ({len(data)} bytes: {exc})") from None
    bodies = list(batch.bodies)  # one object per body: frames sharing one share it (decoded once by the receiver)
    frames = []
    for frame in batch.frames:
        if frame.left:
            frames.append(Frame(frame.client, left=frame.left))
        else:
            frames.append(Frame(frame.client, bodies[frame.body] if 0 <= frame.body < len(bodies) else b""))
    return frames
