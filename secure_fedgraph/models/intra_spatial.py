"""FedRel's intra-spatial graph block (eqs. 7-9)."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.diig_message import DIIGMessage
from secure_fedgraph.models.dynamic_correlation import DynamicCorrelation, complete_edges
from secure_fedgraph.models.graph_readout import GraphReadout


class IntraSpatialBlock(nn.Module):
    r"""One spatial graph :math:`\mathcal{G}_{spa}(t)` per segment: the attention adjacency
    :math:`\mathbf{A}_{spa}(t)` (eq. 7, :class:`DynamicCorrelation` on :math:`\mathbf{X}(t)`),
    L layers of eq. 8, :math:`\mathbf{H}^l_{spa}(t) = msg(\mathbf{A}_{spa}(t),
    \mathbf{H}^{l-1}_{spa}(t))` (:class:`DIIGMessage`, :math:`\mathbf{H}^0 = \mathbf{X}(t)`),
    and the graph embedding of eq. 9, :math:`\mathbf{h}^{\mathcal{G}}(t) =
    readout(\mathbf{H}^L_{spa}(t), \mathbf{X}(t))` (:class:`GraphReadout`).

    ``adjacency`` in :meth:`forward` replaces eq. 7 by a fixed row-stochastic (N, N) matrix,
    as the paper's "intra only" static baselines and STFL's ``distance`` graph do (for example
    ISRUC_S3's channel distance matrix, ``data/isruc.py``).

    Args:
        features: d, size of :math:`\mathbf{x}_i(t)`.
        hidden: size of :math:`\mathbf{h}^l_i`.
        graph_features: size of :math:`\mathbf{h}^{\mathcal{G}}`.
        layers: L (Table II: 2).

    Shapes:
        x (G, N, d) -> H_spa (G, N, hidden), h_G (G, graph_features), A_spa (G, N, N).
    """

    def __init__(self, features: int, hidden: int, graph_features: int, layers: int = 2) -> None:
        super().__init__()
        self.sizes = (features, hidden, graph_features, layers)
        self.correlation = DynamicCorrelation(features)
        self.layers = nn.ModuleList(DIIGMessage(features if l == 0 else hidden, hidden) for l in range(layers))
        self.readout = GraphReadout(hidden, features, graph_features)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        for child in (self.correlation, *self.layers, self.readout):
            child.reset_parameters(generator)

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        g, n, d = x.shape
        flat = x.reshape(g * n, d)
        edges = complete_edges(g, n, x.device)
        if adjacency is None:
            weight = self.correlation(flat, flat, edges)  # eq. 7
        else:
            weight = adjacency.to(x.dtype)[edges[1] % n, edges[0] % n]  # A[i, j] on edge j -> i
        h = flat
        for layer in self.layers:  # eq. 8
            h = layer(h, edges, weight)
        batch = torch.arange(g, device=x.device).repeat_interleave(n)
        graph = self.readout(h, flat, batch)  # eq. 9
        return h.reshape(g, n, -1), graph, weight.reshape(g, n, n)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(features={self.sizes[0]}, hidden={self.sizes[1]}, graph_features={self.sizes[2]}, layers={self.sizes[3]})"
