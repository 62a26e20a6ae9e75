"""Known-answer vectors in tests/vectors."""

from __future__ import annotations

from pathlib import Path

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def read_vectors(name: str) -> list[dict[str, str]]:
    """Parse a `KEY = VALUE` vector file in tests/vectors: '#' lines are comments, blank lines end a record."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in (VECTORS / name).read_text().splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                records.append(current)
                current = {}
            continue
        key, _, value = line.partition("=")
        current[key.strip()] = value.strip()
    return records
