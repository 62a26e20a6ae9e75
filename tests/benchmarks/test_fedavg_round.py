"""benchmarks/fedavg_round.py reads benchmarks/flower_secagg.py's JSON lines for its Flower columns:
the run at our degree + 1 and threshold first (equal security), then Flower's default degree, then
the 2026-11-22 figures; and flower_secagg.py's k and t rules are Flower's."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path


def _load_benchmark(name: str, *, as_name: str):
    """benchmarks/<name>.py by its path, as module ``as_name`` (a script folder, not a package)."""
    spec = importlib.util.spec_from_file_location(as_name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_load_benchmark("floor", as_name="floor")  # the names the benchmarks import them by
_load_benchmark("progress", as_name="progress")
fedavg_round = _load_benchmark("fedavg_round", as_name="fedavg_round_benchmark")
flower_secagg = _load_benchmark("flower_secagg", as_name="flower_secagg_benchmark")  # imports no flwr until it runs

META = {"date": "2026-11-27T12:00:00+00:00", "machine": "test box, 2 cores", "flwr": "1.41.0", "ray": "2.55.1"}


def _record(*, mode: str, n: int, L: int, rule: str | None = None, k: int | None = None, t: int | None = None, seconds=(1.0, 3.0, 2.0)) -> str:
    cell = {"mode": mode, "n": n, "L": L, "rule": rule, "k_asked": k, "t": t, "warmup": 1}
    result = {"seconds": list(seconds), "errors": [1e-6] * len(seconds), "sim_total_s": 20.0}
    return json.dumps(flower_secagg.run_record(cell, result, meta=META))


def test_flower_rules():
    assert [flower_secagg.default_shares(n) for n in (10, 50, 100, 200)] == [9, 13, 15, 17]  # peer-benchmark.md's k
    assert [flower_secagg.majority(k) for k in (9, 13, 15, 17)] == [5, 7, 8, 9]
    assert flower_secagg.flower_shares(89, 100) == 89
    assert flower_secagg.flower_shares(88, 100) == 89  # Flower makes an even k odd
    assert flower_secagg.flower_shares(10, 10) == 10 and flower_secagg.flower_shares(12, 10) == 10
    ours = {100: (88, 62)}
    assert flower_secagg.share_settings("default,ours,21", 100, threshold=None, ours=ours) == [
        {"rule": "default", "k_asked": 15, "t": 8}, {"rule": "ours", "k_asked": 89, "t": 62}, {"rule": "int", "k_asked": 21, "t": 11}]
    assert flower_secagg.share_settings("ours", 100, threshold=50, ours=ours) == [{"rule": "ours", "k_asked": 89, "t": 50}]


def test_run_record_fields():
    record = json.loads(_record(mode="secagg", n=100, L=100_000, rule="ours", k=88, t=62))
    assert record["record"] == "flower" and record["k"] == 89 and record["k_asked"] == 88
    assert record["median_seconds"] == 2.0 and record["round_seconds"] == [1.0, 3.0, 2.0]
    assert record["date"] == META["date"] and record["flwr"] == "1.41.0" and record["ray"] == "2.55.1"
    plain = json.loads(_record(mode="plain", n=100, L=100_000, rule="ours", k=88, t=62))
    assert (plain["k"], plain["t"], plain["rule"]) == (None, None, None)


def test_read_skips_everything_but_runs():
    lines = [json.dumps({"record": "meta", "benchmark": "flower_secagg"}), "| n | L | mode |", "{not json",
             _record(mode="plain", n=10, L=10_000), "# flower secagg n=10 ...", _record(mode="secagg", n=10, L=10_000, rule="default", k=9, t=5)]
    assert [r["mode"] for r in fedavg_round.read_flower_results(lines)] == ["plain", "secagg"]


def test_equal_security_first_then_default_then_fallback():
    results = fedavg_round.read_flower_results([
        _record(mode="plain", n=100, L=100_000, seconds=(0.5,)),
        _record(mode="secagg", n=100, L=100_000, rule="default", k=15, t=8, seconds=(9.0,)),
        _record(mode="secagg", n=100, L=100_000, rule="ours", k=89, t=62, seconds=(30.0,)),
        _record(mode="secagg", n=200, L=100_000, rule="default", k=17, t=9, seconds=(25.0,)),
    ])
    figure = fedavg_round.flower_secagg(results, n=100, L=100_000, degree=88, threshold=62)
    assert figure == {"seconds": 30.0, "k": 89, "t": 62, "rule": "ours", "date": "2026-11-27", "equal": True}
    assert fedavg_round.flower_cell(figure) == "89/62 (ours), 2026-11-27"
    # another threshold is not equal security: Flower's default degree from the same sitting
    assert fedavg_round.flower_secagg(results, n=100, L=100_000, degree=88, threshold=60)["seconds"] == 9.0
    # no mask run (no degree): the default degree
    assert fedavg_round.flower_secagg(results, n=200, L=100_000, degree=None, threshold=None)["k"] == 17
    # no run in the file for the cell: the 2026-11-22 figure, labelled with its date
    fallback = fedavg_round.flower_secagg(results, n=200, L=1_000_000, degree=144, threshold=106)
    assert fallback == {"seconds": 40.43, "k": 17, "t": 9, "rule": "default", "date": "2026-11-22", "equal": False}
    assert fedavg_round.flower_cell(fallback) == "17/9 (default), 2026-11-22"
    assert fedavg_round.flower_secagg([], n=10, L=100_000, degree=8, threshold=5)["equal"] is True  # the old log graph
    assert fedavg_round.flower_secagg([], n=50, L=100_000, degree=None, threshold=None) is None
    assert fedavg_round.flower_cell(None) == "—"


def test_last_run_wins():
    results = fedavg_round.read_flower_results([
        _record(mode="secagg", n=10, L=100_000, rule="default", k=9, t=5, seconds=(2.0,)),
        _record(mode="secagg", n=10, L=100_000, rule="default", k=9, t=5, seconds=(1.5,)),
    ])
    assert fedavg_round.flower_secagg(results, n=10, L=100_000, degree=None, threshold=None)["seconds"] == 1.5
