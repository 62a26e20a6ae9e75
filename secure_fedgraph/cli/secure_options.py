"""The secure-sum and adversary options (declared once: ``run`` and ``server`` configure a sum with
them, ``client`` checks one against them), the fault hook, and the configs built from them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from secure_fedgraph.cli.arguments import WithoutDefaults, count

if TYPE_CHECKING:  # the secure-sum package imports torch: the handlers import it, after the checks
    from secure_fedgraph.protocol.sum_backends import Adversary, SecureSumConfig


def add_adversary_options(group) -> None:
    """The adversary a party assumes (server: to choose thresholds and graphs; client: to check them)."""
    group.add_argument("--corrupt-fraction", type=float, default=1 / 3,
                       help="fraction of the run's clients that may collude with the server (default 1/3)")
    group.add_argument("--dropout-fraction", type=float, default=0.1, help="fraction of clients expected to drop out (default 0.1)")
    group.add_argument("--security-bits", type=int, default=40, help="the sparse graph fails with probability at most 2^-BITS over a run (default 40)")
    group.add_argument("--honest-but-curious", action="store_true",
                       help="assume a server that follows the protocol: lower thresholds (majority), cheaper; weaker (threat_model.md)")
    group.add_argument("--max-rekeys", type=int, default=4, help="key set-ups a round may add after its first, one per dropout (default 4)")
    group.add_argument("--max-key-epochs", type=count(), default=1024,
                       help="key set-ups a whole run may hold, rounds and re-keys (default 1024); the sparse graph's bounds hold over "
                            "all of them, at --security-bits + log2 of this per key set-up (threat_model.md M-GRAPH-SPARSE)")


def add_secure_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """The options of a secure sum's configuration (``defaults=False``: only those given are parsed)."""
    group = parser.add_argument_group("secure sum")
    group = group if defaults else WithoutDefaults(group)
    group.add_argument("--backend", choices=["plain", "mask", "ckks"], default="mask", help="secure-sum backend (default mask)")
    group.add_argument("--clip-range", type=float, default=8.0, help="inputs are clipped to [-R, R] (default 8)")
    group.add_argument("--precision-bits", type=int, default=20, help="mask: fixed-point fractional bits (default 20)")
    group.add_argument("--graph", choices=["auto", "complete", "sparse"], default="auto", help="mask: neighbour graph (default auto)")
    group.add_argument("--no-streaming", action="store_true",
                       help="mask: run every sum through the full protocol, also the sums a plan marks as streaming "
                            "(FedSTGD's P/Q sums); see threat_model.md M-STREAM")
    group.add_argument("--ckks-params", choices=["lean", "standard"], default="lean", help="ckks: parameter preset (default lean)")
    group.add_argument("--min-survivors", type=int, default=None,
                       help="fewest contributors a sum may have, of the run's clients (default a majority, and two more than the colluders)")
    group.add_argument("--degree", type=int, default=None,
                       help="mask, sparse graph: neighbours per client (default the least that holds against the stated adversary)")
    add_adversary_options(group)


def add_crash_option(parser: argparse.ArgumentParser, whom: str) -> None:
    """``--crash-at``: the one fault hook of both runtimes (protocol/core/crash_point.py)."""
    faults = parser.add_argument_group("fault injection (for tests)")
    faults.add_argument("--crash-at", default=None, metavar="STAGE[@ROUND][:N]",
                        help=f"kill {whom} (a wire stage name: advertise, share_keys, input, consistency, unmask, deliver, ...) in "
                             "round ROUND (from 0; default the first round that has it) with SIGKILL, before it is answered: a crash "
                             "at a chosen step, e.g. unmask@1")


def given_secure_options(argv: list[str]) -> set[str]:
    """The secure-sum options a command line sets itself (argparse fills in defaults and keeps no
    record of which were given, so parse them again with every default suppressed)."""
    probe = argparse.ArgumentParser(add_help=False)
    add_secure_options(probe, defaults=False)
    return set(vars(probe.parse_known_args(argv)[0]))


def adversary(args: argparse.Namespace) -> Adversary:
    """The adversary the options state."""
    from secure_fedgraph.protocol.sum_backends import Adversary, Threat

    return Adversary(corrupt_fraction=args.corrupt_fraction, dropout_fraction=args.dropout_fraction, security_bits=args.security_bits,
                     threat=Threat.HONEST_BUT_CURIOUS if args.honest_but_curious else Threat.ACTIVE)


def secure_config(args: argparse.Namespace) -> SecureSumConfig:
    """The SecureSumConfig that ``run`` and ``server`` use."""
    from secure_fedgraph.crypto.ckks import PRESETS
    from secure_fedgraph.protocol.sum_backends import Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig

    return SecureSumConfig(
        backend=Backend(args.backend),
        min_survivors=args.min_survivors,
        mask=MaskConfig(clip_range=args.clip_range, precision_bits=args.precision_bits, graph=GraphKind(args.graph), streaming=not args.no_streaming,
                        adversary=adversary(args), degree=args.degree, max_rekeys_per_round=args.max_rekeys,
                        max_key_epochs=args.max_key_epochs),
        ckks=CkksConfig(params=PRESETS[args.ckks_params], clip_range=args.clip_range),
    )
