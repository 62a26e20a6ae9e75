"""The ``secure-fedgraph`` command line: parses arguments and calls the library, nothing else.

Each command's module declares its options, its checks and its handler. The checks run before
the handler and import nothing heavy (runs/preflight.py), so a bad option is a one-line error
before torch is loaded; the handlers import the library inside the function for the same reason.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from secure_fedgraph import __version__
from secure_fedgraph.cli import (audit_command, client_command, compare_command, data_command, demo_commands, keys_command, run_command,
                                 server_command, sweep_command)
from secure_fedgraph.cli.arguments import OneLineParser
from secure_fedgraph.errors import ConfigError, SecureFedGraphError


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each subcommand sets ``handler`` (runs it) and ``check`` (its preflight)."""
    from secure_fedgraph.papers import PLAN_NAMES  # the registry alone: no torch

    plans = ", ".join(PLAN_NAMES)
    parser = OneLineParser(prog="secure-fedgraph", description="Federated graph learning where the server sees only what threat_model.md allows.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo_commands.add_demo_parser(commands)
    run_command.add_parser(commands, plans=plans)
    audit_command.add_parser(commands)
    compare_command.add_parser(commands)
    keys_command.add_parser(commands)
    server_command.add_parser(commands, plans=plans)
    client_command.add_parser(commands)
    sweep_command.add_parser(commands)
    data_command.add_parser(commands)
    demo_commands.add_sum_demo_parser(commands)
    return parser


def _preflight(args: argparse.Namespace) -> None:
    """What can be checked without torch (runs/preflight.py), before any handler imports it: the
    options several commands share, then the command's own checks."""
    from secure_fedgraph.papers import check_plan_name

    data_dir = getattr(args, "data_dir", None)
    if data_dir and not Path(data_dir).expanduser().is_dir():
        raise ConfigError(f"--data-dir {data_dir}: no such folder")
    if getattr(args, "plan", None) is not None:
        check_plan_name(args.plan)
    if getattr(args, "crash_at", None) is not None:
        from secure_fedgraph.protocol.core.crash_point import CrashPoint

        CrashPoint.parse(args.crash_at)
    args.check(args)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), check it, run the command; returns the exit status
    (2 for a usage or configuration error, 130 when interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        _preflight(args)
        return args.handler(args)
    except SecureFedGraphError as exc:
        print(f"secure-fedgraph: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("secure-fedgraph: interrupted", file=sys.stderr)
        return 130
