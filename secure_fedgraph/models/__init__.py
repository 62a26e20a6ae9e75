"""Neural network modules, one per file (PyG style: paper, equation, shapes in the docstring)."""

from secure_fedgraph.models.graph_net import GraphNet
from secure_fedgraph.models.gru_seq2seq import GRUSeq2Seq

__all__ = ["GRUSeq2Seq", "GraphNet"]
