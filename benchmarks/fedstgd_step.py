"""Benchmark: FedSTGD's training step with the P/Q sums and their gradient sums as secure sums
(mask, with its streaming variant and with the full protocol) against the same sums in the
clear (plain), in one process and over gRPC.

What is measured
----------------
One round of ``fedstgd`` on HZMetro over the first ``--batches`` training batches (batch 16,
the paper's model sizes, ``--clients`` clients, exact gradients): the wall seconds of the
"training" phase divided by the number of batches. A batch is every client's forward and
backward pass and 2 x 16 secure sums (one per GRU step and k, then one per gradient), so it is
the cost the issue's target (mask within 1.3x plain in one process) is about. Validation and
FedAvg are excluded. Bytes are what the clients sent in that phase, per client and batch.

In one process (the in-process transport) the clients' compute is sequential, so a batch costs
the sum of all clients' work plus the sums. Over gRPC each client is its own process (the
server and clients on this machine), so compute overlaps and every sum is a network round
trip per protocol stage (plain and mask's streaming variant: input, deliver; mask with
``--no-streaming``, the full protocol: input, consistency, unmask, deliver).

Each repeat runs plain, mask and mask without streaming with the same seed (identical work);
the table gives the median over repeats and the ratio of the medians to plain, all from this run.

The floor (benchmarks/floor.py) of ``mask --no-streaming``'s batch: its 32 sums of the full
protocol, each at its own size and ring, with the keys kept (the key set-up and the first sum,
which opens the shares, are in the "set-up" phase), over plain's batch of the same transport in
this run; the cryptography on one core in one process, over this machine's cores over gRPC. A
``record: floor`` line per transport, and the columns "floor s" and "÷ floor". The streaming
variant (``mask``) has none: floor.py counts the full protocol's sums, not the streaming ones
(pairwise masks only, no self-mask, consistency or unmask), so its cells read "n/a".

How to run
----------
    .venv/bin/python benchmarks/fedstgd_step.py --data-dir ../shared/data             # in-process
    .venv/bin/python benchmarks/fedstgd_step.py --data-dir ../shared/data --grpc      # and over gRPC

This file is a benchmark, not a test: pytest does not collect it (no test_ names).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.papers import is_resumable
from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig, FedSTGDSums
from secure_fedgraph.protocol.sum_backends import Backend, MaskConfig, SecureSumConfig
from secure_fedgraph.runs.launch import LaunchError, start_clients, start_server
from secure_fedgraph.runs.simulate import simulate

sys.path.insert(0, str(Path(__file__).parent))
from floor import floor_cell, floor_of_sums, ratio_to_floor, sum_sizes  # noqa: E402
from progress import follow, running  # noqa: E402

# name -> (secure-sum config in one process, server options over gRPC)
VARIANTS = {
    "plain": (SecureSumConfig(backend=Backend.PLAIN), ["--backend", "plain"]),
    "mask": (SecureSumConfig(backend=Backend.MASK), ["--backend", "mask"]),
    "mask --no-streaming": (SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(streaming=False)), ["--backend", "mask", "--no-streaming"]),
}
FLOORED = "mask --no-streaming"  # the variant whose sums floor.py counts (the full protocol's)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time a FedSTGD training step: mask against plain secure sums, in one process and over gRPC.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", required=True, help="folder holding hzmetro/ (e.g. ../shared/data)")
    p.add_argument("--clients", type=int, default=4, help="M, the number of clients")
    p.add_argument("--batches", type=int, default=6, help="training batches per run")
    p.add_argument("--repeats", type=int, default=3, help="runs per backend")
    p.add_argument("--threads", type=int, default=1, help="torch threads in one process (and per client process over gRPC)")
    p.add_argument("--grpc", action="store_true", help="also run the server and one process per client over gRPC on 127.0.0.1")
    args = p.parse_args(argv)
    if min(args.clients - 1, args.batches, args.repeats, args.threads) < 1:
        p.error("--clients must be >= 2 and --batches, --repeats, --threads >= 1")
    return args


def per_batch(metrics: dict, clients: int) -> dict[str, float]:
    batches = metrics["cost"]["training_batches"]
    return {
        "seconds": metrics["seconds_by_phase"]["training"] / batches,
        "bytes_up_per_client": metrics["bytes_up_by_phase"]["training"] / batches / clients,
        "sums": metrics["cost"]["secure_sums_per_batch"],
        "key_setup": metrics.get("key_setup"),  # degree and threshold of a mask run: for its floor
    }


def batch_floor(config: FedSTGDConfig, key_setup: dict, *, plain_s: float, cores_used: int | None, hosts: int) -> dict:
    """The floor of one training batch of ``FLOORED`` (its key set-up announced ``key_setup``):
    the batch's sums, each at its own size and ring, with the keys kept, over ``plain_s``."""
    specs = FedSTGDSums(config).batch(config.batch_size, training=True)
    return floor_of_sums(key_setup, sum_sizes(specs, mask=VARIANTS[FLOORED][0].mask, n=config.clients), n=config.clients,
                         plain_s=plain_s, fresh_keys=False, hosts=hosts, resumable=is_resumable(FedSTGD.name), cores_used=cores_used)


def in_process(config: FedSTGDConfig, variant: str, data_dir: str) -> dict[str, float]:
    return per_batch(simulate(FedSTGD(config), VARIANTS[variant][0], data_dir=data_dir).metrics, config.clients)


def over_grpc(config: FedSTGDConfig, variant: str, data_dir: str, threads: int) -> dict[str, float]:
    secure, server_options = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as work:
        keys = init_keys(Path(work) / "keys", clients=config.clients).root
        options = [f"--set={k}={v}" for k, v in (("max_windows", config.max_windows), ("rounds", 1))]
        log = Path(work) / "server.log"  # its round lines and progress, quoted by the benchmark's progress lines
        with open(log, "w") as server_log:
            follow(log)
            run = start_server(Path(work), "--plan", "fedstgd", "--clients", str(config.clients), *server_options, *options,
                               certs=keys, env={"OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}, stdout=server_log)
        try:
            start_clients(run, [str(i) for i in range(config.clients)], "--data-dir", data_dir, "--backend", secure.backend.value)
            try:
                run.wait(timeout=1800)
            except LaunchError as exc:
                raise LaunchError(f"{exc}{log.read_text()[-3000:]}") from None
            for c in run.clients:
                c.wait(timeout=60)
        finally:
            run.stop()
        out = run.out
        return per_batch(json.loads((out / "metrics.json").read_text()), config.clients)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    config = FedSTGDConfig(clients=args.clients, rounds=1, max_windows=args.batches * 16)
    transports = {"in-process": lambda b: in_process(config, b, args.data_dir)}
    cores_used = {"in-process": 1, "gRPC": None}  # every party in one process; over gRPC, this machine's cores
    hosts = {"in-process": 0, "gRPC": config.clients}  # with the server; over gRPC, one process per client
    if args.grpc:
        transports["gRPC"] = lambda b: over_grpc(config, b, args.data_dir, args.threads)
    print(f"# FedSTGD training step: {args.clients} clients, {args.batches} batches of 16, {args.repeats} repeats, "
          f"{args.threads} torch thread(s); {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}")
    lines = ["| transport | backend | secure sums / batch | bytes up / client / batch | seconds / batch (median) | vs plain | floor s | ÷ floor |",
             "|---|---|---|---|---|---|---|---|"]
    for name, run in transports.items():
        rows = {v: [] for v in VARIANTS}
        for repeat in range(args.repeats):
            for variant in VARIANTS:
                with running(f"{name} {variant}, repeat {repeat + 1} of {args.repeats}"):
                    rows[variant].append(run(variant))
        plain = statistics.median(r["seconds"] for r in rows["plain"])
        floor = batch_floor(config, rows[FLOORED][0]["key_setup"], plain_s=plain, cores_used=cores_used[name], hosts=hosts[name])
        print(json.dumps({"record": "floor", "transport": name, "backend": FLOORED, **floor}), flush=True)
        for variant in VARIANTS:
            seconds = statistics.median(r["seconds"] for r in rows[variant])
            first = rows[variant][0]
            floored = {FLOORED: (floor_cell(floor), ratio_to_floor(seconds, floor)), "mask": ("n/a", "n/a")}.get(variant, ("—", "—"))
            lines.append(f"| {name} | {variant} | {first['sums']} | {first['bytes_up_per_client'] / 2**20:.2f} MiB | {seconds:.3f} | "
                         f"{seconds / plain:.2f}x | {' | '.join(floored)} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
