"""FedRel's DIIG classifier: feature transformation, intra-spatial and inter-temporal blocks,
and the output layer (Zhang et al., "FedRel: An Adaptive Federated Relevance Framework for
Spatial Temporal Graph Learning", IEEE TAI 2024, eqs. 6-15)."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.feature_transform import FeatureTransform
from secure_fedgraph.models.generator_dropout import GeneratorDropout, xavier_
from secure_fedgraph.models.inter_temporal import InterTemporalBlock
from secure_fedgraph.models.intra_spatial import IntraSpatialBlock


class DIIG(nn.Module):
    r"""Dynamic inter-intra graph classifier.

    A case :math:`\mathcal{S} \in \mathbb{R}^{N \times T}` becomes P spatial graphs
    (:class:`FeatureTransform`, eq. 6), each updated by :class:`IntraSpatialBlock` (eqs. 7-9),
    then :class:`InterTemporalBlock` (eqs. 10-13) over a window of w graphs. The output layer
    (eq. 14) and the row-wise mean (eq. 15):

    .. math::
        \hat{\mathbf{H}}_{emb}(t) = \mathbf{W}_o(\mathbf{H}^L_{spa}(t) \oplus \mathbf{H}_{tem}(t)),
        \qquad \tilde{\mathbf{z}}(t) = softmax(f_{mn}(\hat{\mathbf{H}}_{emb}(t)))

    :math:`\mathbf{W}_o` is Table II's readout MLP (2 hidden layers of 64, ReLU, dropout, one
    linear output layer per class), applied per node; the node mean gives the logits of graph t.
    (Eq. 14 puts a sigmoid after :math:`\mathbf{W}_o`; logits squeezed into (0, 1) cannot make
    a confident softmax, so the output layer is linear, as STFL's readout is.)

    :meth:`forward` returns the logits of every t >= w (every segment with a full window), all
    labelled with the case's class in training (the loss sums over t, as eq. 16); a case's
    prediction (:meth:`case_probabilities`) is the mean of :math:`\tilde{\mathbf{z}}(t)`.

    Args:
        classes: C.
        segments: P, spatial graphs per case (its length must divide into them).
        window: w (the paper's best: 2 or 3).
        features: d (32), hidden: node embedding size (32), graph_features: size of
            :math:`\mathbf{h}^{\mathcal{G}}` (32), readout_hidden: the output MLP's width (64),
            dropout: Table II's 0.3, layers: L (2).

    Shapes:
        x (B, N, T) -> logits (B, P - w, C).
    """

    def __init__(self, *, classes: int, segments: int, window: int, features: int = 32, hidden: int = 32, graph_features: int = 32,
                 readout_hidden: int = 64, dropout: float = 0.3, layers: int = 2) -> None:
        super().__init__()
        self.options = dict(classes=classes, segments=segments, window=window, features=features, hidden=hidden,
                            graph_features=graph_features, readout_hidden=readout_hidden, dropout=dropout, layers=layers)
        self.transform = FeatureTransform(segments, features)
        self.feature_dropout = GeneratorDropout(dropout)
        self.intra = IntraSpatialBlock(features, hidden, graph_features, layers)
        self.inter = InterTemporalBlock(hidden, graph_features, window)
        self.output = nn.Sequential(nn.Linear(2 * hidden, readout_hidden), nn.ReLU(), GeneratorDropout(dropout),
                                    nn.Linear(readout_hidden, readout_hidden), nn.ReLU(), GeneratorDropout(dropout),
                                    nn.Linear(readout_hidden, classes))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Xavier initialisation of every weight (Table II), from ``generator`` when given."""
        for block in (self.transform, self.intra, self.inter):
            block.reset_parameters(generator)
        xavier_(self.output, generator)

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor | None = None) -> torch.Tensor:
        b, n, _ = x.shape
        p, w = self.options["segments"], self.options["window"]
        features = self.feature_dropout(self.transform(x))  # eq. 6: (B, P, N, d)
        h_spa, h_graph, _ = self.intra(features.reshape(b * p, n, -1), adjacency)  # eqs. 7-9
        h_spa = h_spa.reshape(b, p, n, -1)
        h_tem = self.inter(h_spa, h_graph.reshape(b, p, -1))  # eqs. 10-13
        embedding = self.output(torch.cat([h_spa[:, w:], h_tem], dim=-1))  # eq. 14
        return embedding.mean(dim=2)  # eq. 15's f_mn; the softmax is the loss's or the caller's

    def case_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C): the mean over t of eq. 15's softmax."""
        return torch.softmax(self(x), dim=-1).mean(dim=1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({', '.join(f'{k}={v}' for k, v in self.options.items())})"
