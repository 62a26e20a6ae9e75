"""Which rows of each client's data went out through a DP hook, and how often: the input of
the accountant, kept by the collectives (the server's ``upload``), not counted by a plan.

A row is one sample of the privacy unit (a window of a sensor for CNFGNN). Rows released in
the same upload compose in parallel (they are disjoint data); the releases of one row compose
sequentially, so a client's privacy loss is that of its most released row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class ReleaseLedger:
    """Release counts per client, per unit (a named set of rows, e.g. a split), per row."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], np.ndarray] = {}

    def record(self, client: int, unit: str, rows: Sequence[int] | np.ndarray) -> None:
        """One release of ``rows`` of ``unit`` by ``client``."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        counts = self._counts.get((client, unit), np.zeros(0, dtype=np.int64))
        if int(rows.max()) >= counts.size:
            counts = np.concatenate([counts, np.zeros(int(rows.max()) + 1 - counts.size, dtype=np.int64)])
        np.add.at(counts, rows, 1)
        self._counts[(client, unit)] = counts

    def most_released(self, client: int) -> int:
        """How often this client's most released row went out (0: never)."""
        return max((int(c.max()) for (owner, _), c in self._counts.items() if owner == client and c.size), default=0)

    def per_client(self, clients: Iterable[int]) -> dict[int, int]:
        return {client: self.most_released(client) for client in clients}
