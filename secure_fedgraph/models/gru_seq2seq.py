"""GRU encoder-decoder forecaster: CNFGNN's per-node model and its "GRU" baseline.

Meng, Rambhatla, Liu, "Cross-Node Federated Graph Neural Network for Spatio-Temporal Data
Modeling", KDD 2021 (code: ``models/base_models/GRUSeq2Seq.py``). The encoder reads the input
window; its final state starts the decoder, which predicts one step at a time from
[previous value, time-of-day of the target step] (the last observed speed at the first step),
feeding back its own prediction (or, with probability ``teacher_forcing``, the true value).

Shapes: ``x`` (B, T_in, 2) = [speed, time-of-day]; ``y_tod`` (B, T_out); ``targets`` (B, T_out);
output (B, T_out). With hidden 100 it has 62,501 parameters (the paper's "GRU 63K").
"""

from __future__ import annotations

import torch
from torch import nn


class GRUSeq2Seq(nn.Module):
    def __init__(self, input_size: int = 2, hidden_size: int = 100, horizon: int = 12) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.horizon = input_size, hidden_size, horizon
        self.encoder = nn.GRU(input_size, hidden_size, batch_first=True)
        self.decoder = nn.GRUCell(2, hidden_size)
        self.head = nn.Linear(hidden_size, 1)
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """PyTorch's default initialisation (GRU weights and biases U(-1/sqrt(H), 1/sqrt(H)),
        Linear U(-1/sqrt(fan_in), 1/sqrt(fan_in))), drawn from ``generator`` when given so a
        run's initial model depends on its seed only."""
        bounds = {"encoder": self.hidden_size**-0.5, "decoder": self.hidden_size**-0.5, "head": self.hidden_size**-0.5}
        with torch.no_grad():
            for name, parameter in self.named_parameters():
                bound = bounds[name.split(".")[0]]
                parameter.copy_(torch.rand(parameter.shape, generator=generator) * (2 * bound) - bound)

    def forward(
        self,
        x: torch.Tensor,
        y_tod: torch.Tensor,
        *,
        targets: torch.Tensor | None = None,
        teacher_forcing: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        _, h = self.encoder(x)
        h = h[0]
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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(input_size={self.input_size}, hidden_size={self.hidden_size}, horizon={self.horizon})"
