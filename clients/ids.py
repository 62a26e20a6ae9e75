"""Client id ranges as the command line writes them ("0-9", "0,3,5-7"): light, so the command
line can check --ids before it imports torch."""

from __future__ import annotations

from collections.abc import Sequence

from secure_fedgraph.errors import ConfigError

__all__ = ["format_ids", "parse_ids"]


def parse_ids(text: str) -> list[int]:
    """'A-B' (inclusive), 'A,B,C' or a mix: '0-9,12'."""
    ids: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError:
        raise ConfigError(f"--ids must look like 0-9 or 0,3,5-7, got {text!r}") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ConfigError(f"--ids must name distinct non-negative ids, got {text!r}")
    return ids


def format_ids(ids: Sequence[int]) -> str:
    """The inverse of :func:`parse_ids`: sorted ids as ranges ("0-3,7")."""
    parts, ordered = [], sorted(ids)
    start = previous = ordered[0] if ordered else None
    for i in ordered[1:] + [None]:
        if i is not None and i == previous + 1:
            previous = i
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = i
    return ",".join(parts)
