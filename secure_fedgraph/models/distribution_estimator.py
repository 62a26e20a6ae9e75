"""FedRel's global distribution estimator g_theta (eq. 18)."""

from __future__ import annotations

import math

import torch
from torch import nn

from secure_fedgraph.models.generator_dropout import xavier_


class DistributionEstimator(nn.Module):
    r"""Eq. 18: :math:`\hat{\mathbf{d}}^{(k)} = g_\theta(\mathbf{d}^{(k)})`, each participant's
    estimate of the global distribution vector from its own (eq. 17), an MLP: Linear(m, hidden) -
    ReLU - Linear(hidden, m) - tanh.

    The tanh is ours: it bounds every estimate to (-1, 1)^m, so the distance of eq. 20 is below
    :attr:`distance_bound` = 2 sqrt(m) whatever a participant's data, and the secure sums of
    relevance-weighted models can state their range and precision up front
    (``training/relevance.py``).

    Args:
        latent: m. hidden: the MLP's width.

    Shapes:
        d (..., m) -> d_hat (..., m).
    """

    def __init__(self, latent: int, hidden: int = 32) -> None:
        super().__init__()
        self.sizes = (latent, hidden)
        self.net = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, latent), nn.Tanh())
        self.reset_parameters()

    @property
    def distance_bound(self) -> float:
        """The largest possible ||d_hat_k - d_tilde||: the diameter of (-1, 1)^m."""
        return 2.0 * math.sqrt(self.sizes[0])

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        return self.net(d)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}{self.sizes}"
