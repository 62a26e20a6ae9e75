"""FedRel's relevance-weighted aggregation (eqs. 19-21), in the clear and as sums.

The paper's server computes, from every participant's estimate d_hat_k and weights Theta_k,

    d_tilde = (1/K) sum_k d_hat_k                                         (eq. 19)
    r_k     = exp(||d_hat_k - d_tilde||) / sum_j exp(||d_hat_j - d_tilde||) (eq. 20)
    Theta   = sum_k r_k Theta_k                                           (eq. 21)

:func:`relevance_in_the_clear` is exactly that. The same Theta needs only sums
(shared/DESIGN.md, "FedRel without revealing relevance"): d_tilde is a sum over K; each
participant computes e_k = exp(tau ||d_hat_k - d_tilde|| - c) itself (:func:`relevance_term`),
and Theta = (sum_k e_k Theta_k) / (sum_k e_k) (:func:`weights_from_sums`), because the shift c
cancels in the ratio. tau is 1 in eq. 20; -1 gives the opposite reading of the paper's text
("less relevant, less obtained weight").

Precision (:class:`RelevancePrecision`): with the estimates in (-1, 1)^m the distance lies in
[0, D], D = 2 sqrt(m); the public shift c = tau D / 2 puts every e_k in [e^-h, e^h] with
h = |tau| D / 2. Weights clipped to [-W, W] give |e_k Theta_k| <= e^h W: the clipping range of
the weighted sum. The error of Theta = S1 / S2 from per-element errors b1, b2 of the two sums
is at most (b1 + |Theta| b2) / S2 <= b (1 + W) / e^-h, since S2 >= e^-h with one contributor;
so a target error eps per weight needs a resolution b = eps e^-h / (1 + W) of the sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

WEIGHT = "e"  # the name of sum_k e_k among the weighted sum's tensors
PREFIX = "weighted/"  # e_k Theta_k of parameter p is the tensor "weighted/p"


def relevance_in_the_clear(d_hats: Sequence[np.ndarray], thetas: Sequence[Mapping[str, np.ndarray]], *, temperature: float = 1.0
                           ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Eqs. 19-21 from the individual vectors, as the paper's server computes them: returns
    (d_tilde, r, Theta) in float64."""
    d = np.asarray([np.asarray(v, dtype=np.float64) for v in d_hats])
    d_tilde = d.mean(axis=0)  # eq. 19
    scores = temperature * np.linalg.norm(d - d_tilde, axis=1)
    r = np.exp(scores - scores.max())
    r /= r.sum()  # eq. 20
    theta = {k: sum(r_k * np.asarray(t[k], dtype=np.float64) for r_k, t in zip(r, thetas)) for k in thetas[0]}  # eq. 21
    return d_tilde, r, theta


@dataclass(frozen=True)
class RelevancePrecision:
    """Range and resolution of the sums of e_k Theta_k and e_k (see the module docstring).

    Attributes:
        distance_bound: D, the largest ||d_hat_k - d_tilde|| (2 sqrt(m) for estimates in (-1, 1)^m).
        temperature: tau of e_k = exp(tau ||d_hat_k - d_tilde|| - c).
        weight_clip: W, the range the weights are clipped to.
        error: eps, the largest absolute error per aggregated weight.
    """

    distance_bound: float
    temperature: float = 1.0
    weight_clip: float = 8.0
    error: float = 1e-5

    @property
    def shift(self) -> float:
        """c: the public shift that centres tau times the distance on 0."""
        return self.temperature * self.distance_bound / 2.0

    @property
    def half_span(self) -> float:
        """h: every e_k lies in [e^-h, e^h]."""
        return abs(self.temperature) * self.distance_bound / 2.0

    @property
    def clip_range(self) -> float:
        """|e_k Theta_k| <= e^h W, and e_k <= e^h <= e^h W for W >= 1."""
        return math.exp(self.half_span) * max(self.weight_clip, 1.0)

    @property
    def resolution(self) -> float:
        """The per-element error the sums may have for Theta to be within ``error``."""
        return self.error * math.exp(-self.half_span) / (1.0 + self.weight_clip)


def relevance_term(d_hat: np.ndarray, d_tilde: np.ndarray, precision: RelevancePrecision) -> float:
    """e_k = exp(tau ||d_hat_k - d_tilde|| - c), computed by participant k alone."""
    distance = float(np.linalg.norm(np.asarray(d_hat, dtype=np.float64) - np.asarray(d_tilde, dtype=np.float64)))
    return math.exp(precision.temperature * distance - precision.shift)


def weighted_contribution(e: float, theta: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What participant k sends to the relevance sum: e_k Theta_k per parameter, and e_k."""
    return {**{PREFIX + k: e * np.asarray(v, dtype=np.float64) for k, v in theta.items()}, WEIGHT: np.array([e])}


def weights_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Theta = (sum_k e_k Theta_k) / (sum_k e_k): eq. 21 from the two sums."""
    total = float(np.asarray(sums[WEIGHT]).ravel()[0])
    return {k[len(PREFIX):]: np.asarray(v, dtype=np.float64) / total for k, v in sums.items() if k.startswith(PREFIX)}


def aggregation_error_bound(*, sum_error: float, weight_sum: float, theta_max: float) -> float:
    """The largest error of Theta = S1 / S2 from per-element errors ``sum_error`` of both sums."""
    return sum_error * (1.0 + theta_max) / weight_sum
