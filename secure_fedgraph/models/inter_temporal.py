"""FedRel's inter-temporal graph block (eqs. 10-13)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from secure_fedgraph.models.diig_message import DIIGMessage
from secure_fedgraph.models.dynamic_correlation import DynamicCorrelation, complete_edges
from secure_fedgraph.models.generator_dropout import xavier_


class InterTemporalBlock(nn.Module):
    r"""Eqs. 10-13 over a window of w earlier spatial graphs.

    Fusion (eqs. 10-11): :math:`\mathbf{h}^{fuse}_i(t) = LN(\sigma(\mathbf{W}_{fuse}
    (\mathbf{h}^{spa}_i(t) \oplus \mathbf{h}^{\mathcal{G}}(t))))` (:math:`\sigma` ELU, as :class:`DIIGMessage`). Inter correlation (eq. 12):
    :math:`\mathbf{A}_{tem}(t)` is :class:`DynamicCorrelation` with receivers
    :math:`\mathbf{H}_{fuse}(t)` and senders :math:`\mathbf{H}_{fuse}(t-1)`. Recursion (eq. 13):

    .. math::
        \mathbf{H}_{tem}(t) = msg(\mathbf{A}_{tem}(t), msg(\mathbf{A}_{tem}(t-1), \dots
        msg(\mathbf{A}_{tem}(t-w+1), \mathbf{H}_{fuse}(t-w))))

    w applications of one shared :class:`DIIGMessage` (eq. 2); w = 0 gives
    :math:`\mathbf{H}_{tem}(t) = \mathbf{H}_{fuse}(t)`. It is computed for every t >= w (the
    segments with a full window), all at once.

    Args:
        hidden: size of :math:`\mathbf{h}^{spa}_i` and of every embedding here.
        graph_features: size of :math:`\mathbf{h}^{\mathcal{G}}`.
        window: w.

    Shapes:
        h_spa (B, P, N, hidden), h_graph (B, P, graph_features) -> H_tem (B, P - w, N, hidden),
        for t = w .. P-1.
    """

    def __init__(self, hidden: int, graph_features: int, window: int) -> None:
        super().__init__()
        self.sizes = (hidden, graph_features, window)
        self.window = window
        self.fuse = nn.Linear(hidden + graph_features, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.correlation = DynamicCorrelation(hidden)
        self.message = DIIGMessage(hidden, hidden)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)
        self.correlation.reset_parameters(generator)

    def forward(self, h_spa: torch.Tensor, h_graph: torch.Tensor) -> torch.Tensor:
        b, p, n, hidden = h_spa.shape
        w = self.window
        if p <= w:
            raise ValueError(f"a window of {w} needs more than {w} spatial graphs per case, got {p}")
        graph = h_graph.unsqueeze(2).expand(b, p, n, h_graph.shape[-1])
        fused = self.norm(F.elu(self.fuse(torch.cat([h_spa, graph], dim=-1))))  # eqs. 10-11
        outputs = p - w
        state = fused[:, :outputs].reshape(-1, hidden)  # H_fuse(t - w) for every t >= w
        edges = complete_edges(b * outputs, n, h_spa.device)
        for k in range(1, w + 1):  # eq. 13, innermost msg first: A_tem(t - w + k)
            receivers = fused[:, k : k + outputs].reshape(-1, hidden)
            senders = fused[:, k - 1 : k - 1 + outputs].reshape(-1, hidden)
            state = self.message(state, edges, self.correlation(receivers, senders, edges))  # eq. 12, then msg
        return state.reshape(b, outputs, n, hidden)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(hidden={self.sizes[0]}, graph_features={self.sizes[1]}, window={self.sizes[2]})"
