"""The two-layer GCN of Kipf and Welling (ICLR 2017), whole or split as nFedGNN splits it.

Whole (the centralised baseline), with PyG's ``GCNConv`` (its symmetric normalisation
:math:`\\hat{A} = \\tilde{D}^{-1/2}(A + I)\\tilde{D}^{-1/2}`):

.. math::
    Z = \\hat{A}\\,\\mathrm{drop}(\\mathrm{ReLU}(\\hat{A}\\,\\mathrm{drop}(X) W_1 + b_1)) W_2 + b_2

Split (nFedGNN, Gao et al. 2024, eq. 5 and Appendix B): the first layer's feature transform
:math:`h_i = \\mathrm{drop}(x_i) W_{1,i}` runs on user i, and the server starts from the
received latents H (N, hidden): ``conv1`` keeps PyG's normalisation, propagation and bias but
not its linear map (:class:`UserSide`), so :math:`Z` is the same function of H that the whole
model is of :math:`X W_1` (matrix products associate: :math:`\\hat{A}(XW_1) = (\\hat{A}X)W_1`).

Shapes: x (N, F) whole or H (N, hidden) split; ``edge_index`` (2, E) undirected; out (N, C).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv


class UserSide(nn.Identity):
    """Stands in for a first layer's linear map that the users apply before the server sees
    anything (nFedGNN): the identity, with nothing to reset."""

    def reset_parameters(self) -> None:
        """No parameters here: they are the users'."""


class TwoLayerGNN(nn.Module):
    """What nFedGNN's two-layer models share: input dropout (whole model only: split, the users
    drop their own x_i), conv1, the activation, hidden dropout, conv2; and the first layer's
    weight as the users apply it."""

    activation: ClassVar[Callable[[torch.Tensor], torch.Tensor]]
    conv1: nn.Module
    conv2: nn.Module
    dropout: float
    split: bool

    def reset_parameters(self) -> None:
        self.conv1.reset_parameters()
        self.conv2.reset_parameters()

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        if not self.split:
            x = F.dropout(x, self.dropout, self.training)
        x = type(self).activation(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)

    def user_weight(self) -> torch.Tensor:
        """The first layer's weight as users apply it, x_i W (F, out): what each user holds a copy
        of when the split model starts from this whole one (GAT: the K stacked W^k)."""
        if self.split:
            raise ValueError(f"a split {type(self).__name__} holds no first-layer weight: its users do")
        return self.conv1.lin.weight.detach().T.contiguous()


class GCN(TwoLayerGNN):
    """Two GCNConv layers, ReLU and dropout (Kipf and Welling's Cora model: hidden 16, dropout 0.5).

    Args:
        in_channels: F, the feature size (whole), or ignored when ``split`` (the input is H).
        hidden: first layer output size (16).
        classes: C.
        dropout: rate on the input (whole model only: split, the users drop their own x_i) and
            on the hidden layer (0.5).
        split: the server half of nFedGNN's split model (``conv1`` without its linear map).
    """

    activation = F.relu

    def __init__(self, in_channels: int, hidden: int, classes: int, *, dropout: float = 0.5, split: bool = False) -> None:
        super().__init__()
        self.in_channels, self.hidden, self.classes, self.dropout, self.split = in_channels, hidden, classes, dropout, split
        self.conv1 = GCNConv(hidden if split else in_channels, hidden)
        if split:
            self.conv1.lin = UserSide()
        self.conv2 = GCNConv(hidden, classes)
        self.reset_parameters()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_channels}, {self.hidden}, {self.classes}, dropout={self.dropout}, split={self.split})"
