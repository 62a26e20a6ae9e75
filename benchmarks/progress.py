"""A benchmark's progress, on stderr (stdout holds its results: the JSON lines and the table, which
stay as they were): a line as each run begins, one every ``TICK_S`` seconds while it goes (which
run, its seconds so far and, where it runs a server process, the last line the server wrote: its
round lines and its progress within a round), and one as it ends. A benchmark of minutes is then
never silent, as the sweep is not (secure_fedgraph/runs/sweep_progress.py).

    with running("mask n=100 L=1e+05"):
        measure(...)          # which calls follow(server_log) once it starts the server

The ticking is secure_fedgraph/ticker.py's ``every``; flower_secagg.py runs in a venv with Flower,
which may lack this project, and loads that file from the tree.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    from secure_fedgraph.runs.sweep_progress import last_line
    from secure_fedgraph.ticker import every
except ImportError:  # flower_secagg.py's venv: ticker.py needs only the standard library, so load it from the tree
    import importlib.util

    _spec = importlib.util.spec_from_file_location("_ticker", Path(__file__).resolve().parents[1] / "secure_fedgraph" / "ticker.py")
    _ticker = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_ticker)
    every = _ticker.every
    last_line = None

TICK_S = 30.0


class _Run:
    """The run in progress: its label, when it began, and the log it writes (once known)."""

    def __init__(self, label: str) -> None:
        self.label, self.began, self.log = label, time.monotonic(), None

    def line(self) -> str:
        last = last_line(self.log) if self.log is not None and last_line is not None else ""
        return f"# {self.label}: {time.monotonic() - self.began:.0f} s so far" + (f" ({last})" if last else "")


_current: _Run | None = None


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def running(label: str, *, tick_s: float | None = None) -> Iterator[None]:
    """Lines on stderr while the block runs: ``# LABEL ...`` now, ``# LABEL: S s so far (THE
    SERVER'S LAST LINE)`` every ``tick_s`` (default TICK_S), ``# LABEL: done in S s`` at the end (``failed
    after`` if it raised)."""
    global _current
    run = _current = _Run(label)
    say(f"# {label} ...")
    try:
        with every(tick_s or TICK_S, say, run.line):
            yield
    except BaseException:
        say(f"# {label}: failed after {time.monotonic() - run.began:.0f} s")
        raise
    finally:
        _current = None
    say(f"# {label}: done in {time.monotonic() - run.began:.1f} s")


def follow(log: Path) -> None:
    """The run in progress writes ``log`` (its server's output, unbuffered: PYTHONUNBUFFERED=1): its
    periodic line quotes the last line."""
    if _current is not None:
        _current.log = Path(log)
