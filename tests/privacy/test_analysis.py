"""The pure functions of privacy/analysis: both accountants against opacus' published values and
against each other, calibration (golden values and a property), and privacy units."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secure_fedgraph.errors import ConfigError, PrivacyBudgetError
from secure_fedgraph.privacy.analysis import Unit, UnitKind, calibrate_sigma, member_releases, prv_epsilon, rdp_epsilon
from secure_fedgraph.privacy.analysis.prv import MAX_GRID_POINTS


def test_rdp_matches_the_opacus_golden_value():
    """opacus' accountants_test.py: sigma 1.5, q 0.04, 2,250 steps, delta 1e-5 -> 7.32911117143."""
    assert rdp_epsilon([(1.5, 0.04, 2250)], 1e-5) == pytest.approx(7.32911117143, rel=1e-9)


def test_prv_matches_the_opacus_golden_value():
    """opacus' test_prv_accountant: the same, at int(90 // 0.04) = 2,249 steps -> 6.777395712150674."""
    assert prv_epsilon([(1.5, 0.04, 2249)], 1e-5).epsilon == pytest.approx(6.777395712150674, abs=1e-6)


@pytest.mark.parametrize("history", [[(1.5, 0.04, 2250)], [(1.0, 1.0, 3)], [(0.5, 1.0, 3)], [(2.0, 1.0, 1)], [(5.0, 1.0, 100)],
                                     [(0.8, 0.01, 10_000)], [(1.0, 1.0, 3), (1.2, 0.05, 500)]])
def test_prv_is_within_a_fifth_below_rdp(history):
    """PRV is a tight upper bound (within its eps_error of 0.01), RDP a looser one: here PRV is
    5 to 8% below RDP (13% for a few subsampled steps, tests/privacy/test_dpsgd.py). The stated
    tolerance: RDP * 0.8 <= PRV <= RDP."""
    rdp, prv = rdp_epsilon(history, 1e-5), prv_epsilon(history, 1e-5)
    assert prv.reason is None and 0.8 * rdp <= prv.epsilon <= rdp


def test_prv_declines_where_its_grid_would_not_fit_and_rdp_answers():
    """opacus issue 601's regime: a sensor's every window (a large epsilon, many releases).
    opacus itself would try to allocate 79 GiB here; we estimate the grid first."""
    history = [(1.0, 1.0, 96_000)]
    prv = prv_epsilon(history, 1e-5)
    assert prv.epsilon is None and "issue 601" in prv.reason and f"{MAX_GRID_POINTS:.0e}" in prv.reason
    assert math.isfinite(rdp_epsilon(history, 1e-5))


def test_edge_cases_are_written_out():
    for epsilon in (rdp_epsilon, lambda h, d: prv_epsilon(h, d).epsilon):
        assert epsilon([(1.0, 1.0, 0)], 1e-5) == 0.0  # no release
        assert epsilon([(1.0, 0.0, 5)], 1e-5) == 0.0  # never sampled
        assert epsilon([(0.0, 1.0, 5)], 1e-5) == math.inf  # no noise
    assert rdp_epsilon([(1.0, 1.0, 1)], 1e-5) < rdp_epsilon([(1.0, 1.0, 10)], 1e-5) < rdp_epsilon([(1.0, 1.0, 100)], 1e-5)
    assert rdp_epsilon([(4.0, 1.0, 10)], 1e-5) < rdp_epsilon([(1.0, 1.0, 10)], 1e-5)


@pytest.mark.parametrize("history, delta, match", [([(1.0, 1.0, 1)], 0.0, "delta"), ([(1.0, 1.0, 1)], 1.0, "delta"),
                                                   ([(1.0, 1.5, 1)], 1e-5, "sampling rate"), ([(-1.0, 1.0, 1)], 1e-5, "noise multiplier"),
                                                   ([(1.0, 1.0, 1.5)], 1e-5, "steps")])
def test_bad_histories_are_refused(history, delta, match):
    with pytest.raises(ConfigError, match=match):
        rdp_epsilon(history, delta)


@pytest.mark.parametrize("kwargs, accountant, sigma", [({"steps": 2250}, "rdp", 1.416), ({"steps": 2000}, "rdp", 1.3562),
                                                       ({"steps": 2000}, "prv", 1.2915)])
def test_calibration_matches_the_opacus_golden_values(kwargs, accountant, sigma):
    """opacus' test_get_noise_multiplier_*: epsilon 8 at delta 1e-5 and q 0.04 (90 epochs = 2,250 steps)."""
    assert calibrate_sigma(target_epsilon=8.0, delta=1e-5, sample_rate=0.04, accountant=accountant, **kwargs) == pytest.approx(sigma, abs=1e-4)


@settings(max_examples=15, deadline=None)
@given(target=st.floats(0.5, 20.0), rate=st.sampled_from([1e-3, 1e-2, 0.04, 0.1, 1.0]), steps=st.integers(1, 300))
def test_calibrated_sigma_never_overshoots_its_target(target, rate, steps):
    sigma = calibrate_sigma(target_epsilon=target, delta=1e-5, sample_rate=rate, steps=steps)
    assert target - 0.01 <= rdp_epsilon([(sigma, rate, steps)], 1e-5) <= target


def test_an_unreachable_target_is_refused_with_a_clear_error():
    with pytest.raises(PrivacyBudgetError, match=r"epsilon 1e-07 at delta 1e-05 cannot be reached with 1000 releases"):
        calibrate_sigma(target_epsilon=1e-7, delta=1e-5, sample_rate=1.0, steps=1000)
    with pytest.raises(ConfigError, match="target epsilon"):
        calibrate_sigma(target_epsilon=0.0, delta=1e-5, sample_rate=1.0, steps=1)
    with pytest.raises(ConfigError, match="accountant"):
        calibrate_sigma(target_epsilon=1.0, delta=1e-5, sample_rate=1.0, steps=1, accountant="gdp")


READING = Unit(UnitKind.SPAN, "a reading", span=3)


def test_a_member_takes_part_in_the_releases_of_every_row_it_sits_in():
    counts = [np.array([2, 2, 1, 0]), np.array([1, 1])]  # two streams in the data's order
    assert member_releases(Unit(UnitKind.ROW, "a window"), counts) == 2
    assert member_releases(READING, counts) == 5  # rows 0-2 of the first stream: 2 + 2 + 1
    assert member_releases(READING, [np.array([0, 0, 1]), np.array([3, 3])]) == 7  # across the streams' boundary
    assert member_releases(Unit(UnitKind.CLIENT, "a sensor"), counts) == 7
    assert member_releases(READING, []) == 0
    with pytest.raises(ConfigError, match="span"):
        Unit(UnitKind.ROW, "a window", span=3)


def test_k_rows_of_one_release_cost_what_k_releases_of_one_row_cost():
    """units.py's premise: a member in k rows of one release is a Gaussian with multiplier
    sigma / sqrt(k), which both accountants price as k releases with multiplier sigma."""
    for k in (2, 12):
        assert rdp_epsilon([(1.5 / math.sqrt(k), 1.0, 1)], 1e-5) == pytest.approx(rdp_epsilon([(1.5, 1.0, k)], 1e-5), rel=1e-9)
        assert prv_epsilon([(1.5 / math.sqrt(k), 1.0, 1)], 1e-5).epsilon == pytest.approx(prv_epsilon([(1.5, 1.0, k)], 1e-5).epsilon, abs=0.02)
