"""The adversary a run assumes, and the mask parameters that hold against it: pure functions.

Both sides use this module: the server to choose a round's graph, degree, threshold and
survivor floor (:class:`~.config.MaskConfig`), and every client to check what the server
announces against its own policy (:class:`~.policy.ClientPolicy`). Nothing here keeps state.

Notation: n participants in a key epoch, out of n_run clients that started the run; C of
them collude with the server (C = floor(corrupt_fraction * n_run), and at least one whenever
corrupt_fraction > 0: colluders do not leave when honest clients drop, so C is counted on the
run, not on the epoch, and no run is so small that it counts none); each client has k
neighbours (its group is itself and them, g = k + 1 members); t is the Shamir threshold.

Complete graph (Bonawitz et al., CCS 2017). Against a server that deviates from the protocol
(the "active" model, their Theorem A.3) the consistency check only works if 2t > g + C: honest
group members sign one survivor set per sum, so to reveal a client's self-mask key (t signers
who saw it survive) and its mask key (t shares from holders who saw it drop) the server would
need 2t - C honest signers, more than the g - C there are. An honest-but-curious server does
not equivocate, so t > C (and, as before, a majority) suffices. Survivors must be at least
C + 2, so a released sum always holds two honest inputs: a run of fewer than C + 2 clients
(two, with one colluder) cannot release any sum, and is refused.

Sparse graph (Bell et al., CCS 2020, SecAgg+): a random Harary graph H(n, k). A client's
colluding neighbours c_u are hypergeometric (n - 1 others, C colluders, k draws). Each key
epoch draws a fresh graph, and a deviating server may abort any epoch whose graph it does not
like and start another (grinding, up to the E = max_key_epochs key epochs a run allows), so the
bounds hold per run: with security parameter sigma, every epoch's failure probability is at
most 2^-(sigma + ceil(log2 E)), and the union over the E epochs at most 2^-sigma
(:func:`epoch_security_bits`). Per epoch (union bound over clients):

* (S) no honest client has c_u >= 2t - g (active; c_u >= t honest-but-curious);
* (C) the honest survivors stay connected, so the server learns no partial sum. A run of fewer
  than k/2 consecutive removed clients (colluders, or missing from the survivors) is jumped over
  by the ring's edges, and one longer run leaves a path: the ring falls apart only where two
  disjoint runs of at least k/2 cut it, each just after an honest survivor u_i. Every honest
  client refuses to reveal anything about u when more than d_max of u's neighbours are missing
  from the survivors (the server chooses who "dropped"), so each run holds at least k/2 - d_max
  colluders among the k/2 clients after u_i. The bound is the union over the n(n - k - 1)/2
  pairs of places of the exact probability that both u_i are honest and both windows hold that
  many colluders (a multivariate hypergeometric). Before 2026-11-27 (C) counted one run, which
  needed a quarter to a third more neighbours (benchmarks/degree.py, "two gaps");
* (R) d_max is large enough that honest dropouts at dropout_fraction exceed it with
  probability at most 2^-CORRECTNESS_BITS, and t <= k - d_max so a dropped client's secret
  stays recoverable.

:func:`sparse_parameters` picks the smallest even k meeting all three, and the smallest t
meeting (S). Where no k < n - 1 does, the graph is complete.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass

from secure_fedgraph.errors import ConfigError

CORRECTNESS_BITS = 20  # (R): how rarely honest dropouts alone may exceed d_max in some neighbourhood

# Key epochs one run may hold (MaskConfig.max_key_epochs, ClientPolicy.max_key_epochs; one default
# for both sides). The sparse graph's bounds are taken over all of them (epoch_security_bits), so
# each doubling costs one security bit per epoch. 1024 fits a 200-round run with one key epoch per
# round and every round using all of its default 4 re-keys (200 x 5 = 1000), for 10 bits.
MAX_KEY_EPOCHS = 1024


def epoch_security_bits(security_bits: int, max_key_epochs: int) -> int:
    """The security bits each key epoch's sparse graph must have so that the union over a run's
    ``max_key_epochs`` epochs fails with probability at most 2^-security_bits: sigma + ceil(log2 E).
    A server that aborts every epoch whose graph it dislikes and starts another gets at most E
    tries (clients count them and refuse the next), so grinding gains it nothing beyond 2^-sigma."""
    if isinstance(max_key_epochs, bool) or not isinstance(max_key_epochs, int) or max_key_epochs < 1:
        raise ConfigError(f"max_key_epochs must be an int >= 1, got {max_key_epochs!r}")
    return security_bits + (max_key_epochs - 1).bit_length()


class Threat(enum.Enum):
    """How far the server may stray from the protocol (threat_model.md, "Adversaries")."""

    ACTIVE = "active"  # a deviating server, colluding with up to C clients: 2t > g + C
    HONEST_BUT_CURIOUS = "honest-but-curious"  # follows the protocol; weaker thresholds, explicit opt-in


def majority(n: int) -> int:
    return n // 2 + 1


@dataclass(frozen=True)
class Adversary:
    """What a party assumes about the adversary.

    Attributes:
        corrupt_fraction: the fraction of the run's clients that may collude with the server.
        dropout_fraction: the fraction of clients expected to drop out (a liveness target:
            more dropouts cost re-keys or abandoned sums, never secrets).
        security_bits: sigma; the sparse graph's guarantees fail with probability <= 2^-sigma.
        threat: ACTIVE (default) or HONEST_BUT_CURIOUS (cheaper, only when chosen explicitly).
    """

    corrupt_fraction: float = 1 / 3
    dropout_fraction: float = 0.1
    security_bits: int = 40
    threat: Threat = Threat.ACTIVE

    def __post_init__(self) -> None:
        for name in ("corrupt_fraction", "dropout_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise ConfigError(f"{name} must be a number in [0, 1), got {value!r}")
        if self.corrupt_fraction + self.dropout_fraction >= 1:
            raise ConfigError(f"corrupt_fraction + dropout_fraction must be below 1, got {self.corrupt_fraction} + {self.dropout_fraction}")
        if isinstance(self.security_bits, bool) or not isinstance(self.security_bits, int) or not 1 <= self.security_bits <= 128:
            raise ConfigError(f"security_bits must be an int in [1, 128], got {self.security_bits!r}")
        if not isinstance(self.threat, Threat):
            raise ConfigError(f"threat must be a Threat, got {self.threat!r}")

    def colluders(self, n_run: int) -> int:
        """C: how many of the run's clients may collude with the server: the fraction rounded
        down, and at least one whenever the fraction is above 0. Rounding alone would count no
        colluder in a run of two at a third, so its survivor floor would be 2 and the server,
        with the other client on its side, would learn the first's input from the sum."""
        if self.corrupt_fraction == 0:
            return 0
        return max(1, math.floor(self.corrupt_fraction * n_run))

    def smallest_run(self) -> int:
        """The fewest clients a run needs for a sum to hold two honest inputs (C + 2 <= n)."""
        n = 2
        while self.colluders(n) + 2 > n:
            n += 1
        return n

    def describe(self) -> str:
        return (f"{self.threat.value} server with up to {self.corrupt_fraction:.3g} of the clients colluding, "
                f"{self.dropout_fraction:.3g} dropping, {self.security_bits}-bit security")


def survivor_floor(n_run: int, fraction: float, colluders: int) -> int:
    """The fewest contributors a released sum may have: more than ``fraction`` of the run's
    clients, and always two more than the colluders (so two honest inputs are in every sum)."""
    return min(n_run, max(2, math.floor(fraction * n_run) + 1, colluders + 2))


def complete_threshold(n: int, colluders: int, threat: Threat) -> int:
    """t for the complete graph over n participants: 2t > n + C (active), or a majority and
    t > C (honest-but-curious). May equal n: then no secret is recoverable from shares."""
    c = min(colluders, n - 1)
    t = (n + c) // 2 + 1 if threat is Threat.ACTIVE else max(majority(n), c + 1)
    return min(t, n)


@functools.lru_cache(maxsize=4096)
def _log_pmf(population: int, successes: int, draws: int) -> tuple[float, ...]:
    """Natural-log hypergeometric pmf over 0..draws (-inf where impossible)."""
    def log_comb(a: int, b: int) -> float:
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    total = log_comb(population, draws)
    out = []
    for i in range(draws + 1):
        possible = i <= successes and draws - i <= population - successes
        out.append(log_comb(successes, i) + log_comb(population - successes, draws - i) - total if possible else -math.inf)
    return tuple(out)


def log2_tail(population: int, successes: int, draws: int, at_least: int) -> float:
    """log2 P[X >= at_least] for X ~ Hypergeometric(population, successes, draws)."""
    if at_least <= 0:
        return 0.0
    tails = _log2_tails(population, successes, draws)
    return tails[at_least] if at_least < len(tails) else -math.inf


@functools.lru_cache(maxsize=4096)
def _log2_tails(population: int, successes: int, draws: int) -> tuple[float, ...]:
    """log2 P[X >= k] for k = 0..draws, each tail summed from the top down with its own largest
    term factored out (a running log-sum-exp), so a deep tail never underflows. All tails at once:
    the searches ask for many of one distribution, and one at a time cost O(draws^2) (77 s for the
    plan of n = 100,000)."""
    pmf = _log_pmf(population, successes, draws)
    tails = [-math.inf] * (draws + 1)
    top, scaled = -math.inf, 0.0  # the tail so far is exp(top) * scaled
    for k in range(draws, -1, -1):
        v = pmf[k]
        if v > -math.inf:
            if v > top:
                scaled, top = scaled * math.exp(top - v) + 1.0, v
            else:
                scaled += math.exp(v - top)
        if top > -math.inf:
            tails[k] = (top + math.log(scaled)) / math.log(2)
    return tuple(tails)


def _security_bits_of(n: int, colluders: int, degree: int, threshold: int, threat: Threat) -> float:
    """-log2 of the union bound on (S): some honest client has too many colluding neighbours."""
    need = 2 * threshold - (degree + 1) if threat is Threat.ACTIVE else threshold
    return -(math.log2(n) + log2_tail(n - 1, colluders, degree, need))


def _connectivity_bits_of(n: int, colluders: int, degree: int, max_dropped: int) -> float:
    """-log2 of the union bound on (C): two disjoint windows of k/2 clients, each just after an
    honest survivor, each with at least m = k/2 - d_max colluders (module docstring). Per pair of
    places: P[u_1, u_2 honest] * P[Hyp(n-2, C, h) >= m] * P[Hyp(n-2-h, C-m, h) >= m]: the first
    window's colluders a >= m leave C - a <= C - m for the second, and the second's tail only
    grows with the colluders left, so this bounds the exact sum over a from above (within 0.3
    bit of it at n = 200 to 100,000, benchmarks/degree.py's conn_two_gaps) at the cost of two tails."""
    h = degree // 2
    m = h - max_dropped
    if m <= 0:
        return 0.0  # the server may "drop" a whole window: nothing stops a cut
    if 2 * m > colluders or n - degree - 1 <= 0 or n - colluders < 2:
        return math.inf  # too few colluders for two windows (or no two honest places)
    log2_pairs = math.log2(n) + math.log2(n - degree - 1) - 1
    log2_honest = math.log2((n - colluders) / n) + math.log2((n - colluders - 1) / (n - 1))
    both = log2_tail(n - 2, colluders, h, m) + log2_tail(n - 2 - h, colluders - m, h, m)
    return -(log2_pairs + log2_honest + both)


def _max_dropped(n: int, dropped: int, degree: int) -> int:
    """(R): the smallest d_max that honest dropouts exceed in some neighbourhood w.p. <= 2^-eta."""
    for d in range(degree + 1):
        if math.log2(n) + log2_tail(n - 1, dropped, degree, d + 1) <= -CORRECTNESS_BITS:
            return d
    return degree


@dataclass(frozen=True)
class SparseParameters:
    degree: int
    threshold: int
    max_dropped: int  # d_max: most neighbours of a client that may be missing from the survivors


def sparse_check(n: int, *, colluders: int, degree: int, threshold: int, max_dropped: int, adversary: Adversary,
                 max_key_epochs: int) -> str | None:
    """Why (degree, threshold, max_dropped) on H(n, degree) fails ``adversary``'s (S) or (C) over
    a run of up to ``max_key_epochs`` key epochs, or None when it holds. What a client checks of a
    sparse round the server announces."""
    c = min(colluders, n - 1)
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    over = f"2^-{need} per key epoch (2^-{adversary.security_bits} over a run of {max_key_epochs})"
    if not 2 <= degree < n - 1 or degree % 2 or not 1 <= threshold <= degree or not 0 <= max_dropped < degree // 2:
        return f"degree {degree}, threshold {threshold}, max_dropped {max_dropped} are not a sparse graph over {n} clients"
    if adversary.threat is Threat.HONEST_BUT_CURIOUS and threshold < majority(degree + 1):
        return f"threshold {threshold} is below a majority of the {degree + 1} members of a neighbourhood"
    threshold_bits = _security_bits_of(n, c, degree, threshold, adversary.threat)
    connectivity_bits = _connectivity_bits_of(n, c, degree, max_dropped)
    bits = _either_bits(threshold_bits, connectivity_bits)
    if bits < need:
        if threshold_bits <= connectivity_bits:
            return (f"with {c} colluders among {n}, some honest client has enough colluding neighbours to defeat threshold "
                    f"{threshold} at degree {degree}, or the honest survivors split, with probability up to 2^{-bits:.1f}, above {over}")
        return (f"with {c} colluders among {n} and up to {max_dropped} dropped neighbours, the honest survivors split "
                f"(a partial sum leaks), or some honest client's threshold falls, with probability up to 2^{-bits:.1f}, above {over}")
    return None


def _either_bits(*bits: float) -> float:
    """-log2 of the union of events whose probabilities are 2^-bits each: either one (S) or (C)
    breaks a sum's privacy, so their probabilities add (each alone at the target let the run
    fail with up to twice it: 2^-39.3 at n = 10,000, benchmarks/degree.py)."""
    total = sum(2.0 ** -b for b in bits)
    return math.inf if total == 0 else -math.log2(total)


def sparse_at_degree(n: int, colluders: int, degree: int, adversary: Adversary, *, max_key_epochs: int) -> SparseParameters | None:
    """(d_max, the least threshold) for H(n, degree) meeting (S), (C) and (R) over a run of up to
    ``max_key_epochs`` key epochs, or None."""
    c = min(colluders, n - 1)
    need = epoch_security_bits(adversary.security_bits, max_key_epochs)
    d_max = _max_dropped(n, math.floor(adversary.dropout_fraction * n), degree)
    if d_max >= degree // 2:
        return None
    connectivity_bits = _connectivity_bits_of(n, c, degree, d_max)
    if connectivity_bits < need:
        return None
    lowest = degree // 2 + 1 if adversary.threat is Threat.ACTIVE else majority(degree + 1)
    for t in range(lowest, degree - d_max + 1):
        if _either_bits(_security_bits_of(n, c, degree, t, adversary.threat), connectivity_bits) >= need:
            return SparseParameters(degree, t, d_max)
    return None


@functools.lru_cache(maxsize=1024)
def sparse_parameters(n: int, colluders: int, adversary: Adversary, *, max_key_epochs: int) -> SparseParameters | None:
    """The cheapest random Harary graph over n participants meeting (S), (C) and (R) over a run of
    up to ``max_key_epochs`` key epochs, or None when only the complete graph does (small n, or a
    large corrupt fraction)."""
    found = functools.partial(sparse_at_degree, max_key_epochs=max_key_epochs)
    degrees = list(range(2, n - 1, 2))
    lo, hi = 0, len(degrees)  # feasibility grows with the degree: bisect, then step down while it holds
    while lo < hi:
        mid = (lo + hi) // 2
        if found(n, colluders, degrees[mid], adversary) is None:
            lo = mid + 1
        else:
            hi = mid
    if lo == len(degrees):
        return None
    while lo > 0 and found(n, colluders, degrees[lo - 1], adversary) is not None:
        lo -= 1
    return found(n, colluders, degrees[lo], adversary)
