"""The two-layer GAT of Velickovic et al. (ICLR 2018), whole or split as nFedGNN's Appendix D
splits it.

Whole (the centralised baseline), with PyG's ``GATConv``: ``heads`` attention heads of
``hidden`` features each, concatenated, ELU, then one head to the classes:

.. math::
    h'_i = \\Vert_{k=1}^{K} \\sigma\\Big(\\sum_{j \\in N(i) \\cup \\{i\\}} \\alpha^k_{ij} W^k x_j\\Big)

Split (Appendix D, eq. 9): user i holds K weight matrices :math:`W^k_i` and uploads the K
latents :math:`h^k_i = W^k_i x_i` (one row of K * hidden values, heads major, as GATConv's own
``lin(x).view(-1, K, hidden)`` lays them out); the server keeps the shared attention
mechanism (``att_src``, ``att_dst``), the attention dropout, the bias and the second layer:
``conv1`` without its linear map (:class:`~secure_fedgraph.models.gcn.UserSide`).

Shapes: x (N, F) whole or H (N, heads * hidden) split; ``edge_index`` (2, E); out (N, C).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv

from secure_fedgraph.models.gcn import TwoLayerGNN, UserSide


class GAT(TwoLayerGNN):
    """GATConv(heads x hidden, dropout on attention) - ELU - GATConv(1 head) with input and
    hidden dropout (nFedGNN's settings: 8 heads of 16, dropout 0.6).

    Args:
        in_channels: F (whole), or ignored when ``split`` (the input is H).
        hidden: features per head (16).
        classes: C.
        heads: K (8).
        dropout: rate on the input (whole only), the attention coefficients and the hidden layer.
        split: the server half of the split model (``conv1`` without its linear map).
    """

    activation = F.elu

    def __init__(self, in_channels: int, hidden: int, classes: int, *, heads: int = 8, dropout: float = 0.6, split: bool = False) -> None:
        super().__init__()
        self.in_channels, self.hidden, self.classes, self.heads, self.dropout, self.split = in_channels, hidden, classes, heads, dropout, split
        self.conv1 = GATConv(heads * hidden if split else in_channels, hidden, heads=heads, dropout=dropout)
        if split:
            self.conv1.lin = UserSide()
        self.conv2 = GATConv(heads * hidden, classes, heads=1, concat=False, dropout=dropout)
        self.reset_parameters()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.hidden}, {self.classes}, heads={self.heads}, dropout={self.dropout}, "
                f"split={self.split})")
