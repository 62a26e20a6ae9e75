"""CNFGNN's server-side Graph Network: PyG ``MetaLayer`` blocks with edge, node and global
models and skip concatenation (Battaglia et al. 2018, eq. 3 of Meng et al., KDD 2021; code:
``models/base_models/GraphNets.py``).

Each layer updates edges from [sender, receiver, edge, global], nodes from [node, sum of
incoming updated edges, global], and the global state from [sum of updated nodes, sum of
updated edges, global]; each update is an MLP (Linear-ReLU-Linear-ReLU-Linear, hidden 256)
to 128 features, and the layer's output is [update ; input] for nodes, edges and global state
alike, so widths grow. A final Linear maps the nodes to ``node_output`` (h_G,c,i).

Inputs: node features h_c (N, B, node_input) with the batch of windows as an extra axis (one
graph, B feature sets), edge weights (E, 1) of the directed adjacency with its self-loops
(``edge_index`` (2, E), sender first), the global state starts at zeros of ``node_input``.
With node_input 64 and 2 layers it has 1,237,312 parameters (the paper's "1M").
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MetaLayer
from torch_geometric.utils import scatter


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


class _EdgeUpdate(nn.Module):
    def __init__(self, node: int, edge: int, glob: int, hidden: int, out: int) -> None:
        super().__init__()
        self.mlp = _mlp(2 * node + edge + glob, hidden, out)

    def forward(self, src: torch.Tensor, dst: torch.Tensor, edge: torch.Tensor, u: torch.Tensor, batch: None) -> torch.Tensor:
        return self.mlp(torch.cat([src, dst, edge, u.expand(edge.shape[0], *u.shape)], dim=-1))


class _NodeUpdate(nn.Module):
    def __init__(self, node: int, edge: int, glob: int, hidden: int, out: int) -> None:
        super().__init__()
        self.mlp = _mlp(node + edge + glob, hidden, out)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge: torch.Tensor, u: torch.Tensor, batch: None) -> torch.Tensor:
        incoming = scatter(edge, edge_index[1], dim=0, dim_size=x.shape[0], reduce="sum")
        return self.mlp(torch.cat([x, incoming, u.expand(x.shape[0], *u.shape)], dim=-1))


class _GlobalUpdate(nn.Module):
    def __init__(self, node: int, edge: int, glob: int, hidden: int, out: int) -> None:
        super().__init__()
        self.mlp = _mlp(node + edge + glob, hidden, out)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge: torch.Tensor, u: torch.Tensor, batch: None) -> torch.Tensor:
        return self.mlp(torch.cat([x.sum(dim=0), edge.sum(dim=0), u], dim=-1))


class GraphNet(nn.Module):
    def __init__(self, node_input: int = 64, edge_input: int = 1, hidden: int = 256, update: int = 128, node_output: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.node_input = node_input
        node, edge, glob = node_input, edge_input, node_input
        blocks = []
        for _ in range(layers):
            blocks.append(MetaLayer(
                _EdgeUpdate(node, edge, glob, hidden, update),
                _NodeUpdate(node, update, glob, hidden, update),
                _GlobalUpdate(update, update, glob, hidden, update),
            ))
            node, edge, glob = node + update, edge + update, glob + update
        self.blocks = nn.ModuleList(blocks)
        self.out = nn.Linear(node, node_output)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """h_G (N, B, node_output) from h_c (N, B, node_input)."""
        if x.dim() != 3 or x.shape[-1] != self.node_input:
            raise ValueError(f"expected node features (N, B, {self.node_input}), got {tuple(x.shape)}")
        edge = edge_weight.reshape(-1, 1, 1).expand(-1, x.shape[1], 1)
        u = x.new_zeros(x.shape[1], self.node_input)
        for block in self.blocks:
            new_x, new_edge, new_u = block(x, edge_index, edge, u)
            x, edge, u = torch.cat([new_x, x], dim=-1), torch.cat([new_edge, edge], dim=-1), torch.cat([new_u, u], dim=-1)
        return self.out(x)
