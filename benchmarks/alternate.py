"""Benchmark helper: a before/after comparison in one sitting, the two checkouts alternated.

Why: a change worth a few percent is smaller than the drift of a shared host over half an hour
(benchmarks/README.md quotes the same code's round at 1.78 to 2.22 s in one sitting). Running
before, after, before, after ... spreads the drift over both sides; the summary gives each side's
least, median and largest round and ratio to its floor, so a difference is read against the
spread of the same sitting, not against one run.

Run (each checkout with its own ``.venv``, e.g. ``git clone . ../before && git -C ../before checkout
<commit>`` and ``make .venv/.installed`` there):
    .venv/bin/python benchmarks/alternate.py --before ../before --after . --times 3 \\
        --out /tmp/ab.txt -- benchmarks/fedavg_round.py --n 100,200 --L 1e5 --backends plain,mask --rounds 5

Runs ``<checkout>/.venv/bin/python <script> <args>`` in each checkout (the script's path is taken
relative to it), ``--times`` times each, alternating, and appends every run's stdout to ``--out``
under a line naming the side, the run and the time. Then prints, for every ``record: run`` line
(fedavg_round.py, load.py and the like: backend, n, L, round_seconds) with its ``record: floor``
line where there is one, a table of both sides. Progress (each run as it starts and ends) goes
to stderr. This is a benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

SIDES = ("before", "after")


def cells(lines: Iterable[str]) -> dict[tuple, dict[str, float]]:
    """One run's JSON lines -> {(backend, n, L): {"seconds": its round s, "floor": its floor s (if
    given)}}; a floor without its run is left out."""
    out: dict[tuple, dict[str, float]] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        key = (record.get("backend"), record.get("n"), record.get("L"))
        if record.get("record") == "run" and "round_seconds" in record:
            seconds = record["round_seconds"]  # load.py's is every round's: its median
            out.setdefault(key, {})["seconds"] = statistics.median(seconds) if isinstance(seconds, list) else seconds
        elif record.get("record") == "floor" and "floor_s" in record:
            out.setdefault(key, {})["floor"] = record["floor_s"]
    return {k: v for k, v in out.items() if "seconds" in v}


def _spread(values: Sequence[float], fmt: str) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(min(values), fmt)} / {format(statistics.median(values), fmt)} / {format(max(values), fmt)}"


def summary(runs: Mapping[str, Sequence[Mapping[tuple, Mapping[str, float]]]]) -> str:
    """A markdown table of each cell's round seconds and ÷ floor per side: least / median / largest
    over the side's runs (one value where a side ran once)."""
    seen: dict[tuple, None] = {}
    by: dict[tuple, dict[str, list]] = defaultdict(lambda: {"seconds": [], "ratio": []})
    for side in SIDES:
        for run in runs.get(side, ()):
            for key, cell in run.items():
                seen[key] = None
                by[(side, key)]["seconds"].append(cell["seconds"])
                if cell.get("floor"):
                    by[(side, key)]["ratio"].append(cell["seconds"] / cell["floor"])
    rows = ["| backend | n | L | before: round s (least / median / largest) | after | before: ÷ floor | after |",
            "|---|---|---|---|---|---|---|"]
    for key in seen:
        backend, n, length = key
        b, a = by[("before", key)], by[("after", key)]
        length = format(length, "g") if isinstance(length, int | float) else length  # a benchmark without an L: as it came
        rows.append(f"| {backend} | {n} | {length} | {_spread(b['seconds'], '.2f')} | {_spread(a['seconds'], '.2f')} | "
                    f"{_spread(b['ratio'], '.2f')} | {_spread(a['ratio'], '.2f')} |")
    return "\n".join(rows)


def _interpreter(checkout: Path) -> Path:
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"alternate.py: {checkout} has no .venv/bin/python (run `make .venv/.installed` there first)")
    return python


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("alternate.py: give the benchmark after `--`, e.g. -- benchmarks/fedavg_round.py --n 100 --L 1e5")
    cut = argv.index("--")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", type=Path, required=True, help="the checkout measured first in each pair")
    p.add_argument("--after", type=Path, required=True, help="the checkout measured second in each pair")
    p.add_argument("--times", type=int, default=3, help="runs of each side, alternated (default 3)")
    p.add_argument("--out", type=Path, required=True, help="file the raw stdout of every run is appended to")
    args = p.parse_args(argv[:cut])
    command = argv[cut + 1:]
    if not command:
        p.error("no benchmark after `--`")
    if args.times < 1:
        p.error(f"--times must be at least 1, got {args.times}")
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    pythons = {side: _interpreter(path) for side, path in checkouts.items()}
    for side, path in checkouts.items():
        if not (path / command[0]).exists():
            raise SystemExit(f"alternate.py: {path / command[0]} does not exist ({side})")
    runs: dict[str, list] = {side: [] for side in SIDES}
    with open(args.out, "a") as out:
        out.write(f"# alternate.py {datetime.now(timezone.utc).isoformat(timespec='seconds')}: before {checkouts['before']}, "
                  f"after {checkouts['after']}, {args.times} times each: {' '.join(command)}\n")
        for i in range(1, args.times + 1):
            for side in SIDES:
                started = time.monotonic()
                print(f"# {side} {i}/{args.times} ...", file=sys.stderr, flush=True)
                done = subprocess.run([str(pythons[side]), *command], cwd=checkouts[side], capture_output=True, text=True)
                if done.returncode:
                    sys.stderr.write(done.stderr[-3000:])
                    raise SystemExit(f"alternate.py: the {side} run {i} failed with exit code {done.returncode}")
                out.write(f"# --- {side} {i} ({datetime.now(timezone.utc).isoformat(timespec='seconds')})\n{done.stdout}")
                out.flush()
                runs[side].append(cells(done.stdout.splitlines()))
                print(f"# {side} {i}/{args.times}: done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    print(summary(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
