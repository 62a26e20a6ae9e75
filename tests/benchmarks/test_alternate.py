"""benchmarks/alternate.py alternates two checkouts' runs of a benchmark and summarises both sides
from the runs' JSON lines: each cell's round seconds and ÷ floor, least / median / largest."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.benchmarks.test_fedavg_round import _load_benchmark

alternate = _load_benchmark("alternate", as_name="alternate_benchmark")


def _run(backend: str, n: int, seconds, floor: float | None = None) -> list[str]:
    lines = [json.dumps({"record": "meta", "benchmark": "x"}),
             json.dumps({"record": "run", "backend": backend, "n": n, "L": 100000, "round_seconds": seconds})]
    if floor is not None:
        lines.append(json.dumps({"record": "floor", "backend": backend, "n": n, "L": 100000, "floor_s": floor}))
    return lines + ["| a table | the benchmark printed |"]


def test_cells_pair_each_run_with_its_floor_and_take_the_median_of_a_list_of_rounds():
    lines = _run("plain", 100, 0.3) + _run("mask", 100, 2.0, floor=1.6) + _run("mask", 1000, [110.0, 90.0, 100.0], floor=80.0)
    assert alternate.cells(lines) == {
        ("plain", 100, 100000): {"seconds": 0.3},
        ("mask", 100, 100000): {"seconds": 2.0, "floor": 1.6},
        ("mask", 1000, 100000): {"seconds": 100.0, "floor": 80.0},  # load.py's rounds: their median
    }


def test_the_summary_gives_each_side_its_least_median_and_largest():
    before = [alternate.cells(_run("mask", 100, s, floor=1.0)) for s in (2.4, 2.0, 2.2)]
    after = [alternate.cells(_run("mask", 100, s, floor=f)) for s, f in ((1.8, 1.2), (1.9, 1.0), (2.1, 1.4))]
    row = alternate.summary({"before": before, "after": after}).splitlines()[2]
    assert row == "| mask | 100 | 100000 | 2.00 / 2.20 / 2.40 | 1.80 / 1.90 / 2.10 | 2.00 / 2.20 / 2.40 | 1.50 / 1.50 / 1.90 |"


def test_a_cell_one_side_lacks_is_a_dash():
    row = alternate.summary({"before": [alternate.cells(_run("plain", 10, 0.5))], "after": [{}]}).splitlines()[2]
    assert row == "| plain | 10 | 100000 | 0.50 | — | — | — |"


def test_a_run_without_an_L_is_summarised_as_it_came():
    lines = [json.dumps({"record": "run", "backend": "mask", "n": 10, "round_seconds": 1.0})]
    row = alternate.summary({"before": [alternate.cells(lines)], "after": [alternate.cells(lines)]}).splitlines()[2]
    assert row == "| mask | 10 | None | 1.00 | 1.00 | — | — |"


def _checkout(root: Path, seconds: float) -> Path:
    """A checkout whose .venv/bin/python is this interpreter and whose benchmark prints one run."""
    (root / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, root / ".venv" / "bin" / "python")
    (root / "bench.py").write_text("import json\n" + "".join(f"print({line!r})\n" for line in _run("mask", 100, seconds, floor=1.0)))
    return root


def test_runs_alternate_and_every_run_is_kept(tmp_path, capsys):
    before, after = _checkout(tmp_path / "before", 2.0), _checkout(tmp_path / "after", 1.5)
    out = tmp_path / "raw.txt"
    assert alternate.main(["--before", str(before), "--after", str(after), "--times", "2", "--out", str(out), "--", "bench.py"]) == 0
    sides = [line.split()[2] for line in out.read_text().splitlines() if line.startswith("# --- ")]
    assert sides == ["before", "after", "before", "after"]
    assert "| mask | 100 | 100000 | 2.00 / 2.00 / 2.00 | 1.50 / 1.50 / 1.50 | 2.00 / 2.00 / 2.00 | 1.50 / 1.50 / 1.50 |" in capsys.readouterr().out


@pytest.mark.parametrize("args, match", [
    (["--before", "b", "--after", "a", "--out", "o"], "after `--`"),
    (["--before", "{tmp}", "--after", "{tmp}", "--out", "{tmp}/o", "--", "bench.py"], "no .venv/bin/python"),
])
def test_a_wrong_command_line_says_what_is_missing(tmp_path, args, match):
    with pytest.raises(SystemExit, match=match):
        alternate.main([a.format(tmp=tmp_path) for a in args])
