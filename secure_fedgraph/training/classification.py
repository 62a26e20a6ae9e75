"""Classification pieces FedRel's participants share: the loss of eq. 22, local steps, and
accuracy and macro-F1 from a confusion matrix that a secure sum can pool."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F


def fedrel_loss(logits: torch.Tensor, labels: torch.Tensor, d_hat: torch.Tensor | None = None, d_tilde: torch.Tensor | None = None) -> torch.Tensor:
    r"""Eq. 22: :math:`\mathcal{L}^{(k)} = \mathcal{L}_{DIIG}^{(k)} + MSE(\hat{\mathbf{d}}^{(k)},
    \tilde{\mathbf{d}})`. :math:`\mathcal{L}_{DIIG}` is Table II's cross-entropy over every
    output t of every case (logits (B, P', C), each t labelled with its case's class; eq. 16 as
    printed is not a valid binary cross-entropy). Without ``d_tilde`` (FedAvg, or before the
    first relevance round) the MSE term is absent."""
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.repeat_interleave(logits.shape[1]))
    if d_tilde is not None:
        loss = loss + F.mse_loss(d_hat, d_tilde)
    return loss


def confusion_matrix(true: np.ndarray, predicted: np.ndarray, classes: int) -> np.ndarray:
    """(C, C) float64 counts, row the true class, column the predicted one."""
    matrix = np.zeros((classes, classes), dtype=np.float64)
    np.add.at(matrix, (np.asarray(true, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1.0)
    return matrix


def accuracy_and_macro_f1(confusion: np.ndarray) -> tuple[float, float]:
    """Accuracy and macro-F1 of a (pooled) confusion matrix. Counts are rounded first (a
    secure sum returns them within its encoding error). F1 averages over the classes that occur
    as a true or a predicted label, as scikit-learn's ``f1_score(average="macro")``."""
    c = np.rint(np.asarray(confusion, dtype=np.float64))
    total = c.sum()
    if total <= 0:
        return float("nan"), float("nan")
    tp = np.diag(c)
    support, predicted = c.sum(axis=1), c.sum(axis=0)
    present = (support + predicted) > 0
    f1 = 2 * tp[present] / (support[present] + predicted[present])
    return float(tp.sum() / total), float(f1.mean())


def best_round(history: list[Mapping[str, float]], key: str) -> tuple[float, int]:
    """(best value, first round reaching it): Table IV's "best score and its round"."""
    values = [h[key] for h in history]
    finite = [v for v in values if v == v]
    if not finite:
        return float("nan"), -1
    best = max(finite)
    return best, int(history[values.index(best)]["round"])
