"""CNFGNN's Table 7 (and Table 10's training strategies) on the METR-LA data we have: every
method trained with the same budget, ``epochs`` passes over the training windows, and tested
on the same windows, beside the paper's RMSE.

Budget: a federated round is one pass of local training (CNFGNN adds one server epoch of the
GN, as the paper's METR-LA setting R_s = 1); a centralised epoch is one pass over the pooled
windows. Federated methods run as protocols in one process (the in-process transport) with
the chosen secure-sum backend; the centralised ones are the non-private upper bounds.

The paper trains on four months (34,272 steps) for up to 500 rounds with early stopping; we
have one week (2,016 steps) and a few epochs, so the numbers are for ordering, not equality.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers import CNFGNN, FedAvgGRU, LocalGRU
from secure_fedgraph.papers.cnfgnn import CNFGNNConfig
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig


@dataclass(frozen=True)
class Method:
    """One row: its name on the command line, its label and the paper's METR-LA test RMSE."""

    name: str
    label: str
    paper_rmse: float
    table: int


METHODS = {m.name: m for m in (
    Method("gru-centralised", "GRU (centralised, 63K)", 11.730, 7),
    Method("gru+gn-centralised", "GRU + GN (centralised, 64K + 1M)", 11.471, 7),
    Method("local-gru", "GRU (local, 63K)", 11.801, 7),
    Method("fedavg-gru", "GRU (63K) + FedAvg", 12.132, 7),
    Method("cnfgnn", "CNFGNN (64K + 1M), AT + FedAvg", 11.487, 7),
    Method("cnfgnn-at", "CNFGNN, AT w/o FedAvg", 11.912, 10),
    Method("cnfgnn-sl", "CNFGNN, SL", 12.186, 10),
    Method("cnfgnn-sl+fedavg", "CNFGNN, SL + FedAvg", 11.631, 10),
)}
TABLE_7 = tuple(name for name, m in METHODS.items() if m.table == 7)


@dataclass(frozen=True)
class Row:
    """A method's result: test RMSE and MAE (mph, unmasked, as CNFGNN reports), the last
    validation RMSE, parameters, seconds and the run's own metrics."""

    method: str
    label: str
    paper_rmse: float
    test_rmse: float
    test_mae: float
    val_rmse: float
    seconds: float
    details: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Budget:
    """What every method gets: ``epochs`` passes over the training windows of the first
    ``sensors`` sensors of ``dataset`` (None: all of them), at most ``max_windows`` windows per
    split (None: all)."""

    epochs: int = 3
    sensors: int | None = None
    dataset: str = "metr-la"
    max_windows: int | None = None
    seed: int = 0


def plan_for(method: str, budget: Budget, device: str = "cpu") -> CNFGNN | FedAvgGRU:
    """The federated ``method``'s plan with ``budget``."""
    common = dict(rounds=budget.epochs, sensors=budget.sensors, dataset=budget.dataset, max_windows=budget.max_windows, seed=budget.seed)
    if method in ("local-gru", "fedavg-gru"):
        return (LocalGRU if method == "local-gru" else FedAvgGRU)(FedAvgGRUConfig(**common))
    variant = {"cnfgnn": "at+fedavg", "cnfgnn-at": "at", "cnfgnn-sl": "sl", "cnfgnn-sl+fedavg": "sl+fedavg"}[method]
    return CNFGNN(CNFGNNConfig(**common, variant=variant, server_device=device))


def _federated(method: str, budget: Budget, backend: Backend, device: str, data_dir: str | os.PathLike | None,
               say: Callable[[str], None] | None) -> dict[str, Any]:
    from secure_fedgraph.runs.simulate import simulate

    result = simulate(plan_for(method, budget, device), SecureSumConfig(backend=backend), data_dir=data_dir, say=say)
    return {**result.metrics, "seconds": result.seconds, "backend": backend.value, "val_rmse": result.metrics["rounds"][-1]["val_rmse"]}


def centralised_config(budget: Budget, device: str = "cpu"):
    """The centralised baselines' configuration with ``budget``."""
    from secure_fedgraph.training.centralised import CentralisedConfig

    return CentralisedConfig(epochs=budget.epochs, sensors=budget.sensors, dataset=budget.dataset, max_windows=budget.max_windows, seed=budget.seed,
                             device=device)


def _centralised(method: str, budget: Budget, device: str, data_dir: str | os.PathLike | None, say: Callable[[str], None] | None) -> dict[str, Any]:
    from secure_fedgraph.training.centralised import train_centralised_gru, train_centralised_gru_gn

    train = train_centralised_gru if method == "gru-centralised" else train_centralised_gru_gn
    result = train(centralised_config(budget, device), data_dir, say)
    return {**result.metrics(), "val_rmse": result.history[-1].val_rmse}


def compare(
    methods: Sequence[str] = TABLE_7,
    budget: Budget = Budget(),
    *,
    backend: Backend = Backend.MASK,
    device: str = "auto",
    data_dir: str | os.PathLike | None = None,
    say: Callable[[str], None] | None = None,
) -> list[Row]:
    """Train and test each of ``methods`` (names in :data:`METHODS`) with the same ``budget``.

    Raises:
        ConfigError: an unknown method or a bad budget (checked before anything trains).
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ConfigError(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    for method in methods:  # every configuration is checked before the first run starts
        if method.endswith("-centralised"):
            centralised_config(budget, device)
        else:
            plan_for(method, budget, device)
    rows = []
    for name in methods:
        method = METHODS[name]
        if say:
            say(f"== {method.label}: {budget.epochs} epoch(s)")
        started = time.perf_counter()
        if name.endswith("-centralised"):
            details = _centralised(name, budget, device, data_dir, say)
        else:
            details = _federated(name, budget, backend, device, data_dir, say)
        seconds = time.perf_counter() - started
        rows.append(Row(name, method.label, method.paper_rmse, details["test_rmse"], details["test_mae"], details["val_rmse"], seconds, details))
        if say:
            say(f"== {method.label}: test RMSE {details['test_rmse']:.3f}, MAE {details['test_mae']:.3f} ({seconds:.0f} s)")
    return rows


def markdown(rows: Sequence[Row], budget: Budget) -> str:
    """The rows as a Markdown table beside the paper's METR-LA RMSE, and the budget they had."""
    lines = ["| method | test RMSE | test MAE | val RMSE | seconds | paper RMSE (METR-LA, 4 months) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.label} | {r.test_rmse:.3f} | {r.test_mae:.3f} | {r.val_rmse:.3f} | {r.seconds:.0f} | {r.paper_rmse:.3f} |")
    sensors = ("all sensors" if budget.sensors is None else f"the first {budget.sensors} sensors") + (
        "" if budget.dataset == "metr-la" else f" of {budget.dataset}")
    windows = "all windows" if budget.max_windows is None else f"at most {budget.max_windows} windows per split"
    lines.append(f"\n{budget.epochs} epoch(s) per method, {sensors}, {windows} (DCRNN split 70/10/20), seed {budget.seed}; "
                 "RMSE/MAE in mph, unmasked, pooled over all sensors and horizons.")
    return "\n".join(lines)


def write(rows: Sequence[Row], budget: Budget, out: str | os.PathLike) -> Path:
    """RUN_DIR/comparison.json (every run's metrics) and comparison.md; returns the folder."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comparison.json").write_text(json.dumps({**asdict(budget), "rows": [asdict(r) for r in rows]}, indent=2, sort_keys=True, default=str))
    (folder / "comparison.md").write_text(markdown(rows, budget) + "\n")
    return folder
