"""``run``: a paper's plan with every party in this process (the in-process transport: the same
plan, messages and numbers as across processes)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from secure_fedgraph.cli.arguments import add_dataset_option, add_progress_options, count, positive_float, progress_from_args
from secure_fedgraph.cli.plans import check_plan_data, has_test_metrics, plan_from_args, test_summary
from secure_fedgraph.cli.secure_options import add_secure_options, secure_config


def add_parser(commands: argparse._SubParsersAction, *, plans: str) -> None:
    """``run``; ``plans`` names the registered plans for its help."""
    run = commands.add_parser("run", help="run a paper's plan with every party in this process",
                              description="Run a plan end to end in one process (the in-process transport: the same plan, messages "
                              "and numbers as across processes), print progress per round and write RUN_DIR/metrics.json.")
    run.add_argument("plan", help=f"plan name: {plans}")
    run.add_argument("--out", required=True, metavar="RUN_DIR", help="run folder for metrics.json")
    run.add_argument("--rounds", type=count(), default=None, help="global rounds (the plan's default otherwise)")
    run.add_argument("--clients", type=count(), default=None, help="number of clients (sets the plan's client count)")
    run.add_argument("--dp-sigma", type=positive_float(zero_ok=True), default=None, help="DP noise multiplier on split-learning uploads (cnfgnn, nfedgnn; 0: no DP)")
    run.add_argument("--dp-clip", type=positive_float(), default=None, help="DP per-row L2 clipping bound (cnfgnn; nfedgnn: of each user's whole h_i)")
    run.add_argument("--dpsgd-sigma", type=positive_float(zero_ok=True), default=None,
                     help="DP-SGD noise multiplier for the clients' local training (0: no DP-SGD; the plan option dpsgd_sigma)")
    run.add_argument("--dpsgd-clip", type=positive_float(), default=None, help="DP-SGD per-sample L2 clipping bound (the plan option dpsgd_clip)")
    run.add_argument("--target-epsilon", type=positive_float(), default=None, metavar="EPS",
                     help="calibrate the plan's DP noise multiplier so that the epsilon it reports is at most EPS (opacus' search; "
                          "an unreachable target is refused)")
    run.add_argument("--calibrate", choices=["dp_sigma", "dpsgd_sigma"], default=None,
                     help="which noise --target-epsilon calibrates (default the plan's: dp_sigma for cnfgnn and nfedgnn, dpsgd_sigma otherwise)")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option, e.g. server_rounds=2 (repeatable)")
    run.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    add_dataset_option(run)
    run.add_argument("--transcript", action="store_true",
                     help="also write every party's transcript: RUN_DIR/transcript.bin (the server's) and RUN_DIR/clients/client-<id>.bin "
                          "(each client's, with its plaintext contributions for audits), for `secure-fedgraph audit`; replaces transcripts the folder held")
    add_progress_options(run)
    add_secure_options(run)
    run.set_defaults(handler=_run, check=_check)


def _check(args: argparse.Namespace) -> None:
    from secure_fedgraph.runs import preflight

    check_plan_data(args)
    preflight.check_writable_folder("--out", args.out)


def _run(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.engine.progress import human_bytes
    from secure_fedgraph.protocol.sum_backends.config import config_to_dict
    from secure_fedgraph.runs.simulate import simulate, simulate_one_party

    plan, secure = plan_from_args(args), secure_config(args)
    progress = progress_from_args(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(plan.client_ids()) == 1:
        print(f"run: {plan.name} with one party holding all the data (its centralised baseline: every sum is its own value)")
        started = time.perf_counter()
        metrics = {**simulate_one_party(plan, data_dir=args.data_dir, say=print, progress=progress), "config": json.loads(plan.config_json()),
                   "seconds": time.perf_counter() - started, "transport": "in-process, one party"}
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str))
        print(f"run: done in {metrics['seconds']:.1f} s: {test_summary(metrics)}; metrics in {out / 'metrics.json'}")
        return 0
    print(f"run: {plan.name} in one process, {len(plan.client_ids())} clients, {secure.backend.value} backend")
    result = simulate(plan, secure, data_dir=args.data_dir, say=print, transcripts=out if args.transcript else None, progress=progress)
    metrics = {**result.metrics, "backend": secure.backend.value, "secure_sum": config_to_dict(secure),
               "config": json.loads(plan.config_json()), "seconds": result.seconds, "transport": "in-process"}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str))
    summary = [test_summary(metrics)] if has_test_metrics(metrics) else []
    if "privacy" in metrics:
        summary.append(f"epsilon {metrics['privacy']['epsilon_max']:.3g} at delta {metrics['privacy']['delta']:g} per client")
    summary.append(f"{human_bytes(metrics['bytes_up_total'])} up, {human_bytes(metrics['bytes_down_total'])} down")
    transcripts = f"; transcripts in {out / 'transcript.bin'} and {out / 'clients'}" if args.transcript else ""
    print(f"run: done in {result.seconds:.1f} s: {'; '.join(summary)}; metrics in {out / 'metrics.json'}{transcripts}")
    return 0
