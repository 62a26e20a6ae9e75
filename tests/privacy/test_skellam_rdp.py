"""The Skellam RDP bound (privacy/analysis/skellam.py) against the Gaussian mechanism it
converges to, and its edge cases."""

from __future__ import annotations

import math

import pytest
from opacus.accountants import RDPAccountant

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.analysis.skellam import SkellamRelease, sensitivities, skellam_epsilon, skellam_rdp


def _gaussian(sigma: float, steps: int, delta: float) -> float:
    accountant = RDPAccountant()
    accountant.history = [(sigma, 1.0, steps)]
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("sigma, steps", [(0.8, 1), (1.0, 3), (2.0, 10), (5.0, 100)])
def test_at_a_fine_grid_skellam_costs_what_the_gaussian_does(sigma, steps):
    """With sensitivity 2^20 the discreteness term is negligible: the Skellam epsilon is opacus'
    Gaussian epsilon (sampling rate 1, same conversion) within 1%, and never below it."""
    l2 = 2.0**20
    release = SkellamRelease(l1=l2 * l2, l2=l2, variance=(sigma * l2) ** 2)
    ours, gaussian = skellam_epsilon([release] * steps, 1e-5), _gaussian(sigma, steps, 1e-5)
    assert gaussian <= ours <= 1.01 * gaussian


def test_at_a_coarse_grid_discreteness_costs_more_and_more_noise_costs_less():
    coarse = SkellamRelease(l1=4.0, l2=2.0, variance=(1.0 * 2.0) ** 2)  # sensitivity 2 integer units, sigma 1
    assert skellam_epsilon([coarse], 1e-5) > 1.05 * _gaussian(1.0, 1, 1e-5)
    eps = [skellam_epsilon([SkellamRelease(4.0, 2.0, (z * 2.0) ** 2)] * 5, 1e-5) for z in (1, 2, 4, 8)]
    assert eps == sorted(eps, reverse=True)


def test_sensitivities_of_a_rounded_contribution():
    l1, l2 = sensitivities(l2_clip=1.0, precision_bits=10, dimension=400)
    assert l2 == 1024 + 10 and l1 == min(20 * l2, l2 * l2)
    assert sensitivities(l2_clip=1.0, precision_bits=0, dimension=1) == (1.5, 1.5)


def test_edges():
    assert skellam_epsilon([], 1e-5) == 0.0
    assert math.isinf(skellam_epsilon([SkellamRelease(1.0, 1.0, 0.0)], 1e-5))
    with pytest.raises(ConfigError, match="integer order"):
        skellam_rdp(SkellamRelease(1.0, 1.0, 1.0), 1.5)
    with pytest.raises(ConfigError, match="delta"):
        skellam_epsilon([SkellamRelease(1.0, 1.0, 1.0)], 0.0)
