"""Benchmark: what a FedRel round costs against a FedAvg round of the same model, per backend.

What is measured
----------------
``fedrel`` on a UEA archive with ``--clients`` participants in one process, run twice with the
same seed and work: ``aggregation=relevance`` (per round: a secure sum of d_hat_k, then one of
[e_k Theta_k, e_k]) and ``aggregation=uniform`` (FedAvg: one secure sum of Theta_k). What is timed is a round's
aggregation: its key set-up and its sums, with each participant's work between them (d_hat_k,
e_k, the weighted weights, loading Theta), by the plan's phases "set-up" and "aggregation". The
local training is not in it: a participant resumes its plan when the previous round's last sum
is delivered, so its training is counted with that step (evaluation, which runs every round
here so that every round has its row in the run's round log); it is the same in both variants.
The one-off set-up before round 1 (normalisation, the VAE's pre-training) is left out too. Bytes are what the
participants sent in those phases, per participant and round. Each repeat runs both variants on
every backend; the table gives medians over repeats of the median round, and FedRel's ratio to
FedAvg's on the same backend in this run. For mask, each variant's round is also set against its
floor (benchmarks/floor.py: a key set-up and the round's sums in order, the first opening the
shares, every participant's cryptography on the one core of this process), over the plain
backend's round of the same variant in this run: a ``record: floor`` line each, and the columns
"floor s" and "÷ floor" ("—" without plain in ``--backends``).

How to run
----------
    .venv/bin/python benchmarks/fedrel_round.py --data-dir ../shared/data

This file is a benchmark, not a test: pytest does not collect it (no test_ names).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path

import torch

from secure_fedgraph.papers import is_resumable
from secure_fedgraph.papers.fedrel import FedRel, FedRelConfig, FedRelSums
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate

sys.path.insert(0, str(Path(__file__).parent))
from floor import floor_cell, floor_of_sums, ratio_to_floor, sum_sizes  # noqa: E402
from progress import running  # noqa: E402

ROUND_PHASES = ("set-up", "aggregation")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time a FedRel round against a FedAvg round of the same model, per backend.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data-dir", default=os.environ.get("SECURE_FEDGRAPH_DATA"), help="folder holding uea-basicmotions/ and uea-japanesevowels/")
    p.add_argument("--dataset", default="japanesevowels", choices=["basicmotions", "japanesevowels"])
    p.add_argument("--clients", type=int, default=3)
    p.add_argument("--rounds", type=int, default=8, help="rounds per run (the first is left out of the median)")
    p.add_argument("--local-steps", type=int, default=5)
    p.add_argument("--backends", default="plain,mask,ckks")
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args(argv)


def run_config(args: argparse.Namespace, aggregation: str) -> FedRelConfig:
    return FedRelConfig(dataset=args.dataset, clients=args.clients, rounds=args.rounds, local_steps=args.local_steps, aggregation=aggregation,
                        vae_rounds=1, vae_local_steps=1, eval_every=1)  # one report, so one round_log row, per round


def round_floor(args: argparse.Namespace, aggregation: str, key_setup: Mapping, plain_s: float | None) -> dict:
    """The floor of one timed round of a mask run whose key set-up announced ``key_setup``: the
    key set-up and the round's sums in order (FedAvg: Theta; FedRel: d_hat, then [e_k Theta_k,
    e_k]), each at its own ring, every participant's cryptography on one core (one process),
    over ``plain_s``, the plain backend's round of the same variant in this run."""
    specs = FedRelSums(run_config(args, aggregation)).per_round()
    return floor_of_sums(key_setup, sum_sizes(specs, mask=SecureSumConfig(backend=Backend.MASK).mask, n=args.clients), n=args.clients,
                         plain_s=plain_s, fresh_keys=True, hosts=0, resumable=is_resumable(FedRel.name), cores_used=1)


def one_run(args: argparse.Namespace, backend: Backend, aggregation: str) -> dict:
    config = run_config(args, aggregation)
    result = simulate(FedRel(config), SecureSumConfig(backend=backend), data_dir=args.data_dir, say=lambda line: None)
    rows = result.metrics["round_log"][1:]  # round 0 carries the one-off set-up
    seconds = [sum(r["seconds_by_phase"].get(p, 0.0) for p in ROUND_PHASES) for r in rows]
    up = [sum(r["bytes_up_by_phase"].get(p, 0) for p in ROUND_PHASES) / args.clients for r in rows]
    return {"backend": backend.value, "aggregation": aggregation, "seconds_per_round": statistics.median(seconds),
            "bytes_up_per_client_per_round": statistics.median(up), "cost": result.metrics["cost"],
            "key_setup": result.metrics["key_setup"] if backend is Backend.MASK else None}  # degree, threshold: for its floor


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    backends = [Backend(b) for b in args.backends.split(",")]
    header = {"benchmark": "fedrel_round", "dataset": args.dataset, "clients": args.clients, "rounds": args.rounds, "local_steps": args.local_steps,
              "repeats": args.repeats, "python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
              "cpus": os.cpu_count()}
    print(json.dumps(header), flush=True)
    results: dict[tuple[str, str], list[dict]] = {}
    for repeat in range(args.repeats):
        for backend in backends:
            for aggregation in ("uniform", "relevance"):
                with running(f"{backend.value} {aggregation}, repeat {repeat + 1} of {args.repeats}"):
                    row = one_run(args, backend, aggregation)
                results.setdefault((backend.value, aggregation), []).append(row)
                print(json.dumps({**row, "repeat": repeat}), flush=True)
    seconds = {key: statistics.median(r["seconds_per_round"] for r in rows) for key, rows in results.items()}
    floors = {}  # aggregation -> the floor of the mask run's round, over the plain run's of the same variant
    for aggregation in ("uniform", "relevance") if Backend.MASK in backends else ():
        floors[aggregation] = round_floor(args, aggregation, results[("mask", aggregation)][0]["key_setup"], seconds.get(("plain", aggregation)))
        print(json.dumps({"record": "floor", "backend": "mask", "aggregation": aggregation, **floors[aggregation]}), flush=True)
    print("\n| backend | FedAvg s / round | FedRel s / round | FedRel / FedAvg | floor s: FedAvg / FedRel | ÷ floor: FedAvg / FedRel "
          "| sums / round: FedAvg, FedRel | bytes up / participant / round: FedAvg | FedRel |")
    print("|---|---|---|---|---|---|---|---|---|")
    for backend in backends:
        avg, rel = (results[(backend.value, a)] for a in ("uniform", "relevance"))
        s_avg, s_rel = seconds[(backend.value, "uniform")], seconds[(backend.value, "relevance")]
        f_avg, f_rel = (floors.get(a) if backend is Backend.MASK else None for a in ("uniform", "relevance"))
        b_avg = statistics.median(r["bytes_up_per_client_per_round"] for r in avg)
        b_rel = statistics.median(r["bytes_up_per_client_per_round"] for r in rel)
        print(f"| {backend.value} | {s_avg:.3f} | {s_rel:.3f} | {s_rel / s_avg:.2f}x | {floor_cell(f_avg)} / {floor_cell(f_rel)} | "
              f"{ratio_to_floor(s_avg, f_avg)} / {ratio_to_floor(s_rel, f_rel)} | {avg[0]['cost']['secure_sums_per_round']}, "
              f"{rel[0]['cost']['secure_sums_per_round']} | {b_avg / 1e3:.1f} kB | {b_rel / 1e3:.1f} kB ({b_rel / b_avg:.2f}x) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
