"""FedRel's feature transformation net (Zhang et al., IEEE TAI 2024, eq. 6), CNN variant."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.generator_dropout import xavier_


class FeatureTransform(nn.Module):
    r"""Eq. 6: :math:`\{\mathbf{X}(1), \dots, \mathbf{X}(P)\} = transform(\{\mathbf{S}(1), \dots,
    \mathbf{S}(P)\}; \theta_S)`: the initial node features of every spatial graph.

    A case of ``length`` steps on N channels is cut into ``segments`` consecutive pieces
    :math:`\mathbf{S}(t) \in \mathbb{R}^{N \times D}` (D = length / segments), one spatial
    graph each; a 1-D CNN (the paper's default transformation, as in its predecessor STFL,
    where a CNN is applied per channel) maps every channel's piece to
    :math:`\mathbf{x}_n(t) \in \mathbb{R}^{d}`: Conv1d(1, c, 5) - ReLU - Conv1d(c, d, 3) - ReLU -
    mean over time. Weights are shared over channels and segments.

    Args:
        segments: P, spatial graphs per case.
        features: d, node feature size (32 in the paper).
        conv_channels: c, the first convolution's channels.

    Shapes:
        input (B, N, length) -> output (B, P, N, d).
    """

    def __init__(self, segments: int, features: int = 32, conv_channels: int = 16) -> None:
        super().__init__()
        self.segments, self.features, self.conv_channels = segments, features, conv_channels
        self.net = nn.Sequential(nn.Conv1d(1, conv_channels, 5, padding=2), nn.ReLU(), nn.Conv1d(conv_channels, features, 3, padding=1), nn.ReLU())
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, length = x.shape
        if length % self.segments:
            raise ValueError(f"a case of {length} steps does not cut into {self.segments} equal segments")
        pieces = x.reshape(b, n, self.segments, length // self.segments).transpose(1, 2)  # (B, P, N, D)
        out = self.net(pieces.reshape(-1, 1, length // self.segments)).mean(dim=-1)
        return out.reshape(b, self.segments, n, self.features)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(segments={self.segments}, features={self.features}, conv_channels={self.conv_channels})"
