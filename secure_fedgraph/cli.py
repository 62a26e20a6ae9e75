"""The ``secure-fedgraph`` command line: parses arguments and calls the library, nothing else."""

from __future__ import annotations

import argparse
import sys

from secure_fedgraph import __version__
from secure_fedgraph.errors import SecureFedGraphError


def _demo(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.secure_sum import Backend
    from secure_fedgraph.secure_sum_demo import DemoConfig, run

    config = DemoConfig(
        clients=args.clients,
        backend=Backend(args.backend),
        size=args.size,
        drop=None if args.no_drop else args.drop,
        seed=args.seed,
    )
    return 0 if run(config) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="secure-fedgraph",
        description="Federated graph learning where the server sees only what threat_model.md allows.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run a secure-sum demonstration and show what the server saw",
        description="Sum tensors from several clients with a secure backend, drop one client after the key "
        "set-up, and show from the server's own transcript that it saw only masked (or encrypted) uploads "
        "and that the aggregate equals the plaintext sum. Exit status 1 if any check fails.",
    )
    demo.add_argument("--clients", type=int, default=8, help="number of clients (default 8)")
    demo.add_argument("--backend", choices=["plain", "mask", "ckks"], default="mask", help="secure-sum backend (default mask)")
    demo.add_argument("--size", type=int, default=10_000, help="values per client, a multiple of 10 (default 10000)")
    demo.add_argument("--drop", type=int, default=2, help="id of the client that drops before its input (default 2)")
    demo.add_argument("--no-drop", action="store_true", help="run with no dropout")
    demo.add_argument("--seed", type=int, default=0, help="seed of the demo's synthetic inputs (default 0)")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "clients", 3) < 2:
        parser.error("--clients must be at least 2")
    if getattr(args, "size", 10) < 10 or getattr(args, "size", 10) % 10:
        parser.error("--size must be a positive multiple of 10")
    if getattr(args, "drop", None) is not None and not 0 <= args.drop < args.clients:
        parser.error(f"--drop must be a client id in [0, {args.clients})")
    try:
        return args.handler(args)
    except SecureFedGraphError as exc:
        print(f"secure-fedgraph: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
