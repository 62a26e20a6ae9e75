"""Accounting of the Gaussian releases with opacus' RDP accountant."""

from __future__ import annotations

import math

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy import epsilon_of


def test_accountant_matches_the_opacus_golden_value():
    """opacus' own RDP test: sigma 1.5, q 0.04, 2250 steps, delta 1e-5 -> epsilon 7.32911117143."""
    assert epsilon_of(1.5, 2250, 1e-5, sample_rate=0.04).epsilon == pytest.approx(7.32911117143, rel=1e-9)


def test_epsilon_grows_with_releases_and_falls_with_noise():
    assert epsilon_of(1.0, 1, 1e-5).epsilon < epsilon_of(1.0, 10, 1e-5).epsilon < epsilon_of(1.0, 100, 1e-5).epsilon
    assert epsilon_of(4.0, 10, 1e-5).epsilon < epsilon_of(1.0, 10, 1e-5).epsilon
    assert epsilon_of(0.0, 3, 1e-5).epsilon == math.inf
    assert epsilon_of(1.0, 0, 1e-5).epsilon == 0.0


@pytest.mark.parametrize("delta, rate", [(0.0, 1.0), (1.0, 1.0), (1e-5, 0.0), (1e-5, 1.5)])
def test_bad_parameters_are_refused(delta, rate):
    with pytest.raises(ConfigError):
        epsilon_of(1.0, 1, delta, sample_rate=rate)
