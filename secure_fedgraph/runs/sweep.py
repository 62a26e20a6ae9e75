"""``secure-fedgraph sweep``: a plan's accuracy (or error) against its privacy budget.

One point is one ``secure-fedgraph run`` of the plan with its noise multiplier set to one of
the sweep's sigmas (the plan's privacy option: CNFGNN's ``dp_sigma`` on the uploaded hidden
states, FedAvg's ``ddp_noise`` inside the secure sum, FedSTGD's ``ddp_noise`` in every sum of its
windows together with its ``dpsgd_sigma``: papers.PlanEntry.swept), per seed; or, with target epsilons, the
run calibrates that multiplier itself (``run --target-epsilon E --calibrate OPTION``, opacus'
search) and the sweep reads the multiplier it chose from the run's metrics. Two references run beside
them per seed: the same plan without noise (non-private), and the centralised baseline on
the same data and budget (``secure-fedgraph compare``'s method). Every point is its own process
(up to ``jobs`` at once), writes its own run folder, and the sweep reads each one's
``metrics.json`` (test metric; ``privacy.epsilon_max`` at ``privacy.delta``) into
``sweep.csv``, ``sweep.md`` and ``sweep.png`` (the metric against epsilon, log-scaled, one
marker per seed, the references as horizontal lines; matplotlib). With ``attacks``, every
private and non-private run also writes its transcripts, ``secure-fedgraph audit`` audits it
into its ``audit/`` (the leakage attacks beside their claims), and
``leakage-against-epsilon.png`` draws each attack's error against epsilon from those audits
(secure_fedgraph/audit/curves.py), the non-private run at "no DP".
"""

from __future__ import annotations

import csv
import math
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.runs import sweep_progress
from secure_fedgraph.runs.sweep_progress import RunningPoints
from secure_fedgraph.ticker import every
from secure_fedgraph.papers import PYG_CENTRALISED, plan_entry, plans_where

MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@dataclass(frozen=True)
class SweepOptions:
    """What to sweep.

    Attributes:
        plan: a plan with a privacy option (its papers.PlanEntry's ``privacy_option``).
        sigmas: noise multipliers, one private point each (per seed).
        epsilons: target epsilons instead, one private point each (per seed), the run calibrating
            its noise multiplier (plans whose papers.PlanEntry ``calibrates``).
        seeds: run seeds; each gives one point per sigma and its own references.
        jobs: points running at once (each a process).
        out: the sweep folder (``points/`` holds every run folder).
        run_options: command-line options every ``run`` gets (``--rounds``, ``--set``, ``--backend``, ...).
        budget: the plan's ``rounds``, ``sensors``, ``max_windows``, ``dataset`` and ``model`` (the centralised reference's budget).
        data_dir: data folder for every point.
        centralised: also run the centralised reference (where the plan has one).
        attacks: also audit every private and non-private run (its transcripts, the leakage
            attacks) and draw the attacks' errors against epsilon (plans whose papers.PlanEntry is ``attacked``).
    """

    plan: str
    out: Path
    sigmas: tuple[float, ...] = ()
    epsilons: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    jobs: int = 1
    run_options: tuple[str, ...] = ()
    budget: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    centralised: bool = True
    attacks: bool = False

    def __post_init__(self) -> None:
        check_choices(self.plan, sigmas=self.sigmas, epsilons=self.epsilons, seeds=self.seeds, attacks=self.attacks)
        if self.jobs < 1:
            raise ConfigError(f"sweep: --jobs must be >= 1, got {self.jobs}")


def check_choices(plan: str, *, sigmas: Sequence[float], epsilons: Sequence[float], seeds: Sequence[int], attacks: bool) -> None:
    """What a sweep may be asked for (the CLI calls this before torch is imported; ConfigError, one line)."""
    swept = plans_where(lambda e: e.privacy_option is not None)
    if plan not in swept:
        raise ConfigError(f"sweep: plan {plan} has no privacy option to sweep; plans with one: {', '.join(swept)}")
    entry = plan_entry(plan)
    if bool(sigmas) == bool(epsilons):
        raise ConfigError("sweep: give --sigmas or --epsilons (one of them)")
    for option, values in (("--sigmas", sigmas), ("--epsilons", epsilons)):
        if any(not (math.isfinite(v) and v > 0) for v in values) or len(set(values)) != len(values):
            raise ConfigError(f"sweep: {option} must be distinct numbers > 0, got {list(values)}")
    if epsilons and not entry.calibrates:
        raise ConfigError(f"sweep: plan {plan} cannot calibrate {entry.privacy_option} to a target epsilon (its epsilon depends on the "
                          f"clients that survive each sum); use --sigmas (--epsilons works for: "
                          f"{', '.join(plans_where(lambda e: e.calibrates))})")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"sweep: --seeds must be distinct, got {list(seeds)}")
    if attacks and not entry.attacked:
        raise ConfigError(f"sweep: --attacks: the audit has no leakage attack on plan {plan}'s uploads (plans with one: "
                          f"{', '.join(plans_where(lambda e: e.attacked))})")


@dataclass(frozen=True)
class Point:
    """One run of the sweep: its kind (private, non-private, centralised), sigma or target
    epsilon (a private point has one of them), seed, folder, command; ``audit``: the command
    that audits it once it finished (``sweep --attacks``)."""

    kind: str
    sigma: float | None
    seed: int
    folder: Path
    command: tuple[str, ...]
    target: float | None = None
    audit: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        setting = f" sigma={self.sigma:g}" if self.sigma is not None else f" target epsilon={self.target:g}" if self.target is not None else ""
        return f"{self.kind}{setting} seed={self.seed}"


def _cli(*args: str, module: str = "secure_fedgraph") -> tuple[str, ...]:
    """A point's command: the one launcher's (``python -P``: a checkout's own folder in the
    current directory must not shadow the installed package)."""
    from secure_fedgraph.runs.launch import command

    return tuple(command(*args, module=module))


def _centralised(method: str, options: SweepOptions, seed: int, folder: Path, data: tuple[str, ...]) -> tuple[str, ...]:
    """The centralised reference's command at the sweep's budget: ``compare --methods METHOD``,
    or for nFedGNN the whole-graph PyG model (runs/node_centralised.py) for as many epochs as rounds."""
    budget = options.budget
    if method == PYG_CENTRALISED:
        return _cli("--dataset", budget.get("dataset") or "Cora", "--model", budget.get("model") or "gcn", f"--epochs={budget['rounds']}",
                    f"--seed={seed}", "--out", str(folder), *data, module="secure_fedgraph.runs.node_centralised")
    flags = [f"--epochs={budget['rounds']}", f"--seed={seed}", "--device=cpu"]
    flags += [f"--{k.replace('_', '-')}={budget[k]}" for k in ("sensors", "max_windows") if budget.get(k) is not None]
    flags += [f"--dataset={budget['dataset']}"] if budget.get("dataset") not in (None, "metr-la") else []
    return _cli("compare", "--methods", method, "--out", str(folder), *flags, *data)


def _set(options: SweepOptions, value: str) -> tuple[str, ...]:
    """``--set`` of every option the sweep varies (papers.PlanEntry.swept) to ``value``."""
    return tuple(item for knob in plan_entry(options.plan).swept for item in ("--set", f"{knob}={value}"))


def knob_label(plan: str) -> str:
    """The swept options as the table and the plot name them ("ddp_noise = dpsgd_sigma")."""
    return " = ".join(plan_entry(plan).swept)


def points(options: SweepOptions) -> list[Point]:
    """Every run of the sweep, the references first (their lines frame the plot)."""
    knob = plan_entry(options.plan).privacy_option
    data = ("--data-dir", options.data_dir) if options.data_dir else ()
    out = []
    for seed in options.seeds:
        folder = options.out / "points" / f"non-private-seed{seed}"
        out.append(Point("non-private", None, seed, folder, _cli("run", options.plan, "--out", str(folder), *options.run_options, *data,
                                                              "--set", f"seed={seed}", *_set(options, "0"))))
        method = plan_entry(options.plan).centralised_method
        if options.centralised and method is not None:
            folder = options.out / "points" / f"centralised-seed{seed}"
            out.append(Point("centralised", None, seed, folder, _centralised(method, options, seed, folder, data)))
        for sigma in options.sigmas:
            folder = options.out / "points" / f"sigma-{sigma:g}-seed{seed}"
            out.append(Point("private", sigma, seed, folder, _cli("run", options.plan, "--out", str(folder), *options.run_options, *data,
                                                                  "--set", f"seed={seed}", *_set(options, repr(sigma)))))
        for epsilon in options.epsilons:
            folder = options.out / "points" / f"epsilon-{epsilon:g}-seed{seed}"
            out.append(Point("private", None, seed, folder, _cli("run", options.plan, "--out", str(folder), *options.run_options, *data,
                                                                 "--set", f"seed={seed}", "--target-epsilon", repr(epsilon),
                                                                 "--calibrate", knob), target=epsilon))
    return [_audited(p, data) for p in out] if options.attacks else out


def _audited(point: Point, data: tuple[str, ...]) -> Point:
    """``point`` writing its transcripts and audited afterwards (the centralised reference has none)."""
    if point.kind == "centralised":
        return point
    return replace(point, command=(*point.command, "--transcript"),
                   audit=_cli("audit", str(point.folder), str(point.folder / "clients"), "--out", str(point.folder / "audit"), *data))


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = round(width * done / total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}"


def read_point(point: Point) -> dict[str, Any]:
    """One CSV row from a finished point's metrics (``metrics.json``, or ``comparison.json`` for the centralised reference)."""
    import json

    if point.kind == "centralised" and (point.folder / "comparison.json").exists():
        row = json.loads((point.folder / "comparison.json").read_text())["rows"][0]
        metrics = {**row["details"], "test_rmse": row["test_rmse"], "seconds": row["seconds"]}
    else:
        metrics = json.loads((point.folder / "metrics.json").read_text())
    metric = "test_rmse" if "test_rmse" in metrics else "test_acc"
    privacy = metrics.get("privacy") or {}
    sigma = point.sigma
    if point.target is not None:  # the multiplier the run's calibration chose
        sigma = float(metrics["config"]["config"][plan_entry(metrics["plan"]).privacy_option])
    return {
        "kind": point.kind,
        "target_epsilon": "" if point.target is None else point.target,
        "sigma": "" if sigma is None else sigma,
        "seed": point.seed,
        "metric": metric,
        "value": metrics[metric],
        "epsilon": privacy.get("epsilon_max", math.inf if point.kind == "private" else ""),
        "epsilon_prv": _prv(privacy),
        "delta": privacy.get("delta", ""),
        "accountant": privacy.get("accountant", "opacus RDP" if privacy else ""),
        "seconds": round(float(metrics.get("seconds", 0.0)), 1),
        "run": str(point.folder),
    }


def _prv(privacy: dict[str, Any]) -> float | str:
    """PRV's epsilon where the run reports it beside RDP's (privacy.accountants.prv), else empty."""
    value = ((privacy.get("accountants") or {}).get("prv") or {}).get("epsilon_max")
    return "" if value is None else value


def run_points(todo: Sequence[Point], *, jobs: int, say: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[str]]:
    """Run every point (``jobs`` at once, each in its own process with its output in its folder's
    ``output.txt``), reporting progress with a bar as each ends and, while they go, where each is
    (sweep_progress.py); returns (rows of the finished ones, failures)."""
    lock, rows, failures, done = threading.Lock(), {}, [], [0]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))}

    def one(index: int) -> None:
        point = todo[index]
        point.folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        running.started(point.label, point.folder / "output.txt")
        try:
            with open(point.folder / "output.txt", "w") as log:
                code = subprocess.run(point.command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
                if code == 0 and point.audit is not None:  # exit 1: a claim failed, which the audit reports; 2 or more: no audit
                    audited = subprocess.run(point.audit, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
                    code = 0 if audited in (0, 1) else audited
        finally:
            running.finished(point.label)
        seconds = time.perf_counter() - started
        row, line = None, ""
        if code == 0:
            try:
                row = read_point(point)
                eps = f", epsilon {row['epsilon']:.3g}" if isinstance(row["epsilon"], float) else ""
                line = f"{row['metric'].replace('_', ' ')} {row['value']:.4g}{eps}"
            except (OSError, KeyError, ValueError, IndexError) as exc:
                code, line = 1, f"unreadable metrics ({exc})"
        with lock:
            done[0] += 1
            if row is not None:
                rows[index] = row
            else:
                failures.append(f"{point.label}: exit {code} {line}; see {point.folder / 'output.txt'}")
                line = f"FAILED (exit {code}; {point.folder / 'output.txt'})"
            say(f"sweep: {_bar(done[0], len(todo))} {point.label}: {line} ({seconds:.0f} s)")

    say(f"sweep: {_bar(0, len(todo))} {len(todo)} runs, {jobs} at a time")
    running = RunningPoints(lambda: _bar(done[0], len(todo)))
    with every(sweep_progress.TICK_S, say, running.line), ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, range(len(todo))))
    return [rows[i] for i in sorted(rows)], failures


COLUMNS = ("kind", "target_epsilon", "sigma", "seed", "metric", "value", "epsilon", "epsilon_prv", "delta", "accountant", "seconds", "run")


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def _mean_sd(values: Sequence[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def _settings(rows: Sequence[dict[str, Any]], options: SweepOptions) -> list[tuple[str, list[dict[str, Any]]]]:
    """The private rows per sweep setting, most private first: (label, rows) per sigma, or per target epsilon."""
    private = [r for r in rows if r["kind"] == "private"]
    if options.epsilons:
        groups = [(f"ε ≤ {e:g}", [r for r in private if r["target_epsilon"] == e]) for e in sorted(options.epsilons)]
    else:
        groups = [(f"σ={s:g}", [r for r in private if r["sigma"] == s]) for s in sorted(options.sigmas, reverse=True)]
    return [(label, mine) for label, mine in groups if mine]


def markdown(rows: Sequence[dict[str, Any]], options: SweepOptions) -> str:
    """The sweep as a table: per sigma (or target epsilon) the epsilon and the metric over seeds; the references below."""
    metric = rows[0]["metric"] if rows else "test_rmse"
    name = {"test_rmse": "test RMSE", "test_acc": "test accuracy"}.get(metric, metric)
    delta = next((r["delta"] for r in rows if r["delta"] != ""), "")
    knob = knob_label(options.plan)
    target = "| target epsilon " if options.epsilons else ""
    lines = [f"{target}| noise multiplier ({knob}{', calibrated' if options.epsilons else ''}) | epsilon, RDP (delta {delta}) "
             f"| epsilon, PRV | {name} | seeds |", "|---" * (6 if options.epsilons else 5) + "|"]
    for _, mine in _settings(rows, options):
        prv = [float(r["epsilon_prv"]) for r in mine if r["epsilon_prv"] != ""]
        setting = f"| {mine[0]['target_epsilon']:g} | {_mean_sd([float(r['sigma']) for r in mine])} " if options.epsilons else f"| {mine[0]['sigma']:g} "
        lines.append(f"{setting}| {_mean_sd([float(r['epsilon']) for r in mine])} | {_mean_sd(prv) if len(prv) == len(mine) else '—'} "
                     f"| {_mean_sd([r['value'] for r in mine])} | {len(mine)} |")
    for kind, label in (("non-private", "no noise (non-private)"), ("centralised", f"centralised ({plan_entry(options.plan).centralised_method})")):
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            lines.append(f"{'| ∞ ' if options.epsilons else ''}| {label} | ∞ | ∞ | {_mean_sd([r['value'] for r in mine])} | {len(mine)} |")
    better = "lower is better" if metric == "test_rmse" else "higher is better"
    lines.append(f"\n{options.plan}, {name} ({better}); epsilon per client (the largest over clients; RDP is the run's guarantee, "
                 "PRV where the run reports it), mean ± sd over seeds; "
                 f"options {' '.join(options.run_options) or '(defaults)'}.")
    lines.extend(["", *overlaps(rows, options)])
    return "\n".join(lines) + "\n"


def _spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample sd (0 for one seed)."""
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def overlaps(rows: Sequence[dict[str, Any]], options: SweepOptions) -> list[str]:
    """Which neighbouring points of the curve (most private first, then no noise) the seeds
    cannot tell apart: their mean ± sd intervals overlap. A curve whose every neighbour overlaps
    shows no trade-off at this budget, whatever its means suggest."""
    groups = [(label, [r["value"] for r in mine]) for label, mine in _settings(rows, options)]
    groups += [("no noise", values)] if (values := [r["value"] for r in rows if r["kind"] == "non-private"]) else []
    out = []
    for (a, va), (b, vb) in zip(groups, groups[1:]):
        (ma, sa), (mb, sb) = _spread(va), _spread(vb)
        same = abs(ma - mb) <= sa + sb
        out.append(f"- {a} and {b}: {'overlap within their spread' if same else 'apart'} "
                   f"(means {ma:.3f} and {mb:.3f}, |difference| {abs(ma - mb):.3f} {'<=' if same else '>'} sd sum {sa + sb:.3f})")
    if len(groups) > 1:
        first, last = _spread(groups[0][1]), _spread(groups[-1][1])
        apart = abs(first[0] - last[0]) > first[1] + last[1]
        out.append(f"- the noisiest point and {groups[-1][0]}: {'apart' if apart else 'within their spread: no trade-off shown at this budget'}")
    return out


def plot(rows: Sequence[dict[str, Any]], options: SweepOptions, path: Path) -> None:
    """``path``: the metric against epsilon (log x), one marker per seed, the means joined with
    the seeds' spread (mean ± sd) as a band, the non-private and centralised means as
    horizontal lines with their spread shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    private = [r for r in rows if r["kind"] == "private" and math.isfinite(float(r["epsilon"]))]
    metric = rows[0]["metric"] if rows else "test_rmse"
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    finite = {id(r) for r in private}
    means = sorted((statistics.mean(float(r["epsilon"]) for r in mine), *_spread([r["value"] for r in mine]), label)
                   for label, all_mine in _settings(rows, options) if (mine := [r for r in all_mine if id(r) in finite]))
    if means:  # the means joined, the seeds' spread (mean ± sd at each setting) as a band
        ax.fill_between([m[0] for m in means], [m[1] - m[2] for m in means], [m[1] + m[2] for m in means], color="C0", alpha=0.2,
                        linewidth=0, label="mean ± sd over seeds")
        ax.plot([m[0] for m in means], [m[1] for m in means], color="C0", linewidth=1)
        for eps, value, _, label in means:
            ax.annotate(label, (eps, value), textcoords="offset points", xytext=(4, 4), fontsize=8)
    for i, seed in enumerate(options.seeds):
        mine = [r for r in private if r["seed"] == seed]
        ax.scatter([float(r["epsilon"]) for r in mine], [r["value"] for r in mine], marker=MARKERS[i % len(MARKERS)], color="C0",
                   alpha=0.8, label=f"seed {seed}")
    for kind, color, label in (("non-private", "C2", "non-private (no noise)"), ("centralised", "C3", "centralised")):
        mine = [r["value"] for r in rows if r["kind"] == kind]
        if mine:
            mean, sd = _spread(mine)
            ax.axhline(mean, color=color, linestyle="--", linewidth=1, label=label)
            if sd:
                ax.axhspan(mean - sd, mean + sd, color=color, alpha=0.12, linewidth=0)
    ax.set_xscale("log")
    delta = next((r["delta"] for r in rows if r["delta"] != ""), "")
    ax.set_xlabel(f"epsilon per client (delta {delta})")
    ax.set_ylabel({"test_rmse": "test RMSE", "test_acc": "test accuracy"}.get(metric, metric))
    ax.set_title(f"{options.plan}: {knob_label(options.plan)} sweep{' (calibrated to target epsilons)' if options.epsilons else ''}",
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def sweep(options: SweepOptions, say: Callable[[str], None] = print) -> tuple[Path, list[str]]:
    """Run the sweep and write ``sweep.csv``, ``sweep.md`` and ``sweep.png`` into ``options.out``
    (with ``attacks`` also ``leakage-against-epsilon.png``); returns the folder and the failed points (their rows are missing from the three files)."""
    options.out.mkdir(parents=True, exist_ok=True)
    rows, failures = run_points(points(options), jobs=options.jobs, say=say)
    write_csv(rows, options.out / "sweep.csv")
    (options.out / "sweep.md").write_text(markdown(rows, options))
    plot(rows, options, options.out / "sweep.png")
    if options.attacks:
        from secure_fedgraph.audit.curves import leakage_against_epsilon

        audits = [p.folder / "audit" / "audit.json" for p in points(options) if p.audit is not None and (p.folder / "audit" / "audit.json").exists()]
        if audits:
            leakage_against_epsilon(audits, options.out / "leakage-against-epsilon.png")
    return options.out, failures
