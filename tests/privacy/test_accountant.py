"""The accountant's history and its report with both accountants; the noise source."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy import WINDOW, NoiseSource, PrivacyAccountant, RowRelease, Steps, Unit, UnitKind, prv_epsilon, rdp_epsilon


def _accountant() -> PrivacyAccountant:
    accountant = PrivacyAccountant()
    for client in (0, 1):
        for _ in range(3):
            accountant.record(client, RowRelease("train", np.arange(4), 1.0))
        accountant.record(client, RowRelease("test", [0, 1], 1.0))
    accountant.record(1, RowRelease("test", [1], 1.0))
    return accountant


def test_the_report_states_both_accountants_per_client():
    report = _accountant().report([0, 1, 2], unit=WINDOW, delta=1e-5, mechanism="Gaussian rows")
    assert report["releases_per_client"] == {"0": 3, "1": 3, "2": 0}
    assert report["epsilon_per_client"] == {"0": rdp_epsilon([(1.0, 1.0, 3)], 1e-5), "1": rdp_epsilon([(1.0, 1.0, 3)], 1e-5)}
    assert report["epsilon_max"] == report["accountants"]["rdp"]["epsilon_max"] == report["epsilon_per_client"]["0"]
    prv = report["accountants"]["prv"]
    assert prv["epsilon_max"] == pytest.approx(prv_epsilon([(1.0, 1.0, 3)], 1e-5).epsilon) and prv["note"] is None
    assert report["unit"] == WINDOW.description and report["delta"] == 1e-5


def test_the_unit_decides_how_releases_add_up():
    accountant = _accountant()
    reading = Unit(UnitKind.SPAN, "a reading", span=2)
    assert accountant.uploads_history(1, reading) == [(1.0, 1.0, 6)]  # two training windows, three releases each
    assert accountant.uploads_history(1, Unit(UnitKind.CLIENT, "a sensor")) == [(1.0, 1.0, 15)]


def test_dpsgd_steps_compose_with_uploads_per_sample_only():
    accountant = _accountant()
    accountant.record_steps(0, Steps(1.2, 0.05, 10))
    accountant.record_steps(0, Steps(1.2, 0.05, 5))  # merged: the optimiser records every step
    assert accountant.steps_of(0) == [Steps(1.2, 0.05, 15)]
    assert accountant.history(0, WINDOW) == [(1.0, 1.0, 3), (1.2, 0.05, 15)]
    report = accountant.report([0], unit=WINDOW, delta=1e-5, mechanism="both")
    assert report["epsilon_max"] == pytest.approx(rdp_epsilon([(1.0, 1.0, 3), (1.2, 0.05, 15)], 1e-5))
    assert report["dpsgd_steps_per_client"] == {"0": 15}
    with pytest.raises(ConfigError, match="DP-SGD is accounted per training sample"):
        accountant.history(0, Unit(UnitKind.CLIENT, "a sensor"))


def test_prv_notes_why_it_has_no_value_and_rdp_stands():
    accountant = PrivacyAccountant()
    for _ in range(5):
        accountant.record(0, RowRelease("train", np.arange(20_000), 1.0))
    report = accountant.report([0], unit=Unit(UnitKind.CLIENT, "a sensor"), delta=1e-5, mechanism="Gaussian rows")
    assert report["accountants"]["prv"]["epsilon_max"] is None and "issue 601" in report["accountants"]["prv"]["note"]
    assert report["epsilon_max"] == rdp_epsilon([(1.0, 1.0, 100_000)], 1e-5)


def test_noise_is_fresh_unless_the_client_opts_into_reproducible_noise():
    fresh = NoiseSource()
    assert not np.allclose(fresh.normal(1000, "x"), fresh.normal(1000, "x"))
    seeded = NoiseSource.reproducible(b"seed")
    assert np.array_equal(seeded.normal(1000, "x", 1), seeded.normal(1000, "x", 1))
    assert not np.allclose(seeded.normal(1000, "x", 1), seeded.normal(1000, "x", 2))
    draws = fresh.normal(200_000)
    assert abs(draws.mean()) < 0.01 and draws.std() == pytest.approx(1.0, abs=0.01)
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(seeded)
