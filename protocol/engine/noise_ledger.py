"""The distributed DP noise of a run's secure sums, and what it buys: kept by the server's
``secure_sum`` collective (never counted by a plan), turned into (epsilon, delta) per client by
the Skellam analysis (:mod:`secure_fedgraph.privacy.analysis.skellam`).

Each noised sum releases its contributors' clipped contributions under the Skellam noise the
*survivors* added: every contributor added (z C 2^p)^2 / n_expected per element, so a sum of
n_s contributors carries n_s / n_expected of the stated variance, and its noise multiplier is
z sqrt(n_s / n_expected). Clients that dropped added nothing to it; the report says, per sum,
what the dropouts cost. A client's epsilon composes the sums it contributed to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumSpec


def sum_release(spec: SumSpec, contributors: int, *, precision_bits: int, server_sees_inputs: bool, replace_one: bool = False):
    """One noised sum as a Skellam release (privacy/analysis/skellam.py): the L1 and L2
    sensitivities of one unit's clipped contribution rounded to the sum's grid (zero-out, or
    ``replace_one``), and the noise of ``contributors`` shares (one with plain, where the server
    sees each input); ``precision_bits``: the mask backend's (the sum's grid is at least that fine)."""
    from secure_fedgraph.privacy.analysis.skellam import SkellamRelease, sensitivities

    bits = spec.noise.grid_bits(precision_bits)
    l1, l2 = sensitivities(l2_clip=spec.noise.l2_clip, precision_bits=bits, dimension=spec.unit_size, replace_one=replace_one)
    share = 1 if server_sees_inputs else max(contributors, 0)
    return SkellamRelease(l1, l2, share * spec.noise.local_variance(bits))


@dataclass(frozen=True)
class NoisedSum:
    """One released noised sum: its round, spec (with its SumNoise) and contributors."""

    round: int
    spec: SumSpec
    contributors: frozenset[int]


class NoiseLedger:
    """The noised sums a server released, in order."""

    def __init__(self) -> None:
        self.sums: list[NoisedSum] = []

    def record(self, round_index: int, spec: SumSpec, contributors: frozenset[int]) -> None:
        if spec.noise is not None:
            self.sums.append(NoisedSum(round_index, spec, frozenset(contributors)))

    def report(self, *, delta: float, precision_bits: int, server_sees_inputs: bool, colluders: int) -> dict | None:
        """The ``privacy`` entry of a run's metrics for its noised sums (None if there were none).

        Args:
            delta: the delta of every epsilon.
            precision_bits: the mask backend's precision (a sum's grid is at least that fine: SumNoise.grid_bits).
            server_sees_inputs: the plain backend: the server sees each noisy input, which carries
                only its own client's share of the noise; epsilons are then per input.
            colluders: clients that may collude with the server; they know their own noise, so
                ``epsilon_with_colluders`` counts only the others' (mask).
        """
        from secure_fedgraph.privacy.analysis.prv import PrvEpsilon, prv_epsilon
        from secure_fedgraph.privacy.analysis.skellam import SkellamRelease, skellam_epsilon

        if not self.sums:
            return None
        first: SumNoise = self.sums[0].spec.noise

        def release(s: NoisedSum, contributors: int) -> SkellamRelease:
            return sum_release(s.spec, contributors, precision_bits=precision_bits, server_sees_inputs=server_sees_inputs)

        clients = sorted(set().union(*(s.contributors for s in self.sums)))
        cache: dict[tuple, float] = {}

        def epsilon(sums: list[NoisedSum], minus: int = 0, expected: bool = False) -> float:
            releases = tuple(release(s, (s.spec.noise.expected_contributors if expected else len(s.contributors)) - minus) for s in sums)
            if releases not in cache:
                cache[releases] = skellam_epsilon(releases, delta)
            return cache[releases]

        def gaussian_history(sums: list[NoisedSum]) -> tuple:
            """The same releases as Gaussian ones (noise sd / L2 sensitivity), merged as opacus' history."""
            history: list[tuple[float, float, int]] = []
            for s in sums:
                r = release(s, len(s.contributors))
                sigma = math.sqrt(r.variance) / r.l2
                if history and history[-1][0] == sigma:
                    history[-1] = (sigma, 1.0, history[-1][2] + 1)
                else:
                    history.append((sigma, 1.0, 1))
            return tuple(history)

        prv_cache: dict[tuple, PrvEpsilon] = {}

        def prv(sums: list[NoisedSum]) -> PrvEpsilon:
            history = gaussian_history(sums)
            if history not in prv_cache:
                prv_cache[history] = prv_epsilon(list(history), delta)
            return prv_cache[history]

        per_client = {c: epsilon([s for s in self.sums if c in s.contributors]) for c in clients}
        per_prv = {c: prv([s for s in self.sums if c in s.contributors]) for c in clients}
        prv_values = [p.epsilon for p in per_prv.values()]
        notes = sorted({p.reason for p in per_prv.values() if p.reason})
        most = max(clients, key=lambda c: sum(c in s.contributors for s in self.sums))
        mine = [s for s in self.sums if most in s.contributors]
        return {
            "mechanism": f"distributed Skellam noise in the secure sum: each client clips its contribution to L2 norm {first.l2_clip:g} "
                         f"and adds its share of noise multiplier {first.noise_multiplier:g} over {first.expected_contributors} expected "
                         "contributors, in the integer ring, before masking",
            "unit": "one client's whole contribution to a sum (its model), zero-out neighbours" if first.unit is NoiseUnit.CONTRIBUTION
                    else "one row of a client's contribution to a sum, zero-out neighbours (every sum composed: a bound for any row)",
            "server_sees": "each noisy input (plain backend): epsilons are per input" if server_sees_inputs else "the noisy sum only",
            "delta": delta,
            "accountant": "Skellam RDP (Agarwal et al. 2021, Thm 3.5), opacus' RDP-to-DP conversion",
            "noise_multiplier": first.noise_multiplier,
            "l2_clip": first.l2_clip,
            "expected_contributors": first.expected_contributors,
            "sums": [{"name": s.spec.name, "round": s.round, "contributors": len(s.contributors),
                      "noise_multiplier": s.spec.noise.noise_multiplier * math.sqrt((1 if server_sees_inputs else len(s.contributors))
                                                                                   / s.spec.noise.expected_contributors)}
                     for s in self.sums],
            "epsilon_max": max(per_client.values()),
            "epsilon_if_all_expected": epsilon(mine, expected=True),
            "epsilon_with_colluders": epsilon(mine, minus=0 if server_sees_inputs else colluders),
            "colluders": colluders,
            "epsilon_per_client": {str(c): e for c, e in per_client.items()},
            "accountants": {
                "rdp": {"epsilon_max": max(per_client.values()), "epsilon_per_client": {str(c): e for c, e in per_client.items()},
                        "note": "Skellam RDP (exact for the integer noise)"},
                "prv": {"epsilon_max": None if None in prv_values else max(prv_values),
                        "epsilon_per_client": {str(c): p.epsilon for c, p in per_prv.items()},
                        "note": "opacus' PRV of the Gaussian mechanism with the same noise and sensitivity: the limit the Skellam "
                                "noise approaches at a fine grid (within 1% at 20 bits), not a bound for it"
                                + (f"; {'; '.join(notes)}" if notes else "")},
            },
        }
