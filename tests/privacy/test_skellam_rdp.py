"""The Skellam RDP bound (privacy/analysis/skellam.py) against the Gaussian mechanism it
converges to, and its edge cases."""

from __future__ import annotations

import math

import pytest
from opacus.accountants import RDPAccountant

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.analysis.rdp import gaussian_rdp, rdp_to_epsilon
from secure_fedgraph.privacy.analysis.skellam import (
    ORDERS,
    SkellamRelease,
    fine_grid_bits,
    sensitivities,
    skellam_epsilon,
    skellam_rdp,
    skellam_rdp_curve,
)


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


def test_replacing_a_unit_doubles_its_sensitivity_and_a_fine_grid_keeps_rounding_at_one_percent():
    """Replace-one neighbours (FedSTGD's windows) cost twice the zero-out L2 bound, rounding
    included; fine_grid_bits is the fewest bits at which rounding a unit of d values adds at most
    1% to its sensitivity (one bit fewer adds more)."""
    zero_out, replace = sensitivities(l2_clip=0.5, precision_bits=12, dimension=100), sensitivities(
        l2_clip=0.5, precision_bits=12, dimension=100, replace_one=True)
    assert replace[1] == 2 * zero_out[1] and replace[0] == min(10 * replace[1], replace[1] ** 2)
    bits = fine_grid_bits(l2_clip=1e-4, dimension=2560)
    share = lambda p: (math.sqrt(2560) / 2) / (1e-4 * 2.0**p)  # noqa: E731
    assert share(bits) <= 0.01 < share(bits - 1)
    assert fine_grid_bits(l2_clip=20.0, dimension=1320) == 7 < 20  # a large clip: the backend's 20 bits are fine enough


def test_skellam_sums_and_gaussian_steps_compose_by_adding_rdp_order_by_order():
    """The composition FedSTGD reports: Skellam RDP curves (Theorem 3.5) and DP-SGD's Gaussian
    RDP (opacus' compute_rdp) added at each integer order, then opacus' conversion; with no
    Gaussian steps it is skellam_epsilon, and gaussian_rdp at opacus' own orders gives its
    accountant's golden epsilon (sigma 1.5, q 0.04, 2,250 steps: 7.32911117143)."""
    from opacus.accountants.rdp import RDPAccountant as Accountant

    release = SkellamRelease(*sensitivities(l2_clip=1.0, precision_bits=20, dimension=60, replace_one=True), (2.0 * 2**20) ** 2)
    curve = skellam_rdp_curve(release)
    assert rdp_to_epsilon(ORDERS, 7 * curve, 1e-5) == pytest.approx(skellam_epsilon([release] * 7, 1e-5), rel=1e-12)
    both = rdp_to_epsilon(ORDERS, 7 * curve + gaussian_rdp([(1.0, 1.0, 3)], ORDERS), 1e-5)
    assert both > skellam_epsilon([release] * 7, 1e-5) and both > rdp_to_epsilon(ORDERS, gaussian_rdp([(1.0, 1.0, 3)], ORDERS), 1e-5)
    orders = Accountant.DEFAULT_ALPHAS
    assert rdp_to_epsilon(orders, gaussian_rdp([(1.5, 0.04, 2250)], orders), 1e-5) == pytest.approx(7.32911117143, rel=1e-9)
    assert math.isinf(rdp_to_epsilon(ORDERS, gaussian_rdp([(0.0, 1.0, 1)], ORDERS), 1e-5))
