"""Neural network modules, one per file (PyG style: paper, equation, shapes in the docstring)."""

from secure_fedgraph.models.graph_gru import GraphGRU
from secure_fedgraph.models.graph_net import GraphNet
from secure_fedgraph.models.gru_seq2seq import GRUSeq2Seq
from secure_fedgraph.models.pooled_gru import PooledGRU

__all__ = ["GRUSeq2Seq", "GraphGRU", "GraphNet", "PooledGRU"]
