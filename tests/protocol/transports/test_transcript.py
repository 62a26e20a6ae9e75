"""Transcripts (protocol/transports/transcript.py): records survive a writer killed mid-record."""

from __future__ import annotations

import struct

from secure_fedgraph.protocol.transports.transcript import RECEIVED, SENT, TranscriptWriter, read_transcript


def test_a_writer_cuts_off_the_torn_record_a_killed_writer_left_before_it_appends(tmp_path):
    """A server killed mid-write (server --resume appends to its transcript) leaves part of a
    record; the next writer removes it, so every record reads back whole."""
    path = tmp_path / "transcript.bin"
    first = TranscriptWriter(path)
    first.record(SENT, 1, b"a" * 10, at=1.0)
    first.record(RECEIVED, 2, b"b" * 20, at=2.0)
    first.close()
    whole = path.stat().st_size
    with open(path, "ab") as f:  # what a SIGKILL between a record's header and its data leaves
        f.write(struct.pack("<dcqI", 4.0, SENT, 4, 100) + b"d" * 7)
    second = TranscriptWriter(path)
    assert path.stat().st_size == whole
    second.record(SENT, 3, b"c" * 5, at=3.0)
    second.close()
    assert [(r.direction, r.peer, r.data) for r in read_transcript(path)] == [(SENT, 1, b"a" * 10), (RECEIVED, 2, b"b" * 20), (SENT, 3, b"c" * 5)]
