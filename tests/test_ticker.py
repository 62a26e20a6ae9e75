"""secure_fedgraph/ticker.py: a line every few seconds while long work goes on, none after it."""

from __future__ import annotations

import time

from secure_fedgraph.ticker import every


def test_lines_come_while_the_work_goes_and_stop_with_it():
    said: list[str] = []
    began = time.monotonic()
    with every(0.05, said.append, lambda: f"working, {time.monotonic() - began:.2f} s"):
        time.sleep(0.4)
    count = len(said)
    assert count >= 3 and all(line.startswith("working, ") for line in said)
    time.sleep(0.2)
    assert len(said) == count  # nothing once the block ended


def test_an_empty_line_says_nothing():
    said: list[str] = []
    with every(0.02, said.append, lambda: ""):
        time.sleep(0.15)
    assert said == []
