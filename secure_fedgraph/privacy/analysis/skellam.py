"""Privacy of Skellam-noised integer sums (distributed DP), as pure functions.

Agarwal, Kairouz and Liu (NeurIPS 2021), Theorem 3.5: the Skellam mechanism releasing an
integer vector with L1 and L2 sensitivities d1, d2 plus Sk(mu) per coordinate is (alpha,
eps(alpha))-RDP for integer alpha > 1 with

    eps(alpha) = alpha d2^2 / (2 mu) + min(((2 alpha - 1) d2^2 + 6 d1) / (4 mu^2), 3 d1 / (2 mu)).

The first term is the Gaussian mechanism's; the second is what discreteness costs (it vanishes
as mu grows). Releases compose by adding RDP per order; (eps, delta) follows with opacus'
conversion, the same as its RDP accountant's, so the numbers compare with the Gaussian ones.

Sensitivities of a fixed-point client contribution: x clipped to L2 norm C, scaled by 2^p and
rounded to the nearest integer, moves by at most sqrt(d) / 2 in L2, so d2 = C 2^p + sqrt(d)/2;
an integer vector's L1 norm is at most sqrt(d) times its L2 norm and at most its squared L2 norm.
The neighbouring relation is zero-out: one client's contribution replaced by zeros while it
still takes part (who takes part is metadata the server sees anyway, threat_model.md). A plan
whose unit is one row of a contribution (FedSTGD's windows: ``SumNoise.unit``) may state
replace-one neighbours instead, twice the L2 bound. RDP curves over ``ORDERS`` compose with other
mechanisms' at the same orders (rdp.py: gaussian_rdp, rdp_to_epsilon).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from secure_fedgraph.errors import ConfigError

ORDERS = tuple(range(2, 257))


@dataclass(frozen=True)
class SkellamRelease:
    """One release: an integer sum with sensitivities ``l1``, ``l2`` and Sk(``variance``) noise per coordinate."""

    l1: float
    l2: float
    variance: float


def sensitivities(*, l2_clip: float, precision_bits: int, dimension: int, replace_one: bool = False) -> tuple[float, float]:
    """(L1, L2) sensitivity of one client's rounded fixed-point contribution (integer units);
    ``replace_one``: of one unit replaced by another rather than by zeros, twice the L2 bound
    (each of the two clipped units within C, each rounding within sqrt(d) / 2)."""
    l2 = (2 if replace_one else 1) * (l2_clip * 2.0**precision_bits + math.sqrt(dimension) / 2)
    return min(math.sqrt(dimension) * l2, l2 * l2), l2


def fine_grid_bits(*, l2_clip: float, dimension: int, share: float = 0.01) -> int:
    """The fewest fractional bits p at which rounding one unit of ``dimension`` values to the grid
    2^-p adds at most ``share`` to its L2 sensitivity: sqrt(d) / 2 <= share C 2^p (a clip of 1e-4
    on a 20-bit grid would otherwise see its sensitivity grow by a quarter at d = 2,500)."""
    if not (l2_clip > 0 and share > 0) or dimension < 1:
        raise ConfigError(f"fine_grid_bits needs l2_clip > 0, share > 0 and dimension >= 1, got {l2_clip!r}, {share!r}, {dimension!r}")
    return max(0, math.ceil(math.log2(math.sqrt(dimension) / (2 * share * l2_clip))))


def noise_per_sensitivity(*, noise_multiplier: float, l2_clip: float, precision_bits: int, dimension: int, contributors: int,
                          expected: int) -> float:
    """The noise standard deviation of a sum over ``contributors`` of ``expected`` clients, per
    unit of one client's rounded L2 sensitivity: z C 2^p sqrt(min(1, m / E)) / d2, integer units
    (every client adds variance (z C 2^p)^2 / E). At a fine grid it is z sqrt(m / E); on a coarse
    one the rounding adds up to sqrt(d)/2 to d2 (at p = 0, d = 4, C = 1: twice the clip), and the
    same noise buys that much less. What a client's distributed DP floor bounds (DDP-FLOOR)."""
    _, l2 = sensitivities(l2_clip=l2_clip, precision_bits=precision_bits, dimension=dimension)
    return noise_multiplier * l2_clip * 2.0**precision_bits * math.sqrt(min(1.0, contributors / expected)) / l2


def skellam_rdp(release: SkellamRelease, order: int) -> float:
    """RDP of one release at integer ``order`` > 1 (Theorem 3.5); infinite without noise."""
    if order < 2 or int(order) != order:
        raise ConfigError(f"the Skellam RDP bound needs an integer order > 1, got {order!r}")
    mu, d1, d2 = release.variance, release.l1, release.l2
    if mu <= 0:
        return math.inf
    return order * d2 * d2 / (2 * mu) + min(((2 * order - 1) * d2 * d2 + 6 * d1) / (4 * mu * mu), 3 * d1 / (2 * mu))


def skellam_rdp_curve(release: SkellamRelease) -> np.ndarray:
    """:func:`skellam_rdp` of one release at every order of ``ORDERS``."""
    return np.array([skellam_rdp(release, order) for order in ORDERS])


def skellam_epsilon(releases: Iterable[SkellamRelease], delta: float) -> float:
    """(eps, delta)-DP of the composition of ``releases`` (0 for none)."""
    from secure_fedgraph.privacy.analysis.rdp import rdp_to_epsilon

    if not 0 < delta < 1:
        raise ConfigError(f"delta must be in (0, 1), got {delta!r}")
    releases = list(releases)
    if not releases:
        return 0.0
    rdp = [sum(skellam_rdp(r, order) for r in releases) for order in ORDERS]
    if any(math.isinf(value) for value in rdp):
        return math.inf
    return rdp_to_epsilon(ORDERS, rdp, float(delta))
