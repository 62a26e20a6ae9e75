"""CNFGNN's architecture trained centrally ("GRU + GN (centralized)", Table 7 and Table 10's
"Centralized" row): a shared GRU encoder, the Graph Network over the sensor graph, and the
shared decoder, trained end to end. Trained by secure_fedgraph/training/centralised.py."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.graph_net import GraphNet
from secure_fedgraph.models.gru_seq2seq import GRUSeq2Seq
from secure_fedgraph.models.pooled_gru import per_node, per_window


class GraphGRU(nn.Module):
    """Baseline (b), CNFGNN's model trained centrally: a shared GRU encoder gives h_c for every
    sensor of every window, the Graph Network over the sensor graph gives h_G (N, B, H), and
    the shared decoder predicts each sensor from [h_c ; h_G]. Gradients flow through both.

    Shapes as :class:`PooledGRU`; the graph (``edge_index`` (2, E), ``edge_weight`` (E,)) is
    held as non-persistent buffers, so it moves with the module but stays out of state_dict.
    """

    def __init__(self, node: GRUSeq2Seq, graph_net: GraphNet, edge_index: torch.Tensor, edge_weight: torch.Tensor, nodes: int) -> None:
        super().__init__()
        if node.graph_size != node.hidden_size:
            raise ValueError(f"the node model must take h_G of its hidden size, got {node!r}")
        if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_weight.shape != (edge_index.shape[1],):
            raise ValueError(f"expected edge_index (2, E) and edge_weight (E,), got {tuple(edge_index.shape)} and {tuple(edge_weight.shape)}")
        if edge_index.numel() and not (0 <= int(edge_index.min()) and int(edge_index.max()) < nodes):
            raise ValueError(f"edge_index refers to nodes outside [0, {nodes})")
        self.node, self.graph_net, self.nodes = node, graph_net, nodes
        self.register_buffer("edge_index", edge_index.long(), persistent=False)
        self.register_buffer("edge_weight", edge_weight.float(), persistent=False)

    def forward(
        self,
        x: torch.Tensor,
        y_tod: torch.Tensor,
        *,
        targets: torch.Tensor | None = None,
        teacher_forcing: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        windows, nodes = x.shape[0], x.shape[2]
        if nodes != self.nodes:
            raise ValueError(f"expected windows of {self.nodes} sensors, got {nodes}")
        sequences = per_node(x)
        h = self.node.encode(sequences)  # h_c, (N*B, H)
        h_graph = self.graph_net(h.reshape(nodes, windows, -1), self.edge_index, self.edge_weight)  # h_G, (N, B, H)
        out = self.node.decode(h, sequences, per_node(y_tod), graph=h_graph.reshape(nodes * windows, -1),
                               targets=None if targets is None else per_node(targets), teacher_forcing=teacher_forcing, generator=generator)
        return per_window(out, nodes)
