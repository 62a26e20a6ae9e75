"""Node classification on a citation graph: nFedGNN's graph-Laplacian term (eq. 6), accuracy
on a split, and the centralised GCN/GAT baselines (Kipf and Welling 2017; Velickovic et al.
2018) trained as nFedGNN's Section 4 sets them up (200 epochs, Adam with weight decay)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from secure_fedgraph.models import GAT, GCN
from secure_fedgraph.validation import positive, positive_number

MODELS = ("gcn", "gat")
# the paper's Section 4 settings per model: hidden size, dropout, learning rate
PAPER_SETTINGS = {"gcn": {"hidden": 16, "dropout": 0.5, "lr": 0.1}, "gat": {"hidden": 16, "dropout": 0.6, "lr": 0.01}}


def laplacian_penalty(h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """tr(H^T L H) = sum over undirected edges {i, j} of ||h_i - h_j||^2 (eq. 6, L = D - A
    unnormalised). ``edge_index`` holds both directions of every edge (PyG's undirected form),
    so the directed sum is halved. Rows of H are flattened: a multi-head latent counts every
    element alike (Appendix D's first scheme)."""
    h = h.reshape(h.shape[0], -1)
    diff = h[edge_index[0]] - h[edge_index[1]]
    return 0.5 * (diff * diff).sum()


def accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float | None:
    """Share of the nodes in ``mask`` whose arg-max class is their label (None: no such node,
    e.g. a small run on the first nodes of a graph, which hold no test node)."""
    if not bool(mask.any()):
        return None
    return float((logits[mask].argmax(-1) == y[mask]).float().mean())


def build_model(kind: str, *, features: int, classes: int, hidden: int, heads: int, dropout: float, split: bool) -> GCN | GAT:
    """The whole model (``split`` False) or the server half of the split one."""
    if kind == "gcn":
        return GCN(features, hidden, classes, dropout=dropout, split=split)
    return GAT(features, hidden, classes, heads=heads, dropout=dropout, split=split)


@dataclass(frozen=True)
class CentralisedNodeConfig:
    """The centralised baseline: one model on the whole graph (all features in one place).
    ``dropout``/``lr`` None: the paper's for ``model``."""

    model: str = "gcn"
    epochs: int = 200
    hidden: int = 16
    heads: int = 8
    dropout: float | None = None
    lr: float | None = None
    weight_decay: float = 5e-4
    seed: int = 0

    def __post_init__(self) -> None:
        from secure_fedgraph.errors import ConfigError

        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        for name in ("epochs", "hidden", "heads"):
            positive(name, getattr(self, name))
        positive_number("weight_decay", self.weight_decay, zero_ok=True)


def train_centralised(graph, config: CentralisedNodeConfig) -> dict:
    """Train the whole model on ``graph`` (a :class:`~secure_fedgraph.data.planetoid.CitationGraph`
    with row-normalised features) and return the final and best-validation test accuracy."""
    settings = PAPER_SETTINGS[config.model]
    dropout = settings["dropout"] if config.dropout is None else config.dropout
    lr = settings["lr"] if config.lr is None else config.lr
    with torch.random.fork_rng(devices=[]):  # PyG's initialisers and F.dropout draw from the global generator: seeded here, restored after
        torch.manual_seed(config.seed)
        model = build_model(config.model, features=graph.x.shape[1], classes=graph.num_classes, hidden=config.hidden, heads=config.heads,
                            dropout=dropout, split=False)
        optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=config.weight_decay)
        history, best = [], (-1.0, 0.0)
        for epoch in range(config.epochs):
            model.train()
            optimiser.zero_grad()
            loss = F.cross_entropy(model(graph.x, graph.edge_index)[graph.train_mask], graph.y[graph.train_mask])
            loss.backward()
            optimiser.step()
            model.eval()
            with torch.no_grad():
                logits = model(graph.x, graph.edge_index)
            val, test = accuracy(logits, graph.y, graph.val_mask), accuracy(logits, graph.y, graph.test_mask)
            best = max(best, (val, test), key=lambda p: -1.0 if p[0] is None else p[0])
            history.append({"round": epoch, "train_loss": float(loss.detach()), "val_acc": val, "test_acc": test})
    return {"plan": f"{config.model}-centralised", "rounds": history, "test_acc": history[-1]["test_acc"], "best_val_test_acc": best[1]}


def normalise_rows(x: torch.Tensor) -> torch.Tensor:
    """Each feature vector scaled to sum 1 (Kipf and Welling's preprocessing, and DGL's for
    these graphs); an all-zero row stays zero. Row by row, so a user can do it alone."""
    total = x.sum(dim=-1, keepdim=True)
    return x / torch.where(total == 0, torch.ones_like(total), total)
