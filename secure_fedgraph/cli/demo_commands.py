"""``demo`` (secure FedAvg across processes, audited) and ``sum-demo`` (one secure sum in one process):
the two commands that show the system working without any set-up."""

from __future__ import annotations

import argparse
from pathlib import Path

from secure_fedgraph.cli.arguments import DATASET_HELP, count, multiple_of_10
from secure_fedgraph.errors import ConfigError


def add_demo_parser(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser("demo", help="secure FedAvg of per-sensor GRUs across processes, with an audit of what the server saw",
                               description="Start a server and several client processes on 127.0.0.1 with throwaway certificates, run "
                               "secure FedAvg of per-sensor GRU forecasters on the first week of METR-LA (one client per sensor), and "
                               "check from the run's transcripts that the server saw only masked uploads and that the aggregates equal "
                               "the plaintext sums. Exit status 1 if a check fails.")
    demo.add_argument("--clients", type=count(2), default=None, help="sensors, one client each (default all of the dataset's: METR-LA's 207)")
    demo.add_argument("--processes", type=count(), default=3, help="client processes to spread them over (default 3)")
    demo.add_argument("--rounds", type=count(), default=3, help="FedAvg rounds (default 3)")
    demo.add_argument("--local-steps", type=count(), default=2, help="local Adam steps per round and client (default 2)")
    demo.add_argument("--backend", choices=["mask", "ckks", "plain"], default="mask", help="secure-sum backend (default mask)")
    demo.add_argument("--data-dir", default=None, help="read METR-LA from DIR/metr-la instead of the packaged week (and --dataset NAME from DIR/NAME)")
    demo.add_argument("--dataset", default="metr-la", metavar="NAME|PATH", help=DATASET_HELP.replace("default the plan's own (cnfgnn, fedavg-gru, local-gru: metr-la; fedstgd: hzmetro)", "default metr-la, the packaged week") + "; the demo forecasts its first channel"),
    demo.add_argument("--keep", default=None, metavar="DIR", help="keep keys, transcripts and metrics in DIR (default: a temporary folder)")
    demo.set_defaults(handler=_demo, check=_check_demo)


def add_sum_demo_parser(commands: argparse._SubParsersAction) -> None:
    sum_demo = commands.add_parser("sum-demo", help="one secure sum in one process, showing what the server saw")
    sum_demo.add_argument("--clients", type=count(2), default=8, help="number of clients (at least 2)")
    sum_demo.add_argument("--backend", choices=["plain", "mask", "ckks"], default="mask", help="secure-sum backend (default mask)")
    sum_demo.add_argument("--size", type=multiple_of_10, default=10_000, help="values per client, a multiple of 10 (default 10000)")
    sum_demo.add_argument("--drop", type=int, default=2, help="id of the client that drops before its input (default 2)")
    sum_demo.add_argument("--no-drop", action="store_true", help="run with no dropout")
    sum_demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic inputs (default 0)")
    sum_demo.set_defaults(handler=_sum_demo, check=_check_sum_demo)


def _check_demo(args: argparse.Namespace) -> None:
    from secure_fedgraph.cli.plans import check_windows
    from secure_fedgraph.data.sources import node_count, validate
    from secure_fedgraph.runs import preflight

    series = validate(args.dataset, args.data_dir)  # once, here: not once per client process
    check_windows("fedavg-gru", args.dataset, series.layout, {})  # the demo's plan, with its windows
    nodes = node_count(args.dataset)
    if args.clients is None:
        args.clients = nodes
    elif args.clients > nodes:
        raise ConfigError(f"--clients {args.clients}: dataset {args.dataset} has {nodes} sensors (one client each at most)")
    if args.processes > args.clients:
        raise ConfigError(f"--processes must be between 1 and --clients ({args.clients}), got {args.processes}")
    if args.keep:
        preflight.check_writable_folder("--keep", args.keep)


def _check_sum_demo(args: argparse.Namespace) -> None:
    if not args.no_drop and not 0 <= args.drop < args.clients:
        raise ConfigError(f"--drop must be a client id in [0, {args.clients}), or --no-drop")


def _demo(args: argparse.Namespace) -> int:
    from secure_fedgraph.runs.demo import DemoOptions, run_demo

    options = DemoOptions(
        clients=args.clients, processes=args.processes, rounds=args.rounds, local_steps=args.local_steps,
        backend=args.backend, keep=Path(args.keep) if args.keep else None, data_dir=args.data_dir, dataset=args.dataset,
    )
    return 0 if run_demo(options) else 1


def _sum_demo(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.sum_backends import Backend
    from secure_fedgraph.runs.secure_sum_demo import DemoConfig, run

    config = DemoConfig(clients=args.clients, backend=Backend(args.backend), size=args.size, drop=None if args.no_drop else args.drop, seed=args.seed)
    return 0 if run(config) else 1
