"""benchmarks/progress.py: a benchmark says on stderr which run goes, every few seconds how long
it has gone and the last line its server wrote, and when it ends; stdout (the results) gets
nothing of it."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("progress", Path(__file__).resolve().parents[2] / "benchmarks" / "progress.py")
progress = sys.modules.setdefault("progress", importlib.util.module_from_spec(_spec))
if not hasattr(progress, "running"):
    _spec.loader.exec_module(progress)


def test_a_run_is_announced_ticks_quoting_its_servers_last_line_and_ends(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text("server: fedavg-vector with the mask backend, listening on 127.0.0.1:1 (mutual TLS); waiting for 3 clients\n"
                   "round 1, set-up, broadcast: 2 of 3 clients answered, 5 s\n")
    with progress.running("mask n=3 L=1e+05", tick_s=0.2):
        progress.follow(log)
        time.sleep(0.5)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[0] == "# mask n=3 L=1e+05 ..."
    assert "# mask n=3 L=1e+05: 0 s so far (round 1, set-up, broadcast: 2 of 3 clients answered, 5 s)" in lines
    assert lines[-1].startswith("# mask n=3 L=1e+05: done in 0.")


def test_a_failed_run_says_so_and_the_error_goes_on(capsys):
    with pytest.raises(RuntimeError, match="the server exited"):
        with progress.running("plain n=3 L=1e+05", tick_s=10):
            raise RuntimeError("the server exited")
    assert capsys.readouterr().err.splitlines() == ["# plain n=3 L=1e+05 ...", "# plain n=3 L=1e+05: failed after 0 s"]
    progress.follow(Path("nowhere.log"))  # no run in progress: nothing to follow, nothing said
    assert capsys.readouterr() == ("", "")
