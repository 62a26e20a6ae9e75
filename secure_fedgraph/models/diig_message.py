"""FedRel's message-passing function msg(A, H) (eq. 2), used by eqs. 8 and 13."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import MessagePassing

from secure_fedgraph.models.generator_dropout import xavier_


class DIIGMessage(MessagePassing):
    r"""Eq. 2:

    .. math::
        msg(\mathbf{A}, \mathbf{H}^{l-1}) = \sigma\big(\mathbf{W}^l_{agg} \cdot (\mathbf{H}^{l-1}
        \oplus \tfrac{1}{N} \mathbf{A} \mathbf{H}^{l-1})\big)

    on a complete graph with self loops: the message from j to i is :math:`A_{i,j}
    \mathbf{h}_j`, and mean aggregation over the N incoming edges is exactly
    :math:`\tfrac{1}{N} (\mathbf{A}\mathbf{H})_i`; the update concatenates node i's own
    :math:`\mathbf{h}_i`. :math:`\sigma` is ELU, as in STFL's GAT (Table I of the paper says sigmoid;
    with it, two layers of eq. 2 learned far slower here: JapaneseVowels, one party, 150 rounds of
    5 steps, final accuracy 0.362 against 0.611 with ELU, results/fedrel-probes/).

    Args:
        in_features, out_features: sizes of :math:`\mathbf{h}^{l-1}_i` and :math:`\mathbf{h}^l_i`.

    Shapes:
        x (G * N, in), edge_index (2, G * N^2) from :func:`complete_edges`, edge_weight (E,)
        -> (G * N, out).
    """

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__(aggr="mean")
        self.in_features, self.out_features = in_features, out_features
        self.lin = nn.Linear(2 * in_features, out_features)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        aggregated = self.propagate(edge_index, x=x, edge_weight=edge_weight)
        return F.elu(self.lin(torch.cat([x, aggregated], dim=-1)))

    def message(self, x_j: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        return edge_weight.unsqueeze(-1) * x_j

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_features}, {self.out_features})"
