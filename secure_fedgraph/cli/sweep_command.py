"""``sweep``: accuracy or error against privacy budget, a plan run per noise multiplier (or target
epsilon) and seed, each in its own process."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from secure_fedgraph.cli.arguments import add_dataset_option, count, numbers
from secure_fedgraph.cli.plans import check_plan_data, plan_from_args
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.validation import positive, positive_number


def add_parser(commands: argparse._SubParsersAction) -> None:
    from secure_fedgraph.papers import plans_where

    swept = plans_where(lambda e: e.privacy_option is not None)
    sweep = commands.add_parser("sweep", help="accuracy or error against privacy budget: a plan run per noise multiplier, CSV, table, PNG",
                                description="Run PLAN (cnfgnn: DP noise multiplier on the uploaded hidden states; nfedgnn: on the "
                                "uploaded latents h_i; fedavg-gru: distributed DP inside the FedAvg sum; fedstgd: distributed DP in every "
                                "sum of its windows and DP-SGD, both at the multiplier, one epsilon) once per noise multiplier (or per target epsilon, the run "
                                "calibrating its multiplier) and seed, each in its own process "
                                "(up to --jobs at once), beside the same plan without noise and the centralised baseline with the same "
                                "budget (cnfgnn, fedavg-gru: compare's method; nfedgnn: the PyG model on the whole graph, as many epochs as rounds), and write "
                                "OUT/sweep.csv, OUT/sweep.md (which also says which neighbouring points overlap within the seeds' spread) "
                                "and OUT/sweep.png (the test metric against epsilon, log-scaled, the seeds' spread as a band). Every run's "
                                "folder is under OUT/points/. Exit status 1 if a run failed.")
    sweep.add_argument("plan", help=f"plan name: {', '.join(swept)}")
    points = sweep.add_mutually_exclusive_group(required=True)
    points.add_argument("--sigmas", metavar="S1,S2,...", help="noise multipliers, one private run each (per seed)")
    points.add_argument("--epsilons", metavar="E1,E2,...",
                        help="target epsilons instead, one private run each (per seed) calibrating its noise multiplier with "
                             "run --target-epsilon (cnfgnn and nfedgnn: the distributed DP epsilon of fedavg-gru and fedstgd "
                             "depends on the survivors)")
    sweep.add_argument("--seeds", default="0", metavar="N1,N2,...",
                       help="run seeds; each gives one marker per sigma and its own reference runs (default 0)")
    sweep.add_argument("--jobs", type=count(), default=1, help="runs at the same time, each its own process (default 1)")
    sweep.add_argument("--out", required=True, metavar="DIR", help="folder for sweep.csv, sweep.md, sweep.png and points/")
    sweep.add_argument("--rounds", type=count(), default=None, help="global rounds of every run (the plan's default otherwise)")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option for every run, e.g. sensors=50 (repeatable)")
    sweep.add_argument("--backend", choices=["plain", "mask"], default="mask", help="secure-sum backend of every run (default mask)")
    sweep.add_argument("--no-centralised", action="store_true", help="skip the centralised reference runs")
    sweep.add_argument("--attacks", action="store_true",
                       help="also audit every private and non-private run from its transcripts (run --transcript; secure-fedgraph audit, "
                            "into its folder's audit/) and draw the leakage attacks' measures against epsilon: OUT/leakage-against-epsilon.png "
                            "(cnfgnn; nfedgnn: feature reconstruction, word recovery and link inference from the latents)")
    sweep.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged week)")
    add_dataset_option(sweep)
    sweep.set_defaults(handler=_sweep, check=_check, clients=None)


def _check(args: argparse.Namespace) -> None:
    """Parses --sigmas, --epsilons and --seeds into lists in ``args`` (the handler reads them so)."""
    from secure_fedgraph.runs import preflight
    from secure_fedgraph.runs.sweep import check_choices

    for option in ("sigmas", "epsilons"):
        if getattr(args, option) is not None:
            setattr(args, option, numbers(f"--{option}", getattr(args, option), float, lambda v: positive_number("value", v)))
    args.seeds = numbers("--seeds", args.seeds, int, lambda v: positive("value", v, 0))
    check_choices(args.plan, sigmas=args.sigmas or (), epsilons=args.epsilons or (), seeds=args.seeds, attacks=args.attacks)
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("sweep draws sweep.png with matplotlib, which is not installed: pip install matplotlib")
    check_plan_data(args)
    preflight.check_writable_folder("--out", args.out)


def _sweep(args: argparse.Namespace) -> int:
    from secure_fedgraph.runs.sweep import SweepOptions, sweep

    plan = plan_from_args(args)  # checks --rounds and --set against the plan before the first point starts
    forwarded = [*(("--rounds", str(args.rounds)) if args.rounds is not None else ()), *(f"--set={item}" for item in args.set or []),
                 *(("--dataset", args.dataset) if args.dataset is not None else ()), "--backend", args.backend]
    options = SweepOptions(plan=args.plan, sigmas=tuple(args.sigmas or ()), epsilons=tuple(args.epsilons or ()), seeds=tuple(args.seeds),
                           jobs=args.jobs, out=Path(args.out),
                           run_options=tuple(forwarded), budget={k: getattr(plan.config, k, None) for k in ("rounds", "sensors", "max_windows", "dataset", "model")},
                           data_dir=args.data_dir, centralised=not args.no_centralised, attacks=args.attacks)
    folder, failures = sweep(options, say=print)
    for line in failures:
        print(f"sweep: failed: {line}", file=sys.stderr)
    print(f"sweep: {folder / 'sweep.csv'}, {folder / 'sweep.md'} and {folder / 'sweep.png'}"
          + (f"; the attacks against epsilon in {folder / 'leakage-against-epsilon.png'}" if args.attacks else "")
          + (f"; {len(failures)} run(s) failed" if failures else ""))
    return 1 if failures else 0
