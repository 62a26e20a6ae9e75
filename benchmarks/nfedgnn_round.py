"""Benchmark: nFedGNN's thousands of users (issue 15, item 3): Cora's 2,708 users hosted by a few
client processes over gRPC, against the same run in one process.

Workload: ``nfedgnn`` on Cora (GCN, per-user W_i, the paper's settings, the default mask backend, whose
key set-up these rounds skip: they hold no secure sum; ``--users`` cuts the
graph to its first N nodes), ``--rounds`` rounds, evaluating every round. The baseline, measured
in the same invocation on the same machine, is ``secure-fedgraph run nfedgnn``: server and every
user in one process over the in-process transport (the same collectives, codec and messages,
no sockets). The gRPC run is one ``server`` and ``--processes`` ``client`` processes on
127.0.0.1, each holding one mutually authenticated TLS stream for all its users under a host
certificate (``keys init --hosts``; clients/runtime.py): per step one batch per process down and
one up, each user's request and answer its own frame.

Measured, per transport:
- seconds per round (the server's round lines: upload of h_i, the server's step, scatter of
  dL/dh_i; round 0 also carries the Welcome over gRPC and is reported apart), their median,
  and the ratio gRPC / in-process; the join (TLS handshakes and Hellos) and the whole run;
- the projection to 200 rounds: join + Welcome + 200 x the median round;
- peak RSS of each process, exact (``ru_maxrss`` from ``os.wait4`` as the benchmark reaps it),
  and the threads and open files at their sampled peak;
- CPU seconds of the server and the clients, and the cores other work kept busy (the machine
  may be shared: seconds are then upper bounds);
- bytes down: on the wire (the streams' batches) and as the clients received them (a body a
  host's users share, the Welcome with its n certificates, counted once per user); the
  Welcome step's seconds; the streams the server served; the final accuracies, which are the
  same on both transports.

Run:
    .venv/bin/python benchmarks/nfedgnn_round.py --data-dir ../shared/data | tee benchmarks/results-nfedgnn_round.txt
    .venv/bin/python benchmarks/nfedgnn_round.py --data-dir ../shared/data --users 300 --rounds 2    # a quick look

The floor (benchmarks/floor.py) of a timed round counts no cryptography: the rounds hold no
secure sum and skip the key set-up, so a round's floor is the plain backend's round, which this
benchmark does not run. Each run's ``record: floor`` line says so (crypto_cpu_s 0, plain_s null)
and the table's "floor s" and "÷ floor" read "—".

Prints one JSON line per run (and its floor) after a ``meta`` line, then a table. This is a benchmark, not a
test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from floor import floor_cell, floor_of_sums, ratio_to_floor  # noqa: E402
from progress import follow, running  # noqa: E402
from load import MiB, Sampler, Watched, _joined_in, _machine_busy_seconds, _meta, _wait_all  # noqa: E402  (the load benchmark's process watching)


def _plan_options(args: argparse.Namespace) -> list[str]:
    options = ["--set", f"dataset={args.dataset}", "--set", f"model={args.model}", "--set", f"rounds={args.rounds}",
               "--set", f"seed={args.seed}", "--data-dir", args.data_dir]
    if args.users:
        options += ["--set", f"users={args.users}"]
    return options


def _row(transport: str, metrics: dict, watched: list[Watched], total: float, busy: float, join: float | None) -> dict:
    seconds = [r["seconds"] for r in metrics["round_log"]]
    rounds = len(metrics["rounds"])
    training = seconds[1:rounds]  # rounds 1..R-1: round 0 carries the Welcome, the last line is the final evaluation
    median = statistics.median(training) if training else seconds[0]
    ours = sum(w.cpu_seconds or 0.0 for w in watched)
    return {
        "record": "run", "transport": transport, "users": metrics["users"], "rounds": rounds,
        "round_seconds": seconds, "round_seconds_median": median, "join_seconds": join, "run_seconds": metrics["seconds"],
        "total_seconds": total, "projected_200_rounds_seconds": (join or 0.0) + seconds[0] + 199 * median,
        "bytes_up_total": metrics["bytes_up_total"], "bytes_down_total": metrics["bytes_down_total"],
        "wire_bytes_down_total": metrics.get("wire_bytes_down_total"), "welcome_bytes_down": metrics.get("bytes_down_by_stage", {}).get("welcome"),
        "welcome_seconds": metrics.get("wall_seconds_by_stage", {}).get("welcome"), "streams": metrics.get("streams"),
        "val_acc": metrics.get("val_acc"), "test_acc": metrics.get("test_acc"),  # the same numbers on both transports (seeded, no DP)
        "dropped": len(metrics["dropped"]), "dropped_example": next(iter(metrics["dropped"].items()), None), "key_setup": metrics.get("key_setup") or None,
        "processes": [{"name": w.name, "exit": w.process.returncode, "peak_rss_bytes": w.peak_rss_bytes, "threads_peak": w.peak_threads,
                       "open_files_peak": w.peak_open_files, "cpu_seconds": w.cpu_seconds} for w in watched],
        "other_cores_busy": max(0.0, busy - ours) / total,
    }


def round_floor(row: dict) -> dict:
    """The floor of one of ``row``'s timed rounds: no mask sum and no key set-up in it (nFedGNN's
    per-user W_i: ``start_round(keys=False)``), over no plain round (none runs here)."""
    if row["key_setup"]:
        raise ValueError(f"the {row['transport']} run's rounds held a key set-up ({row['key_setup']}): round_floor counts none")
    from secure_fedgraph.papers import is_resumable

    return floor_of_sums(None, [], n=row["users"], plain_s=None, fresh_keys=False, hosts=None, resumable=is_resumable("nfedgnn"),
                         cores_used=1 if row["transport"] == "in-process" else None)


def in_process(args: argparse.Namespace, work: Path) -> dict:
    import subprocess

    from secure_fedgraph.runs.launch import command

    out = work / "in-process"
    busy, started = _machine_busy_seconds(), time.monotonic()
    with open(work / "in-process.log", "w") as log:
        process = Watched("run (server and every user)", subprocess.Popen(command("run", "nfedgnn", "--out", str(out), *_plan_options(args)),
                                                                          stdout=log, stderr=subprocess.STDOUT, text=True))
        with Sampler(args.sample_s, [process]):
            _wait_all([process], args.timeout_s)
    if process.process.returncode != 0:
        raise RuntimeError(f"in-process run failed: {(work / 'in-process.log').read_text()[-3000:]}")
    return _row("in-process", json.loads((out / "metrics.json").read_text()), [process], time.monotonic() - started,
                _machine_busy_seconds() - busy, None)


def over_grpc(args: argparse.Namespace, keys: Path, work: Path, users: int) -> dict:
    from secure_fedgraph.runs.launch import id_ranges, start_clients, start_server

    out = work / "grpc"
    busy, started = _machine_busy_seconds(), time.monotonic()
    with open(work / "server.log", "w") as server_log:
        follow(work / "server.log")
        run = start_server(work / "grpc-work", "--plan", "nfedgnn", *_plan_options(args), "--step-timeout", str(args.step_timeout), certs=keys, out=out, stdout=server_log,
                           env={"PYTHONUNBUFFERED": "1"})
    server = Watched("server", run.server)
    ranges = id_ranges(users, args.processes)
    try:
        with Sampler(args.sample_s, [server]) as sampler:
            processes = start_clients(run, ranges, "--min-dp-sigma", "0", "--data-dir", args.data_dir, logs=work / "clients")
            clients = [Watched(f"clients {ids}", p) for ids, p in zip(ranges, processes, strict=True)]
            sampler.watched.extend(clients)
            _wait_all([server, *clients], args.timeout_s)
    finally:
        run.stop()
    if server.process.returncode != 0:
        raise RuntimeError(f"the server exited with {server.process.returncode}: {(work / 'server.log').read_text()[-3000:]}")
    return _row("grpc", json.loads((out / "metrics.json").read_text()), [server, *clients], time.monotonic() - started,
                _machine_busy_seconds() - busy, _joined_in(work / "server.log"))


def table(rows: list[dict], floors: list[dict]) -> str:
    base = next((r for r in rows if r["transport"] == "in-process"), None)
    lines = ["| transport | users | processes | s / round: median (min-max, rounds 1..R-1) | ratio to in-process | join s | round 0 s (with the Welcome) "
             "| floor s | ÷ floor | projected 200 rounds | MB down on the wire (per client) | peak RSS MiB per process | threads at peak | CPU s | other work, cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, floor in zip(rows, floors, strict=True):
        training = r["round_seconds"][1 : r["rounds"]] or r["round_seconds"][:1]
        ratio = f"{r['round_seconds_median'] / base['round_seconds_median']:.2f}x" if base else "—"
        join = "—" if r["join_seconds"] is None else f"{r['join_seconds']:.1f}"
        rss = " / ".join(f"{(p['peak_rss_bytes'] or 0) / MiB:,.0f}" for p in r["processes"])
        lines.append(
            f"| {r['transport']} | {r['users']} | {len(r['processes'])} | {r['round_seconds_median']:.2f} ({min(training):.2f}-{max(training):.2f}) "
            f"| {ratio} | {join} | {r['round_seconds'][0]:.1f} | {floor_cell(floor)} | {ratio_to_floor(r['round_seconds_median'], floor)} "
            f"| {r['projected_200_rounds_seconds'] / 60:.1f} min | {(r.get('wire_bytes_down_total') or r['bytes_down_total']) / 1e6:,.1f} "
            f"({r['bytes_down_total'] / 1e6:,.1f}) | {rss} "
            f"| {' / '.join(str(p['threads_peak']) for p in r['processes'])} | {sum(p['cpu_seconds'] or 0 for p in r['processes']):.0f} "
            f"| {r['other_cores_busy']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", required=True, help="the data folder (with planetoid/)")
    p.add_argument("--dataset", default="Cora")
    p.add_argument("--model", default="gcn")
    p.add_argument("--users", type=int, default=None, help="the first N nodes' users (default: every node)")
    p.add_argument("--processes", type=int, default=4, help="client processes hosting the users over gRPC")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--transports", default="in-process,grpc")
    p.add_argument("--step-timeout", type=float, default=600, help="the server's --step-timeout (a shared machine is slow)")
    p.add_argument("--sample-s", type=float, default=0.5)
    p.add_argument("--timeout-s", type=float, default=3600)
    args = p.parse_args(argv)
    meta = _meta(args)
    meta["benchmark"] = "nfedgnn_round"
    print(json.dumps(meta), flush=True)
    from secure_fedgraph.data.planetoid import CitationGraph
    from secure_fedgraph.crypto.pki import init_keys

    users = args.users or CitationGraph.load(args.dataset, args.data_dir).num_nodes
    rows, floors = [], []
    with tempfile.TemporaryDirectory(prefix="nfedgnn-round-") as tmp:
        work = Path(tmp)
        for transport in [t for t in args.transports.split(",") if t]:
            with running(f"{transport}: {users} users, {args.rounds} rounds"):
                if transport == "in-process":
                    row = in_process(args, work)
                else:
                    began = time.monotonic()
                    from secure_fedgraph.clients.ids import parse_ids
                    from secure_fedgraph.runs.launch import id_ranges

                    hosts = {label: parse_ids(label) for label in id_ranges(users, args.processes)}
                    keys = init_keys(work / "keys", clients=users, hosts=hosts).root
                    print(json.dumps({"record": "keys", "n": users, "seconds": time.monotonic() - began}), flush=True)
                    row = over_grpc(args, keys, work, users)
            rows.append(row)
            print(json.dumps(row), flush=True)
            floors.append(round_floor(row))
            print(json.dumps({"record": "floor", "transport": transport, **floors[-1]}), flush=True)
    print()
    print(table(rows, floors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
