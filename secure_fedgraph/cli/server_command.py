"""``server``: a plan's server side over gRPC with mutual TLS, fresh or resumed from its checkpoint."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from secure_fedgraph import __version__
from secure_fedgraph.cli.arguments import add_dataset_option, add_progress_options, count, positive_float, progress_from_args
from secure_fedgraph.cli.keys_command import check_keys
from secure_fedgraph.cli.plans import check_plan_data, has_test_metrics, plan_from_args, set_item, test_summary
from secure_fedgraph.cli.secure_options import add_crash_option, add_secure_options, given_secure_options, secure_config
from secure_fedgraph.errors import ConfigError

if TYPE_CHECKING:  # the plans and the secure-sum package import torch: the handler imports them, after the checks
    from secure_fedgraph.papers.base import Plan
    from secure_fedgraph.protocol.sum_backends import SecureSumConfig


def add_parser(commands: argparse._SubParsersAction, *, plans: str) -> None:
    """``server``; ``plans`` names the registered plans for its help."""
    server = commands.add_parser("server", help="run a plan's server side over gRPC with mutual TLS")
    server.add_argument("--bind", required=True, help="HOST:PORT to listen on (port 0: any free port)")
    server.add_argument("--plan", default=None, help=f"plan name: {plans} (required unless --resume)")
    server.add_argument("--clients", type=count(), default=None, help="number of clients (sets the plan's client count)")
    server.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option, e.g. rounds=5 (repeatable)")
    server.add_argument("--target-epsilon", type=positive_float(), default=None, metavar="EPS",
                        help="calibrate the plan's DP noise multiplier so that the epsilon it reports is at most EPS")
    server.add_argument("--calibrate", choices=["dp_sigma", "dpsgd_sigma"], default=None,
                        help="which noise --target-epsilon calibrates (default the plan's: dp_sigma for cnfgnn and nfedgnn, dpsgd_sigma otherwise)")
    server.add_argument("--certs", required=True, help="folder made by `keys init`")
    server.add_argument("--out", default=None, help="run folder: metrics.json, checkpoint.json and, with --transcript, transcript.bin "
                        "(required unless --resume)")
    server.add_argument("--resume", default=None, metavar="RUN",
                        help="go on with the run in folder RUN from its last round boundary (its plan, options and secure-sum "
                             "configuration; the clients that were still in it reconnect on their own)")
    server.add_argument("--transcript", action="store_true", help="record every message the server received and sent")
    server.add_argument("--join-timeout", type=positive_float(), default=120.0, help="seconds to wait for the clients (default 120)")
    server.add_argument("--step-timeout", type=positive_float(), default=120.0, help="seconds to wait for answers to each step (default 120)")
    server.add_argument("--max-message-mb", type=positive_float(), default=256.0, help="largest message accepted, MiB (default 256)")
    server.add_argument("--hello-timeout", type=positive_float(), default=10.0, help="seconds a new stream has to send its Hello (default 10)")
    server.add_argument("--queue-depth", type=count(), default=1,
                        help="messages a connection may have waiting before gRPC flow control holds its sender back (default 1)")
    server.add_argument("--port-file", default=None, help="write the bound port here (useful with port 0)")
    server.add_argument("--data-dir", default=None, help="data folder for what the server itself holds, e.g. CNFGNN's sensor graph "
                        "(default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    add_dataset_option(server)
    add_progress_options(server)
    add_secure_options(server)
    add_crash_option(server, "this server on entering the N-th (default first) step of STAGE")
    server.set_defaults(handler=_server, check=_check)


def _check(args: argparse.Namespace) -> None:
    from secure_fedgraph import resources
    from secure_fedgraph.runs import preflight

    if args.clients:
        resources.ensure_server_files(args.clients)  # again in the runtime, for a plan's default count
    preflight.check_bindable("--bind", args.bind)
    if args.resume:
        clients = _check_resume(args)
    else:
        if args.plan is None or args.out is None:
            raise ConfigError(f"server: {'--plan' if args.plan is None else '--out'} is required (unless --resume RUN continues a run)")
        preflight.check_writable_folder("--out", args.out)
        check_plan_data(args, files=False)
        clients = list(range(args.clients)) if args.clients else []
    check_keys(args.certs, server=True, clients=clients)


def _check_resume(args: argparse.Namespace) -> list[int]:
    """``server --resume RUN`` before any heavy import: a plan that can resume, a checkpoint of an
    unfinished run in RUN, and plan options (if given) that are the run's. Returns the clients the
    run started with (their certificates are needed)."""
    from secure_fedgraph.papers import check_resumable
    from secure_fedgraph.runs import preflight
    from secure_fedgraph.server import checkpoint

    if args.plan is not None:
        check_resumable(args.plan)  # before looking for a checkpoint: say why a plan cannot resume at all
    if args.out is not None and Path(args.out).resolve() != Path(args.resume).resolve():
        raise ConfigError(f"--out {args.out} and --resume {args.resume} name different folders; a resumed run goes on in its own folder")
    saved = checkpoint.read(args.resume)
    if saved["run"]["version"] != __version__:
        raise ConfigError(f"--resume {args.resume}: the checkpoint was written by secure-fedgraph {saved['run']['version']}, this is "
                          f"{__version__}; a resumed run needs the code that began it")
    run_plan = saved["run"]["plan"]
    if args.plan is not None and args.plan != run_plan["plan"]:
        raise ConfigError(f"--resume {args.resume}: the checkpoint is of plan {run_plan['plan']}, not --plan {args.plan}")
    check_resumable(run_plan["plan"])
    options = (set_item(item, run_plan["config"]) for item in args.set or [])
    given = [(f"--set {key}", run_plan["config"][key], value) for key, value in options]
    if args.clients is not None:
        given.append(("--clients", saved["plan_clients"], args.clients))
    for option, held, value in given:
        if held != value:
            raise ConfigError(f"--resume {args.resume}: {option} is {held!r} in the run, {value!r} here; a resumed run keeps its options "
                              "(leave them out)")
    preflight.check_writable_folder("--resume", args.resume)
    return [int(c) for c in saved["run_clients"]]


def _resumed_run(args: argparse.Namespace) -> tuple[Plan, SecureSumConfig]:
    """The plan and secure-sum configuration of the run ``--resume`` names (its checkpoint's);
    secure-sum options given on the command line must be the run's."""
    from secure_fedgraph.papers import plan_class
    from secure_fedgraph.protocol.sum_backends.config import config_from_dict, config_to_dict
    from secure_fedgraph.server import checkpoint

    run = checkpoint.read(args.resume)["run"]
    plan = plan_class(run["plan"]["plan"]).from_config_json(json.dumps(run["plan"]))
    if given_secure_options(args.argv):
        differences = checkpoint.differences(run["secure_sum"], config_to_dict(secure_config(args)))
        if differences:
            raise ConfigError(f"--resume {args.resume}: the secure-sum options differ from the run's ({'; '.join(differences[:3])}); "
                              "repeat the run's options, or leave them out")
    return plan, config_from_dict(run["secure_sum"])


def _server(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.core.crash_point import CrashPoint
    from secure_fedgraph.server.runtime import ServerOptions, run_server

    plan, secure = _resumed_run(args) if args.resume else (plan_from_args(args), secure_config(args))
    options = ServerOptions(
        bind=args.bind,
        plan=plan,
        secure=secure,
        keys=Path(args.certs),
        out=Path(args.resume or args.out),
        transcript=args.transcript,
        join_timeout_s=args.join_timeout,
        step_timeout_s=args.step_timeout,
        max_message_bytes=int(args.max_message_mb * 2**20),
        hello_timeout_s=args.hello_timeout,
        queue_depth=args.queue_depth,
        port_file=Path(args.port_file) if args.port_file else None,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        resume=bool(args.resume),
        crash_at=None if args.crash_at is None else CrashPoint.parse(args.crash_at),
    )
    metrics = run_server(options, progress=progress_from_args(args))
    summary = f"{test_summary(metrics)}; " if has_test_metrics(metrics) else ""
    print(f"server: done in {metrics['seconds']:.1f} s: {summary}metrics in {options.out / 'metrics.json'}")
    return 0
