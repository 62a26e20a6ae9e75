"""Batches: what a stream carries both ways (``Batch`` in proto/secure_fedgraph/wire/envelope.proto).

One stream serves every logical client its certificate names (a client process's host stream),
so each message on it is a batch of frames, each naming the client it is to or from and
carrying one Envelope (the codec's bytes, untouched here). A body that several frames share
(the Welcome every client of a host receives, a broadcast) travels once per batch, not once per
client: the Welcome's n participant certificates go to each host once, not to each of its
clients (n x n). Batches are cut to stay under the stream's message size limit, so a host of
many clients never needs a larger ``--max-message-mb`` than one client does, and at 16 MiB
(``BATCH_TARGET_BYTES``) below it, so a receiver never holds a host's whole step at once.

A batch carries at most one frame per client (one request, answer or notice each way per
step), so at most as many frames as its stream has clients: a receiver refuses any other batch
at its first excess frame, before it builds the rest, and an accepted batch costs it about
twice its wire size (threat_model.md R-FLOOD).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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
    return list(iter_batches(frames, max_bytes=max_bytes))


def iter_batches(frames: Iterable[Frame], *, max_bytes: int) -> Iterator[bytes]:
    """``encode_batches`` one batch at a time, reading ``frames`` only as far as the batch
    being built: a sender that takes the next batch when its stream has room holds one batch's
    bodies, not a step's."""
    budget = max(1, min(max_bytes, BATCH_TARGET_BYTES) - BATCH_MARGIN_BYTES)
    current, index, size = envelope_pb2.Batch(), {}, 0
    held: list[bytes] = []  # this batch's bodies: while held, no other body can take one's id
    for frame in frames:
        new_body = not frame.left and id(frame.body) not in index
        cost = FRAME_OVERHEAD_BYTES + (len(frame.body) + FRAME_OVERHEAD_BYTES if new_body else 0) + len(frame.left)
        if current.frames and size + cost > budget:
            yield current.SerializeToString()
            current, index, size, held = envelope_pb2.Batch(), {}, 0, []
            new_body = not frame.left
        if frame.left:
            current.frames.add(client=frame.client, left=frame.left)
        else:
            if new_body:
                index[id(frame.body)] = len(current.bodies)
                current.bodies.append(frame.body)
                held.append(frame.body)
            current.frames.add(client=frame.client, body=index[id(frame.body)])
        size += cost
    if current.frames:
        yield current.SerializeToString()


_BODIES, _FRAMES = 1, 2  # Batch's field numbers (envelope.proto)
_LENGTH_DELIMITED = 2  # the wire type of both
# Past a refused frame, how many more fields a refusal reads to count its frames ("at least" beyond):
# a flood's size is worth a line in the log, not a long pause of the server's step loop.
FRAMES_COUNTED = 2**18


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The base-128 varint at ``pos`` and the position after it.

    Raises:
        ProtocolError: the bytes end inside it, or it runs past 10 bytes.
    """
    value = shift = 0
    while shift < 70:
        if pos >= len(data):
            raise ProtocolError(f"malformed batch ({len(data):,} bytes: truncated)")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ProtocolError(f"malformed batch ({len(data):,} bytes: a varint longer than 10 bytes at byte {pos - 10})")


def _fields(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each of a batch's fields in order, without copying them:
    bodies and frames, both length-delimited.

    Raises:
        ProtocolError: any other field, or bytes that end inside a field.
    """
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number not in (_BODIES, _FRAMES) or wire_type != _LENGTH_DELIMITED:
            raise ProtocolError(f"malformed batch ({len(data):,} bytes: field {number} of wire type {wire_type} is no part of a Batch)")
        length, pos = _varint(data, pos)
        if pos + length > len(data):
            raise ProtocolError(f"malformed batch ({len(data):,} bytes: truncated)")
        yield number, pos, pos + length
        pos += length


def _count_frames(fields: Iterator[tuple[int, int, int]], *, cap: int) -> tuple[int, bool]:
    """How many frames ``fields`` has left, reading at most ``cap`` more fields (parsing none),
    and whether that is all of them."""
    counted = 0
    try:
        for read, (number, _, _) in enumerate(fields):
            if read == cap:
                return counted, False
            counted += number == _FRAMES
    except ProtocolError:
        return counted, False
    return counted, True


def one_frame_per_client(seen: set[int], client: int, *, max_frames: int) -> None:
    """Admit a batch's next frame, naming ``client``, after the frames naming ``seen``: a batch
    carries at most one frame per client and at most ``max_frames`` (how many clients its
    stream speaks for; threat_model.md R-FLOOD). Checked frame by frame as a batch is read, so
    a flood of frames is refused at its first excess one, before the others are built.

    Raises:
        ProtocolError: ``client`` is named a second time, or this frame is one more than ``max_frames``.
    """
    if client in seen:
        raise ProtocolError(f"client {client} is named by more than one frame")
    if len(seen) >= max_frames:
        raise ProtocolError(f"more frames than the {max_frames} client{'s' * (max_frames != 1)} its stream speaks for")
    seen.add(client)


def decode_batch(data: bytes, *, max_frames: int) -> list[Frame]:
    """The frames of one batch, in order: at most one per client and at most ``max_frames`` (the
    clients its stream speaks for), else the whole batch is refused (threat_model.md R-FLOOD).

    The batch's fields are read one at a time and each frame is admitted before the next is
    read, so a refused batch costs at most ``max_frames + 1`` frames' work, and an accepted
    one holds its bytes, one copy of each body its frames use and one small object per frame:
    about twice its wire size, plus a few hundred bytes per client of the stream. (The decoder
    this replaces parsed the whole batch first: one batch repeating one frame 2 million times,
    8 MB, took 108 MiB in protobuf's parse alone and 325 MiB once its frames were built.) A
    batch holds bodies and frames only: any other field is refused.

    Raises:
        ProtocolError: the bytes are not a batch, a client is named twice, or there are more
            than ``max_frames`` frames (or bodies); the message names the client and counts the frames.
    """
    bodies: list[tuple[int, int]] = []
    frames: list[envelope_pb2.Frame] = []
    seen: set[int] = set()
    fields = _fields(data)
    for number, start, end in fields:
        if number == _BODIES:
            if len(bodies) >= max_frames:
                raise ProtocolError(f"malformed batch ({len(data):,} bytes: more bodies than the {max_frames} frames it may carry)")
            bodies.append((start, end))
            continue
        try:
            frame = envelope_pb2.Frame.FromString(data[start:end])
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise ProtocolError(f"malformed batch ({len(data):,} bytes: frame {len(frames)}: {exc})") from None
        try:
            one_frame_per_client(seen, frame.client, max_frames=max_frames)
        except ProtocolError as exc:
            counted, exact = _count_frames(fields, cap=FRAMES_COUNTED)
            total = f"{len(frames) + 1 + counted:,}" if exact else f"at least {len(frames) + 1 + counted:,}"
            raise ProtocolError(f"a batch of {total} frames ({len(data):,} bytes) refused: {exc} "
                                f"(a batch carries at most one frame per client)") from None
        frames.append(frame)
    copies: dict[int, bytes] = {}  # one copy of each body used: frames sharing one share it (decoded once by the receiver)

    def body(index: int) -> bytes:
        if not 0 <= index < len(bodies):
            return b""
        if index not in copies:
            start, end = bodies[index]
            copies[index] = data[start:end]
        return copies[index]

    return [Frame(f.client, left=f.left) if f.left else Frame(f.client, body(f.body)) for f in frames]
