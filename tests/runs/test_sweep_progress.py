"""secure_fedgraph/runs/sweep_progress.py: a sweep says where its runs are while they go, not only
when each ends."""

from __future__ import annotations

import sys

from secure_fedgraph.runs import sweep, sweep_progress


def test_a_sweep_names_each_run_in_progress_with_its_seconds_and_last_line(monkeypatch, tmp_path):
    """Two real runs (child processes) that write a step line and then work a while: while they
    go, the sweep says each one's label, its seconds so far and the line it last wrote; each
    still gets its line when it ends (here a failure: they write no metrics)."""
    monkeypatch.setattr(sweep_progress, "TICK_S", 0.2)
    script = "import sys, time; print('round 0, training, upload: 3 of 8 clients answered, 1 s', flush=True); time.sleep(1.2)"
    points = [sweep.Point("private", sigma, 0, tmp_path / f"p{sigma}", (sys.executable, "-c", script)) for sigma in (1.0, 2.0)]
    said: list[str] = []
    rows, failures = sweep.run_points(points, jobs=2, say=said.append)
    running = [line for line in said if "running:" in line]
    assert running, said
    assert any("private sigma=1 seed=0" in line and "private sigma=2 seed=0" in line for line in running)
    assert all("(round 0, training, upload: 3 of 8 clients answered, 1 s)" in line for line in running if " s (" in line)
    assert any(" s (round 0, training" in line for line in running)
    assert rows == [] and len(failures) == 2 and sum("FAILED" in line for line in said) == 2


def test_the_last_line_of_a_runs_output(tmp_path):
    path = tmp_path / "output.txt"
    assert sweep_progress.last_line(path) == ""  # not written yet
    path.write_text("first\nround 1, fedavg, input: 5 of 9 clients answered, 12 s\n\n")
    assert sweep_progress.last_line(path) == "round 1, fedavg, input: 5 of 9 clients answered, 12 s"
    path.write_text("x" * 500)
    assert sweep_progress.last_line(path) == "x" * (sweep_progress.LINE_CHARS - 1) + "…"
