"""Dropout whose masks come from a generator the caller owns, not torch's global RNG."""

from __future__ import annotations

import torch
from torch import nn


class GeneratorDropout(nn.Module):
    r"""Inverted dropout, :math:`x \odot m / (1 - p)` with :math:`m \sim \mathrm{Bernoulli}(1 - p)`,
    drawn from ``self.generator``.

    Why not :class:`torch.nn.Dropout`: it draws from torch's global generator, which every
    logical client of one process would share, so a run in one process and the same run across
    processes would drop different units. A plan gives each client's model its own generator
    (:func:`use_generator`); without one (or in eval mode) this is the identity.

    Args:
        p: drop probability (Table II of FedRel: 0.3).
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.generator: torch.Generator | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.generator is None:
            return x
        keep = torch.empty_like(x).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(p={self.p})"


def use_generator(module: nn.Module, generator: torch.Generator | None) -> None:
    """Make every :class:`GeneratorDropout` inside ``module`` draw from ``generator``."""
    for child in module.modules():
        if isinstance(child, GeneratorDropout):
            child.generator = generator


def xavier_(module: nn.Module, generator: torch.Generator | None) -> None:
    """Table II's initialiser: Xavier-uniform weights of every Linear and Conv1d in ``module``,
    zero biases, LayerNorm at (1, 0); seeded by ``generator``."""
    for child in module.modules():
        if isinstance(child, nn.Linear | nn.Conv1d):
            nn.init.xavier_uniform_(child.weight, generator=generator)
            if child.bias is not None:
                nn.init.zeros_(child.bias)
        elif isinstance(child, nn.LayerNorm):
            nn.init.ones_(child.weight)
            nn.init.zeros_(child.bias)
