"""Local training and evaluation of a forecaster on one client's windows.

Everything runs with one torch thread (``single_thread``, training/device.py): BLAS results
can depend on the thread count, and a plan must give the same numbers in one process and
across processes. Inside a plan the client host already holds that setting.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from secure_fedgraph.models import GRUSeq2Seq
from secure_fedgraph.training.device import single_thread


def weights_of(model: nn.Module) -> dict[str, np.ndarray]:
    """The model's parameters as float32 numpy arrays (copies), keyed by name."""
    return {k: v.detach().cpu().numpy().astype(np.float32, copy=True) for k, v in model.state_dict().items()}


def load_weights(model: nn.Module, weights: Mapping[str, np.ndarray]) -> None:
    model.load_state_dict({k: torch.tensor(np.asarray(v, dtype=np.float32)) for k, v in weights.items()})


def curriculum(step: int, decay_steps: int) -> float:
    """Scheduled sampling's probability of feeding the true value at training step ``step``:
    c / (c + exp(step / c)) with c = ``decay_steps`` (CNFGNN's ``cl_decay_steps``; 0 disables)."""
    if decay_steps <= 0:
        return 0.0
    return decay_steps / (decay_steps + math.exp(min(step / decay_steps, 700.0)))


@dataclass(frozen=True)
class LocalTraining:
    """What a client's local training reports: the mean loss and the batches it took."""

    loss: float
    steps: int


def train_local(
    model: GRUSeq2Seq,
    x: np.ndarray,
    y: np.ndarray,
    y_tod: np.ndarray,
    *,
    rng: np.random.Generator,
    graph: np.ndarray | None = None,
    epochs: int = 1,
    max_steps: int | None = None,
    batch_size: int = 128,
    lr: float = 1e-3,
    decay_steps: int = 0,
    start_step: int = 0,
    private: Any = None,
) -> LocalTraining:
    """Train with a fresh Adam (as CNFGNN's clients do each round); MSE on the normalised scale.

    ``graph``: the fixed h_G of each window (CNFGNN), or None. ``decay_steps``/``start_step``:
    scheduled sampling (:func:`curriculum`), counted from ``start_step``. ``private``: a DP-SGD
    mechanism (``secure_fedgraph.privacy.mechanisms.dpsgd.DPSGD``) or None; with it, each step
    takes a Poisson sample the mechanism draws, ``epochs`` is in expected passes (1 / q steps
    each) and ``batch_size`` is unused (the expected batch is q times the windows).
    """
    xt, yt, tt = (torch.as_tensor(np.ascontiguousarray(a)) for a in (x, y, y_tod))
    gt = None if graph is None else torch.tensor(np.asarray(graph, dtype=np.float32))
    coin = torch.Generator().manual_seed(int(rng.integers(2**63))) if decay_steps > 0 else None
    if private is None:
        training = contextlib.nullcontext((model, torch.optim.Adam(model.parameters(), lr=lr)))
        batches = _shuffled_batches(rng, len(xt), epochs=epochs, batch_size=batch_size, max_steps=max_steps)
    else:
        training = private.training(model, lambda parameters: torch.optim.Adam(parameters, lr=lr), samples=len(xt))
        steps = epochs * private.steps_per_epoch()
        batches = (private.sample(len(xt)) for _ in range(steps if max_steps is None else min(steps, max_steps)))
    losses, steps = [], 0
    with single_thread(), training as (module, optimiser):
        module.train()
        for batch in batches:
            idx = torch.as_tensor(batch)
            optimiser.zero_grad()
            if len(idx) == 0:  # an empty Poisson sample: a noise-only step, counted by the accountant too
                private.empty_step(module, optimiser)
            else:
                prediction = module(xt[idx], tt[idx], graph=None if gt is None else gt[idx], targets=yt[idx],
                                    teacher_forcing=curriculum(start_step + steps, decay_steps), generator=coin)
                loss = nn.functional.mse_loss(prediction, yt[idx])
                loss.backward()
                optimiser.step()
                losses.append(loss.item())
            steps += 1
    return LocalTraining(float(np.mean(losses)) if losses else math.nan, steps)


def _shuffled_batches(rng: np.random.Generator, samples: int, *, epochs: int, batch_size: int, max_steps: int | None):
    """Batches of a fresh permutation per epoch, at most ``max_steps`` in all."""
    taken = 0
    for _ in range(epochs):
        order = rng.permutation(samples)
        for start in range(0, len(order), batch_size):
            if max_steps is not None and taken >= max_steps:
                return
            taken += 1
            yield order[start : start + batch_size]


def error_sums(
    model: GRUSeq2Seq, x: np.ndarray, y: np.ndarray, y_tod: np.ndarray, *, mean: float, std: float, graph: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Squared and absolute errors in the data's units (mph), summed, and their count: the
    pieces a secure sum of all clients turns into RMSE and MAE without revealing any client's.

    Unmasked, as CNFGNN reports (the interpolated week has no zero readings anyway).
    """
    with single_thread(), torch.no_grad():
        model.eval()
        g = None if graph is None else torch.tensor(np.asarray(graph, dtype=np.float32))
        prediction = model(torch.as_tensor(x), torch.as_tensor(y_tod), graph=g).numpy().astype(np.float64)
    error = (prediction - y.astype(np.float64)) * std
    return {"sse": np.array([np.sum(error**2)]), "sae": np.array([np.sum(np.abs(error))]), "count": np.array([float(error.size)])}
