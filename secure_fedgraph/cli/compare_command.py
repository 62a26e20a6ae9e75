"""``compare``: CNFGNN's Table 7 on METR-LA, every method with the same budget, beside the paper."""

from __future__ import annotations

import argparse

from secure_fedgraph.cli.arguments import count
from secure_fedgraph.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser("compare", help="CNFGNN's Table 7 on METR-LA: every method with the same budget, beside the paper",
                                  description="Train CNFGNN, its federated baselines (as protocols, in one process) and the centralised "
                                  "baselines for the same number of epochs, test them on the same windows, and write RUN_DIR/comparison.md "
                                  "and comparison.json. Methods: gru-centralised, gru+gn-centralised, local-gru, fedavg-gru, cnfgnn "
                                  "(Table 7, the default) and cnfgnn-at, cnfgnn-sl, cnfgnn-sl+fedavg (Table 10).")
    compare.add_argument("--out", required=True, metavar="RUN_DIR", help="folder for comparison.md and comparison.json")
    compare.add_argument("--epochs", type=count(), default=3, help="passes over the training windows per method (default 3)")
    compare.add_argument("--methods", default=None, help="comma-separated method names, or 'all' (default: Table 7's five)")
    compare.add_argument("--backend", choices=["mask", "ckks", "plain"], default="mask", help="secure-sum backend of the federated methods (default mask)")
    compare.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                         help="device of the centralised baselines and of CNFGNN's server GN (auto: CUDA when available)")
    compare.add_argument("--sensors", type=count(), default=None, help="only the first N sensors and their subgraph (default all of the dataset's)")
    compare.add_argument("--dataset", default="metr-la", metavar="NAME|PATH",
                         help="the graph series every method reads, its first channel: a name (metr-la, pems-bay, hzmetro, nycbike1) or a "
                              "graph-series folder (docs/data.md); default metr-la")
    compare.add_argument("--max-windows", type=count(), default=None, help="at most this many windows per split (default all; for quick looks)")
    compare.add_argument("--seed", type=int, default=0, help="run seed of every method (default 0)")
    compare.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged week)")
    compare.set_defaults(handler=_compare, check=_check)


def _check(args: argparse.Namespace) -> None:
    from secure_fedgraph.cli.plans import check_windows
    from secure_fedgraph.data.sources import node_count, validate
    from secure_fedgraph.runs import preflight

    series = validate(args.dataset, args.data_dir)
    check_windows("cnfgnn", args.dataset, series.layout, {})  # every method cuts CNFGNN's (DCRNN's) windows
    if args.sensors is not None and args.sensors > node_count(args.dataset):
        raise ConfigError(f"--sensors {args.sensors}: dataset {args.dataset} has {node_count(args.dataset)} sensors")
    preflight.check_writable_folder("--out", args.out)


def _compare(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.sum_backends import Backend
    from secure_fedgraph.runs.comparison import METHODS, TABLE_7, Budget, compare, markdown, write

    if args.methods is None:
        methods = TABLE_7
    elif args.methods == "all":
        methods = tuple(METHODS)
    else:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    budget = Budget(epochs=args.epochs, sensors=args.sensors, dataset=args.dataset, max_windows=args.max_windows, seed=args.seed)
    rows = compare(methods, budget, backend=Backend(args.backend), device=args.device, data_dir=args.data_dir, say=print)
    folder = write(rows, budget, args.out)
    print(markdown(rows, budget))
    print(f"compare: results in {folder / 'comparison.md'} and {folder / 'comparison.json'}")
    return 0
