"""CNFGNN's centralised GRU baseline ("GRU (centralized, 63K)", Table 7): one GRU
encoder-decoder shared by every sensor, each (window, sensor) pair an independent sequence.
Trained by secure_fedgraph/training/centralised.py."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.gru_seq2seq import GRUSeq2Seq


def per_node(a: torch.Tensor) -> torch.Tensor:
    """(B, T, N, ...) -> (N*B, T, ...), node-major: row n*B + b is node n of window b."""
    moved = a.movedim(2, 0)
    return moved.reshape(moved.shape[0] * moved.shape[1], *moved.shape[2:])


def per_window(a: torch.Tensor, nodes: int) -> torch.Tensor:
    """(N*B, T) -> (B, T, N), the inverse of :func:`per_node`."""
    return a.reshape(nodes, -1, a.shape[-1]).permute(1, 2, 0)


class PooledGRU(nn.Module):
    """Baseline (a): one GRU encoder-decoder for every sensor, each (window, sensor) pair an
    independent sequence.

    Shapes: ``x`` (B, T_in, N, 2) = [speed, time-of-day]; ``y_tod`` and ``targets`` (B, T_out, N);
    output (B, T_out, N).
    """

    def __init__(self, node: GRUSeq2Seq) -> None:
        super().__init__()
        if node.graph_size:
            raise ValueError(f"the pooled GRU baseline needs a node model without graph input, got {node!r}")
        self.node = node

    def forward(
        self,
        x: torch.Tensor,
        y_tod: torch.Tensor,
        *,
        targets: torch.Tensor | None = None,
        teacher_forcing: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        nodes = x.shape[2]
        out = self.node(per_node(x), per_node(y_tod), targets=None if targets is None else per_node(targets),
                        teacher_forcing=teacher_forcing, generator=generator)
        return per_window(out, nodes)
