"""Batches: what a stream carries both ways (``Batch`` in proto/secure_fedgraph/wire/envelope.proto).

One stream serves every logical client its certificate names (a client process's host stream),
so each message on it is a batch of frames, each naming the client it is to or from and
carrying one Envelope (the codec's bytes, untouched here). A body that several frames share
(the Welcome every client of a host receives, a broadcast) travels once per batch, not once per
client: the Welcome's n participant certificates go to each host once, not to each of its
clients (n x n). Batches are cut to stay under the stream's message size limit, so a host of
many clients never needs a larger ``--max-message-mb`` than one client does, and at 16 MiB
(``BATCH_TARGET_BYTES``) below it, so a receiver never holds a host's whole step at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.wire import envelope_pb2

FRAME_OVERHEAD_BYTES = 32  # a frame's client, body index and tags, and its body's length prefix, at most
BATCH_MARGIN_BYTES = 1024  # what a batch keeps free below the size limit
# Batches are cut at this size even under a larger limit: a receiver holds a few messages per
# stream at once (the one gRPC assembles, the queued one, the one being decoded, and its bodies
# decoded), so a host's whole step in one batch (250 masked uploads: 220 MB) sat in memory two
# or three times over. Measured (benchmarks/load.py --n 400 --rounds 2 --backends mask): server
# peak 1,375 MiB with 256 MiB batches, 785 MiB with 16 MiB ones, rounds no slower.
BATCH_TARGET_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Frame:
    """One logical client's message: ``body`` (Envelope bytes), or ``left`` (why the client is
    out of the run; no body). A frame whose body index points nowhere decodes with an empty body,
    which the codec refuses as that client's malformed message."""

    client: int
    body: bytes = b""
    left: str = ""


def encode_batches(frames: Iterable[Frame], *, max_bytes: int) -> list[bytes]:
    """The frames as batches of at most about ``min(max_bytes, BATCH_TARGET_BYTES)`` each, in
    order; bodies that are the same object (one request encoded once for many clients) are sent
    once per batch. A single body larger than that still goes, alone: under ``max_bytes`` the
    receiver takes it, over it the receiver's limit refuses it."""
    frames = list(frames)  # holds every body while batching: ids are compared only among live objects
    budget = max(1, min(max_bytes, BATCH_TARGET_BYTES) - BATCH_MARGIN_BYTES)
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
