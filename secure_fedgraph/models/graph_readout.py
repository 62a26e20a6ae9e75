"""FedRel's graph readout (eqs. 3-4, 9)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import global_mean_pool

from secure_fedgraph.models.generator_dropout import xavier_


class GraphReadout(nn.Module):
    r"""Eq. 4:

    .. math::
        \mathbf{h}^G = readout(\mathbf{H}^L, \mathbf{X}) = \sigma\Big(\mathbf{W}_{pool} \cdot
        \tfrac{1}{N} \sum_{i=1}^N (\mathbf{h}^L_i \oplus \mathbf{x}_i)\Big)

    the node mean (PyG's :func:`global_mean_pool`) of each node's final embedding concatenated
    with its initial features, then the linear pooling :math:`\mathbf{W}_{pool}` and :math:`\sigma` (ELU, as
    :class:`DIIGMessage`).

    Args:
        node_features, input_features: sizes of :math:`\mathbf{h}^L_i` and :math:`\mathbf{x}_i`.
        graph_features: size of :math:`\mathbf{h}^G`.

    Shapes:
        h (G * N, node), x (G * N, input), batch (G * N,) graph ids -> (G, graph_features).
    """

    def __init__(self, node_features: int, input_features: int, graph_features: int) -> None:
        super().__init__()
        self.sizes = (node_features, input_features, graph_features)
        self.pool = nn.Linear(node_features + input_features, graph_features)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)

    def forward(self, h: torch.Tensor, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        return F.elu(self.pool(global_mean_pool(torch.cat([h, x], dim=-1), batch)))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}{self.sizes}"
