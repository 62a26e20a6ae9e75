"""``data check PATH``: whether a dataset folder (or name) is readable by the traffic plans, in one line."""

from __future__ import annotations

import argparse


def add_parser(commands: argparse._SubParsersAction) -> None:
    data = commands.add_parser("data", help="check a graph-series dataset before a run",
                               description="Commands about datasets (docs/data.md). Nothing is ever downloaded.")
    actions = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="read and validate a dataset; one line: what it holds, or what is wrong",
                               description="Read PATH (a graph-series folder, or a folder in a named dataset's own layout such as "
                               ".../pems-bay) or a dataset NAME (under --data-dir) the way every traffic plan reads it, check it, and "
                               "print one line: what it holds (steps, nodes, channels, start, step, complete days, edges), or what "
                               "is wrong and which file holds the fault (exit status 2).")
    check.add_argument("path", metavar="PATH", help="a dataset folder, or a dataset name (metr-la, pems-bay, hzmetro, nycbike1)")
    check.add_argument("--data-dir", default=None, help="where a dataset NAME is looked for (default: $SECURE_FEDGRAPH_DATA)")
    check.set_defaults(handler=_check_data, check=_preflight)


def _preflight(args: argparse.Namespace) -> None:
    from secure_fedgraph.data.sources import check_files

    check_files(args.path, args.data_dir, option="data check")


def _check_data(args: argparse.Namespace) -> int:
    from secure_fedgraph.data.sources import describe, validate

    print(f"data check: ok: {describe(validate(args.path, args.data_dir, option='data check'))}")
    return 0
