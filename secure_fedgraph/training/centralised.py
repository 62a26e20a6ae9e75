"""Centralised baselines of CNFGNN's Table 7 on METR-LA: the non-private upper bounds, trained
on pooled data in one process (no protocol, no secure sums).

Meng, Rambhatla, Liu, KDD 2021, Section 4.1 and Table 7 (code: ``main.py`` with
``NodePredictor``, ``submission_exps/exp_main.sh`` and ``exp_at.py``):

- "GRU (centralized, 63K)": one :class:`~secure_fedgraph.models.GRUSeq2Seq` (hidden 100, 62,501
  parameters) shared by every sensor. A batch is a set of windows; each (window, sensor) pair is
  one independent sequence, so a batch of B windows over N sensors is B x N sequences
  (:class:`~secure_fedgraph.models.PooledGRU`).
- "GRU + GN (centralized, 64K + 1M)": CNFGNN's architecture trained end to end: one shared
  ``GRUSeq2Seq(hidden 64, graph 64)`` (63,873 parameters) encodes every sensor's window to
  h_c, a :class:`~secure_fedgraph.models.GraphNet` (1,237,312 parameters) maps the h_c of all
  sensors of each window to h_G, and every sensor decodes from [h_c ; h_G]
  (:class:`~secure_fedgraph.models.GraphGRU`). One Adam steps both models. Table 7's METR-LA number for it (11.471) is
  Table 10's "Centralized" row, which ``exp_at.py`` runs with 64 windows per batch. Nothing
  reads the last GN layer's global update, so its 213,632 parameters (of the 1,237,312) get no
  gradient, in CNFGNN's code as here.

Both: speeds z-scored with the mean and std of the training inputs of the sensors used (DCRNN,
zeros included), MSE on the normalised scale, Adam (lr 1e-3, no weight decay), scheduled
sampling with c = ``cl_decay_steps`` (1000, CNFGNN's default for both) counted in optimiser
steps, RMSE and MAE in mph, unmasked, pooled over every sensor, window and horizon step of a
split (as :func:`~secure_fedgraph.training.forecasting.rmse_mae`). Validation after every
epoch; the test split is evaluated with the final model and with the model of the best
validation epoch (CNFGNN's ``main.py`` tests its best ``val/loss`` checkpoint; the ranking by
validation RMSE is the same, since both are the pooled MSE up to a constant).

Paper symbols: h_c (``h``) the encoder's final state, (N*B, H) rows ordered node-major (row
n*B + b is node n, window b); h_G (``h_graph``) the Graph Network's output, (N, B, H).

Defaults and deviations (see also :class:`CentralisedConfig`): batch sizes are CNFGNN's
(256 windows for the GRU, 64 for GRU + GN); CNFGNN's Lightning runs stop on ``val/loss``
with patience 50 and at most 1000 epochs, here ``epochs`` and ``patience`` are explicit and
``patience`` is off by default. Determinism: the same seed gives the same numbers on CPU (one
torch thread); on CUDA, scatter-sums and cuDNN kernels may differ in the last bits.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from secure_fedgraph.data import TrafficSplits, dcrnn_windows
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.models import GraphGRU, GraphNet, GRUSeq2Seq, PooledGRU
from secure_fedgraph.models.graph_net import sensor_graph
from secure_fedgraph.data.metr_la import check_sensors
from secure_fedgraph.data.sources import load_series, node_count
from secure_fedgraph.validation import positive, positive_number
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.training.device import check_device, resolve_device
from secure_fedgraph.training.device import single_thread
from secure_fedgraph.training.forecasting import curriculum
from secure_fedgraph.training.metrics import rmse_mae

GRU = "gru"
GRU_GN = "gru+gn"
PAPER_BATCH_WINDOWS = {GRU: 256, GRU_GN: 64}  # exp_main.sh (GRU centralized 63K), exp_at.py (Centralized)
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class CentralisedConfig:
    """Settings of both centralised baselines; defaults are CNFGNN's METR-LA ones.

    Attributes:
        epochs: passes over the training windows (at most; see ``patience``).
        sensors: the first ``sensors`` sensors and their subgraph (None: all of them).
        dataset: the graph series (data/sources.py; METR-LA by default): its first channel.
        batch_size: windows per batch, each with all its sensors (None: CNFGNN's, 256 windows
            for the GRU and 64 for GRU + GN).
        lr: Adam learning rate (1e-3).
        gru_hidden_size: hidden size of the GRU baseline (100: the "63K" model).
        hidden_size: GRU + GN: the node GRU's hidden size and the size of h_G (64).
        gn_hidden / gn_update / gn_layers: the Graph Network's MLP width (256), update size
            (128) and depth (2).
        cl_decay_steps: scheduled sampling constant c (1000; 0: always feed predictions).
        max_windows: keep only the first windows of each split (None: all).
        max_steps_per_epoch: cap on optimiser steps per epoch, for timing and small runs (None).
        patience: stop after this many epochs without a better validation RMSE (None: never).
        seed: run seed (initial weights, batch order, scheduled-sampling draws).
        device: "auto" (CUDA when available), "cpu" or "cuda".
    """

    epochs: int = 100
    sensors: int | None = None
    dataset: str = "metr-la"
    batch_size: int | None = None
    lr: float = 1e-3
    gru_hidden_size: int = 100
    hidden_size: int = 64
    gn_hidden: int = 256
    gn_update: int = 128
    gn_layers: int = 2
    cl_decay_steps: int = 1000
    max_windows: int | None = None
    max_steps_per_epoch: int | None = None
    patience: int | None = None
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        check_sensors(self.sensors, node_count(self.dataset))
        for name in ("epochs", "gru_hidden_size", "hidden_size", "gn_hidden", "gn_update", "gn_layers"):
            positive(name, getattr(self, name))
        positive("cl_decay_steps", self.cl_decay_steps, 0)
        for name in ("batch_size", "max_windows", "max_steps_per_epoch", "patience"):
            positive(name, getattr(self, name), optional=True)
        positive_number("lr", self.lr)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an int, got {self.seed!r}")
        check_device("device", self.device)

    def batch_windows(self, baseline: str) -> int:
        """Windows per batch for ``baseline`` (``GRU`` or ``GRU_GN``)."""
        return self.batch_size if self.batch_size is not None else PAPER_BATCH_WINDOWS[baseline]


# -- the two forecasters (models/pooled_gru.py, models/graph_gru.py) -----------------------


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def build_gru(config: CentralisedConfig) -> PooledGRU:
    """Baseline (a) with its seeded initial weights (on the CPU)."""
    with torch.random.fork_rng(devices=[]):  # the constructor's default draws leave the global RNG as it was
        node = GRUSeq2Seq(hidden_size=config.gru_hidden_size)
    node.reset_parameters(torch.Generator().manual_seed(derive_seed(config.seed, "centralised", GRU, "node model")))
    return PooledGRU(node)


def build_gru_gn(config: CentralisedConfig, edge_index: torch.Tensor, edge_weight: torch.Tensor, nodes: int) -> GraphGRU:
    """Baseline (b) with its seeded initial weights (on the CPU)."""
    h = config.hidden_size
    with torch.random.fork_rng(devices=[]):  # the constructors' default draws leave the global RNG as it was
        node = GRUSeq2Seq(hidden_size=h, graph_size=h)
        graph_net = GraphNet(h, 1, config.gn_hidden, config.gn_update, h, config.gn_layers)
    node.reset_parameters(torch.Generator().manual_seed(derive_seed(config.seed, "centralised", GRU_GN, "node model")))
    graph_net.reset_parameters(torch.Generator().manual_seed(derive_seed(config.seed, "centralised", GRU_GN, "graph net")))
    return GraphGRU(node, graph_net, edge_index, edge_weight, nodes)


# -- data, evaluation ---------------------------------------------------------------------


@dataclass(frozen=True)
class PooledData:
    """The normalised windows of the sensors used, their training mean and std (mph), and
    their subgraph of METR-LA's adjacency."""

    splits: TrafficSplits
    mean: float
    std: float
    adjacency: np.ndarray

    @property
    def sensors(self) -> int:
        return self.adjacency.shape[0]

    def windows(self, split: str) -> int:
        return len(self.splits.y[split])


def load_pooled(config: CentralisedConfig, data_dir: str | os.PathLike | None = None) -> PooledData:
    """The first ``config.sensors`` sensors' DCRNN windows, z-scored with their pooled training
    statistics, and their subgraph."""
    data = load_series(config.dataset, data_dir)
    n = config.sensors or data.n_nodes
    raw = dcrnn_windows(data.signals[:, :n, 0], max_windows=config.max_windows, time_of_day=data.time_of_day(), segments=data.segments())
    mean, mean_square = raw.training_moments()
    std = math.sqrt(max(mean_square - mean**2, 0.0))
    if not std > 0:
        raise ConfigError(f"the training speeds of the first {n} sensors are constant ({mean} mph); use more sensors or windows")
    return PooledData(raw.normalised(mean, std), mean, std, np.asarray(data.adjacency[:n, :n]))


def predict(model: nn.Module, x: torch.Tensor, y_tod: torch.Tensor, *, batch_windows: int) -> torch.Tensor:
    """Free-running predictions (normalised scale) for every window, ``batch_windows`` at a
    time; (S, T_out, N) on the model's device."""
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[i : i + batch_windows], y_tod[i : i + batch_windows]) for i in range(0, len(x), batch_windows)])


def error_sums_of(prediction: torch.Tensor, target: torch.Tensor, *, std: float) -> dict[str, np.ndarray]:
    """Squared and absolute errors in mph (normalised errors times ``std``), summed in float64,
    and their count, in :func:`~secure_fedgraph.training.forecasting.error_sums`'s layout so
    :func:`~secure_fedgraph.training.forecasting.rmse_mae` turns them into RMSE and MAE.
    Unmasked, as CNFGNN."""
    if prediction.shape != target.shape:
        raise ValueError(f"prediction {tuple(prediction.shape)} and target {tuple(target.shape)} differ in shape")
    error = (prediction.detach().double() - target.double()) * std
    return {"sse": np.array([float((error**2).sum().cpu())]), "sae": np.array([float(error.abs().sum().cpu())]),
            "count": np.array([float(error.numel())])}


# -- training -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochRecord:
    """One epoch: mean training loss (normalised MSE, weighted by windows), optimiser steps,
    validation RMSE and MAE (mph), seconds (training and validation)."""

    epoch: int
    train_loss: float
    steps: int
    val_rmse: float
    val_mae: float
    seconds: float


@dataclass(frozen=True)
class CentralisedResult:
    """What a centralised baseline reports. ``test_rmse``/``test_mae``: the final model;
    ``best_*``: the model of the epoch with the lowest validation RMSE (what CNFGNN tests).
    ``model`` is the final forecaster, on the device it was trained on."""

    baseline: str
    config: CentralisedConfig
    history: tuple[EpochRecord, ...]
    test_rmse: float
    test_mae: float
    best_epoch: int
    best_val_rmse: float
    best_test_rmse: float
    best_test_mae: float
    node_parameters: int
    graph_parameters: int
    sensors: int
    windows: tuple[int, int, int]
    mean: float
    std: float
    device: str
    seconds: float
    model: nn.Module = field(repr=False, compare=False)

    @property
    def epochs(self) -> int:
        """Epochs run (fewer than ``config.epochs`` when ``patience`` stopped the run)."""
        return len(self.history)

    @property
    def parameters(self) -> int:
        return self.node_parameters + self.graph_parameters

    def metrics(self) -> dict[str, Any]:
        """A JSON-ready summary (no model)."""
        return {
            "baseline": self.baseline, "config": dataclasses.asdict(self.config), "epochs": self.epochs,
            "history": [dataclasses.asdict(r) for r in self.history], "test_rmse": self.test_rmse, "test_mae": self.test_mae,
            "best_epoch": self.best_epoch, "best_val_rmse": self.best_val_rmse, "best_test_rmse": self.best_test_rmse,
            "best_test_mae": self.best_test_mae, "node_parameters": self.node_parameters, "graph_parameters": self.graph_parameters,
            "sensors": self.sensors, "windows": dict(zip(SPLITS, self.windows, strict=True)), "mean": self.mean, "std": self.std,
            "device": self.device, "seconds": self.seconds,
        }


def train_centralised_gru(
    config: CentralisedConfig | None = None, data_dir: str | os.PathLike | None = None, say: Callable[[str], None] | None = None
) -> CentralisedResult:
    """Train and evaluate "GRU (centralized, 63K)" (see the module docstring).

    Args:
        config: settings (None: the defaults).
        data_dir: METR-LA's folder (None: $SECURE_FEDGRAPH_DATA, else the packaged week).
        say: gets one progress line per epoch (None: silent).

    Returns:
        The per-epoch validation numbers, test numbers (final and best-validation model),
        parameter counts and timings.

    Raises:
        ConfigError: a bad setting, or device "cuda" without CUDA.
        DataNotFoundError: METR-LA's files are missing from ``data_dir``.
    """
    config = config if config is not None else CentralisedConfig()
    with single_thread():
        data = load_pooled(config, data_dir)
        return _fit(GRU, build_gru(config), data, config, say)


def train_centralised_gru_gn(
    config: CentralisedConfig | None = None, data_dir: str | os.PathLike | None = None, say: Callable[[str], None] | None = None
) -> CentralisedResult:
    """Train and evaluate "GRU + GN (centralized, 64K + 1M)" (see the module docstring); the
    arguments, result and errors are :func:`train_centralised_gru`'s."""
    config = config if config is not None else CentralisedConfig()
    with single_thread():
        data = load_pooled(config, data_dir)
        edge_index, edge_weight = sensor_graph(data.adjacency)
        return _fit(GRU_GN, build_gru_gn(config, edge_index, edge_weight, data.sensors), data, config, say)


def _fit(baseline: str, model: PooledGRU | GraphGRU, data: PooledData, config: CentralisedConfig, say: Callable[[str], None] | None) -> CentralisedResult:
    """The training loop both baselines share; runs inside :func:`single_thread`."""
    started = time.perf_counter()
    device = resolve_device(config.device)
    model.to(device)
    tensors = {split: tuple(torch.as_tensor(np.ascontiguousarray(a[split])).to(device) for a in (data.splits.x, data.splits.y, data.splits.y_tod))
               for split in SPLITS}
    x, y, tod = tensors["train"]
    batch = config.batch_windows(baseline)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    order_rng = np.random.default_rng(derive_seed(config.seed, "centralised", baseline, "batch order"))
    coin = torch.Generator().manual_seed(derive_seed(config.seed, "centralised", baseline, "scheduled sampling"))

    def evaluate(split: str) -> tuple[float, float]:
        sx, sy, stod = tensors[split]
        return rmse_mae(error_sums_of(predict(model, sx, stod, batch_windows=batch), sy, std=data.std))

    label = "GRU" if baseline == GRU else "GRU+GN"
    history: list[EpochRecord] = []
    step = 0
    best: tuple[float, int, dict[str, torch.Tensor]] = (math.inf, 0, {})
    for epoch in range(1, config.epochs + 1):
        epoch_start = time.perf_counter()
        model.train()
        order = torch.as_tensor(order_rng.permutation(len(x)), device=device)
        loss_sum, seen, epoch_steps = 0.0, 0, 0
        for start in range(0, len(order), batch):
            if config.max_steps_per_epoch is not None and epoch_steps >= config.max_steps_per_epoch:
                break
            idx = order[start : start + batch]
            optimiser.zero_grad()
            prediction = model(x[idx], tod[idx], targets=y[idx], teacher_forcing=curriculum(step, config.cl_decay_steps), generator=coin)
            loss = nn.functional.mse_loss(prediction, y[idx])
            loss.backward()
            optimiser.step()
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
            step += 1
            epoch_steps += 1
        val_rmse, val_mae = evaluate("val")
        record = EpochRecord(epoch, loss_sum / seen, epoch_steps, val_rmse, val_mae, time.perf_counter() - epoch_start)
        history.append(record)
        if say is not None:
            say(f"{label} epoch {epoch}/{config.epochs}: train loss {record.train_loss:.4f} ({epoch_steps} steps), "
                f"val RMSE {val_rmse:.3f} MAE {val_mae:.3f} mph, {record.seconds:.1f} s")
        if val_rmse < best[0]:
            best = (val_rmse, epoch, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if config.patience is not None and epoch - best[1] >= config.patience:
            break
    test_rmse, test_mae = evaluate("test")
    best_test_rmse, best_test_mae = test_rmse, test_mae
    if best[1] == 0:  # no finite validation RMSE: there is no best epoch
        best_test_rmse = best_test_mae = math.nan
    elif best[1] != len(history):
        final = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(best[2])
        best_test_rmse, best_test_mae = evaluate("test")
        model.load_state_dict(final)
    return CentralisedResult(
        baseline=baseline, config=config, history=tuple(history), test_rmse=test_rmse, test_mae=test_mae, best_epoch=best[1],
        best_val_rmse=best[0], best_test_rmse=best_test_rmse, best_test_mae=best_test_mae, node_parameters=parameter_count(model.node),
        graph_parameters=parameter_count(model.graph_net) if isinstance(model, GraphGRU) else 0, sensors=data.sensors,
        windows=tuple(data.windows(s) for s in SPLITS), mean=data.mean, std=data.std, device=str(device),
        seconds=time.perf_counter() - started, model=model,
    )
