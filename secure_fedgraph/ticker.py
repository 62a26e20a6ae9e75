"""A line every few seconds while long work goes on (a sweep's runs, an audit's attacks), so work
of minutes is never silent; the work itself says when it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def every(seconds: float, say: Callable[[str], None], line: Callable[[], str]) -> Iterator[None]:
    """While the block runs, say ``line()`` every ``seconds`` (nothing when it returns "")."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(seconds):
            text = line()
            if text:
                say(text)

    thread = threading.Thread(target=tick, name="ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
