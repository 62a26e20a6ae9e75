"""FedRel's per-participant VAE and its distribution vector (eq. 17)."""

from __future__ import annotations

import torch
from torch import nn

from secure_fedgraph.models.generator_dropout import xavier_


class DistributionVAE(nn.Module):
    r"""A Gaussian VAE over flattened cases :math:`\tilde{\mathbf{s}}_i \in \mathbb{R}^{ND}`,
    :math:`q_\phi(\mathbf{z}_i | \tilde{\mathbf{s}}_i) = \mathcal{N}(\mu_i, \sigma_i^2 \mathbf{I})`
    (Kingma and Welling 2014, as FedRel section IV-C), and the distribution vector of eq. 17:

    .. math::
        \mathbf{d}^{(k)} = \frac{1}{T^{(k)}} \sum_{i=1}^{T^{(k)}} \mathbf{z}^{(k)}_i

    with :math:`\mathbf{z}_i` taken as the posterior mean :math:`\mu_i` (deterministic; a
    sampled z would add noise of mean zero). Encoder Linear(ND, hidden) - ReLU - Linear(hidden,
    2m) giving :math:`(\mu, \log\sigma^2)`; decoder Linear(m, hidden) - ReLU - Linear(hidden, ND).
    The loss is the negative ELBO per case with a unit-variance Gaussian likelihood (squared
    error / 2) and the KL term to N(0, I).

    Args:
        inputs: ND. latent: m. hidden: width of encoder and decoder.

    Shapes:
        x (B, ND) -> (reconstruction (B, ND), mu (B, m), log_var (B, m)).
    """

    def __init__(self, inputs: int, latent: int, hidden: int = 64) -> None:
        super().__init__()
        self.sizes = (inputs, latent, hidden)
        self.latent = latent
        self.encoder = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, inputs))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        xavier_(self, generator)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, log_var = self.encoder(x).chunk(2, dim=-1)
        return mu, log_var.clamp(-10.0, 10.0)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, log_var = self.encode(x)
        noise = torch.randn(mu.shape, generator=generator, dtype=mu.dtype, device=mu.device)
        return self.decoder(mu + noise * torch.exp(0.5 * log_var)), mu, log_var

    def loss(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The negative ELBO, averaged over the batch."""
        reconstruction, mu, log_var = self(x, generator)
        squared = 0.5 * ((reconstruction - x) ** 2).sum(dim=-1)
        kl = 0.5 * (mu**2 + log_var.exp() - 1.0 - log_var).sum(dim=-1)
        return (squared + kl).mean()

    @torch.no_grad()
    def distribution_vector(self, x: torch.Tensor) -> torch.Tensor:
        """Eq. 17: (m,), the mean posterior mean of the cases ``x`` (B, ND)."""
        return self.encode(x)[0].mean(dim=0)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}{self.sizes}"
