"""FedRel's aggregation algebra (training/relevance.py) and its metrics (training/classification.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from secure_fedgraph.training.classification import accuracy_and_macro_f1, best_round, confusion_matrix
from secure_fedgraph.training.relevance import RelevancePrecision, relevance_in_the_clear, relevance_term, weighted_contribution, weights_from_sums


@pytest.mark.parametrize("temperature", [1.0, -1.0, 2.5])
def test_ratio_of_the_two_sums_is_eq_21_whatever_the_shift(temperature):
    """sum_k e_k Theta_k / sum_k e_k with e_k computed by each participant from d_tilde equals
    eqs. 19-21 from the individual vectors: the public shift c cancels."""
    rng = np.random.default_rng(0)
    k, m = 4, 8
    d_hats = [np.tanh(rng.normal(size=m)) for _ in range(k)]
    thetas = [{"w": rng.normal(size=(3, 2)), "b": rng.normal(size=5)} for _ in range(k)]
    d_tilde, r, theta = relevance_in_the_clear(d_hats, thetas, temperature=temperature)
    precision = RelevancePrecision(2 * math.sqrt(m), temperature)
    parts = [weighted_contribution(relevance_term(d, d_tilde, precision), t) for d, t in zip(d_hats, thetas)]
    sums = {name: sum(p[name] for p in parts) for name in parts[0]}
    for name, value in weights_from_sums(sums).items():
        np.testing.assert_allclose(value, theta[name], rtol=1e-12, atol=1e-14)
    assert len(set(np.round(r, 9))) == k  # distinct relevance for distinct distances
    if temperature > 0:  # eq. 20 as printed: the farthest estimate gets the most weight
        assert np.argmax(r) == np.argmax([np.linalg.norm(d - d_tilde) for d in d_hats])


def test_with_two_participants_relevance_is_uniform():
    """d_tilde is the midpoint of two estimates, so both are equally far from it: eq. 20 gives
    r = (1/2, 1/2) and FedRel aggregates as FedAvg, whatever the data."""
    rng = np.random.default_rng(1)
    _, r, _ = relevance_in_the_clear([rng.normal(size=6), rng.normal(size=6)], [{"w": np.zeros(1)}] * 2)
    np.testing.assert_allclose(r, [0.5, 0.5], rtol=1e-12)


def test_every_relevance_term_lies_in_the_stated_span():
    precision = RelevancePrecision(2 * math.sqrt(8), temperature=1.0)
    corners = [np.ones(8), -np.ones(8)]
    e_far = relevance_term(corners[0], corners[1], precision)  # the largest distance, D
    e_near = relevance_term(corners[0], corners[0], precision)
    assert e_far == pytest.approx(math.exp(precision.half_span)) and e_near == pytest.approx(math.exp(-precision.half_span))


def test_accuracy_and_macro_f1_from_a_pooled_confusion_matrix():
    true = np.array([0, 0, 1, 1, 2, 2, 2, 3])
    predicted = np.array([0, 1, 1, 1, 2, 0, 2, 0])
    pooled = confusion_matrix(true[:4], predicted[:4], 5) + confusion_matrix(true[4:], predicted[4:], 5)
    acc, f1 = accuracy_and_macro_f1(pooled + 1e-7)  # a secure sum's encoding error is rounded away
    assert acc == pytest.approx(5 / 8)
    per_class = []
    for c in range(4):  # class 4 never occurs: left out, as scikit-learn's macro average does
        tp = np.sum((true == c) & (predicted == c))
        per_class.append(2 * tp / (np.sum(true == c) + np.sum(predicted == c)))
    assert f1 == pytest.approx(np.mean(per_class))
    assert best_round([{"round": 0, "f1": 0.2}, {"round": 5, "f1": 0.7}, {"round": 9, "f1": 0.7}], "f1") == (0.7, 5)
