"""Batches on a host stream (protocol/transports/batch.py): frames come back in order with their
bodies, a body shared by many frames goes once per batch, and batches stay near
BATCH_TARGET_BYTES however large the stream's message limit is. A batch carries at most one
frame per client and no more than its stream's clients; a receiver refuses any other at its
first excess frame, and holds about twice an accepted batch's wire size (threat_model.md R-FLOOD)."""

from __future__ import annotations

import tracemalloc

import pytest

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.transports import batch as batch_module
from secure_fedgraph.protocol.transports.batch import BATCH_TARGET_BYTES, Frame, decode_batch, encode_batches
from secure_fedgraph.wire import envelope_pb2

MIB = 2**20


def _decoded(batches: list[bytes], *, max_frames: int = 100) -> list[Frame]:
    return [frame for batch in batches for frame in decode_batch(batch, max_frames=max_frames)]


def repeated_frame_batch(client: int, body: bytes, count: int) -> bytes:
    """One valid batch whose frame (``client``, its one body) is repeated ``count`` times: the
    frame-repetition flood (issue 29, item 8: 2 million frames in 8 MB)."""
    head = envelope_pb2.Batch(bodies=[body], frames=[envelope_pb2.Frame(client=client)]).SerializeToString()
    frame = envelope_pb2.Frame(client=client).SerializeToString()
    return head + (b"\x12" + bytes([len(frame)]) + frame) * (count - 1)


def test_frames_round_trip_in_order_and_a_shared_body_goes_once_per_batch():
    shared = b"w" * 1000  # one request encoded once for many clients (a broadcast)
    frames = [Frame(0, shared), Frame(1, b"own answer"), Frame(2, shared), Frame(3, left="timed out"), Frame(4, shared)]
    batches = encode_batches(frames, max_bytes=256 * MIB)
    assert len(batches) == 1
    assert _decoded(batches) == frames
    assert len(batches[0]) < 2 * len(shared)  # three frames, one copy of the body


def test_batches_are_cut_at_the_target_below_a_larger_limit():
    """A host's step of distinct uploads (masked inputs) must not travel as one message of the
    whole step: the receiver holds a few messages per stream at once."""
    frames = [Frame(c, bytes([c]) * MIB) for c in range(40)]  # 40 MiB of distinct bodies
    batches = encode_batches(frames, max_bytes=256 * MIB)
    assert len(batches) == 3
    assert all(len(b) <= BATCH_TARGET_BYTES for b in batches)
    assert _decoded(batches) == frames
    small_limit = encode_batches(frames, max_bytes=4 * MIB)  # a smaller limit still governs
    assert all(len(b) <= 4 * MIB for b in small_limit) and _decoded(small_limit) == frames


def test_a_body_larger_than_the_target_but_within_the_limit_goes_alone():
    big = Frame(7, b"x" * (BATCH_TARGET_BYTES + MIB))
    frames = [Frame(6, b"a"), big, Frame(8, b"b")]
    batches = encode_batches(frames, max_bytes=256 * MIB)
    assert len(batches) == 3 and BATCH_TARGET_BYTES < len(batches[1]) < 256 * MIB
    assert _decoded(batches) == frames


def test_a_shared_body_decodes_to_one_object():
    shared = b"w" * 1000
    frames = _decoded(encode_batches([Frame(0, shared), Frame(1, shared)], max_bytes=MIB))
    assert frames[0].body == shared and frames[0].body is frames[1].body


def test_a_batch_naming_a_client_twice_is_refused_naming_it_and_counting_the_frames():
    data = encode_batches([Frame(2, b"a"), Frame(5, b"b"), Frame(2, b"c")], max_bytes=MIB)[0]
    with pytest.raises(ProtocolError, match=r"^a batch of 3 frames \(\d+ bytes\) refused: client 2 is named by more than one frame "
                                            r"\(a batch carries at most one frame per client\)$"):
        decode_batch(data, max_frames=4)
    left_and_answer = encode_batches([Frame(2, left="it left the run"), Frame(2, b"answer")], max_bytes=MIB)[0]
    with pytest.raises(ProtocolError, match="client 2 is named by more than one frame"):
        decode_batch(left_and_answer, max_frames=4)


def test_a_batch_with_more_frames_than_its_streams_clients_is_refused():
    data = encode_batches([Frame(c, b"x") for c in range(3)], max_bytes=MIB)[0]
    assert len(decode_batch(data, max_frames=3)) == 3
    with pytest.raises(ProtocolError, match=r"a batch of 3 frames .* refused: more frames than the 2 clients its stream speaks for"):
        decode_batch(data, max_frames=2)
    with pytest.raises(ProtocolError, match="more frames than the 0 clients"):
        decode_batch(encode_batches([Frame(1, left="it left the run")], max_bytes=MIB)[0], max_frames=0)


def test_a_frame_flood_is_refused_at_its_second_frame_before_the_others_are_built(monkeypatch):
    """200,000 frames repeating one client's frame (800 kB): the decoder admits the first,
    refuses the second, and builds no other; the message counts them all."""
    admitted = []
    real = batch_module.one_frame_per_client
    monkeypatch.setattr(batch_module, "one_frame_per_client", lambda seen, client, **kw: (admitted.append(client), real(seen, client, **kw)))
    data = repeated_frame_batch(3, b"an answer", 200_000)
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match=rf"^a batch of 200,000 frames \({len(data):,} bytes\) refused: client 3 is named by "):
            decode_batch(data, max_frames=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert admitted == [3, 3]
    assert peak < 64 * 1024  # nothing per frame: the count reads the fields in place


def test_a_flood_past_the_count_cap_says_at_least(monkeypatch):
    monkeypatch.setattr(batch_module, "FRAMES_COUNTED", 1000)
    with pytest.raises(ProtocolError, match=r"^a batch of at least 1,002 frames"):
        decode_batch(repeated_frame_batch(3, b"x", 5000), max_frames=1)


def test_an_accepted_batch_costs_about_its_wire_size_once_more():
    """Its bytes, plus one copy of each body its frames use: distinct 64 kB bodies for 64
    clients (4 MiB) add 4 MiB and a little, not the two or three copies of a full parse."""
    frames = [Frame(c, bytes([c]) * 2**16) for c in range(64)]
    data = encode_batches(frames, max_bytes=256 * MIB)[0]
    tracemalloc.start()
    try:
        decoded = decode_batch(data, max_frames=64)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoded == frames
    assert len(data) < peak < 1.1 * len(data)


@pytest.mark.parametrize(
    "data,message",
    [
        (envelope_pb2.Batch(frames=[envelope_pb2.Frame(client=1)]).SerializeToString() + b"\x18\x01", "field 3 of wire type 0 is no part of a Batch"),
        (b"\x0a\x05abc", "truncated"),
        (b"\x0a" + b"\xff" * 11, "a varint longer than 10 bytes"),
        (b"\x12\x03\xff\xff\xff", "frame 0"),
        (envelope_pb2.Batch(bodies=[b"a", b"b", b"c"]).SerializeToString(), "more bodies than the 2 frames it may carry"),
    ],
    ids=["unknown field", "truncated", "long varint", "bad frame", "bodies"],
)
def test_malformed_batches_are_refused_with_the_reason(data, message):
    with pytest.raises(ProtocolError, match=f"malformed batch .*{message}"):
        decode_batch(data, max_frames=2)


def test_a_body_index_that_points_nowhere_gives_an_empty_body():
    data = envelope_pb2.Batch(bodies=[b"a"], frames=[envelope_pb2.Frame(client=1, body=5), envelope_pb2.Frame(client=2, body=-1)]).SerializeToString()
    assert decode_batch(data, max_frames=2) == [Frame(1, b""), Frame(2, b"")]


def test_iter_batches_reads_frames_only_as_far_as_the_batch_it_builds():
    """A sender that takes the next batch when its stream has room holds one batch's bodies:
    the frames after the first batch are not read (so not encoded) before it goes."""
    read = []

    def frames():
        for c in range(40):
            read.append(c)
            yield Frame(c, bytes([c]) * MIB)

    batches = batch_module.iter_batches(frames(), max_bytes=256 * MIB)
    first = next(batches)
    assert len(read) <= BATCH_TARGET_BYTES // MIB + 1  # the first batch and the frame that did not fit
    assert _decoded([first, *batches]) == [Frame(c, bytes([c]) * MIB) for c in range(40)]


def test_a_body_freed_as_soon_as_it_is_copied_in_is_not_taken_for_a_later_one():
    """Bodies are recognised as shared by identity, and a freed body's id can be reused by the
    next one: each frame still carries its own body, in a batch or across batches."""
    frames = (Frame(c, bytes([c % 256]) * 100_000) for c in range(400))  # each body freed as soon as it is copied in
    got = _decoded(list(batch_module.iter_batches(frames, max_bytes=256 * MIB)), max_frames=400)
    assert [f.body[:1] for f in got] == [bytes([c % 256]) for c in range(400)]
