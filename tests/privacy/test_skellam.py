"""The Skellam sampler (privacy/mechanisms/skellam.py): the Poisson variates it is built from follow
their distribution at small and at very large rates, the noise is fresh OS randomness unless a
key is given, and the tail bound holds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.mechanisms.skellam import log_poisson_pmf, poisson, skellam, skellam_tail

KEY = bytes(range(32))


@pytest.mark.parametrize("lam", [0.3, 4.0, 9.99, 10.0, 37.5, 1e3, 1e6, 1e9, 3e11])
def test_log_pmf_matches_scipy_where_scipy_is_exact_and_normalises_elsewhere(lam):
    k = np.unique(np.clip(np.rint(lam + np.sqrt(lam) * np.linspace(-8, 8, 401)), 0, None))
    ours = log_poisson_pmf(k, lam)
    if lam <= 1e6:  # scipy's -lam + k log lam - lgamma(k+1) loses digits beyond
        assert np.max(np.abs(ours - stats.poisson.logpmf(k, lam))) < 1e-8
    else:  # the normal limit: mass over +-8 sd sums to 1 (spacing sqrt(lam)/25 per grid point, so weight by it)
        dense = np.arange(int(lam - 8 * np.sqrt(lam)), int(lam + 8 * np.sqrt(lam)), max(1, int(np.sqrt(lam) / 50)))
        mass = np.exp(log_poisson_pmf(dense, lam)).sum() * max(1, int(np.sqrt(lam) / 50))
        assert mass == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("lam", [0.3, 4.0, 10.0, 37.5])
def test_small_rates_pass_a_chi_square_test(lam):
    x = poisson(lam, 100_000, key=KEY)
    k = np.arange(int(lam + 10 * np.sqrt(lam) + 10))
    observed, expected = np.bincount(x, minlength=k.size)[: k.size], stats.poisson.pmf(k, lam) * x.size
    keep = expected > 5
    assert stats.chisquare(observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()).pvalue > 1e-4


@pytest.mark.parametrize("variance", [50.0, 2e6, 1.1e11])
def test_skellam_has_mean_zero_and_the_stated_variance(variance):
    """200,000 draws: the variance within 6 standard errors (sqrt(2/n) relative, plus the
    excess kurtosis 1/variance), the mean within 6 of its standard error."""
    x = skellam(variance, 200_000, key=KEY)
    assert x.dtype == np.int64
    assert abs(x.mean()) < 6 * np.sqrt(variance / x.size)
    assert abs(x.var() / variance - 1) < 6 * np.sqrt((2 + 1 / variance) / x.size)


def test_noise_is_fresh_without_a_key_and_reproducible_with_one():
    assert not np.array_equal(skellam(1e6, 100), skellam(1e6, 100))
    assert np.array_equal(skellam(1e6, 100, key=KEY), skellam(1e6, 100, key=KEY))
    assert not np.array_equal(skellam(1e6, 100, key=KEY), skellam(1e6, 100, key=bytes(32)))
    with pytest.raises(ConfigError, match="Poisson rate"):
        poisson(float("nan"), 3)


def test_the_tail_bound_holds_and_is_not_loose():
    """At 2^-10 over 10,000 values the bound is never crossed in 20 trials, and it is within 1.6x of
    the largest value seen (a Gaussian tail at that level is 4.9 sd, Bernstein's a little more)."""
    variance, count = 1e8, 10_000
    bound = skellam_tail(variance, count, security_bits=10)
    largest = max(int(np.abs(skellam(variance, count)).max()) for _ in range(20))
    assert largest <= bound < 1.6 * largest
    assert skellam_tail(0.0, count) == 0
