"""The sweep's progress while its runs go, not only when each ends: every ``TICK_S`` seconds one
line naming each run in progress, its seconds so far and the last line it wrote (its own step
progress: round, phase, stage, how many clients of how many; docs/running.md). A run takes
minutes, and without this a sweep of hours said nothing between two finished runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path


TICK_S = 30.0
TAIL_BYTES = 4096  # enough for the last few progress lines of a run's output.txt
LINE_CHARS = 120


class RunningPoints:
    """Which runs are in progress, and the line that says where they are (for
    secure_fedgraph/ticker.py's ``every``, every ``TICK_S``)."""

    def __init__(self, bar: Callable[[], str]) -> None:
        self._bar = bar
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, Path]] = {}

    def started(self, label: str, output: Path) -> None:
        with self._lock:
            self._running[label] = (time.monotonic(), output)

    def finished(self, label: str) -> None:
        with self._lock:
            self._running.pop(label, None)

    def line(self) -> str:
        with self._lock:
            running = sorted(self._running.items())
        if not running:
            return ""
        now = time.monotonic()
        parts = [f"{label} {now - began:.0f} s" + (f" ({last})" if (last := last_line(output)) else "") for label, (began, output) in running]
        return f"sweep: {self._bar()} running: {'; '.join(parts)}"


def last_line(path: Path) -> str:
    """The last non-empty line of a run's output so far, shortened; "" before it wrote one."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").replace("\r", "\n").splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    return lines[-1] if len(lines[-1]) <= LINE_CHARS else lines[-1][: LINE_CHARS - 1] + "…"
