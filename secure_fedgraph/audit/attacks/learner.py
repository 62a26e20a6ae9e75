"""The attacker's learner: a small MLP regressor, fitted the same way for every attack and every
reference, so the differences between them are what the inputs give away, not the learner.

Seeded (experimental randomness: the attack is a measurement, not a protocol secret), on one
CPU thread, with a fixed budget of Adam steps and early stopping on a fifth of its own training
rows (the attacker's public slice); inputs and targets are standardised on the training rows.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import torch


def fit_regressor(x: np.ndarray, y: np.ndarray, *, seed: int = 0, hidden: int = 128, steps: int = 1500,
                  batch_size: int = 256, lr: float = 1e-3) -> Callable[[np.ndarray], np.ndarray]:
    """Fit y ~ MLP(x) on (rows, features) -> (rows, targets); returns the predictor."""
    x = np.asarray(x, np.float32)
    y = np.asarray(y, np.float32).reshape(len(x), -1)
    x_mean, x_std = x.mean(0), x.std(0) + 1e-6
    y_mean, y_std = y.mean(0), y.std(0) + 1e-6
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, y.shape[1]))
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                bound = 1 / np.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)
    xs = torch.as_tensor((x - x_mean) / x_std)
    ys = torch.as_tensor((y - y_mean) / y_std)
    order = torch.randperm(len(xs), generator=generator)
    held = order[: max(1, len(xs) // 5)]  # early stopping on a fifth of the attacker's own rows
    train = order[len(held):] if len(xs) > 1 else order
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    best, best_loss = copy.deepcopy(model.state_dict()), math.inf
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for step in range(1, steps + 1):
            rows = train[torch.randint(0, len(train), (min(batch_size, len(train)),), generator=generator)]
            loss = torch.nn.functional.mse_loss(model(xs[rows]), ys[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if step % 50 == 0:
                with torch.no_grad():
                    held_loss = float(torch.nn.functional.mse_loss(model(xs[held]), ys[held]))
                if held_loss < best_loss:
                    best, best_loss = copy.deepcopy(model.state_dict()), held_loss
    finally:
        torch.set_num_threads(threads)
    model.load_state_dict(best)

    def predict(new: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = model(torch.as_tensor((np.asarray(new, np.float32) - x_mean) / x_std)).numpy()
        return out * y_std + y_mean

    return predict


def rmse(prediction: np.ndarray, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(prediction, np.float64) - np.asarray(truth, np.float64)) ** 2)))
