"""Benchmark: one secure FedAvg round over gRPC, with real processes, for plain, mask and ckks.

Workload (the peer benchmark's, shared/research/peer-benchmark.md): the ``fedavg-vector`` plan.
The server broadcasts a length-L float32 model, every client returns the model plus a seeded
update in [-1, 1) through a secure sum, and the server (or, with ckks, the clients) average.
n logical clients are spread over ``--processes`` client processes; server and clients run
on this machine over 127.0.0.1 with mutual TLS. One round = key set-up + broadcast + secure
sum, timed by the server from the start of the round to the end of the sum (process start-up,
joining and the Welcome are not counted; they are reported as ``total_seconds``). As in
Flower's round, only the server gets the sum (``server_only``; ckks must send it to the
clients, who alone can decrypt). mask uses the sparse graph unless ``--graph`` says otherwise,
with the degree and threshold the stated adversary needs (a third of the clients colluding,
10% dropping, 40-bit security: degree 88 at n=100, 144 at n=200; below that the graph is
complete). ``--degree log`` uses SecAgg+'s degree 2*ceil(log2 n) instead (Flower's work), which
holds only against a weaker stated adversary: pass it with ``--extra "--corrupt-fraction 0
--dropout-fraction 0.02"`` (given to the server and to every client process) to measure what the
protocol's checks cost at the graph the benchmark used before issue 12.

Run:
    .venv/bin/python benchmarks/fedavg_round.py                        # n in {10, 100, 200}, L in {1e5, 1e6}
    .venv/bin/python benchmarks/fedavg_round.py --n 100 --L 1e5 --backends plain,mask

Each run has ``--rounds`` rounds (default 4) and reports the median of all but the first
(``round_seconds``: the steady state; the first, which also pays the ckks key deal, is
``first_round_seconds``). mask is measured twice: with a
fresh key set-up every round (as SecAgg+ does) and with one key set-up kept for the run
(``fresh_keys_every``: every sum still has its own masks).

Prints one JSON line per measurement (``record: run``: backend, n, L, round_seconds,
total_seconds, bytes up/down per client, graph; ``record: floor``: each mask run's floor,
benchmarks/floor.py, over the plain round of the same run) and then a table with mask/plain,
mask ÷ floor and ckks/plain (same run) and the speed-up over Flower's SecAgg+ on the same workload.
Flower's figures come from ``--flower-results FILE``, the JSON lines of benchmarks/flower_secagg.py
(run in a venv with Flower, ideally in the same sitting): for each cell the SecAgg+ run at our
degree + 1 and threshold (equal security), else the one at Flower's default degree, else the
fallback. The fallback, and the figures without the option, are Flower 1.41's measured
2026-11-22 on this kind of machine at its default degree (shared/research/peer-benchmark.md:
8.95 s at n=100, L=1e5; 27 s at n=200, L=1e5; 40 s at n=200, L=1e6). The table says which
(k/t, rule, date). Targets from the issue: mask <= 1.5x plain, and >= 10x faster than SecAgg+.

This is a benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from floor import floor_cell, floor_of_run, int_list, mask_plan_of_run, ratio_to_floor
from progress import follow, running

# Fallback Flower figures (median wall s of one round): shared/research/peer-benchmark.md, measured
# 2026-11-22 with flwr 1.41.0 on Ray 2.55.1 (simulation engine) on a 2-core machine, SecAgg+ at the
# default rule k = min(n, 2*ceil(log2 n) + 1), t = k//2 + 1.
FLOWER_DATE = "2026-11-22"
FLOWER_SECAGG = {(100, 100_000): 8.95, (200, 100_000): 27.08, (200, 1_000_000): 40.43, (10, 100_000): 1.01, (10, 1_000_000): 1.36, (100, 1_000_000): 15.09}
FLOWER_PLAIN = {(100, 100_000): 0.87, (200, 100_000): 2.01, (200, 1_000_000): 4.28, (10, 100_000): 0.21, (10, 1_000_000): 0.33, (100, 1_000_000): 1.83}

FLOWER_SHARES = {10: (9, 5), 100: (15, 8), 200: (17, 9)}  # (k, t) of FLOWER_SECAGG's runs


def read_flower_results(lines: Iterable[str]) -> list[dict]:
    """The ``record: flower`` lines of benchmarks/flower_secagg.py's output, in order; its other
    lines (meta, skips, errors, the table, any log) are skipped."""
    records = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("record") == "flower":
            records.append(record)
    return records


def flower_secagg(results: Sequence[Mapping], *, n: int, L: int, degree: int | None, threshold: int | None) -> dict | None:
    """Flower's SecAgg+ seconds for one cell and where they come from: among ``results``
    (:func:`read_flower_results`; the last one wins) the run at n and L with num_shares degree + 1
    and our threshold (equal security; Flower counts the client itself), else the one at Flower's
    default rule, else the 2026-11-22 figure (FLOWER_SECAGG); None where there is none.

    Returns:
        {"seconds", "k", "t", "rule", "date", "equal": k and t are ours}.
    """
    runs = [r for r in results if r.get("mode") == "secagg" and r.get("n") == n and r.get("L") == L]
    equal = [r for r in runs if degree is not None and r.get("k_asked") == degree + 1 and r.get("t") == threshold]
    default = [r for r in runs if r.get("rule") == "default"]
    for found in (equal, default):
        if found:
            r = found[-1]
            return {"seconds": r["median_seconds"], "k": r["k"], "t": r["t"], "rule": r["rule"], "date": r["date"][:10], "equal": found is equal}
    if (n, L) in FLOWER_SECAGG:
        k, t = FLOWER_SHARES[n]
        return {"seconds": FLOWER_SECAGG[(n, L)], "k": k, "t": t, "rule": "default", "date": FLOWER_DATE,
                "equal": degree is not None and (k, t) == (degree + 1, threshold)}
    return None


def flower_cell(flower: Mapping | None) -> str:
    """The table's "Flower k/t, date" cell."""
    if flower is None:
        return "—"
    return f"{flower['k']}/{flower['t']} ({'ours' if flower['equal'] else flower['rule']}), {flower['date']}"


def measure(backend: str, n: int, length: int, args: argparse.Namespace, work: Path, *, keys_kept: bool = False, hosts=None) -> dict:
    """One run of ``args.rounds`` rounds; on 127.0.0.1, or with ``hosts`` (a runs/netns.py
    Network with hosts ``server`` and ``h0``, ``h1``, ...: benchmarks/hosts.py) the server and each
    client process on a host of its own, the clients checking the server's certificate under its
    address."""
    from secure_fedgraph.crypto.pki import init_keys
    from secure_fedgraph.runs.launch import LaunchError, id_ranges, start_clients, start_server

    server = {} if hosts is None else {"host": hosts["server"].address, "prefix": hosts["server"].prefix}
    keys = work / f"keys-{n}"
    if not keys.exists():
        init_keys(keys, clients=n, **({} if hosts is None else {"server_names": (), "server_ips": (server["host"],)}))
    ranges = id_ranges(n, args.processes)
    clients = {} if hosts is None else {"prefixes": [hosts[f"h{i}"].prefix for i in range(len(ranges))]}
    label = f"{backend}{'-kept' if keys_kept else ''}-{n}-{length}"
    out = work / f"run-{label}"
    started = time.monotonic()
    log = work / f"server-{label}.log"  # its round lines and progress: quoted by the benchmark's progress (progress.py)
    work.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as server_log:
        run = start_server(work / label, "--plan", "fedavg-vector", "--clients", str(n),
                           "--set", f"length={length}", "--set", f"seed={args.seed}", "--set", f"rounds={args.rounds}",
                           "--set", f"fresh_keys_every={args.rounds if keys_kept else 1}", "--backend", backend,
                           "--clip-range", "1.0", "--graph", args.graph, "--step-timeout", "600", "--max-message-mb", "512",
                           *(["--degree", str(2 * math.ceil(math.log2(n)))] if args.degree == "log" and backend == "mask" else []),
                           *args.extra.split(), certs=keys, out=out, stdout=server_log, env={"PYTHONUNBUFFERED": "1"}, **server)
    follow(log)
    try:
        start_clients(run, ranges, "--backend", backend, *args.extra.split(), *(() if hosts is None else ("--server-name", server["host"])),
                      **clients)
        try:
            run.wait(timeout=3600)
        except LaunchError as exc:
            raise LaunchError(f"{exc}{log.read_text()[-3000:]}") from None
        for c in run.clients:
            c.wait(timeout=120)
    finally:
        run.stop()
    metrics = json.loads((out / "metrics.json").read_text())
    plan_round = metrics["rounds"][-1]
    steady = statistics.median(r["round_seconds"] for r in metrics["rounds"][1:])  # the first round also pays every set-up
    config = metrics["secure_sum"]
    return {
        "record": "run", "backend": backend + (" (keys kept)" if keys_kept else ""), "n": n, "L": length, "processes": args.processes,
        "round_seconds": steady, "first_round_seconds": metrics["rounds"][0]["round_seconds"],
        "total_seconds": time.monotonic() - started,
        "clients": plan_round["clients"],
        # per client and round (the run's totals over its rounds; set-up and Welcome bytes included)
        "upload_bytes_per_client": metrics["bytes_up_total"] / n / args.rounds,
        "download_bytes_per_client": metrics["bytes_down_total"] / n / args.rounds,
        "upload_over_float32": metrics["bytes_up_total"] / n / args.rounds / (4 * length),
        "server_seconds": metrics["server_seconds"],
        "wall_seconds_by_stage": metrics.get("wall_seconds_by_stage"),
        "graph": config["mask"]["graph"] if backend == "mask" else None,
        "degree": metrics.get("key_setup", {}).get("degree") if backend == "mask" else None,
        "mask_plan": mask_plan_of_run(metrics, n=n, L=length),  # degree, threshold, ring bits: for its floor
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int_list, default=int_list("10,100,200"), help="comma list of client counts")
    p.add_argument("--L", type=int_list, default=int_list("1e5,1e6"), help="comma list of vector lengths")
    p.add_argument("--backends", default="plain,mask,ckks", help="comma list among plain,mask,ckks")
    p.add_argument("--processes", type=int, default=4, help="client processes per run")
    p.add_argument("--graph", choices=("auto", "complete", "sparse"), default="sparse",
                   help="mask neighbour graph (default sparse, at the degree the stated adversary needs; complete where none below n-1 holds)")
    p.add_argument("--degree", choices=("auto", "log"), default="auto",
                   help="mask sparse degree: auto (from the adversary) or log (SecAgg+'s 2*ceil(log2 n), with a weaker adversary in --extra)")
    p.add_argument("--extra", default="", help="extra options for the server and every client process, e.g. \"--corrupt-fraction 0\"")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=4, help="rounds per run; the median of all but the first is reported (the first also pays every set-up)")
    p.add_argument("--no-kept-keys", action="store_true", help="skip the extra mask run that keeps one key set-up for the whole run")
    p.add_argument("--ckks-max-work", type=float, default=1.5e8,
                   help="skip ckks cells with n*L above this (n=200, L=1e6 holds ~200 ciphertexts of 32 MB on the server and was OOM-killed at 24 GiB)")
    p.add_argument("--flower-results", type=Path, default=None,
                   help="JSON lines of benchmarks/flower_secagg.py for the Flower columns (default: Flower 1.41's figures of 2026-11-22)")
    args = p.parse_args(argv)
    flower_results = read_flower_results(args.flower_results.read_text().splitlines()) if args.flower_results else []
    backends = [b for b in args.backends.split(",") if b]
    print(json.dumps({"record": "meta", "benchmark": "fedavg_round", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "python": platform.python_version(), "platform": platform.platform(), "cores": os.cpu_count(),
                      "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                      "flower": f"{len(flower_results)} runs from {args.flower_results}" if args.flower_results else f"Flower 1.41, {FLOWER_DATE}"}),
          flush=True)
    rows: dict[tuple[int, int, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="fedavg-round-") as tmp:
        for n in args.n:
            for length in args.L:
                for backend in backends:
                    if backend == "ckks" and n * length > args.ckks_max_work:
                        print(json.dumps({"record": "skip", "backend": backend, "n": n, "L": length, "why": f"n*L above --ckks-max-work={args.ckks_max_work:g}"}), flush=True)
                        continue
                    with running(f"{backend} n={n} L={length:g}"):
                        row = measure(backend, n, length, args, Path(tmp))
                    rows[(n, length, backend)] = row
                    print(json.dumps(row), flush=True)
                    if backend == "mask" and not args.no_kept_keys:
                        with running(f"mask (keys kept) n={n} L={length:g}"):
                            row = measure(backend, n, length, args, Path(tmp), keys_kept=True)
                        rows[(n, length, "mask-kept")] = row
                        print(json.dumps(row), flush=True)
    floors = {}  # (n, L, "mask" or "mask-kept") -> the floor of that run, over the plain round of the same run
    for (n, length, backend), row in rows.items():
        plain = rows.get((n, length, "plain"), {}).get("round_seconds")
        floor = floor_of_run(row["mask_plan"], n=n, L=length, plain_s=plain, fresh_keys=backend == "mask", hosts=row["processes"])
        if floor is not None:
            floors[(n, length, backend)] = floor
            print(json.dumps({"record": "floor", "backend": row["backend"], **floor}), flush=True)
    print("\n| n | L | mask degree | plain s | mask s | mask, keys kept s | ckks s | mask/plain | mask kept/plain | ckks/plain | "
          "floor s: mask / keys kept | ÷ floor: mask / keys kept | SecAgg+ s (Flower) | Flower k/t, date | "
          "speed-up vs SecAgg+: mask / keys kept | upload per client: mask (x float32) | ckks (x float32) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for length in args.L:
            get = lambda b, k: rows.get((n, length, b), {}).get(k)  # noqa: E731
            fmt = lambda x, spec=".2f": "—" if x is None else format(x, spec)  # noqa: E731
            plain, mask, kept, ckks = (get(b, "round_seconds") for b in ("plain", "mask", "mask-kept", "ckks"))
            ratio = lambda a, b: fmt(a / b if a and b else None)  # noqa: E731
            plan = get("mask", "mask_plan") or {}
            figure = flower_secagg(flower_results, n=n, L=length, degree=plan.get("degree"), threshold=plan.get("threshold"))
            flower = figure and figure["seconds"]
            floor, floor_kept = floors.get((n, length, "mask")), floors.get((n, length, "mask-kept"))
            print(f"| {n} | {length:g} | {get('mask', 'degree') or '—'} | {fmt(plain)} | {fmt(mask)} | {fmt(kept)} | {fmt(ckks)} | {ratio(mask, plain)}x | {ratio(kept, plain)}x | "
                  f"{ratio(ckks, plain)}{'x' if ckks and plain else ''} | {floor_cell(floor, '.2f')} / {floor_cell(floor_kept, '.2f')} | "
                  f"{ratio_to_floor(mask, floor)} / {ratio_to_floor(kept, floor_kept)} | {fmt(flower)} | {flower_cell(figure)} | {fmt(flower / mask if flower and mask else None, '.1f')}x / "
                  f"{fmt(flower / kept if flower and kept else None, '.1f')}x | {fmt(get('mask', 'upload_over_float32'), '.3f')} | "
                  f"{fmt(get('ckks', 'upload_over_float32'), '.2f')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
