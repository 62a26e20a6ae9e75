"""Transcripts: every message a party received or sent, as wire bytes, for audits.

A transcript is a binary file of records: an 8-byte timestamp (float64, seconds), a 1-byte
direction (``r``eceived, ``s``ent, or ``a``udit: a client's own plaintext contribution, written
only when the client is run with auditing on), an 8-byte peer id, a 4-byte length, then the
Envelope bytes, exactly as they crossed the wire. The server's transcript is what the server
says it saw: the audit checks claims against it (threat_model.md), and, where the clients'
transcripts are given, compares every message a client received or sent with the server's
record of it at the same (session, step) (R-TRANSCRIPT).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from secure_fedgraph.protocol.core.messages import Header, UploadResponse, named
from secure_fedgraph.protocol.transports import codec

_HEAD = struct.Struct("<dcqI")
RECEIVED, SENT, AUDIT = b"r", b"s", b"a"


@dataclass(frozen=True)
class Record:
    time: float
    direction: bytes
    peer: int
    data: bytes

    def message(self) -> Any:
        return codec.decode(self.data)


class TranscriptWriter:
    """Appends records; safe to share between threads. Each record reaches the file before the
    next is written (flushed), so a party killed mid-run loses at most the record it was writing:
    the audit compares the clients' transcripts with the server's message by message, and a
    record lost in a buffer would read as one the server withheld. A writer killed mid-record (a
    server that ``--resume`` continues appends to the transcript its killed predecessor wrote)
    leaves a torn last record: the next writer cuts it off before it appends."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            os.truncate(self.path, _whole_records(self.path))
        self._file: BinaryIO = open(self.path, "ab")  # noqa: SIM115 (closed by close())
        self._lock = threading.Lock()

    def record(self, direction: bytes, peer: int, data: bytes, *, at: float) -> None:
        with self._lock:
            self._file.write(_HEAD.pack(at, direction, peer, len(data)))
            self._file.write(data)
            self._file.flush()

    def contributed(self, client: int, header: Header, name: str, tensors: Any) -> None:
        """``client``'s own input in the clear, on its own disk (auditing on): a secure-sum
        contribution, or an upload before its DP hook, as the UploadResponse it would be."""
        self.record(AUDIT, client, codec.encode(UploadResponse(header, name, named(tensors))), at=time.time())

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _whole_records(path: Path) -> int:
    """How many leading bytes of ``path`` hold whole records."""
    size, end = path.stat().st_size, 0
    with open(path, "rb") as f:
        while len(head := f.read(_HEAD.size)) == _HEAD.size and end + _HEAD.size + _HEAD.unpack(head)[3] <= size:
            end += _HEAD.size + _HEAD.unpack(head)[3]
            f.seek(end)
    return end


def read_transcript(path: str | Path) -> Iterator[Record]:
    """The records of a transcript, in order."""
    with open(path, "rb") as f:
        while head := f.read(_HEAD.size):
            if len(head) < _HEAD.size:
                raise ValueError(f"{path}: truncated record header")
            at, direction, peer, length = _HEAD.unpack(head)
            data = f.read(length)
            if len(data) != length:
                raise ValueError(f"{path}: truncated record")
            yield Record(at, direction, peer, data)


class RunTranscripts:
    """Every party's transcript of a run with all parties in one process (the in-process
    transport): the server's ``transcript.bin`` and each client's ``clients/client-<id>.bin``,
    in the formats the gRPC runtimes write (``server --transcript``; ``client --transcript DIR
    --audit``), so ``secure-fedgraph audit`` reads either. The clients' files hold audit records
    (their plaintext contributions, their uploads before the DP hook): one user runs every party
    here, and those records are that user's own data. A new run starts the files afresh (a
    folder reused for another run would otherwise mix two runs' records in one audit)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        for old in [self.folder / "transcript.bin", *(self.folder / "clients").glob("client-*.bin")]:
            old.unlink(missing_ok=True)
        self.server = TranscriptWriter(self.folder / "transcript.bin")
        self._clients: dict[int, TranscriptWriter] = {}
        self._lock = threading.Lock()

    def client(self, client: int) -> TranscriptWriter:
        with self._lock:
            if client not in self._clients:
                self._clients[client] = TranscriptWriter(self.folder / "clients" / f"client-{client}.bin")
            return self._clients[client]

    def down(self, client: int, sent: bytes, delivered: bytes | None) -> None:
        """The server sent ``sent`` to ``client``, which received ``delivered`` (None: it never arrived)."""
        now = time.time()
        self.server.record(SENT, client, sent, at=now)
        if delivered is not None:
            self.client(client).record(RECEIVED, -1, delivered, at=now)

    def up(self, client: int, sent: bytes, delivered: bytes | None) -> None:
        """``client`` answered ``sent``; the server received ``delivered`` (None: it never arrived)."""
        now = time.time()
        self.client(client).record(SENT, -1, sent, at=now)
        if delivered is not None:
            self.server.record(RECEIVED, client, delivered, at=now)

    def close(self) -> None:
        self.server.close()
        for writer in self._clients.values():
            writer.close()
