"""One nFedGNN user's half of the first GNN layer: h_i = drop(x_i) W_i, and its own Adam step
on the server's dL/dh_i (Gao et al. 2024, Algorithm 1 lines 5-6 and 11-12).

Only the rows of W_i where x_i is non-zero are stored (Cora: 18 of 1,433 on average). That is
exact, not an approximation: the other rows never touch h_i (their products with x_i are zero),
and Adam (with its L2 weight decay) updates each entry from that entry's own gradient and
state, so they evolve apart from everything the user computes or sends. With the FedAvg'ed
variant every row matters (the average mixes everyone's), so all rows are stored there.

The arithmetic is numpy on float32: a host runs thousands of users, and torch.optim.Adam's
step costs about 200 us on an 18 x 16 tensor against 30 us here (the same update as torch's
Adam with L2 weight decay, which tests/training/test_node_user.py checks step by step).
"""

from __future__ import annotations

import numpy as np
import torch


def glorot_rows(generator: torch.Generator, rows: int, columns: int) -> torch.Tensor:
    """A (rows, columns) Glorot-uniform matrix, as PyG initialises a Linear's weight."""
    bound = (6.0 / (rows + columns)) ** 0.5
    return torch.rand(rows, columns, generator=generator) * (2 * bound) - bound


def glorot_from_uniforms(uniforms: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """The same Glorot-uniform law as :func:`glorot_rows`, from ``rows * columns`` uniforms in
    (0, 1) (a user's own cryptographic draws: its W^(0) is then its own secret), float32."""
    bound = (6.0 / (rows + columns)) ** 0.5
    return ((np.asarray(uniforms, dtype=np.float64).reshape(rows, columns) * 2.0 - 1.0) * bound).astype(np.float32)


class Adam:
    """torch.optim.Adam's update (defaults betas (0.9, 0.999), eps 1e-8, L2 ``weight_decay``
    added to the gradient, no amsgrad) on one float32 array, with its own moments and step.

    With ``decoupled_where_touched`` the decay is torch.optim.AdamW's instead (the entry shrinks
    by lr x weight_decay, outside Adam's normalisation) and only on the entries whose gradient in
    this step is non-zero. Why: Adam normalises what it is given, so an L2 term added to a zero
    or tiny gradient becomes a step of about ``lr`` on decay alone, moving parameters the loss
    does not (or hardly) touch. Where every entry has a gradient it is AdamW's update."""

    def __init__(self, param: np.ndarray, *, lr: float, weight_decay: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 decoupled_where_touched: bool = False) -> None:
        self.param, self.lr, self.weight_decay, self.betas, self.eps = param, lr, weight_decay, betas, eps
        self.decoupled_where_touched = decoupled_where_touched
        self.exp_avg = np.zeros_like(param)
        self.exp_avg_sq = np.zeros_like(param)
        self.steps = 0

    def step(self, grad: np.ndarray) -> None:
        beta1, beta2 = self.betas
        self.steps += 1
        if self.weight_decay and self.decoupled_where_touched:
            self.param *= np.where(grad != 0, np.float32(1 - self.lr * self.weight_decay), np.float32(1))
        elif self.weight_decay:
            grad = grad + np.float32(self.weight_decay) * self.param
        self.exp_avg *= np.float32(beta1)
        self.exp_avg += np.float32(1 - beta1) * grad
        self.exp_avg_sq *= np.float32(beta2)
        self.exp_avg_sq += np.float32(1 - beta2) * grad * grad
        step_size = self.lr / (1 - beta1**self.steps)
        denominator = np.sqrt(self.exp_avg_sq) / np.float32((1 - beta2**self.steps) ** 0.5) + np.float32(self.eps)
        self.param -= np.float32(step_size) * (self.exp_avg / denominator)


def dropout_keep(uniforms: np.ndarray, dropout: float) -> np.ndarray:
    """The entries of x_i a training latent keeps (F,) bool, from one uniform per feature: the
    same mask whatever rows a user holds. Whoever can draw the uniforms can draw the mask: the
    user's own randomness by default (papers/nfedgnn.py ``user_randomness``)."""
    return np.asarray(uniforms) >= dropout


class NodeUser:
    """A user's feature vector (its non-zero entries, or all of them), the matching rows of its
    own first-layer weight and its own Adam.

    Args:
        x: the user's feature vector (F,), float32.
        initial_weight: W^(0) (F, d); the user keeps a copy of the rows it needs.
        lr / weight_decay: its Adam's (the paper's: 0.1 for GCN, 0.01 for GAT; 5e-4). The decay
            is decoupled (AdamW's) and applies only to the entries this step's gradient reaches
            (``decoupled_where_touched``): a user the training signal does not reach (more than
            two hops from every labelled node) stays where it is, as the paper's Sec. 3.3 says
            such users' models do, and one it barely reaches is not pushed a full lr step by
            decay that Adam normalised.
        dropout: rate on x_i's entries in training (the whole model's input dropout).
        all_rows: keep every row of W_i (the FedAvg'ed variant, whose average needs them).
    """

    def __init__(self, x: np.ndarray, initial_weight: np.ndarray, *, lr: float, weight_decay: float, dropout: float,
                 all_rows: bool = False) -> None:
        x = np.asarray(x, dtype=np.float32)
        self.features = x.shape[0]
        self.rows = np.arange(self.features) if all_rows else np.flatnonzero(x)
        self.values = x[self.rows].copy()
        self.dropout = dropout
        self.weight = np.array(initial_weight[self.rows], dtype=np.float32)
        self.optimiser = Adam(self.weight, lr=lr, weight_decay=weight_decay, decoupled_where_touched=True)
        self._input: np.ndarray | None = None

    def latent(self, uniforms: np.ndarray | None = None) -> np.ndarray:
        """h_i (d,): with ``uniforms`` (F,) in (0, 1), x_i's entries dropped at ``dropout`` (the
        rest scaled up, as F.dropout does) for a training step that :meth:`step` then completes;
        without, the evaluation latent x_i W_i."""
        values = self.values
        if uniforms is not None:
            if self.dropout > 0:
                values = values * dropout_keep(uniforms, self.dropout)[self.rows] / np.float32(1.0 - self.dropout)
            self._input = values
        return values @ self.weight

    def weight_gradient(self, grad: np.ndarray) -> np.ndarray:
        """dL/dW_i = drop(x_i)^T dL/dh_i (its held rows) for the last training latent, without
        stepping: what a FedSGD round sums over users."""
        if self._input is None:
            raise RuntimeError("a step without a training latent() before it")
        gradient = np.outer(self._input, np.asarray(grad, dtype=np.float32))
        self._input = None
        return gradient

    def step(self, grad: np.ndarray) -> None:
        """One Adam step on this user's own dL/dW_i, from the server's dL/dh_i."""
        self.optimiser.step(self.weight_gradient(grad))

    def step_on(self, weight_gradient: np.ndarray) -> None:
        """One Adam step on a gradient of the whole W (F, d), e.g. the users' summed gradients
        (FedSGD: every user takes the same step from the same state, so W stays shared)."""
        self.optimiser.step(np.asarray(weight_gradient, dtype=np.float32)[self.rows])

    def full_weight(self) -> np.ndarray:
        """W_i as (F, d) (FedAvg: every row is held)."""
        if self.rows.size != self.features:
            raise RuntimeError("this user holds only the rows its features use")
        return self.weight

    def load_weight(self, weight: np.ndarray) -> None:
        """Replace W_i by ``weight`` (F, d) (the FedAvg average); its Adam state stays its own."""
        self.weight[...] = np.asarray(weight, dtype=np.float32)[self.rows]
