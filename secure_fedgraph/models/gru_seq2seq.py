"""GRU encoder-decoder forecaster: CNFGNN's per-node model and its "GRU" baseline.

Meng, Rambhatla, Liu, "Cross-Node Federated Graph Neural Network for Spatio-Temporal Data
Modeling", KDD 2021 (code: ``models/base_models/GRUSeq2Seq.py``). The encoder reads the input
window; its final state h_c starts the decoder, which predicts one step at a time from
[previous value, time-of-day of the target step] (the last observed speed at the first step),
feeding back its own prediction (or, with probability ``teacher_forcing``, the true value).

With ``graph_size`` > 0 this is CNFGNN's ``GRUSeq2SeqWithGraphNet``: the decoder is
``graph_size`` wider and starts from [h_c ; h_G], h_G being the server's graph embedding of
this node for the window. With hidden 64 and graph 64 it has 63,873 parameters (the paper's
"64K"); with hidden 100 and no graph 62,501 (the paper's "GRU 63K").

Shapes: ``x`` (B, T_in, 2) = [speed, time-of-day]; ``y_tod`` (B, T_out); ``targets`` (B, T_out);
``graph`` (B, graph_size); output (B, T_out).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class GRUSeq2Seq(nn.Module):
    def __init__(self, input_size: int = 2, hidden_size: int = 100, horizon: int = 12, graph_size: int = 0) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.horizon, self.graph_size = input_size, hidden_size, horizon, graph_size
        self.encoder = nn.GRU(input_size, hidden_size, batch_first=True)
        self.decoder = nn.GRUCell(2, hidden_size + graph_size)
        self.head = nn.Linear(hidden_size + graph_size, 1)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """PyTorch's default initialisation (GRU weights and biases U(-1/sqrt(H), 1/sqrt(H)),
        Linear U(-1/sqrt(fan_in), 1/sqrt(fan_in))), drawn from ``generator`` when given so a
        run's initial model depends on its seed only."""
        wide = (self.hidden_size + self.graph_size) ** -0.5
        bounds = {"encoder": self.hidden_size**-0.5, "decoder": wide, "head": wide}
        with torch.no_grad():
            for name, parameter in self.named_parameters():
                bound = bounds[name.split(".")[0]]
                parameter.copy_(torch.rand(parameter.shape, generator=generator) * (2 * bound) - bound)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """h_c: the encoder's final state, (B, hidden_size)."""
        return self.encoder(x)[1][0]

    def decode(
        self,
        h: torch.Tensor,
        x: torch.Tensor,
        y_tod: torch.Tensor,
        *,
        graph: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        teacher_forcing: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Predict ``horizon`` steps from h_c (and h_G when the model has a graph input)."""
        if self.graph_size:
            if graph is None or graph.shape != (h.shape[0], self.graph_size):
                raise ValueError(f"expected graph embeddings of shape {(h.shape[0], self.graph_size)}, got {None if graph is None else tuple(graph.shape)}")
            h = torch.cat([h, graph], dim=1)
        previous = x[:, -1, :1]
        outputs = []
        for t in range(self.horizon):
            h = self.decoder(torch.cat([previous, y_tod[:, t : t + 1]], dim=1), h)
            prediction = self.head(h)
            outputs.append(prediction)
            previous = prediction
            if targets is not None and teacher_forcing > 0:
                if torch.rand((), generator=generator).item() < teacher_forcing:  # one draw per step, as CNFGNN
                    previous = targets[:, t : t + 1]
        return torch.cat(outputs, dim=1)

    def forward(self, x: torch.Tensor, y_tod: torch.Tensor, **decode_options: Any) -> torch.Tensor:
        """Encode then decode; ``decode_options`` are :meth:`decode`'s keyword arguments."""
        return self.decode(self.encode(x), x, y_tod, **decode_options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(input_size={self.input_size}, hidden_size={self.hidden_size}, horizon={self.horizon}, graph_size={self.graph_size})"
