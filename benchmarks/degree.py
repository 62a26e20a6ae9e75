"""Analysis: the degree the default adversary needs, and what would lower it (issue 31, item 3).

Why: at n = 1,000 and above a mask round's cryptography is its floor, and that floor grows with
the sparse graph's degree k (each client does k key agreements, k mask expansions, and checks t
consistency signatures per sum). The degree comes from union bounds (protocol/sum_backends/
adversary.py), and a union bound may cost more than the event it bounds. This script prints, for
each n, the degree, threshold and max_dropped the project picks today, then the same under
alternatives, each at the same target: 2^-40 per run, i.e. 2^-(40 + ceil(log2 E)) per key epoch
over the E = max_key_epochs a run allows (a server may abort epochs whose graph it dislikes).

Notation as in adversary.py: n participants, C = Adversary.colluders(n) colluding with an active
server, D = floor(dropout_fraction * n) honest dropouts (for (R) only), a Harary ring with h = k/2
neighbours each side, t the Shamir threshold, d_max the most missing neighbours an honest client
tolerates before it refuses to reveal anything about that client. The bad events of an epoch:

* (S) some honest client u has c_u >= 2t - (k + 1) colluding neighbours (active server), so the
  server could reveal both of u's secrets;
* (C) the honest survivors split: the server learns a partial sum.

The project holds the *sum* of (S) and (C) to 2^-need (adversary.sparse_check, since this
analysis found that each had been held to it on its own: 2^-39.3 per run at n = 10,000); so do
the alternatives below. The bounds
(--help prints this text; every one is an upper bound on the probability of its event):

* today: ``MaskConfig().resolve(n, None)`` (complete up to 100 clients), or
  ``sparse_parameters`` for the sparse graph. (S): n P[Hyp(n-1, C, k) >= 2t-k-1]; (C): one gap
  of h consecutive removed clients beside an honest survivor, 2n P[Hyp(n-1, C, h) >= h - d_max].
* today, every degree: the same terms, their sum at most 2^-need, as ``sparse_at_degree``
  applies them, and the smallest even degree that holds found by trying every one
  (``sparse_parameters`` bisects, and feasibility is not monotone in k: d_max steps up with k).
* today's bounds each alone (before 2026-11-27): the same terms, each at most 2^-need.
* one gap, tighter union: (S) the least of (n - C) P[Hyp(n-1, C, k) >= m] (only honest clients
  count) and a first-passage bound over the ring's sliding windows (if some window of k + 1
  consecutive clients holds m colluders, either window 0 does or some window does while the one
  before it does not: P[W_0 >= m] + (n-1) (C/n) ((n-C)/(n-1)) P[Hyp(n-2, C-1, k) = m-1]); (C)
  the same for windows of h (one side suffices: every gap has an honest survivor just before it).
* two gaps: (C) a Harary ring falls apart only where two disjoint runs of >= h removed clients
  cut it (one run leaves a path), each just after an honest survivor u_i that sees at most d_max
  of its neighbours missing, so each run holds >= h - d_max colluders. Union over the
  n(n-k-1)/2 pairs of such places of the exact joint probability (u_1, u_2 honest, both windows
  >= h - d_max: a multivariate hypergeometric). (S) as "one gap, tighter union". Same adversary
  as today: the server chooses who "dropped" after seeing the graph.

Other graphs (question c):

* Bell et al. random Harary: the bound Google's federated-compute uses for its SecAgg+ random
  Harary graph (fcp/secagg/server/graph_parameter_finder.cc, LogProbOfDisconnectedRandomHarary;
  formula re-derived here, not copied): two gaps of h, all k clients in them among the C + D bad
  ones, union over n(n-k-1)/2 pairs: C(C+D, k)/C(n, k). It treats the dropouts as a random set
  fixed before the graph; here a deviating server picks them after seeing it, so this bound
  rests on an assumption the project does not make. (S), (R) and t as ours.
* random k-regular (floor): for a uniformly random k-regular graph a client's neighbourhood is a
  uniformly random k-set, so (S) and (R) are the ring's hypergeometrics ((S) the honest union:
  no ring windows to slide), and isolating one honest client needs k - d_max colluding
  neighbours out of k. Only sets of one client are bounded: a floor on what that graph needs,
  not a proof that it holds.
* Erdos-Renyi (floor): G(n, p), mean degree k = p(n-1) (the random graph the issue names from
  Bell et al.), one threshold for every client: binomial colluding, honest and dropped
  neighbours; (S) 2c + h_u >= 2t - 1; (R) d_max from the dropped neighbours and t <= deg - d_max
  for every client, both at 2^-20; isolation of one client needs all its honest neighbours
  missing (<= d_max). A floor, like the k-regular one.

The paper's text is not in this repository (nor in /work/shared/papers), so its theorem
constants are not quoted here; the random-Harary bound above is Google's implementation of it.

Run:
    .venv/bin/python benchmarks/degree.py                          # every table, n = 100 ... 100,000
    .venv/bin/python benchmarks/degree.py --n 1000 --tables a,b
    .venv/bin/python benchmarks/degree.py --n 200,1000 --corrupt 0.2,0.33 --dropout 0.05,0.1,0.2 --tables d

Analysis, not a test: pytest does not collect it (tests/benchmarks/test_degree.py checks it).
"""

from __future__ import annotations

import argparse
import functools
import math
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import scipy
from scipy.special import gammaln

from secure_fedgraph import ticker
from secure_fedgraph.protocol.sum_backends.adversary import (
    CORRECTNESS_BITS,
    MAX_KEY_EPOCHS,
    Adversary,
    Threat,
    _connectivity_bits_of,  # today's terms, exactly as the project computes them
    _max_dropped,
    _security_bits_of,
    epoch_security_bits,
    sparse_parameters,
)
from secure_fedgraph.protocol.sum_backends.config import GraphKind, MaskConfig

LN2 = math.log(2)
NS = (100, 200, 1_000, 10_000, 100_000)
CAPS = (1, 32, 1024)

# ---------------------------------------------------------------------------------------------
# Natural-log probabilities. Everything below is exact arithmetic on log factorials (scipy's
# gammaln), summed in log space (np.logaddexp), so tails of 2^-200 neither underflow nor round.


@functools.lru_cache(maxsize=8)
def _log_factorials(top: int) -> np.ndarray:
    """ln i! for i = 0..top (grown in powers of two, so a run needs a few)."""
    return gammaln(np.arange(top + 1, dtype=np.float64) + 1.0)


def _lf(top: int) -> np.ndarray:
    return _log_factorials(1 << max(10, (top + 1).bit_length()))


def _log_choose(a: int, b: np.ndarray) -> np.ndarray:
    """ln C(a, b), -inf where b is outside 0..a."""
    lf = _lf(a)
    b = np.asarray(b)
    ok = (b >= 0) & (b <= a)
    bb = np.where(ok, b, 0)
    return np.where(ok, lf[a] - lf[bb] - lf[a - bb], -np.inf)


def hyp_log_pmf(population: int, successes: int, draws: int, at: np.ndarray | int) -> np.ndarray:
    """ln P[X = at], X ~ Hypergeometric(population, successes, draws)."""
    at = np.asarray(at)
    if successes < 0 or successes > population or draws > population:
        return np.full(at.shape, -np.inf)
    return _log_choose(successes, at) + _log_choose(population - successes, draws - at) - _log_choose(population, np.asarray(draws))


@functools.lru_cache(maxsize=4096)
def _hyp_log_sf_all(population: int, successes: int, draws: int) -> np.ndarray:
    """ln P[X >= m] for m = 0..draws + 1 (the last -inf), summed from the top."""
    pmf = hyp_log_pmf(population, successes, draws, np.arange(draws + 1))
    tails = np.logaddexp.accumulate(pmf[::-1])[::-1]
    return np.append(tails, -np.inf)


def hyp_log_sf(population: int, successes: int, draws: int, at_least: int) -> float:
    """ln P[X >= at_least]."""
    if at_least <= 0:
        return 0.0
    if at_least > draws or successes < 0:
        return -math.inf
    return float(_hyp_log_sf_all(population, successes, draws)[at_least])


def binom_log_pmf(trials: int, p: float, at: np.ndarray) -> np.ndarray:
    """ln P[X = at], X ~ Binomial(trials, p)."""
    at = np.asarray(at)
    return _log_choose(trials, at) + at * math.log(p) + (trials - at) * math.log1p(-p)


def _lse(values: np.ndarray) -> float:
    """ln sum exp(values) (-inf for none)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return -math.inf
    top = float(values.max())
    return top if top == -math.inf else top + math.log(float(np.exp(values - top).sum()))


def bits(log_p: float) -> float:
    """-log2 of a probability given as its natural log (inf for probability 0)."""
    return -log_p / LN2


def colluders_needed(t: int, k: int, threat: Threat) -> int:
    """m: colluding neighbours that defeat threshold t at degree k (adversary.py's (S))."""
    return 2 * t - (k + 1) if threat is Threat.ACTIVE else t


# ---------------------------------------------------------------------------------------------
# The bounds: ln of an upper bound on P[(S)] for (n, C, k, t), and on P[(C)] for (n, C, k, d_max).


def sec_today(n: int, c: int, k: int, t: int, threat: Threat) -> float:
    """Today's (S): adversary._security_bits_of."""
    return -_security_bits_of(n, c, k, t, threat) * LN2


def conn_today(n: int, c: int, k: int, d_max: int) -> float:
    """Today's (C): adversary._connectivity_bits_of (two gaps, bounded by two tails)."""
    return -_connectivity_bits_of(n, c, k, d_max) * LN2


def conn_one_gap_before(n: int, c: int, k: int, d_max: int) -> float:
    """(C) before 2026-11-27: one gap of h beside some honest survivor, on either side:
    2n P[Hyp(n-1, C, h) >= h - d_max]."""
    h = k // 2
    return math.log(2 * n) + hyp_log_sf(n - 1, c, h, h - d_max)


def sec_honest_union(n: int, c: int, k: int, t: int, threat: Threat) -> float:
    """(S), union over the n - C honest clients only: (n - C) P[Hyp(n-1, C, k) >= m]. Holds for
    any graph whose neighbourhoods are uniformly random k-sets (the ring, a random k-regular graph)."""
    m = colluders_needed(t, k, threat)
    if c == 0 or m > c:
        return -math.inf
    return math.log(n - c) + hyp_log_sf(n - 1, c, k, m)


def _first_passage(n: int, c: int, window: int, m: int) -> float:
    """ln of P[W_0 >= m] + (n-1) P[W_1 >= m > W_0] for windows of ``window`` consecutive ring
    places (W_1 is W_0 moved one place on): some window of the ring holds m colluders only if
    window 0 does or one does while the one before it does not, i.e. the place entering holds a
    colluder, the place leaving an honest client, and the window - 1 shared places m - 1."""
    if m <= 0:
        return 0.0
    if c == 0 or m > c:
        return -math.inf
    first = hyp_log_sf(n, c, window, m)
    step = math.log(n - 1) + math.log(c / n) + math.log((n - c) / (n - 1)) + float(hyp_log_pmf(n - 2, c - 1, window - 1, m - 1))
    return float(np.logaddexp(first, step))


def sec_tight(n: int, c: int, k: int, t: int, threat: Threat) -> float:
    """(S) on the ring: the least of the honest union and the first-passage bound over windows
    of k + 1 (a client's closed neighbourhood; an honest u adds no colluder to its own)."""
    m = colluders_needed(t, k, threat)
    return min(sec_honest_union(n, c, k, t, threat), _first_passage(n, c, k + 1, m))


def conn_one_gap_tight(n: int, c: int, k: int, d_max: int) -> float:
    """(C) with today's one-gap event, one side only (a gap's first removed client follows an
    honest survivor), the least of (n - C) P[Hyp(n-1, C, h) >= h - d_max] and the first-passage
    bound over windows of h."""
    h = k // 2
    m = h - d_max
    honest = -math.inf if c == 0 or m > c else math.log(n - c) + hyp_log_sf(n - 1, c, h, m)
    return min(honest, _first_passage(n, c, h, m))


def conn_two_gaps(n: int, c: int, k: int, d_max: int) -> float:
    """(C), two gaps: union over the n(n-k-1)/2 unordered places (u_1, u_2) of P[u_1, u_2 honest,
    the h places after each hold >= h - d_max colluders], exact (multivariate hypergeometric):
    (n-C)(n-C-1)/(n(n-1)) sum_a P[Hyp(n-2, C, h) = a] P[Hyp(n-2-h, C-a, h) >= m]."""
    h = k // 2
    m = h - d_max
    if m <= 0:
        return 0.0
    if c - 1 < 0 or 2 * m > c or n - k - 1 <= 0:
        return -math.inf
    pairs = math.log(n) + math.log(n - k - 1) - LN2
    honest = math.log((n - c) / n) + math.log((n - c - 1) / (n - 1)) if n - c >= 2 else -math.inf
    a = np.arange(m, min(h, c - m) + 1)
    i = np.arange(m, h + 1)
    first = hyp_log_pmf(n - 2, c, h, a)
    lf = _lf(n)
    rest = n - 2 - h  # places left once the first window is placed; C - a colluders among them
    ca = (c - a)[:, None]
    ok = (i[None, :] <= ca) & (h - i[None, :] <= rest - ca)
    ii = np.where(ok, i[None, :], 0)
    second = np.where(ok, lf[ca] - lf[ii] - lf[ca - ii] + lf[rest - ca] - lf[h - ii] - lf[rest - ca - h + ii], -np.inf)
    second -= float(_log_choose(rest, np.asarray(h)))
    joint = first[:, None] + second
    return pairs + honest + _lse(joint.ravel())


def conn_bell_harary(n: int, c: int, d: int, k: int) -> float:
    """(C) as Bell et al.'s authors bound the random Harary graph with random (non-adaptive)
    dropouts: n(n-k-1)/2 pairs of gaps, all k of their clients among the C + D bad ones."""
    bad = c + d
    if k > bad:
        return -math.inf
    pairs = math.log(n) + math.log(n - k - 1) - LN2
    return pairs + float(_log_choose(bad, np.asarray(k)) - _log_choose(n, np.asarray(k)))


def conn_isolate_one(n: int, c: int, k: int, d_max: int) -> float:
    """(C) of a random k-regular graph, sets of one client only (a floor): some honest u has
    >= k - d_max colluding neighbours, so the server can drop the rest and isolate it."""
    m = k - d_max
    if c == 0 or m > c:
        return -math.inf
    return math.log(n - c) + hyp_log_sf(n - 1, c, k, m)


SecBound = Callable[[int, int, int, int, Threat], float]
ConnBound = Callable[[int, int, int, int], float]


@dataclass(frozen=True)
class Bound:
    """A pair of (S) and (C) bounds, and how they meet the target."""

    name: str
    sec: SecBound
    conn: ConnBound
    summed: bool = True  # hold P(S) + P(C) <= 2^-need (False: each on its own, as before 2026-11-27)
    assumes: str = "the project's adversary (a deviating server that picks the dropped after seeing the graph)"


TODAY_EACH = Bound("one gap, each alone (before 2026-11-27)", sec_today, conn_one_gap_before, summed=False)
TODAY_SUMMED = Bound("today's bounds, every degree", sec_today, conn_today)
ONE_GAP = Bound("one gap, tighter union", sec_tight, conn_one_gap_tight)
TWO_GAPS = Bound("two gaps", sec_tight, conn_two_gaps)
RANDOM_REGULAR = Bound("random k-regular (floor)", sec_honest_union, conn_isolate_one,
                       assumes="a uniformly random k-regular graph; only one-client cuts bounded: a floor, not a proof")
SEC_ALONE = Bound("(S) and (R) alone", sec_tight, lambda n, c, k, d_max: -math.inf,
                  assumes="no connectivity event at all: what (S) and (R) need by themselves on the ring, a floor for any cut bound")
BOUNDS = {b.name: b for b in (TODAY_EACH, TODAY_SUMMED, ONE_GAP, TWO_GAPS, RANDOM_REGULAR, SEC_ALONE)}


@dataclass(frozen=True)
class Found:
    """A degree that holds under ``bound``, with the figures that show it."""

    bound: str
    n: int
    colluders: int
    degree: int
    threshold: int
    max_dropped: int
    need_bits: int  # per key epoch
    sec_bits: float
    conn_bits: float
    total_bits: float  # -log2(P(S) + P(C))
    below_bits: float | None  # the best total bits at degree - 2 (any allowed threshold); None: no threshold allowed there

    def cell(self) -> str:
        return f"{self.degree}, {self.threshold} ({self.max_dropped})"


def _total(log_s: float, log_c: float) -> float:
    return bits(float(np.logaddexp(log_s, log_c)))


def at_degree(n: int, c: int, k: int, adversary: Adversary, bound: Bound, need: int) -> tuple[int, int, float, float] | None:
    """(t, d_max, sec bits, conn bits) for the least t at which degree k holds under ``bound``,
    or None. d_max is (R), the project's own (adversary._max_dropped), and t <= k - d_max."""
    h = k // 2
    d_max = _max_dropped(n, math.floor(adversary.dropout_fraction * n), k)
    if d_max >= h:
        return None
    log_c = bound.conn(n, c, k, d_max)
    if bits(log_c) < need:
        return None
    for t in range(h + 1, k - d_max + 1):  # t > k/2 (active) or a majority of the k + 1 (honest-but-curious): both h + 1
        log_s = bound.sec(n, c, k, t, adversary.threat)
        ok = _total(log_s, log_c) >= need if bound.summed else bits(log_s) >= need
        if ok:
            return t, d_max, bits(log_s), bits(log_c)
    return None


def best_bits(n: int, c: int, k: int, adversary: Adversary, bound: Bound) -> float | None:
    """The most total bits degree k reaches under ``bound`` over its allowed thresholds (the
    highest, t = k - d_max, since (S) only falls with t), or None where no t is allowed."""
    if k < 2:
        return None
    d_max = _max_dropped(n, math.floor(adversary.dropout_fraction * n), k)
    if d_max >= k // 2:
        return None
    t = k - d_max
    log_s, log_c = bound.sec(n, c, k, t, adversary.threat), bound.conn(n, c, k, d_max)
    return _total(log_s, log_c) if bound.summed else min(bits(log_s), bits(log_c))


def smallest_degree(n: int, adversary: Adversary, bound: Bound, *, max_key_epochs: int = MAX_KEY_EPOCHS) -> Found | None:
    """The smallest even degree below n - 1 that holds under ``bound``, trying every one from 2
    up (no bisection: feasibility is not monotone in k), or None (only the complete graph)."""
    c = adversary.colluders(n)
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    for k in range(2, n - 1, 2):
        got = at_degree(n, c, k, adversary, bound, need)
        if got is not None:
            t, d_max, s_bits, c_bits = got
            return Found(bound.name, n, c, k, t, d_max, need, s_bits, c_bits,
                         _total(-s_bits * LN2, -c_bits * LN2), best_bits(n, c, k - 2, adversary, bound))
    return None


def today(n: int, adversary: Adversary | None = None, *, max_key_epochs: int = MAX_KEY_EPOCHS, graph: GraphKind = GraphKind.AUTO) -> Found:
    """What the project picks today: ``MaskConfig(...).resolve(n, None)``, with its bits by
    today's terms (the complete graph: inf)."""
    adversary = adversary or Adversary()
    plan = MaskConfig(adversary=adversary, max_key_epochs=max_key_epochs, graph=graph).resolve(n, None)
    c = adversary.colluders(n)
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    if plan.graph is GraphKind.COMPLETE:
        return Found("today", n, c, plan.degree, plan.threshold, plan.max_dropped, need, math.inf, math.inf, math.inf, None)
    s = _security_bits_of(n, c, plan.degree, plan.threshold, adversary.threat)
    cb = _connectivity_bits_of(n, c, plan.degree, plan.max_dropped)
    below = best_bits(n, c, plan.degree - 2, adversary, TODAY_SUMMED)
    return Found("today", n, c, plan.degree, plan.threshold, plan.max_dropped, need, s, cb, _total(-s * LN2, -cb * LN2), below)


def today_sparse(n: int, adversary: Adversary | None = None, *, max_key_epochs: int = MAX_KEY_EPOCHS) -> Found | None:
    """``sparse_parameters`` (the sparse graph even where AUTO takes the complete one), or None."""
    adversary = adversary or Adversary()
    c = adversary.colluders(n)
    found = sparse_parameters(n, c, adversary, max_key_epochs=max_key_epochs)
    if found is None:
        return None
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    s = _security_bits_of(n, c, found.degree, found.threshold, adversary.threat)
    cb = _connectivity_bits_of(n, c, found.degree, found.max_dropped)
    return Found("today, sparse_parameters", n, c, found.degree, found.threshold, found.max_dropped, need, s, cb,
                 _total(-s * LN2, -cb * LN2), best_bits(n, c, found.degree - 2, adversary, TODAY_SUMMED))


def bell_harary(n: int, adversary: Adversary | None = None, *, max_key_epochs: int = MAX_KEY_EPOCHS) -> Found | None:
    """The smallest degree under Bell et al.'s random-Harary connectivity bound (dropouts random,
    fixed before the graph), with our tighter (S), (R) and t."""
    adversary = adversary or Adversary()
    d = math.floor(adversary.dropout_fraction * n)
    bound = Bound("Bell et al. random Harary", sec_tight, lambda n_, c_, k_, _d: conn_bell_harary(n_, c_, d, k_),
                  assumes="dropouts random and fixed before the graph (not a server that picks them)")
    return smallest_degree(n, adversary, bound, max_key_epochs=max_key_epochs)


# ---------------------------------------------------------------------------------------------
# Erdos-Renyi G(n, p): a floor, searched over the mean degree.

_TRUNCATE = 400 * LN2  # binomial terms more than 2^-400 below a pmf's largest are summed into one bound


def _binom_kept(trials: int, p: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(values, ln pmf) of Binomial(trials, p) where the pmf is within 2^-400 of its top, and ln
    of the mass left out (counted in full wherever it is used, so truncation only adds)."""
    mode = int((trials + 1) * p)
    width = int(60 * math.sqrt(trials * p + 1)) + 200
    values = np.arange(max(0, mode - width), min(trials, mode + width) + 1)
    pmf = binom_log_pmf(trials, p, values)
    keep = pmf >= pmf.max() - _TRUNCATE
    values, pmf = values[keep], pmf[keep]
    left = []
    if values[0] > 0:
        left.append(math.log(values[0]) + float(binom_log_pmf(trials, p, np.asarray(values[0] - 1))))  # the pmf rises up to the mode
    if values[-1] < trials:
        left.append(math.log(trials - values[-1]) + float(binom_log_pmf(trials, p, np.asarray(values[-1] + 1))))
    return values, pmf, _lse(np.array(left)) if left else -math.inf


def _binom_log_cdf_all(trials: int, p: float, upto: int) -> np.ndarray:
    """ln P[Binomial(trials, p) <= x] for x = 0..upto (from the pmf, exact to float rounding)."""
    return np.logaddexp.accumulate(binom_log_pmf(trials, p, np.arange(min(upto, trials) + 1)))


def _binom_log_sf(trials: int, p: float, at_least: int) -> float:
    """ln P[Binomial(trials, p) >= at_least] (summed over the kept terms, plus the mass left out)."""
    if at_least <= 0:
        return 0.0
    if at_least > trials:
        return -math.inf
    values, pmf, left = _binom_kept(trials, p)
    return float(np.logaddexp(_lse(pmf[values >= at_least]), left))


@dataclass(frozen=True)
class ErFound:
    n: int
    mean_degree: int
    threshold: int
    max_dropped: int
    total_bits: float
    below_bits: float | None

    def cell(self) -> str:
        return f"{self.mean_degree}, {self.threshold} ({self.max_dropped})"


def er_at_mean_degree(n: int, mean: int, adversary: Adversary, need: int) -> tuple[int, int, float] | None:
    """(t, d_max, total bits) for G(n, mean/(n-1)) under the floor bounds, the least t, or None."""
    c = adversary.colluders(n)
    d = math.floor(adversary.dropout_fraction * n)
    p = mean / (n - 1)
    eta = -CORRECTNESS_BITS * LN2 - math.log(n)
    if d:
        values, pmf, left = _binom_kept(d, p)
        tails = np.logaddexp(np.logaddexp.accumulate(pmf[::-1])[::-1], left)  # ln P[dropped >= values[j]], plus the mass left out
        over = np.nonzero(tails <= eta)[0]
        d_max = int(values[over[0]]) - 1 if over.size else None  # P[dropped >= d_max + 1] <= 2^-20 / n
    else:
        d_max = 0
    if d_max is None:
        return None
    honest_n = n - 1 - c  # an honest client's honest neighbours ~ Binomial(n-1-C, p), colluding ~ Binomial(C, p)
    log_c = math.log(n - c) + float(_binom_log_cdf_all(honest_n, p, d_max)[-1])  # isolate one honest client
    if bits(log_c) < need:
        return None
    # t_max: every client keeps t + d_max neighbours (deg ~ Binomial(n-1, p)) but w.p. 2^-20
    cdf = _binom_log_cdf_all(n - 1, p, 4 * mean + 10 + d_max)
    fine = np.nonzero(cdf <= eta)[0]  # x with P[deg <= x] <= 2^-20 / n; t may be x + 1 - d_max
    if fine.size == 0 or fine[-1] + 1 - d_max < 2:
        return None
    t_max = int(fine[-1]) + 1 - d_max
    cv, cpmf, cleft = _binom_kept(c, p)
    hv, hpmf, hleft = _binom_kept(honest_n, p)
    h_tail = np.logaddexp.accumulate(hpmf[::-1])[::-1]  # ln P[h >= hv[j]] over the kept terms
    def total_at(t: int) -> float:
        if adversary.threat is Threat.ACTIVE:  # 2c + h >= 2t - 1 (g = deg + 1)
            short = 2 * t - 1 - 2 * cv  # h must reach this
            idx = np.searchsorted(hv, short)  # first kept h >= it
            tail = np.where(idx < hv.size, h_tail[np.minimum(idx, hv.size - 1)], -np.inf)
            tail = np.where(short <= 0, 0.0, tail)
            log_z = float(np.logaddexp(_lse(cpmf + np.logaddexp(tail, hleft)), cleft))
        else:  # c >= t
            log_z = _binom_log_sf(c, p, t)
        return _total(math.log(n - c) + log_z, log_c)

    if total_at(t_max) < need:  # (S) only falls with t: the highest allowed t is the best
        return None
    lo, hi = 2, t_max  # the least t that holds: (S) is monotone in t, so bisect
    while lo < hi:
        mid = (lo + hi) // 2
        if total_at(mid) >= need:
            hi = mid
        else:
            lo = mid + 1
    return lo, d_max, total_at(lo)
    return None


def er_smallest(n: int, adversary: Adversary | None = None, *, max_key_epochs: int = MAX_KEY_EPOCHS) -> ErFound | None:
    """The least even mean degree at which G(n, p) meets the floor bounds, or None below n - 1."""
    adversary = adversary or Adversary()
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    for mean in range(2, n - 1, 2):
        got = er_at_mean_degree(n, mean, adversary, need)
        if got is not None:
            below = er_at_mean_degree(n, mean - 2, adversary, 0) if mean > 2 else None
            return ErFound(n, mean, got[0], got[1], got[2], below[2] if below else None)
    return None


# ---------------------------------------------------------------------------------------------
# Tables


def _fmt_bits(x: float | None) -> str:
    if x is None:
        return "no t"
    return "inf" if math.isinf(x) else f"{x:.1f}"


def _cell(found: Found | ErFound | None) -> str:
    if found is None:
        return "complete"
    if isinstance(found, Found) and found.degree >= found.n - 1:
        return f"complete: {found.degree}, {found.threshold}"
    return found.cell()


class Progress:
    """What the script is computing, for a line on stderr every 5 s (ticker.every)."""

    def __init__(self) -> None:
        self.now = ""
        self.started = time.monotonic()

    def line(self) -> str:
        return f"degree.py: {self.now} ({time.monotonic() - self.started:.0f} s)" if self.now else ""


def table_a(ns: Sequence[int], progress: Progress) -> list[Found | None]:
    """(a) today against tighter unions, default adversary and cap."""
    print("## (a) The union bound: today against tighter bounds (default adversary, 2^-40 per run over 1,024 key epochs: "
          "2^-50 per epoch)\n")
    print("Cells: degree, threshold (max_dropped); every one holds by its bound. Bits: -log2 of the bound per key epoch; "
          "total = -log2(P(S) + P(C)); k - 2: the most bits two fewer neighbours reach at any allowed threshold (the total, "
          "or for today's bounds, which hold each term on its own, the lesser term), short of 50.\n")
    print("| n | C | bound | k, t (d_max) | (S) bits | (C) bits | total bits | k - 2: best bits |")
    print("|---|---|---|---|---|---|---|---|")
    out: list[Found | None] = []
    for n in ns:
        rows: list[tuple[str, Found | None]] = [("today: MaskConfig().resolve", today(n))]
        progress.now = f"(a) n={n:,}"
        rows.append(("today: sparse_parameters", today_sparse(n)))
        for bound in (TODAY_EACH, TODAY_SUMMED, ONE_GAP, TWO_GAPS):
            progress.now = f"(a) n={n:,}, {bound.name}"
            rows.append((bound.name, smallest_degree(n, Adversary(), bound)))
        for label, f in rows:
            out.append(f)
            c = Adversary().colluders(n)
            if f is None:
                print(f"| {n:,} | {c:,} | {label} | complete | | | | |")
            elif f.degree >= n - 1:
                print(f"| {n:,} | {c:,} | {label} | complete: {f.degree}, {f.threshold} | | | | |")
            else:
                print(f"| {n:,} | {c:,} | {label} | {f.cell()} | {_fmt_bits(f.sec_bits)} | {_fmt_bits(f.conn_bits)} | "
                      f"{_fmt_bits(f.total_bits)} | {_fmt_bits(f.below_bits)} |")
    print()
    return out


def table_b(ns: Sequence[int], caps: Sequence[int], progress: Progress) -> None:
    """(b) the key-epoch cap: caps of 1, 32, 1024 (0, 5, 10 extra bits per epoch)."""
    print("## (b) The key-epoch cap (default adversary; per-epoch target 2^-(40 + ceil(log2 cap)))\n")
    print("| n | cap (extra bits) | today: resolve | today's bounds, every degree | two gaps |")
    print("|---|---|---|---|---|")
    for n in ns:
        for cap in caps:
            progress.now = f"(b) n={n:,}, cap {cap}"
            extra = (cap - 1).bit_length()
            print(f"| {n:,} | {cap:,} ({extra}) | {_cell(today(n, max_key_epochs=cap))} | "
                  f"{_cell(smallest_degree(n, Adversary(), TODAY_SUMMED, max_key_epochs=cap))} | "
                  f"{_cell(smallest_degree(n, Adversary(), TWO_GAPS, max_key_epochs=cap))} |")
    print()


def table_c(ns: Sequence[int], progress: Progress) -> None:
    """(c) another graph."""
    print("## (c) Another graph (default adversary and cap; floors bound one-client cuts only)\n")
    print("| n | Harary, today: sparse_parameters | Harary, two gaps | Bell et al. random Harary (dropouts random, not chosen) "
          "| random k-regular (floor) | (S) and (R) alone, ring | Erdos-Renyi, one t, mean degree (floor) |")
    print("|---|---|---|---|---|---|---|")
    for n in ns:
        progress.now = f"(c) n={n:,}"
        cells = [_cell(today_sparse(n)), _cell(smallest_degree(n, Adversary(), TWO_GAPS)), _cell(bell_harary(n)),
                 _cell(smallest_degree(n, Adversary(), RANDOM_REGULAR)), _cell(smallest_degree(n, Adversary(), SEC_ALONE))]
        progress.now = f"(c) n={n:,}, Erdos-Renyi"
        cells.append(_cell(er_smallest(n)))
        print(f"| {n:,} | " + " | ".join(cells) + " |")
    print()


def table_d(ns: Sequence[int], corrupt: Sequence[float], dropout: Sequence[float], progress: Progress) -> None:
    """(d) what the default fractions cost."""
    print("## (d) Sensitivity to the corrupt and dropout fractions (cap 1,024; cells: degree, threshold (max_dropped))\n")
    print("| corrupt | dropout | " + " | ".join(f"n={n:,}: today (sparse) / two gaps" for n in ns) + " |")
    print("|---|---|" + "---|" * len(ns))
    for cf in corrupt:
        for df in dropout:
            adversary = Adversary(corrupt_fraction=cf, dropout_fraction=df)
            cells = []
            for n in ns:
                progress.now = f"(d) corrupt {cf:g}, dropout {df:g}, n={n:,}"
                cells.append(f"{_cell(today_sparse(n, adversary))} / {_cell(smallest_degree(n, adversary, TWO_GAPS))}")
            print(f"| {cf:g} | {df:g} | " + " | ".join(cells) + " |")
    print()


def _ints(text: str) -> list[int]:
    return [int(float(x.replace("_", ""))) for x in text.split(",") if x]


def _floats(text: str) -> list[float]:
    return [1 / 3 if x.strip() in ("0.33", "1/3") else float(x) for x in text.split(",") if x]


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """--help: the module docstring as written (it names every bound), and each option's default."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=_HelpFormatter)
    p.add_argument("--n", type=_ints, default=list(NS), help="comma list of participant counts")
    p.add_argument("--tables", default="a,b,c,d", help="which questions: a (union bound), b (key-epoch cap), c (graph), d (fractions)")
    p.add_argument("--caps", type=_ints, default=list(CAPS), help="(b): key-epoch caps (max_key_epochs)")
    p.add_argument("--corrupt", type=_floats, default=[0.2, 1 / 3], help="(d): corrupt fractions (0.33 means 1/3, the default)")
    p.add_argument("--dropout", type=_floats, default=[0.05, 0.1, 0.2], help="(d): dropout fractions")
    args = p.parse_args(argv)
    tables = set(args.tables.split(","))
    progress = Progress()
    print(f"# degree.py {datetime.now(timezone.utc).isoformat(timespec='seconds')}: the degree the default adversary "
          f"({Adversary().describe()}) needs, and alternatives (Python {platform.python_version()}, numpy {np.__version__}, "
          f"scipy {scipy.__version__})\n")
    with ticker.every(5.0, lambda s: print(s, file=sys.stderr, flush=True), progress.line):
        if "a" in tables:
            table_a(args.n, progress)
        if "b" in tables:
            table_b(args.n, args.caps, progress)
        if "c" in tables:
            table_c(args.n, progress)
        if "d" in tables:
            table_d(args.n, args.corrupt, args.dropout, progress)
    print(f"# computed in {time.monotonic() - progress.started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
