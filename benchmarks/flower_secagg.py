"""Benchmark: Flower's SecAgg+ and plain FedAvg, one aggregation round, in Flower's simulation engine.

The peer's side of ``fedavg_round.py``, measured the way shared/research/peer-benchmark.md measured
it (2026-11-22, flwr 1.41.0 on Ray 2.55.1), so that both sides can come from the same sitting:

- Workload: one aggregation round over n clients. Each client contributes a float32 vector of
  length L drawn uniformly from [-1, 1) (a seeded generator per (seed, client, round): fresh
  vectors every round); nothing is trained. Clients report ``num_examples=1``.
- SecAgg+: ``SecAggPlusWorkflow`` as the fit workflow of a ``DefaultWorkflow`` on the ServerApp,
  ``secaggplus_mod`` on the ClientApp, with ``num_shares`` k and ``reconstruction_threshold`` t,
  ``max_weight=1.0``, ``clipping_range=8``, ``quantization_range=2^22``, ``modulus_range=2^32``.
  Plain: Flower's default fit workflow (FedAvg, no mod).
- Engine: ``flwr.simulation.run_simulation`` (Ray backend), every ClientApp in Ray actors of
  ``--client-cpus`` CPUs each on this machine (1: one actor per core).
- Timing: the wall time of the fit workflow (configure_fit through aggregate_fit) on the
  ServerApp thread, per round; ``--warmup`` untimed rounds first, then ``--rounds`` timed
  ones, reported each and as their median. Ray's start-up is not counted (``sim_total_s``).
- Correctness: after every round the global model is compared with the exact float64 mean of
  the round's n vectors (``max_abs_error``, the largest over the timed rounds).

k and t (``--num-shares``, a comma list; ``--threshold``):

- ``default``: the peer benchmark's rule, k = min(n, 2*ceil(log2 n) + 1), t = k//2 + 1 (Bell et
  al.'s O(log n) neighbourhood; our ``fedavg_round.py --degree log`` runs at degree k - 1).
- ``ours``: the degree and threshold our default adversary needs, the ones ``fedavg_round.py``
  runs its mask backend at (``MaskConfig(graph=GraphKind.SPARSE).resolve(n, None)``, as
  ``floor.default_plan(n, L, graph="sparse", clip_range=1)``): k = degree + 1 (Flower's num_shares
  counts the client itself) and t = our threshold. The project needs its own dependencies
  (tenseal, torch) that the Flower venv lacks, so the plan comes from ``--ours-python``, the
  project's interpreter, run from this checkout.
- an int: that k, with t = k//2 + 1.

``--threshold`` overrides t for every setting. Flower makes an even k below n odd (k + 1) and
needs t < k; the JSON gives both the k asked for and the k Flower used (``k``).

Output: one ``record: meta`` line (date, machine, flwr and ray versions, arguments), one
``record: flower`` line per run (mode plain or secagg, n, L, k, t, the wall seconds of each timed
round and their median, the largest error), then a Markdown table. ``fedavg_round.py
--flower-results FILE`` reads these lines for its "SecAgg+ s (Flower)" column. Each run
is a child process of its own (a fresh Ray).

Run (from the repository root; Flower is not a dependency of this project, so it lives in a
venv of its own, see benchmarks/README.md):

    python3 -m venv ../flower-venv && ../flower-venv/bin/pip install "flwr[simulation]==1.41.0"
    ../flower-venv/bin/python benchmarks/flower_secagg.py --n 10 --L 1e4 --rounds 1
    ../flower-venv/bin/python benchmarks/flower_secagg.py --n 100,200 --L 1e5 \\
        --num-shares default,ours --ours-python .venv/bin/python

Without flwr it prints how to install it and exits 0. This is a benchmark, not a test: pytest
does not collect it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from floor import cpu_model, int_list
from progress import running

FLWR_VERSION = "1.41.0"  # what shared/research/peer-benchmark.md measured (on ray 2.55.1, which it pulls)
INSTALL = (f'python3 -m venv ../flower-venv && ../flower-venv/bin/pip install "flwr[simulation]=={FLWR_VERSION}"'
           " (a venv of its own: Flower is not a dependency of this project; it brings ray 2.55.1)")
REPO = Path(__file__).resolve().parents[1]
SECAGG = {"max_weight": 1.0, "clipping_range": 8.0, "quantization_range": 2**22, "modulus_range": 2**32}  # the peer benchmark's


def default_shares(n: int) -> int:
    """The peer benchmark's SecAgg+ neighbourhood (self included): min(n, 2*ceil(log2 n) + 1)."""
    return min(n, 2 * math.ceil(math.log2(n)) + 1)


def majority(k: int) -> int:
    """The threshold the peer benchmark pairs with k shares: k//2 + 1."""
    return k // 2 + 1


def flower_shares(k: int, n: int) -> int:
    """The num_shares Flower's SecAggPlusWorkflow uses for k among n clients: a ring of k//2
    neighbours each side, so an even k below n becomes k + 1, and at most n."""
    if k >= n:
        return n
    return min(n, k + 1 if k % 2 == 0 else k)


def ours_plans(ns: Sequence[int], *, python: str) -> dict[int, tuple[int, int]]:
    """(degree, threshold) of our default adversary's sparse graph for each n, as fedavg_round.py
    runs mask: ``floor.default_plan(n, L, graph="sparse", clip_range=1)`` (L only sets the ring),
    computed by the project's interpreter ``python`` from this checkout."""
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); from floor import default_plan; "
            f"print(json.dumps({{n: default_plan(n, 1, graph='sparse', clip_range=1)[:2] for n in {list(ns)!r}}}))")
    try:
        done = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise SystemExit(f"--num-shares ours needs the project's Python (--ours-python), not found: {python}") from None
    if done.returncode != 0:
        raise SystemExit(f"--num-shares ours: {python} could not compute our plan (is it the project's venv?):\n{done.stderr[-2000:]}")
    return {int(n): (int(d), int(t)) for n, (d, t) in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def share_settings(spec: str, n: int, *, threshold: int | None, ours: Mapping[int, tuple[int, int]]) -> list[dict]:
    """The (rule, k asked, t) of each entry of ``--num-shares`` at n clients."""
    out = []
    for rule in (s.strip() for s in spec.split(",") if s.strip()):
        if rule == "default":
            k = default_shares(n)
            t = majority(k)
        elif rule == "ours":
            degree, t = ours[n]
            k = degree + 1
        else:
            k = int(rule)
            t = majority(k)
            rule = "int"
        out.append({"rule": rule, "k_asked": k, "t": threshold or t})
    return out


def client_vector(*, seed: int, client: int, server_round: int, length: int):
    """Client ``client``'s float32 vector in round ``server_round``: uniform in [-1, 1)."""
    import numpy as np

    return np.random.default_rng([seed, client, server_round]).uniform(-1.0, 1.0, length).astype(np.float32)


def exact_mean(*, seed: int, n: int, server_round: int, length: int):
    """The float64 mean of the round's n client vectors."""
    import numpy as np

    total = np.zeros(length, dtype=np.float64)
    for client in range(n):
        total += client_vector(seed=seed, client=client, server_round=server_round, length=length)
    return total / n


def run_once(cell: Mapping) -> dict:
    """One simulation: ``cell["warmup"] + cell["rounds"]`` rounds of ``cell["mode"]`` (plain or
    secagg) over n clients of L values; returns the timed rounds' seconds and errors."""
    import numpy as np
    from flwr.client import ClientApp, NumPyClient
    from flwr.client.mod import secaggplus_mod
    from flwr.common import ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.compat.common import recorddict_compat as compat
    from flwr.server import LegacyContext, ServerApp, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD, Key
    from flwr.server.workflow.default_workflows import default_fit_workflow
    from flwr.simulation import run_simulation

    n, length, seed = cell["n"], cell["L"], cell["seed"]
    total_rounds = cell["warmup"] + cell["rounds"]
    seconds: list[float] = []
    errors: list[float] = []

    def client_fn(context):
        client = int(context.node_config["partition-id"])

        class VectorClient(NumPyClient):
            def fit(self, parameters, config):
                return [client_vector(seed=int(config["seed"]), client=client, server_round=int(config["round"]),
                                      length=int(config["length"]))], 1, {}

        return VectorClient().to_client()

    server = ServerApp()

    @server.main()
    def _main(grid, context) -> None:
        strategy = FedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=n, min_available_clients=n,
                          initial_parameters=ndarrays_to_parameters([np.zeros(length, dtype=np.float32)]),
                          on_fit_config_fn=lambda server_round: {"round": server_round, "seed": seed, "length": length})
        fit = (SecAggPlusWorkflow(num_shares=cell["k_asked"], reconstruction_threshold=cell["t"], **SECAGG)
               if cell["mode"] == "secagg" else default_fit_workflow)

        def timed_fit(grid, ctx) -> None:
            started = time.perf_counter()
            fit(grid, ctx)
            seconds.append(time.perf_counter() - started)
            server_round = int(ctx.state.config_records[MAIN_CONFIGS_RECORD][Key.CURRENT_ROUND])
            model = parameters_to_ndarrays(compat.arrayrecord_to_parameters(ctx.state.array_records[MAIN_PARAMS_RECORD], keep_input=True))[0]
            errors.append(float(np.max(np.abs(model.astype(np.float64) - exact_mean(seed=seed, n=n, server_round=server_round, length=length)))))

        legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=total_rounds), strategy=strategy)
        DefaultWorkflow(fit_workflow=timed_fit, evaluate_workflow=lambda grid, ctx: None)(grid, legacy)

    mods = [secaggplus_mod] if cell["mode"] == "secagg" else []
    started = time.perf_counter()
    run_simulation(server_app=server, client_app=ClientApp(client_fn=client_fn, mods=mods), num_supernodes=n,
                   backend_config={"client_resources": {"num_cpus": cell["client_cpus"], "num_gpus": 0.0}})
    sim_total_s = time.perf_counter() - started
    if len(seconds) != total_rounds:
        raise RuntimeError(f"{cell['mode']} n={n} L={length}: {len(seconds)} of {total_rounds} rounds finished (see Flower's log above)")
    return {"seconds": seconds[cell["warmup"]:], "errors": errors[cell["warmup"]:], "warmup_seconds": seconds[:cell["warmup"]],
            "sim_total_s": sim_total_s}


def run_record(cell: Mapping, result: Mapping, *, meta: Mapping) -> dict:
    """The ``record: flower`` JSON line of one run (what ``fedavg_round.py --flower-results`` reads):
    its date and machine, the mode, n, L, k and t (None for plain), each timed round's wall
    seconds, their median and the largest error against the exact mean."""
    secagg = cell["mode"] == "secagg"
    return {
        "record": "flower", "date": meta["date"], "machine": meta["machine"], "flwr": meta["flwr"], "ray": meta["ray"],
        "mode": cell["mode"], "n": cell["n"], "L": cell["L"],
        "rule": cell["rule"] if secagg else None, "k_asked": cell["k_asked"] if secagg else None,
        "k": flower_shares(cell["k_asked"], cell["n"]) if secagg else None, "t": cell["t"] if secagg else None,
        "warmup": cell["warmup"], "round_seconds": [round(s, 4) for s in result["seconds"]],
        "median_seconds": round(statistics.median(result["seconds"]), 4),
        "max_abs_error": max(result["errors"]), "sim_total_s": round(result["sim_total_s"], 2),
        **({"secagg": SECAGG} if secagg else {}),
    }


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _child(cell_json: str, out: str) -> int:
    """Run one cell in this (fresh) process and write its result to ``out``."""
    Path(out).write_text(json.dumps(run_once(json.loads(cell_json))))
    return 0


def _run_cell(cell: Mapping, *, verbose: bool) -> dict | str:
    """One cell in a child process: its result, or why it failed."""
    with tempfile.TemporaryDirectory(prefix="flower-secagg-") as tmp:
        out = Path(tmp) / "result.json"
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(cell), str(out)],
                              stdout=None if verbose else subprocess.PIPE, stderr=None if verbose else subprocess.STDOUT, text=True)
        if done.returncode != 0 or not out.exists():
            return f"exit {done.returncode}: " + ("(log above)" if verbose else (done.stdout or "")[-3000:])
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int_list, default=int_list("100,200"), help="comma list of client counts")
    p.add_argument("--L", type=int_list, default=int_list("1e5"), help="comma list of vector lengths")
    p.add_argument("--num-shares", default="default",
                   help="comma list of SecAgg+ num_shares k: default (min(n, 2*ceil(log2 n)+1)), ours (our degree + 1, our threshold) or an int")
    p.add_argument("--threshold", type=int, default=None, help="reconstruction_threshold t for every k (default: k//2+1, ours: our threshold)")
    p.add_argument("--modes", default="plain,secagg", help="comma list among plain,secagg")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per run (their median is reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--client-cpus", type=float, default=1.0, help="Ray CPUs per ClientApp actor (1: one actor per core)")
    p.add_argument("--ours-python", default=os.environ.get("SECURE_FEDGRAPH_PYTHON", str(REPO / ".venv" / "bin" / "python")),
                   help="the project's interpreter, for --num-shares ours (env SECURE_FEDGRAPH_PYTHON)")
    p.add_argument("--verbose", action="store_true", help="show Flower's and Ray's log")
    p.add_argument("--child", nargs=2, metavar=("CELL", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return _child(*args.child)
    if _version("flwr") is None:
        print(f"flwr is not installed in {sys.executable}; this benchmark needs it: {INSTALL}, then run it with that venv's python.")
        return 0
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - {"plain", "secagg"}
    if unknown:
        p.error(f"--modes: unknown {sorted(unknown)}; expected plain and/or secagg")
    rules = [r.strip() for r in args.num_shares.split(",") if r.strip()]
    bad = [r for r in rules if r not in ("default", "ours") and not r.isdigit()]
    if bad or not rules:
        p.error(f"--num-shares: expected a comma list of default, ours or ints, got {args.num_shares!r}")
    ours = ours_plans(args.n, python=args.ours_python) if "ours" in rules and "secagg" in modes else {}
    meta = {"record": "meta", "benchmark": "flower_secagg", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{cpu_model() or platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
            "flwr": _version("flwr"), "ray": _version("ray"), "numpy": _version("numpy"), "python": platform.python_version(),
            "platform": platform.platform(), "ours": {str(n): list(plan) for n, plan in ours.items()}, "args": vars(args)}
    print(json.dumps(meta), flush=True)
    records = []
    for n in args.n:
        for length in args.L:
            cells = [{"mode": "plain", "rule": None, "k_asked": None, "t": None}] if "plain" in modes else []
            if "secagg" in modes:
                cells += [{"mode": "secagg", **s} for s in share_settings(args.num_shares, n, threshold=args.threshold, ours=ours)]
            for cell in cells:
                cell = {**cell, "n": n, "L": length, "seed": args.seed, "warmup": args.warmup, "rounds": args.rounds, "client_cpus": args.client_cpus}
                if cell["mode"] == "secagg" and not (2 < cell["k_asked"] and cell["t"] < cell["k_asked"] and cell["t"] <= flower_shares(cell["k_asked"], n)):
                    print(json.dumps({"record": "skip", "n": n, "L": length, "rule": cell["rule"], "k_asked": cell["k_asked"], "t": cell["t"],
                                      "why": "Flower needs 2 < num_shares, reconstruction_threshold < num_shares and <= the neighbourhood"}), flush=True)
                    continue
                with running(f"flower {cell['mode']} n={n} L={length:g} k={cell['k_asked']} t={cell['t']}"):
                    result = _run_cell(cell, verbose=args.verbose)
                if isinstance(result, str):
                    print(json.dumps({"record": "error", "mode": cell["mode"], "n": n, "L": length, "k_asked": cell["k_asked"], "t": cell["t"],
                                      "why": result}), flush=True)
                    continue
                record = run_record(cell, result, meta=meta)
                records.append(record)
                print(json.dumps(record), flush=True)
    plain = {(r["n"], r["L"]): r for r in records if r["mode"] == "plain"}
    print(f"\nFlower {meta['flwr']} (ray {meta['ray']}), {meta['date']}, {meta['machine']}; "
          f"median of {args.rounds} timed round(s) after {args.warmup} warm-up\n")
    print("| n | L | mode | k / t (rule) | wall s per round | median s | ÷ plain | max abs error |")
    print("|---|---|---|---|---|---|---|---|")
    for r in records:
        base = plain.get((r["n"], r["L"]))
        ratio = f"{r['median_seconds'] / base['median_seconds']:.1f}x" if base and r["mode"] == "secagg" and base["median_seconds"] else "—"
        kt = f"{r['k']} / {r['t']} ({r['rule']})" if r["mode"] == "secagg" else "—"
        print(f"| {r['n']} | {r['L']:g} | {r['mode']} | {kt} | {', '.join(f'{s:.2f}' for s in r['round_seconds'])} | "
              f"{r['median_seconds']:.2f} | {ratio} | {r['max_abs_error']:.2e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
