"""Batches on a host stream (protocol/transports/batch.py): frames come back in order with their
bodies, a body shared by many frames goes once per batch, and batches stay near
BATCH_TARGET_BYTES however large the stream's message limit is."""

from __future__ import annotations

from secure_fedgraph.protocol.transports.batch import BATCH_TARGET_BYTES, Frame, decode_batch, encode_batches

MIB = 2**20


def _decoded(batches: list[bytes]) -> list[Frame]:
    return [frame for batch in batches for frame in decode_batch(batch)]


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
