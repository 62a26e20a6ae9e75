"""The bounds behind thresholds, degrees and survivor floors (protocol/sum_backends/adversary.py)."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.sum_backends.config import MaskConfig
from secure_fedgraph.protocol.sum_backends.adversary import (
    MAX_KEY_EPOCHS,
    Adversary,
    Threat,
    complete_threshold,
    _connectivity_bits_of,
    _security_bits_of,
    epoch_security_bits,
    log2_tail,
    sparse_at_degree,
    sparse_check,
    sparse_parameters,
    survivor_floor,
)


@pytest.mark.parametrize("population,successes,draws,at_least", [(206, 68, 138, 60), (999, 333, 310, 120), (29, 0, 4, 1), (50, 10, 6, 0)])
def test_the_hypergeometric_tail_is_scipys(population, successes, draws, at_least):
    expected = stats.hypergeom(population, successes, draws).sf(at_least - 1)
    got = 2.0 ** log2_tail(population, successes, draws, at_least)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_every_tail_of_one_distribution_is_scipys():
    """The searches read many tails of one distribution (all computed in one pass): each must
    be scipy's, the deep ones included."""
    population, successes, draws = 999, 333, 310
    for at_least in range(0, draws + 2):
        expected = stats.hypergeom(population, successes, draws).sf(at_least - 1)
        got = log2_tail(population, successes, draws, at_least)
        if expected > 1e-290:
            assert 2.0**got == pytest.approx(expected, rel=1e-9), at_least
        else:
            assert got < -960 or math.isinf(got), at_least


def test_the_plan_for_a_hundred_thousand_clients_is_found_quickly():
    """The degree search at n = 100,000 took 77 s when each tail was summed on its own; it is
    the same plan now, and cheap enough to test."""
    plan = MaskConfig().resolve(100_000, None)
    assert (plan.degree, plan.threshold, plan.max_dropped) == (412, 322, 87)


def test_the_threshold_and_connectivity_failures_together_meet_the_target():
    """Either (S) or (C) leaks a partial sum, so a plan holds their summed probability to the
    target: one that meets 2^-50 per key epoch with each alone but not with both (n = 10,000,
    degree 272, threshold 218, d_max 52: 2^-49.2) is refused, as the defaults once were (each
    alone let a run fail with up to 2^-39.3 at n = 10,000; benchmarks/degree.py)."""
    from secure_fedgraph.protocol.sum_backends import adversary as adv

    config = MaskConfig()
    n, need = 10_000, adv.epoch_security_bits(config.adversary.security_bits, config.max_key_epochs)
    colluders = config.adversary.colluders(n)
    plan = dict(degree=272, threshold=218, max_dropped=52)
    threshold_bits = adv._security_bits_of(n, colluders, plan["degree"], plan["threshold"], config.adversary.threat)
    connectivity_bits = adv._connectivity_bits_of(n, colluders, plan["degree"], plan["max_dropped"])
    assert threshold_bits >= need and connectivity_bits >= need  # each alone: what the old rule checked
    assert adv._either_bits(threshold_bits, connectivity_bits) < need
    why = adv.sparse_check(n, colluders=colluders, **plan, adversary=config.adversary, max_key_epochs=config.max_key_epochs)
    assert why is not None and "2^-49." in why
    assert adv.sparse_check(n, colluders=colluders, degree=272, threshold=221, max_dropped=52, adversary=config.adversary,
                            max_key_epochs=config.max_key_epochs) is None  # three more: both together below 2^-50


@pytest.mark.parametrize("n,colluders,threat,t", [(10, 3, Threat.ACTIVE, 7), (10, 2, Threat.ACTIVE, 7), (4, 1, Threat.ACTIVE, 3),
                                                  (3, 1, Threat.ACTIVE, 3), (10, 3, Threat.HONEST_BUT_CURIOUS, 6), (10, 6, Threat.HONEST_BUT_CURIOUS, 7)])
def test_complete_graph_thresholds(n, colluders, threat, t):
    """Active: 2t > n + colluders (Bonawitz et al.'s bound); honest-but-curious: a majority, and
    more than the colluders."""
    assert complete_threshold(n, colluders, threat) == t
    if threat is Threat.ACTIVE:
        assert 2 * t > n + colluders >= 2 * (t - 1) - 1


def test_survivor_floor_is_a_majority_of_the_run_and_two_above_the_colluders():
    assert survivor_floor(10, 0.5, 3) == 6
    assert survivor_floor(3, 0.5, 1) == 3  # two honest inputs in every sum
    assert survivor_floor(207, 0.5, 69) == 104
    assert survivor_floor(207, 0.0, 0) == 2


@pytest.mark.parametrize("n", [150, 300, 1000])
def test_the_chosen_sparse_graph_holds_and_is_the_cheapest(n):
    adversary = Adversary()
    colluders = adversary.colluders(n)
    found = sparse_parameters(n, colluders, adversary, max_key_epochs=MAX_KEY_EPOCHS)
    assert found is not None and found.degree < n - 1
    assert sparse_check(n, colluders=colluders, degree=found.degree, threshold=found.threshold, max_dropped=found.max_dropped,
                        adversary=adversary, max_key_epochs=MAX_KEY_EPOCHS) is None
    assert sparse_at_degree(n, colluders, found.degree - 2, adversary, max_key_epochs=MAX_KEY_EPOCHS) is None
    assert found.threshold <= found.degree - found.max_dropped  # a dropped client's secret stays recoverable
    lower = sparse_check(n, colluders=colluders, degree=found.degree, threshold=found.threshold - 1, max_dropped=found.max_dropped,
                         adversary=adversary, max_key_epochs=MAX_KEY_EPOCHS)
    assert lower is not None and "colluding neighbours" in lower


def test_the_degree_grows_slowly_with_n_and_with_the_corrupt_fraction():
    degrees = [sparse_parameters(n, Adversary().colluders(n), Adversary(), max_key_epochs=MAX_KEY_EPOCHS).degree for n in (300, 1000, 10_000)]
    assert degrees == sorted(degrees) and degrees[-1] < 0.05 * 10_000  # logarithmic-ish, far below n
    weaker = Adversary(corrupt_fraction=0.05, dropout_fraction=0.05)
    assert sparse_parameters(1000, weaker.colluders(1000), weaker, max_key_epochs=MAX_KEY_EPOCHS).degree < degrees[1] / 2


def test_small_runs_take_the_complete_graph():
    """Up to complete_up_to (100) clients the complete graph; where a sparse one exists at all
    for ten clients it is a near-complete one (each misses one other)."""
    assert MaskConfig().resolve(10, None).degree == 9
    assert sparse_parameters(10, 3, Adversary(), max_key_epochs=MAX_KEY_EPOCHS).degree == 8
    assert sparse_parameters(10, 6, Adversary(corrupt_fraction=0.6), max_key_epochs=MAX_KEY_EPOCHS) is None


@pytest.mark.parametrize("kwargs,match", [({"corrupt_fraction": 1.0}, "corrupt_fraction"), ({"dropout_fraction": -0.1}, "dropout_fraction"),
                                          ({"corrupt_fraction": 0.6, "dropout_fraction": 0.5}, "below 1"),
                                          ({"security_bits": 0}, "security_bits"), ({"threat": "active"}, "threat")])
def test_adversary_validation_names_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        Adversary(**kwargs)


def test_sparse_check_explains_what_fails():
    adversary = Adversary()
    assert "not a sparse graph" in sparse_check(100, colluders=33, degree=5, threshold=3, max_dropped=0, adversary=adversary,
                                                max_key_epochs=MAX_KEY_EPOCHS)
    why = sparse_check(1000, colluders=333, degree=342, threshold=261, max_dropped=120, adversary=adversary, max_key_epochs=MAX_KEY_EPOCHS)
    assert why is not None and "honest survivors split" in why  # more dropped neighbours than (C) allows
    assert "above 2^-50 per key epoch (2^-40 over a run of 1024)" in why
    assert math.isinf(log2_tail(10, 0, 3, 1))


def test_colluders_count_at_least_one_whenever_the_fraction_is_above_zero():
    """B2: rounding down alone counts no colluder in a run of two at a third, so a sum of the
    two would pass as holding two honest inputs."""
    assert [Adversary().colluders(n) for n in (2, 3, 5, 6, 10)] == [1, 1, 1, 2, 3]
    assert Adversary(corrupt_fraction=0.05, dropout_fraction=0.05).colluders(10) == 1
    assert Adversary(corrupt_fraction=0.0).colluders(1000) == 0
    assert Adversary().smallest_run() == 3 and Adversary(corrupt_fraction=0.0).smallest_run() == 2


def test_the_sparse_graph_holds_for_the_union_over_a_runs_key_epochs():
    """C2: a server may abort any key epoch whose graph it dislikes and start another, up to the
    run's cap. The chosen parameters' per-epoch failure bounds (union over the clients, for (S)
    and for (C)) are at most 2^-(bits + log2 cap), so over every epoch the cap allows at most
    2^-bits; checked against scipy's hypergeometric tails. The per-epoch parameters of before
    (40 bits per epoch) fail the run's check."""
    adversary = Adversary()
    assert epoch_security_bits(40, 1024) == 50 and epoch_security_bits(40, 1025) == 51 and epoch_security_bits(40, 1) == 40
    assert MAX_KEY_EPOCHS >= 200 * 5  # a 200-round run with all 4 default re-keys in every round fits
    for n in (200, 1000):
        c = adversary.colluders(n)
        p = sparse_parameters(n, c, adversary, max_key_epochs=MAX_KEY_EPOCHS)
        half, m = p.degree // 2, p.degree // 2 - p.max_dropped
        two_windows = sum(stats.hypergeom(n - 2, c, half).pmf(a) * stats.hypergeom(n - 2 - half, c - a, half).sf(m - 1) for a in range(m, half + 1))
        for failure in (n * stats.hypergeom(n - 1, c, p.degree).sf(2 * p.threshold - (p.degree + 1) - 1),  # (S), union over clients
                        n * (n - p.degree - 1) / 2 * (n - c) * (n - c - 1) / (n * (n - 1)) * two_windows):  # (C), over pairs of places
            assert failure <= 2.0 ** -(40 + math.log2(MAX_KEY_EPOCHS))
            assert MAX_KEY_EPOCHS * failure <= 2.0**-40  # the union over every key epoch of the run
        assert min(_security_bits_of(n, c, p.degree, p.threshold, adversary.threat), _connectivity_bits_of(n, c, p.degree, p.max_dropped)) >= 50
        per_epoch = sparse_parameters(n, c, adversary, max_key_epochs=1)
        assert per_epoch.degree < p.degree
        why = sparse_check(n, colluders=c, degree=per_epoch.degree, threshold=per_epoch.threshold, max_dropped=per_epoch.max_dropped,
                           adversary=adversary, max_key_epochs=MAX_KEY_EPOCHS)
        assert why is not None and "over a run of 1024" in why
    with pytest.raises(ConfigError, match="max_key_epochs"):
        epoch_security_bits(40, 0)


def _ring_connected(n: int, half: int, removed: set[int]) -> bool:
    alive = [i for i in range(n) if i not in removed]
    seen, stack = {alive[0]}, [alive[0]]
    while stack:
        u = stack.pop()
        for d in range(1, half + 1):
            for v in ((u + d) % n, (u - d) % n):
                if v not in removed and v not in seen:
                    seen.add(v)
                    stack.append(v)
    return len(seen) == len(alive)


def _long_runs(n: int, half: int, removed: set[int]) -> int:
    start = next(i for i in range(n) if i not in removed)
    runs, current = 0, 0
    for j in range(1, n + 1):
        if (start + j) % n in removed:
            current += 1
        else:
            runs, current = runs + (current >= half), 0
    return runs


def test_a_harary_ring_falls_apart_exactly_where_two_runs_of_half_its_degree_cut_it():
    """What (C) counts: removing clients from H(n, k) disconnects the rest if and only if two
    disjoint runs of at least k/2 consecutive removed clients cut the ring (one run leaves a
    path; a shorter run is jumped over). Checked against the graph itself on random removals."""
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randint(8, 48)
        half = rng.randint(1, n // 3)
        removed = {i for i in range(n) if rng.random() < rng.random()}
        if len(removed) >= n - 1:
            continue
        assert _ring_connected(n, half, removed) == (_long_runs(n, half, removed) < 2), (n, half, sorted(removed))


@pytest.mark.parametrize("n,degree,max_dropped", [(200, 104, 20), (1000, 240, 50), (10_000, 360, 76)])
def test_the_connectivity_bound_is_above_the_exact_two_window_probability(n, degree, max_dropped):
    """(C)'s two tails bound the exact union term (a sum over the first window's colluders, by
    scipy) from above, so the bits it grants are never more than the event's."""
    c, half = Adversary().colluders(n), degree // 2
    m = half - max_dropped
    first = stats.hypergeom(n - 2, c, half)
    exact = sum(first.pmf(a) * stats.hypergeom(n - 2 - half, c - a, half).sf(m - 1) for a in range(m, half + 1))
    exact *= n * (n - degree - 1) / 2 * (n - c) * (n - c - 1) / (n * (n - 1))
    bits = _connectivity_bits_of(n, c, degree, max_dropped)
    assert 2.0 ** -bits >= exact * (1 - 1e-9)
    assert bits > -math.log2(exact) - 0.3  # and not much looser
