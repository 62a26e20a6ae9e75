"""CNFGNN's server-side Graph Network: Graph Network blocks with edge, node and global models
and skip concatenation (Battaglia et al. 2018, eq. 3 of Meng et al., KDD 2021; code:
``models/base_models/GraphNets.py``, which uses PyG ``MetaLayer``).

Each layer updates edges from [sender, receiver, edge, global], nodes from [node, sum of
incoming updated edges, global], and the global state from [sum of updated nodes, sum of
updated edges, global]; each update is an MLP (Linear-ReLU-Linear-ReLU-Linear, hidden 256)
to 128 features, and the layer's output is [update ; input] for nodes, edges and global state
alike, so widths grow. A final Linear maps the nodes to ``node_output`` (h_G,c,i).

Inputs: node features h_c (N, B, node_input) with the batch of windows as an extra axis (one
graph, B feature sets), edge weights (E, 1) of the directed adjacency with its self-loops
(``edge_index`` (2, E), sender first), the global state starts at zeros of ``node_input``.
With node_input 64 and 2 layers it has 1,237,312 parameters (the paper's "1M").

How it is computed: the function and the parameters (names included) of MetaLayer blocks whose
models concatenate their inputs and apply the MLP, but not MetaLayer itself, because its
interface hands the edge model the gathered [sender, receiver, edge, global] rows, and with
E ~ 8 N edges (METR-LA: 1722 for 207 sensors) those per-edge rows dominate the cost. The first
Linear is affine, so W [x_src; x_dst; e; u] + b = (x W_s)[src] + (x W_d + u W_u + b)[dst] + e W_e:
node terms are projected once per node and window (N rows, not E) and one ``embedding_bag``
gathers and sums them, with the edge weight times its column of W, per edge and window; each
earlier layer's edge update adds one matrix product. The node model's first Linear adds its
global term once per window. In the last layer only the node update reaches the output: the
edge MLP's last Linear is applied after the incoming sum (sum of updates = (sum of hidden) W +
in-degree b), and the global update, which nothing reads (so no gradient reached it before
either), is skipped. Per-edge tensors are 2-D (E * B rows, edge-major) and ReLUs and additions
into them run in place: with one CPU thread, first-touching the pages of a fresh (E, B, 256)
tensor costs about as much as the arithmetic on it (and an in-place step on a view would make
autograd copy the whole base back). ``benchmarks/graph_net.py`` times both formulations.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import scatter


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs))


def _hidden(mlp: nn.Sequential, first: torch.Tensor) -> torch.Tensor:
    """The MLP's second hidden activation from its first Linear's output (ReLUs in place: nothing else holds those tensors)."""
    return F.relu(mlp[2](F.relu(first, inplace=True)), inplace=True)


class _Update(nn.Module):
    """An edge, node or global model; a module of its own so parameter names match MetaLayer's."""

    def __init__(self, inputs: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.mlp = _mlp(inputs, hidden, outputs)


class _Block(nn.Module):
    """One Graph Network layer: MetaLayer's edge, node and global models, computed split by input."""

    def __init__(self, node: int, edge: int, glob: int, hidden: int, update: int) -> None:
        super().__init__()
        self.edge_model = _Update(2 * node + edge + glob, hidden, update)
        self.node_model = _Update(node + update + glob, hidden, update)
        self.global_model = _Update(update + update + glob, hidden, update)

    def edge_hidden(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor, learned: list[torch.Tensor], u: torch.Tensor) -> torch.Tensor:
        """The edge MLP's second hidden activation, (E * B, hidden), row e * B + b for edge e in window b.

        The edge features are ``learned`` (each (E * B, update)) then the edge weight (the same in
        every window) concatenated. One ``embedding_bag`` sums, per row, the sender's and the
        receiver's projected node rows and the edge weight times its column of W.
        """
        n, b = x.shape[:2]
        first = self.edge_model.mlp[0]
        w_src, w_dst, *w_learned, w_weight, w_u = first.weight.split([x.shape[-1]] * 2 + [t.shape[-1] for t in learned] + [1, u.shape[-1]], dim=1)
        sender_terms = F.linear(x, w_src).view(n * b, -1)
        receiver_terms = (F.linear(x, w_dst) + F.linear(u, w_u, first.bias)).view(n * b, -1)
        window = torch.arange(b, device=x.device)
        sender_rows, receiver_rows = edge_index[0, :, None] * b + window, (edge_index[1, :, None] + n) * b + window
        rows = torch.stack([sender_rows, receiver_rows, torch.full_like(sender_rows, 2 * n * b)], dim=-1).view(-1, 3)
        weight = edge_weight.reshape(-1, 1).expand(-1, b)
        weights = torch.stack([torch.ones_like(weight), torch.ones_like(weight), weight], dim=-1).view(-1, 3)
        h = F.embedding_bag(rows, torch.cat([sender_terms, receiver_terms, w_weight.t()]), per_sample_weights=weights, mode="sum")
        for piece, w in zip(learned, w_learned, strict=True):
            h.addmm_(piece, w.t())
        return _hidden(self.edge_model.mlp, h)

    def node_update(self, x: torch.Tensor, incoming: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The node update (N, B, update) from the nodes, the sum of their incoming edge updates and the global state."""
        n, b = x.shape[:2]
        first = self.node_model.mlp[0]
        w_xe, w_u = first.weight.split([x.shape[-1] + incoming.shape[-1], u.shape[-1]], dim=1)
        h = torch.addmm(F.linear(u, w_u, first.bias).repeat(n, 1), torch.cat([x, incoming], dim=-1).view(n * b, -1), w_xe.t())
        return self.node_model.mlp[4](_hidden(self.node_model.mlp, h)).view(n, b, -1)

    def global_update(self, x: torch.Tensor, edges: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return self.global_model.mlp(torch.cat([x.sum(dim=0), edges.sum(dim=0), u], dim=-1))


class GraphNet(nn.Module):
    def __init__(self, node_input: int = 64, edge_input: int = 1, hidden: int = 256, update: int = 128, node_output: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.node_input = node_input
        node, edge, glob = node_input, edge_input, node_input
        blocks = []
        for _ in range(layers):
            blocks.append(_Block(node, edge, glob, hidden, update))
            node, edge, glob = node + update, edge + update, glob + update
        self.blocks = nn.ModuleList(blocks)
        self.out = nn.Linear(node, node_output)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """PyTorch's default ``nn.Linear`` initialisation (weight and bias U(-1/sqrt(fan_in),
        1/sqrt(fan_in))), drawn from ``generator`` when given, so a run's initial GN depends on
        its seed only (every parameter belongs to a Linear layer)."""
        with torch.no_grad():
            for layer in self.modules():
                if isinstance(layer, nn.Linear):
                    bound = layer.in_features**-0.5
                    for parameter in (layer.weight, layer.bias):
                        parameter.copy_(torch.rand(parameter.shape, generator=generator) * (2 * bound) - bound)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
        """h_G (N, B, node_output) from h_c (N, B, node_input)."""
        if x.dim() != 3 or x.shape[-1] != self.node_input:
            raise ValueError(f"expected node features (N, B, {self.node_input}), got {tuple(x.shape)}")
        (n, b), e, receivers = x.shape[:2], edge_index.shape[1], edge_index[1]
        learned: list[torch.Tensor] = []  # edge updates of earlier layers, newest first, (E * B, update)
        u = x.new_zeros(b, self.node_input)
        for i, block in enumerate(self.blocks):
            hidden = block.edge_hidden(x, edge_index, edge_weight, learned, u)
            last_linear = block.edge_model.mlp[4]
            if i < len(self.blocks) - 1:
                new_edge = last_linear(hidden)
                per_edge = new_edge.unflatten(0, (e, b))
                new_x = block.node_update(x, scatter(per_edge, receivers, dim=0, dim_size=n, reduce="sum"), u)
                new_u = block.global_update(new_x, per_edge, u)
                x, learned, u = torch.cat([new_x, x], dim=-1), [new_edge, *learned], torch.cat([new_u, u], dim=-1)
            else:  # sum of updates = (sum of hidden) W + in-degree b; nothing reads this layer's global update
                hidden_in = scatter(hidden.unflatten(0, (e, b)), receivers, dim=0, dim_size=n, reduce="sum")
                in_degree = scatter(torch.ones_like(edge_weight), receivers, dim=0, dim_size=n, reduce="sum")
                incoming = F.linear(hidden_in, last_linear.weight) + in_degree.view(n, 1, 1) * last_linear.bias
                x = torch.cat([block.node_update(x, incoming, u), x], dim=-1)
        return self.out(x)


def reference_forward(gn: GraphNet, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
    """The MetaLayer formulation on ``gn``'s parameters, each model's MLP on its concatenated
    inputs: the specification :meth:`GraphNet.forward` is tested and benchmarked against (slow)."""
    src, dst = edge_index
    n, b = x.shape[:2]
    edge = edge_weight.reshape(-1, 1, 1).expand(-1, b, 1)
    u = x.new_zeros(b, gn.node_input)
    for block in gn.blocks:
        new_edge = block.edge_model.mlp(torch.cat([x[src], x[dst], edge, u.expand(len(src), *u.shape)], dim=-1))
        incoming = scatter(new_edge, dst, dim=0, dim_size=n, reduce="sum")
        new_x = block.node_model.mlp(torch.cat([x, incoming, u.expand(n, *u.shape)], dim=-1))
        new_u = block.global_model.mlp(torch.cat([new_x.sum(dim=0), new_edge.sum(dim=0), u], dim=-1))
        x, edge, u = torch.cat([new_x, x], dim=-1), torch.cat([new_edge, edge], dim=-1), torch.cat([new_u, u], dim=-1)
    return gn.out(x)


def sensor_graph(adjacency: np.ndarray | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges of a weighted directed adjacency, as CNFGNN's ``dense_to_sparse``: one edge i -> j
    (``edge_index[0]`` the sender i, ``[1]`` the receiver j) for each nonzero ``adjacency[i, j]``,
    self-loops included, weighted by the entry.

    Returns:
        ``edge_index`` (2, E) int64 and ``edge_weight`` (E,) float32, in row-major order.
    """
    a = torch.as_tensor(np.asarray(adjacency) if not isinstance(adjacency, torch.Tensor) else adjacency)
    if a.dim() != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"expected a square adjacency matrix, got shape {tuple(a.shape)}")
    edge_index = a.nonzero().t().contiguous()
    return edge_index, a[edge_index[0], edge_index[1]].float()
