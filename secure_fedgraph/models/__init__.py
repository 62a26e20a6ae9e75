"""Neural network modules, one per file (PyG style: paper, equation, shapes in the docstring).

Each class loads with its module on first use (``from secure_fedgraph.models import GRUSeq2Seq``
works as before): the graph network imports PyG, which takes seconds in every server and client
process, and a plan without a graph network (fedavg-gru, FedSTGD) or a process that holds none
(CNFGNN's clients) never needs it."""

from importlib import import_module
from typing import Any

_MODULES = {"GRUSeq2Seq": "gru_seq2seq", "GraphGRU": "graph_gru", "GraphNet": "graph_net", "PooledGRU": "pooled_gru",
            "sensor_graph": "graph_net", "GCN": "gcn", "GAT": "gat"}
__all__ = sorted(_MODULES)


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
