"""The ``secure-fedgraph`` command line: parses arguments and calls the library, nothing else."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from secure_fedgraph import __version__
from secure_fedgraph.errors import ConfigError, SecureFedGraphError
from secure_fedgraph.validation import positive, positive_number


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command's --help (argparse prints the
    whole usage block first, which for ``run`` or ``server`` is a screenful above the error)."""

    def error(self, message: str):  # argparse's hook: it must not return
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _adversary(args: argparse.Namespace):
    from secure_fedgraph.protocol.sum_backends import Adversary, Threat

    return Adversary(corrupt_fraction=args.corrupt_fraction, dropout_fraction=args.dropout_fraction, security_bits=args.security_bits,
                     threat=Threat.HONEST_BUT_CURIOUS if args.honest_but_curious else Threat.ACTIVE)


def _secure_config(args: argparse.Namespace):
    from secure_fedgraph.crypto.ckks import PRESETS
    from secure_fedgraph.protocol.sum_backends import Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig

    return SecureSumConfig(
        backend=Backend(args.backend),
        min_survivors=args.min_survivors,
        mask=MaskConfig(clip_range=args.clip_range, precision_bits=args.precision_bits, graph=GraphKind(args.graph), streaming=not args.no_streaming,
                        adversary=_adversary(args), degree=args.degree, max_rekeys_per_round=args.max_rekeys,
                        max_key_epochs=args.max_key_epochs),
        ckks=CkksConfig(params=PRESETS[args.ckks_params], clip_range=args.clip_range),
    )


def _client_policy(args: argparse.Namespace):
    from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy

    return ClientPolicy(adversary=_adversary(args), min_survivors_fraction=args.min_survivors_fraction, allow_sparse=not args.no_sparse,
                        allow_streaming=not args.no_streaming, backends=frozenset(Backend(b) for b in args.backend),
                        min_dp_sigma=args.min_dp_sigma, min_ddp_noise=args.min_ddp_noise,
                        min_dpsgd_sigma=args.min_dpsgd_sigma, max_rekeys_per_round=args.max_rekeys,
                        allow_seeded_randomness=args.allow_seeded_randomness, min_run_clients=args.min_run_clients,
                        max_key_epochs=args.max_key_epochs)


def _set_item(item: str, fields) -> tuple[str, object]:
    """One ``--set KEY=VALUE``: KEY must be one of ``fields``; VALUE is JSON where it looks like it."""
    key, sep, raw = item.partition("=")
    if not sep or key not in fields:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(fields))}")
    if raw.lower() in ("none", "true", "false"):
        return key, json.loads(raw.lower().replace("none", "null"))
    return key, json.loads(raw) if raw[:1].isdigit() or raw[:1] in "-[{" else raw


def _plan(args: argparse.Namespace):
    from secure_fedgraph.papers import plan_class

    cls = plan_class(args.plan)
    fields = {f.name: f for f in dataclasses.fields(cls.Config)}
    values = dict(_set_item(item, fields) for item in args.set or [])
    if args.clients is not None:
        values[cls.clients_field] = args.clients
    for option, key in (("rounds", "rounds"), ("dp_sigma", "dp_sigma"), ("dp_clip", "dp_clip"), ("dpsgd_sigma", "dpsgd_sigma"),
                        ("dpsgd_clip", "dpsgd_clip")):
        value = getattr(args, option, None)
        if value is not None:
            if key not in fields:
                raise ConfigError(f"--{option.replace('_', '-')}: plan {cls.name} has no option {key!r}")
            values[key] = value
    plan = cls(cls.Config(**values))
    if getattr(args, "target_epsilon", None) is not None:
        plan = plan.calibrated(args.target_epsilon, data_dir=args.data_dir, option=args.calibrate)
        print(f"{args.command}: --target-epsilon {args.target_epsilon:g} calibrates the noise: {_calibrated_noise(plan)}")
    return plan


def _calibrated_noise(plan) -> str:
    config = plan.config
    return ", ".join(f"{key} {getattr(config, key):.4g}" for key in ("dp_sigma", "dpsgd_sigma") if getattr(config, key, 0))


class _Repeatable(argparse.Action):
    """A repeatable option whose default list the first use replaces (argparse's ``append``
    would add to it), so defaults are declared once, in the parser."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        current = getattr(namespace, self.dest)
        setattr(namespace, self.dest, [*([] if current is self.default else current), values])


def _checked(kind: type, check):
    """An argparse type: ``kind(text)`` passing ``check`` (secure_fedgraph.validation's wording),
    so a bad value is argparse's one-line usage error, exit 2, before anything is imported."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        try:
            check(value)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return parse


def _count(minimum: int = 1):
    """An int >= ``minimum``."""
    return _checked(int, lambda value: positive("value", value, minimum))


def _positive_number(*, zero_ok: bool = False):
    """A finite number > 0 (>= 0 with ``zero_ok``): timeouts, sizes, noise multipliers."""
    return _checked(float, lambda value: positive_number("value", value, zero_ok=zero_ok))


def _multiple_of_10(text: str) -> int:
    value = _count()(text)
    if value % 10:
        raise argparse.ArgumentTypeError(f"value must be a positive multiple of 10, got {value}")
    return value


def _add_adversary_options(group) -> None:

    """The adversary a party assumes (server: to choose thresholds and graphs; client: to check them)."""
    group.add_argument("--corrupt-fraction", type=float, default=1 / 3,
                       help="fraction of the run's clients that may collude with the server (default 1/3)")
    group.add_argument("--dropout-fraction", type=float, default=0.1, help="fraction of clients expected to drop out (default 0.1)")
    group.add_argument("--security-bits", type=int, default=40, help="the sparse graph fails with probability at most 2^-BITS over a run (default 40)")
    group.add_argument("--honest-but-curious", action="store_true",
                       help="assume a server that follows the protocol: lower thresholds (majority), cheaper; weaker (threat_model.md)")
    group.add_argument("--max-rekeys", type=int, default=4, help="key set-ups a round may add after its first, one per dropout (default 4)")
    group.add_argument("--max-key-epochs", type=_count(), default=1024,
                       help="key set-ups a whole run may hold, rounds and re-keys (default 1024); the sparse graph's bounds hold over "
                            "all of them, at --security-bits + log2 of this per key set-up (threat_model.md M-GRAPH-SPARSE)")


class _WithoutDefaults:
    """An argument group whose options have no default: parsed, it holds only what was given."""

    def __init__(self, group) -> None:
        self.group = group

    def add_argument(self, *names, **options):
        return self.group.add_argument(*names, **{**options, "default": argparse.SUPPRESS})


def _add_crash_option(parser: argparse.ArgumentParser, whom: str) -> None:
    """``--crash-at``: the one fault hook of both runtimes (protocol/core/crash_point.py)."""
    faults = parser.add_argument_group("fault injection (for tests)")
    faults.add_argument("--crash-at", default=None, metavar="STAGE[@ROUND][:N]",
                        help=f"kill {whom} (a wire stage name: advertise, share_keys, input, consistency, unmask, deliver, ...) in "
                             "round ROUND (from 0; default the first round that has it) with SIGKILL, before it is answered: a crash "
                             "at a chosen step, e.g. unmask@1")


def _add_secure_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    group = parser.add_argument_group("secure sum")
    group = group if defaults else _WithoutDefaults(group)
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
    _add_adversary_options(group)


def _keys_init(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import parse_ids
    from secure_fedgraph.crypto.pki import init_keys
    from secure_fedgraph.runs.launch import id_ranges

    hosts = {label: parse_ids(label) for label in id_ranges(args.clients, args.hosts)} if args.hosts else {}
    keys = init_keys(args.dir, clients=args.clients, server_names=tuple(args.server_name), server_ips=tuple(args.server_ip), hosts=hosts)
    with_hosts = f", and host certificates for clients {', '.join(hosts)} (hosts/)" if hosts else ""
    print(f"keys: CA, server certificate ({', '.join(args.server_name + args.server_ip)}) and {args.clients} client "
          f"certificates with Ed25519 identity keys{with_hosts} in {keys.root} (private keys mode 0600; keep ca.key off the protocol hosts)")
    return 0


def _keys_host(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import format_ids, parse_ids
    from secure_fedgraph.crypto.pki import issue_host

    ids = parse_ids(args.ids)
    path = issue_host(args.dir, label=format_ids(ids), ids=ids)
    print(f"keys: host certificate for clients {format_ids(ids)} in {path} (its key beside it, mode 0600): `client --ids {format_ids(ids)}` "
          "uses it, one connection for all of them")
    return 0


def _given_secure_options(argv: list[str]) -> set[str]:
    """The secure-sum options a command line sets itself (argparse fills in defaults and keeps no
    record of which were given, so parse them again with every default suppressed)."""
    probe = argparse.ArgumentParser(add_help=False)
    _add_secure_options(probe, defaults=False)
    return set(vars(probe.parse_known_args(argv)[0]))


def _resumed_run(args: argparse.Namespace):
    """The plan and secure-sum configuration of the run ``--resume`` names (its checkpoint's);
    secure-sum options given on the command line must be the run's."""
    from secure_fedgraph.papers import plan_class
    from secure_fedgraph.protocol.sum_backends.config import config_from_dict, config_to_dict
    from secure_fedgraph.server import checkpoint

    run = checkpoint.read(args.resume)["run"]
    plan = plan_class(run["plan"]["plan"]).from_config_json(json.dumps(run["plan"]))
    if _given_secure_options(args.argv):
        differences = checkpoint.differences(run["secure_sum"], config_to_dict(_secure_config(args)))
        if differences:
            raise ConfigError(f"--resume {args.resume}: the secure-sum options differ from the run's ({'; '.join(differences[:3])}); "
                              "repeat the run's options, or leave them out")
    return plan, config_from_dict(run["secure_sum"])


def _server(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.core.crash_point import CrashPoint
    from secure_fedgraph.server.runtime import ServerOptions, run_server

    plan, secure = _resumed_run(args) if args.resume else (_plan(args), _secure_config(args))
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
    metrics = run_server(options)
    summary = f"{_test_summary(metrics)}; " if "test_rmse" in metrics or "test_acc" in metrics else ""
    print(f"server: done in {metrics['seconds']:.1f} s: {summary}metrics in {options.out / 'metrics.json'}")
    return 0


def _client(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import parse_ids
    from secure_fedgraph.protocol.core.crash_point import CrashPoint
    from secure_fedgraph.clients.runtime import ClientOptions, run_clients, stop_reasons

    options = ClientOptions(
        server=args.server,
        ids=parse_ids(args.ids),
        keys=Path(args.certs),
        data_dir=Path(args.data_dir) if args.data_dir else None,
        policy=_client_policy(args),
        transcript_dir=Path(args.transcript) if args.transcript else None,
        audit=args.audit,
        server_name=args.server_name,
        session_timeout_s=args.session_timeout,
        connect_timeout_s=args.connect_timeout,
        reconnect_timeout_s=args.reconnect_timeout,
        parallel=args.parallel,
        crash_at=None if args.crash_at is None else CrashPoint.parse(args.crash_at),
        reproducible_dp_noise=args.reproducible_dp_noise,
    )
    outcomes = run_clients(options)
    for line in stop_reasons(outcomes):
        print(line, file=sys.stderr)
    finished = sum(o.finished for o in outcomes.values())
    print(f"clients {args.ids}: {finished} of {len(outcomes)} finished the run")
    return 0 if finished == len(outcomes) else 1


def _run(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.engine.progress import human_bytes
    from secure_fedgraph.protocol.sum_backends.config import config_to_dict
    from secure_fedgraph.runs.simulate import simulate, simulate_one_party

    plan, secure = _plan(args), _secure_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if len(plan.client_ids()) == 1:
        print(f"run: {plan.name} with one party holding all the data (its centralised baseline: every sum is its own value)")
        started = time.perf_counter()
        metrics = {**simulate_one_party(plan, data_dir=args.data_dir, say=print), "config": json.loads(plan.config_json()),
                   "seconds": time.perf_counter() - started, "transport": "in-process, one party"}
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str))
        print(f"run: done in {metrics['seconds']:.1f} s: {_test_summary(metrics)}; metrics in {out / 'metrics.json'}")
        return 0
    print(f"run: {plan.name} in one process, {len(plan.client_ids())} clients, {secure.backend.value} backend")
    result = simulate(plan, secure, data_dir=args.data_dir, say=print, transcripts=out if args.transcript else None)
    metrics = {**result.metrics, "backend": secure.backend.value, "secure_sum": config_to_dict(secure),
               "config": json.loads(plan.config_json()), "seconds": result.seconds, "transport": "in-process"}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True, default=str))
    summary = [_test_summary(metrics)] if "test_rmse" in metrics or "test_acc" in metrics else []
    if "privacy" in metrics:
        summary.append(f"epsilon {metrics['privacy']['epsilon_max']:.3g} at delta {metrics['privacy']['delta']:g} per client")
    summary.append(f"{human_bytes(metrics['bytes_up_total'])} up, {human_bytes(metrics['bytes_down_total'])} down")
    transcripts = f"; transcripts in {out / 'transcript.bin'} and {out / 'clients'}" if args.transcript else ""
    print(f"run: done in {result.seconds:.1f} s: {'; '.join(summary)}; metrics in {out / 'metrics.json'}{transcripts}")
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from secure_fedgraph.runs.sweep import SweepOptions, sweep

    plan = _plan(args)  # checks --rounds and --set against the plan before the first point starts
    forwarded = [*(("--rounds", str(args.rounds)) if args.rounds is not None else ()), *(f"--set={item}" for item in args.set or []),
                 "--backend", args.backend]
    options = SweepOptions(plan=args.plan, sigmas=tuple(args.sigmas or ()), epsilons=tuple(args.epsilons or ()), seeds=tuple(args.seeds),
                           jobs=args.jobs, out=Path(args.out),
                           run_options=tuple(forwarded), budget={k: getattr(plan.config, k, None) for k in ("rounds", "sensors", "max_windows")},
                           data_dir=args.data_dir, centralised=not args.no_centralised, attacks=args.attacks)
    folder, failures = sweep(options, say=print)
    for line in failures:
        print(f"sweep: failed: {line}", file=sys.stderr)
    print(f"sweep: {folder / 'sweep.csv'}, {folder / 'sweep.md'} and {folder / 'sweep.png'}"
          + (f"; the attacks against epsilon in {folder / 'leakage-against-epsilon.png'}" if args.attacks else "")
          + (f"; {len(failures)} run(s) failed" if failures else ""))
    return 1 if failures else 0


def _numbers(option: str, text: str, kind: type, check) -> list:
    """``--option A,B,...``: a list of ``kind`` values, each passing ``check`` (ConfigError: one line, exit 2)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = [kind(part) for part in parts]
    except ValueError:
        raise ConfigError(f"{option} must be a comma-separated list of {'integers' if kind is int else 'numbers'}, got {text!r}") from None
    if not values:
        raise ConfigError(f"{option} names no value")
    for value in values:
        try:
            check(value)
        except ConfigError as exc:
            raise ConfigError(f"{option}: {exc}") from None
    return values


def _audit(args: argparse.Namespace) -> int:
    from secure_fedgraph.audit import audit, lines, write_report

    out = Path(args.out) if args.out else Path(args.run_dir) / "audit"
    report = audit(args.run_dir, _client_transcripts(args.client_transcripts), data_dir=args.data_dir, attacks=not args.no_attacks,
                   seed=args.seed, say=print)
    for line in lines(report):
        print(line)
    paths = write_report(report, out)
    verdict = "passed" if report.passed else f"FAILED ({', '.join(report.failed)})"
    print(f"audit: {verdict}; {report.run['mode']}; report in {paths['md']} and {paths['json']}, figures beside them")
    return 0 if report.passed else 1


def _client_transcripts(given: list[str]) -> list[Path]:
    """Client transcripts: files, or folders of ``client-*.bin`` (``client --transcript DIR``)."""
    paths: list[Path] = []
    for item in given:
        path = Path(item)
        paths.extend(sorted(path.glob("client-*.bin")) if path.is_dir() else [path])
    return paths


def _test_summary(metrics: dict) -> str:
    if "best_val_test_acc" in metrics:  # node classification (nfedgnn)
        if metrics["test_acc"] is None:
            return f"training loss {metrics['rounds'][-1]['train_loss']:.4f} in the last round (no test node among the run's users)"
        return (f"test accuracy {metrics['test_acc']:.3f} ({metrics['best_val_test_acc']:.3f} at the best validation round, "
                f"{metrics['best_val_round']})")
    if "test_acc" in metrics:  # classification (fedrel)
        return f"test accuracy {metrics['test_acc']:.3f}, macro-F1 {metrics['test_f1']:.3f} (best {metrics['best_f1']:.3f} at round {metrics['best_f1_round']})"
    mape = f", MAPE {metrics['test_mape']:.2f}%" if "test_mape" in metrics else ""
    return f"test RMSE {metrics['test_rmse']:.3f}, MAE {metrics['test_mae']:.3f}{mape}"


def _compare(args: argparse.Namespace) -> int:
    from secure_fedgraph.runs.comparison import METHODS, TABLE_7, Budget, compare, markdown, write
    from secure_fedgraph.protocol.sum_backends import Backend

    if args.methods is None:
        methods = TABLE_7
    elif args.methods == "all":
        methods = tuple(METHODS)
    else:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    budget = Budget(epochs=args.epochs, sensors=args.sensors, max_windows=args.max_windows, seed=args.seed)
    rows = compare(methods, budget, backend=Backend(args.backend), device=args.device, data_dir=args.data_dir, say=print)
    folder = write(rows, budget, args.out)
    print(markdown(rows, budget))
    print(f"compare: results in {folder / 'comparison.md'} and {folder / 'comparison.json'}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from secure_fedgraph.runs.demo import DemoOptions, run_demo

    options = DemoOptions(
        clients=args.clients, processes=args.processes, rounds=args.rounds, local_steps=args.local_steps,
        backend=args.backend, keep=Path(args.keep) if args.keep else None, data_dir=args.data_dir,
    )
    return 0 if run_demo(options) else 1


def _sum_demo(args: argparse.Namespace) -> int:
    from secure_fedgraph.protocol.sum_backends import Backend
    from secure_fedgraph.runs.secure_sum_demo import DemoConfig, run

    config = DemoConfig(clients=args.clients, backend=Backend(args.backend), size=args.size, drop=None if args.no_drop else args.drop, seed=args.seed)
    return 0 if run(config) else 1


def _client_streams(certs: str, clients: list[int]) -> int:
    """The streams a client process will hold: one under a host certificate for exactly its ids
    (in ``certs``), else one per client."""
    from secure_fedgraph.clients.ids import format_ids
    from secure_fedgraph.crypto.pki import KeyDirectory

    return 1 if KeyDirectory(Path(certs)).host_cert(format_ids(clients)).is_file() else len(clients)


def _check_keys(args: argparse.Namespace, *, server: bool, clients: list[int]) -> None:
    """The files a server, or a client process (under its host certificate or its clients' own), needs."""
    from secure_fedgraph.clients.ids import format_ids
    from secure_fedgraph.crypto.pki import KeyDirectory
    from secure_fedgraph.runs.preflight import check_files

    keys = KeyDirectory(Path(args.certs))
    paths = [keys.ca, *((keys.server_cert, keys.server_key) if server else ())]
    host = not server and keys.host_cert(format_ids(clients)).is_file()
    if host:
        paths += [keys.host_key(format_ids(clients))]
    for client in clients:
        paths += [keys.client_cert(client)] if server else [*(() if host else (keys.client_cert(client), keys.client_key(client))), keys.identity_key(client)]
    check_files("--certs", paths, f"make the run's keys with `secure-fedgraph keys init {args.certs} --clients N`")


def _check_data_dir(args: argparse.Namespace) -> None:
    if getattr(args, "data_dir", None) and not Path(args.data_dir).expanduser().is_dir():
        raise ConfigError(f"--data-dir {args.data_dir}: no such folder")


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
    options = (_set_item(item, run_plan["config"]) for item in args.set or [])
    given = [(f"--set {key}", run_plan["config"][key], value) for key, value in options]
    if args.clients is not None:
        given.append(("--clients", saved["plan_clients"], args.clients))
    for option, held, value in given:
        if held != value:
            raise ConfigError(f"--resume {args.resume}: {option} is {held!r} in the run, {value!r} here; a resumed run keeps its options "
                              "(leave them out)")
    preflight.check_writable_folder("--resume", args.resume)
    return [int(c) for c in saved["run_clients"]]


def _preflight(args: argparse.Namespace) -> None:
    """What can be checked without torch (runs/preflight.py), before any handler imports it."""
    from secure_fedgraph.data import DATASETS
    from secure_fedgraph.papers import check_plan_name, plan_dataset
    from secure_fedgraph import resources
    from secure_fedgraph.runs import preflight
    from secure_fedgraph.runs.preflight import check_files

    _check_data_dir(args)
    if getattr(args, "plan", None) is not None:
        check_plan_name(args.plan)
    if getattr(args, "crash_at", None) is not None:
        from secure_fedgraph.protocol.core.crash_point import CrashPoint

        CrashPoint.parse(args.crash_at)
    if args.command == "server":
        if args.clients:
            resources.ensure_server_files(args.clients)  # again in the runtime, for a plan's default count
        preflight.check_bindable("--bind", args.bind)
        if args.resume:
            clients = _check_resume(args)
        else:
            if args.plan is None or args.out is None:
                raise ConfigError(f"server: {'--plan' if args.plan is None else '--out'} is required (unless --resume RUN continues a run)")
            preflight.check_writable_folder("--out", args.out)
            clients = list(range(args.clients)) if args.clients else []
        _check_keys(args, server=True, clients=clients)
    elif args.command == "client":
        from secure_fedgraph.clients.ids import parse_ids

        preflight.parse_address("--server", args.server)
        ids = parse_ids(args.ids)
        resources.ensure_client_files(_client_streams(args.certs, ids), clients=len(ids), transcripts=len(ids) if args.transcript is not None else 0)
        _check_keys(args, server=False, clients=ids)
    elif args.command == "demo":
        DATASETS["metr-la"].check_files(args.data_dir)  # once, here: not once per client process
        if args.keep:
            preflight.check_writable_folder("--keep", args.keep)
    elif args.command == "run":
        dataset = plan_dataset(args.plan)
        if dataset is not None:
            DATASETS[dataset].check_files(args.data_dir)
        preflight.check_writable_folder("--out", args.out)
    elif args.command == "audit":
        check_files("RUN_DIR", [Path(args.run_dir) / "transcript.bin"],
                    "run the server with --transcript (or `secure-fedgraph run ... --transcript`) to record one")
        for item in args.client_transcripts:
            if not Path(item).exists():
                raise ConfigError(f"CLIENT_TRANSCRIPTS: no such file or folder {item}")
        preflight.check_writable_folder("--out", args.out or str(Path(args.run_dir) / "audit"))
    elif args.command == "compare":
        DATASETS["metr-la"].check_files(args.data_dir)
        preflight.check_writable_folder("--out", args.out)
    elif args.command == "sweep":
        import importlib.util

        from secure_fedgraph.runs.sweep import check_choices

        for option in ("sigmas", "epsilons"):
            if getattr(args, option) is not None:
                setattr(args, option, _numbers(f"--{option}", getattr(args, option), float, lambda v: positive_number("value", v)))
        args.seeds = _numbers("--seeds", args.seeds, int, lambda v: positive("value", v, 0))
        check_choices(args.plan, sigmas=args.sigmas or (), epsilons=args.epsilons or (), seeds=args.seeds, attacks=args.attacks)
        if importlib.util.find_spec("matplotlib") is None:
            raise ConfigError("sweep draws sweep.png with matplotlib, which is not installed: pip install matplotlib")
        DATASETS["metr-la"].check_files(args.data_dir)
        preflight.check_writable_folder("--out", args.out)
    elif args.command == "sum-demo":
        if not args.no_drop and not 0 <= args.drop < args.clients:
            raise ConfigError(f"--drop must be a client id in [0, {args.clients}), or --no-drop")
    elif args.command == "keys" and args.keys_command == "init":
        preflight.check_writable_folder("keys init DIR", args.dir)
        if args.hosts is not None and args.hosts > args.clients:
            raise ConfigError(f"--hosts {args.hosts}: more hosts than --clients {args.clients}")
    elif args.command == "keys":
        from secure_fedgraph.clients.ids import parse_ids

        parse_ids(args.ids)
        if not (Path(args.dir) / "ca.key").is_file():
            raise ConfigError(f"keys host {args.dir}: no ca.key there (the folder `keys init` made; the CA key signs the host certificate)")


def build_parser() -> argparse.ArgumentParser:
    from secure_fedgraph.papers import PLAN_NAMES  # the registry alone: no torch

    plans = ", ".join(PLAN_NAMES)
    parser = _OneLineParser(prog="secure-fedgraph", description="Federated graph learning where the server sees only what threat_model.md allows.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="secure FedAvg of per-sensor GRUs across processes, with an audit of what the server saw",
                               description="Start a server and several client processes on 127.0.0.1 with throwaway certificates, run "
                               "secure FedAvg of per-sensor GRU forecasters on the first week of METR-LA (one client per sensor), and "
                               "check from the run's transcripts that the server saw only masked uploads and that the aggregates equal "
                               "the plaintext sums. Exit status 1 if a check fails.")
    demo.add_argument("--clients", type=_count(2), default=207, help="sensors, one client each (default all 207)")
    demo.add_argument("--processes", type=_count(), default=3, help="client processes to spread them over (default 3)")
    demo.add_argument("--rounds", type=_count(), default=3, help="FedAvg rounds (default 3)")
    demo.add_argument("--local-steps", type=_count(), default=2, help="local Adam steps per round and client (default 2)")
    demo.add_argument("--backend", choices=["mask", "ckks", "plain"], default="mask", help="secure-sum backend (default mask)")
    demo.add_argument("--data-dir", default=None, help="read METR-LA from DIR/metr-la instead of the packaged week")
    demo.add_argument("--keep", default=None, metavar="DIR", help="keep keys, transcripts and metrics in DIR (default: a temporary folder)")
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="run a paper's plan with every party in this process",
                              description="Run a plan end to end in one process (the in-process transport: the same plan, messages "
                              "and numbers as across processes), print progress per round and write RUN_DIR/metrics.json.")
    run.add_argument("plan", help=f"plan name: {plans}")
    run.add_argument("--out", required=True, metavar="RUN_DIR", help="run folder for metrics.json")
    run.add_argument("--rounds", type=_count(), default=None, help="global rounds (the plan's default otherwise)")
    run.add_argument("--clients", type=_count(), default=None, help="number of clients (sets the plan's client count)")
    run.add_argument("--dp-sigma", type=_positive_number(zero_ok=True), default=None, help="DP noise multiplier on split-learning uploads (cnfgnn, nfedgnn; 0: no DP)")
    run.add_argument("--dp-clip", type=_positive_number(), default=None, help="DP per-row L2 clipping bound (cnfgnn; nfedgnn: of each user's whole h_i)")
    run.add_argument("--dpsgd-sigma", type=_positive_number(zero_ok=True), default=None,
                     help="DP-SGD noise multiplier for the clients' local training (0: no DP-SGD; the plan option dpsgd_sigma)")
    run.add_argument("--dpsgd-clip", type=_positive_number(), default=None, help="DP-SGD per-sample L2 clipping bound (the plan option dpsgd_clip)")
    run.add_argument("--target-epsilon", type=_positive_number(), default=None, metavar="EPS",
                     help="calibrate the plan's DP noise multiplier so that the epsilon it reports is at most EPS (opacus' search; "
                          "an unreachable target is refused)")
    run.add_argument("--calibrate", choices=["dp_sigma", "dpsgd_sigma"], default=None,
                     help="which noise --target-epsilon calibrates (default the plan's: dp_sigma for cnfgnn and nfedgnn, dpsgd_sigma otherwise)")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option, e.g. server_rounds=2 (repeatable)")
    run.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    run.add_argument("--transcript", action="store_true",
                     help="also write every party's transcript: RUN_DIR/transcript.bin (the server's) and RUN_DIR/clients/client-<id>.bin "
                          "(each client's, with its plaintext contributions for audits), for `secure-fedgraph audit`; replaces transcripts the folder held")
    _add_secure_options(run)
    run.set_defaults(handler=_run)

    audit = commands.add_parser("audit", help="check a run's transcripts against every threat_model.md claim, and measure leakage with attacks",
                                description="Replay the server's transcript (RUN_DIR/transcript.bin) and, where given, the clients' "
                                "transcripts; check every threat_model.md claim a transcript can show (PASS / FAIL / NOT APPLICABLE "
                                "with its evidence); list every secure sum the server started (delivered, redone after a re-key, or "
                                "abandoned), every dropout and re-key, and who saw what; run the attacks that measure what the uploads "
                                "give away (CNFGNN: reconstruction of raw inputs from h_c,i, label leakage from dL/dh_G; nFedGNN: x_i and its "
                                "words decoded from h_i, link inference from the latents), each beside the claim it tests. Writes audit.md, audit.json and PNGs. Exit status 1 if a claim fails.")
    audit.add_argument("run_dir", metavar="RUN_DIR", help="the run folder: transcript.bin (server --transcript, or run --transcript) and metrics.json")
    audit.add_argument("client_transcripts", nargs="*", metavar="CLIENT_TRANSCRIPTS",
                       help="client transcripts (files, or folders of client-*.bin): ground truth for the sums, the plaintext probe and the "
                            "DP residuals (without them: what the server alone could compute)")
    audit.add_argument("--out", default=None, metavar="DIR", help="where to write audit.md, audit.json and the PNGs (default RUN_DIR/audit)")
    audit.add_argument("--data-dir", default=None,
                       help="the data folder the run read: the attacks take their public slice and the ground truth from it "
                            "(default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    audit.add_argument("--no-attacks", action="store_true", help="check the claims only (the attacks fit small models: seconds to minutes)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the attacks' learners and samples (default 0)")
    audit.set_defaults(handler=_audit)

    compare = commands.add_parser("compare", help="CNFGNN's Table 7 on METR-LA: every method with the same budget, beside the paper",
                                  description="Train CNFGNN, its federated baselines (as protocols, in one process) and the centralised "
                                  "baselines for the same number of epochs, test them on the same windows, and write RUN_DIR/comparison.md "
                                  "and comparison.json. Methods: gru-centralised, gru+gn-centralised, local-gru, fedavg-gru, cnfgnn "
                                  "(Table 7, the default) and cnfgnn-at, cnfgnn-sl, cnfgnn-sl+fedavg (Table 10).")
    compare.add_argument("--out", required=True, metavar="RUN_DIR", help="folder for comparison.md and comparison.json")
    compare.add_argument("--epochs", type=_count(), default=3, help="passes over the training windows per method (default 3)")
    compare.add_argument("--methods", default=None, help="comma-separated method names, or 'all' (default: Table 7's five)")
    compare.add_argument("--backend", choices=["mask", "ckks", "plain"], default="mask", help="secure-sum backend of the federated methods (default mask)")
    compare.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                         help="device of the centralised baselines and of CNFGNN's server GN (auto: CUDA when available)")
    compare.add_argument("--sensors", type=_count(), default=None, help="only the first N sensors and their subgraph (default all 207)")
    compare.add_argument("--max-windows", type=_count(), default=None, help="at most this many windows per split (default all; for quick looks)")
    compare.add_argument("--seed", type=int, default=0, help="run seed of every method (default 0)")
    compare.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged week)")
    compare.set_defaults(handler=_compare)

    keys = commands.add_parser("keys", help="make the run's certificates and identity keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True, metavar="SUBCOMMAND")
    init = keys_commands.add_parser("init", help="a CA, a server certificate, and per client a certificate and Ed25519 identity key")
    init.add_argument("dir", help="folder to write into")
    init.add_argument("--clients", type=_count(), required=True, help="number of clients (ids 0..N-1)")
    init.add_argument("--server-name", action=_Repeatable, default=["localhost"], help="DNS name in the server certificate (repeatable; default localhost)")
    init.add_argument("--server-ip", action=_Repeatable, default=["127.0.0.1"], help="IP address in the server certificate (repeatable; default 127.0.0.1)")
    init.add_argument("--hosts", type=_count(), default=None, metavar="K",
                      help="also a host certificate for each of K client processes (ids split into K contiguous ranges, as the demo "
                           "starts them): a process started with exactly those --ids holds one connection for all of them")
    init.set_defaults(handler=_keys_init)
    host = keys_commands.add_parser("host", help="a host certificate for the clients one process hosts (needs ca.key)",
                                    description="Issue a host certificate naming every client id in --ids (SAN URIs), signed by the "
                                    "CA in DIR (ca.key): a `client --ids` process with exactly these ids then holds one connection for all "
                                    "of them instead of one per client. Each client keeps its own identity key and certificate.")
    host.add_argument("dir", help="the folder `keys init` made (with ca.key)")
    host.add_argument("--ids", required=True, help="client ids the process hosts: 0-249, or 0,3,5-7")
    host.set_defaults(handler=_keys_host)

    server = commands.add_parser("server", help="run a plan's server side over gRPC with mutual TLS")
    server.add_argument("--bind", required=True, help="HOST:PORT to listen on (port 0: any free port)")
    server.add_argument("--plan", default=None, help=f"plan name: {plans} (required unless --resume)")
    server.add_argument("--clients", type=_count(), default=None, help="number of clients (sets the plan's client count)")
    server.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option, e.g. rounds=5 (repeatable)")
    server.add_argument("--target-epsilon", type=_positive_number(), default=None, metavar="EPS",
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
    server.add_argument("--join-timeout", type=_positive_number(), default=120.0, help="seconds to wait for the clients (default 120)")
    server.add_argument("--step-timeout", type=_positive_number(), default=120.0, help="seconds to wait for answers to each step (default 120)")
    server.add_argument("--max-message-mb", type=_positive_number(), default=256.0, help="largest message accepted, MiB (default 256)")
    server.add_argument("--hello-timeout", type=_positive_number(), default=10.0, help="seconds a new stream has to send its Hello (default 10)")
    server.add_argument("--queue-depth", type=_count(), default=1,
                        help="messages a connection may have waiting before gRPC flow control holds its sender back (default 1)")
    server.add_argument("--port-file", default=None, help="write the bound port here (useful with port 0)")
    server.add_argument("--data-dir", default=None, help="data folder for what the server itself holds, e.g. CNFGNN's sensor graph "
                        "(default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    _add_secure_options(server)
    _add_crash_option(server, "this server on entering the N-th (default first) step of STAGE")
    server.set_defaults(handler=_server)

    client = commands.add_parser("client", help="host one or many logical clients of a run")
    client.add_argument("--server", required=True, help="HOST:PORT of the server")
    client.add_argument("--ids", required=True, help="client ids to host: 0-9, or 0,3,5-7")
    client.add_argument("--certs", required=True, help="folder with ca.pem, clients/client-<id>.identity, and either hosts/host-<ids>.{pem,key} for "
                        "exactly these --ids (one connection for all of them; keys init --hosts, keys host) or clients/client-<id>.{pem,key}")
    client.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    policy = client.add_argument_group("security policy (what these clients accept, whatever the server announces; threat_model.md M-POLICY)")
    policy.add_argument("--backend", action=_Repeatable, choices=["plain", "mask", "ckks"], default=["mask"],
                        help="backends these clients accept (repeatable; default mask only: ckks gives every input to one colluding "
                             "client, plain to the server)")
    policy.add_argument("--no-streaming", action="store_true",
                        help="refuse a run whose mask backend allows the streaming variant (threat_model.md M-STREAM)")
    policy.add_argument("--no-sparse", action="store_true", help="refuse the sparse neighbour graph (accept the complete graph only)")
    policy.add_argument("--min-survivors-fraction", type=float, default=0.5,
                        help="refuse sums over this fraction of the run's clients or fewer (default 0.5: a majority)")
    policy.add_argument("--min-run-clients", type=_count(2), default=3,
                        help="refuse a run that started with fewer clients (default 3: in a run of two each client, and a server "
                             "colluding with one, reads the other's input from the sum)")
    policy.add_argument("--min-dp-sigma", type=float, default=1.0,
                        help="least DP noise multiplier on uploaded activations, for plans that upload them (cnfgnn, nfedgnn; default 1; "
                             "0 accepts no noise: the server then sees your hidden states as they are)")
    policy.add_argument("--reproducible-randomness", "--reproducible-dp-noise", dest="reproducible_dp_noise", action="store_true",
                        help="draw these clients' private randomness (DP noise and DP-SGD samples; nFedGNN's initial W_i and dropout "
                             "masks) from the run seed instead of fresh OS randomness, so a run can be compared with an in-process one; "
                             "for tests only: the server knows the run seed and can remove such noise and recompute such weights")
    policy.add_argument("--allow-seeded-randomness", action="store_true",
                        help="accept a plan that draws users' initial weights and dropout masks from the run seed (nfedgnn "
                             "user_randomness=run_seed); off by default: the server could recompute them and invert a user's first "
                             "latents (threat_model.md NF-INIT)")
    policy.add_argument("--min-ddp-noise", type=_checked(float, lambda v: positive_number("value", v, zero_ok=True)), default=0.0,
                        help="least distributed DP noise multiplier in any sum of this client's model, counted over the fewest "
                             "contributors this client lets a sum have and per unit of a contribution's rounded L2 sensitivity (fedavg-gru, fedavg-vector: the server's --set ddp_noise=z must "
                             "be about 1.41 Z or more); default 0: accept exact sums (threat_model.md DDP-FLOOR)")
    policy.add_argument("--min-dpsgd-sigma", type=_checked(float, lambda v: positive_number("value", v, zero_ok=True)), default=0.0,
                        help="least DP-SGD noise multiplier of the plan's local training (fedavg-gru, local-gru, cnfgnn, fedrel: "
                             "--set dpsgd_sigma=S on the server); default 0: accept training without DP-SGD (threat_model.md DP-SGD-FLOOR)")
    _add_adversary_options(policy)
    client.add_argument("--transcript", default=None, metavar="DIR", help="record what each client received and sent in DIR")
    client.add_argument("--audit", action="store_true", help="with --transcript: also record each client's own plaintext contributions (local files, for audits)")
    client.add_argument("--server-name", default="localhost", help="name to expect in the server's certificate (default localhost)")
    client.add_argument("--connect-timeout", type=_positive_number(), default=60.0,
                        help="seconds to wait for a server that is not listening yet, retrying with backoff (default 60)")
    client.add_argument("--reconnect-timeout", type=_positive_number(zero_ok=True), default=60.0,
                        help="seconds to wait, retrying with backoff, for a server that went away mid-run to come back (server "
                             "--resume); 0: do not wait (default 60)")
    client.add_argument("--session-timeout", type=_positive_number(), default=24 * 3600.0, help="deadline of the whole run, seconds (default 24 h)")
    client.add_argument("--parallel", type=_count(), default=2,
                        help="hosted clients handling a request at the same time (the workers each batch's frames go to; default 2; bounds memory)")
    _add_crash_option(client, "this process, with every client it hosts, on receiving the N-th (default first) request of STAGE")
    client.set_defaults(handler=_client)

    sweep = commands.add_parser("sweep", help="accuracy or error against privacy budget: a plan run per noise multiplier, CSV, table, PNG",
                                description="Run PLAN (cnfgnn: DP noise multiplier on the uploaded hidden states; nfedgnn: on the "
                                "uploaded latents h_i; fedavg-gru: distributed DP inside the FedAvg sum) once per noise multiplier (or per target epsilon, the run "
                                "calibrating its multiplier) and seed, each in its own process "
                                "(up to --jobs at once), beside the same plan without noise and the centralised baseline with the same "
                                "budget (cnfgnn, fedavg-gru), and write OUT/sweep.csv, OUT/sweep.md and OUT/sweep.png (the test metric against epsilon, "
                                "log-scaled). Every run's folder is under OUT/points/. Exit status 1 if a run failed.")
    sweep.add_argument("plan", help="plan name: cnfgnn, nfedgnn or fedavg-gru")
    points = sweep.add_mutually_exclusive_group(required=True)
    points.add_argument("--sigmas", metavar="S1,S2,...", help="noise multipliers, one private run each (per seed)")
    points.add_argument("--epsilons", metavar="E1,E2,...",
                        help="target epsilons instead, one private run each (per seed) calibrating its noise multiplier with "
                             "run --target-epsilon (cnfgnn and nfedgnn: fedavg-gru's distributed DP epsilon depends on the survivors)")
    sweep.add_argument("--seeds", default="0", metavar="N1,N2,...",
                       help="run seeds; each gives one marker per sigma and its own reference runs (default 0)")
    sweep.add_argument("--jobs", type=_count(), default=1, help="runs at the same time, each its own process (default 1)")
    sweep.add_argument("--out", required=True, metavar="DIR", help="folder for sweep.csv, sweep.md, sweep.png and points/")
    sweep.add_argument("--rounds", type=_count(), default=None, help="global rounds of every run (the plan's default otherwise)")
    sweep.add_argument("--set", action="append", metavar="KEY=VALUE", help="a plan option for every run, e.g. sensors=50 (repeatable)")
    sweep.add_argument("--backend", choices=["plain", "mask"], default="mask", help="secure-sum backend of every run (default mask)")
    sweep.add_argument("--no-centralised", action="store_true", help="skip the centralised reference runs")
    sweep.add_argument("--attacks", action="store_true",
                       help="also audit every private and non-private run from its transcripts (run --transcript; secure-fedgraph audit, "
                            "into its folder's audit/) and draw the leakage attacks' measures against epsilon: OUT/leakage-against-epsilon.png "
                            "(cnfgnn; nfedgnn: feature reconstruction, word recovery and link inference from the latents)")
    sweep.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged week)")
    sweep.set_defaults(handler=_sweep, clients=None)

    sum_demo = commands.add_parser("sum-demo", help="one secure sum in one process, showing what the server saw")
    sum_demo.add_argument("--clients", type=_count(2), default=8, help="number of clients (at least 2)")
    sum_demo.add_argument("--backend", choices=["plain", "mask", "ckks"], default="mask", help="secure-sum backend (default mask)")
    sum_demo.add_argument("--size", type=_multiple_of_10, default=10_000, help="values per client, a multiple of 10 (default 10000)")
    sum_demo.add_argument("--drop", type=int, default=2, help="id of the client that drops before its input (default 2)")
    sum_demo.add_argument("--no-drop", action="store_true", help="run with no dropout")
    sum_demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic inputs (default 0)")
    sum_demo.set_defaults(handler=_sum_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
