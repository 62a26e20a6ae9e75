"""FedRel's dynamic correlation layer c(., .) (eqs. 7 and 12): a learned, row-normalised
adjacency between the nodes of a graph, or between the nodes of two consecutive graphs."""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.utils import softmax


def complete_edges(graphs: int, nodes: int, device: torch.device | None = None) -> torch.Tensor:
    """edge_index (2, graphs * nodes^2) of ``graphs`` complete graphs with self loops on
    consecutive blocks of ``nodes`` nodes: row 0 the sender j, row 1 the receiver i (PyG's
    source-to-target flow), grouped by receiver."""
    local = torch.arange(nodes, device=device)
    receiver = local.repeat_interleave(nodes)
    sender = local.repeat(nodes)
    offset = (torch.arange(graphs, device=device) * nodes).repeat_interleave(nodes * nodes)
    return torch.stack([sender.repeat(graphs) + offset, receiver.repeat(graphs) + offset])


class DynamicCorrelation(nn.Module):
    r"""Eq. 7 (intra-spatial) and eq. 12 (inter-temporal):

    .. math::
        A^{i,j} = c(\mathbf{x}_i, \mathbf{x}_j) = \frac{\exp(\mathbf{x}_i^\top \mathbf{W}
        \mathbf{x}_j)}{\sum_{n=1}^N \exp(\mathbf{x}_i^\top \mathbf{W} \mathbf{x}_n)}

    with a learnable :math:`\mathbf{W} \in \mathbb{R}^{d \times d}` (``W_spa`` or ``W_tem``). The
    softmax over each receiver's senders is PyG's :func:`torch_geometric.utils.softmax`. For
    eq. 7 receivers and senders are the nodes of one spatial graph G_spa(t); for eq. 12, which
    the paper describes as "the inter correlation layer between nodes in two consecutive spatial
    graphs" (its printed formula repeats t on both sides), receivers are the fused nodes of
    G_spa(t) and senders those of G_spa(t-1).

    Args:
        features: d.

    Shapes:
        receivers, senders (G * N, d); edge_index (2, E) -> edge weights (E,), summing to 1 over
        each receiver's incoming edges.
    """

    def __init__(self, features: int) -> None:
        super().__init__()
        self.features = features
        self.weight = nn.Parameter(torch.empty(features, features))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        nn.init.xavier_uniform_(self.weight, generator=generator)

    def forward(self, receivers: torch.Tensor, senders: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        sender, receiver = edge_index
        scores = ((receivers @ self.weight)[receiver] * senders[sender]).sum(dim=-1)
        return softmax(scores, receiver, num_nodes=receivers.shape[0])

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.features})"
