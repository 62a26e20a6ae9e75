"""FedSTGD's one guarantee with distributed DP: the epsilon of everything a run releases about
one window of one client, from the noised sums the server's ledger recorded (protocol/engine/
noise_ledger.py), each client's DP-SGD steps (its optimiser counted them) and how often the plan
releases a window (papers/fedstgd.py derives the counts and the sensitivities).

The members of the unit are training, validation and test windows. A member's releases compose,
RDP adding up at each integer order: per kind of sum, the plan's count of the member's releases
times the costliest delivered sum of that kind (the largest RDP at each order over the sums the
client contributed to: fewer contributors carry less noise), and for a training window the
client's DP-SGD steps (Gaussian RDP at sigma / sensitivity). Each sum is priced for replace-one
neighbours (one window swapped for another: twice a row's bound, rounding included) with the
noise of its contributors (with plain, of the input alone, which is all a noised input carries).
Epsilon is opacus' conversion at the plan's ``dp_delta``, the largest over members and clients.
The PRV accountant gets the same releases as Gaussian ones (each kind at its least noise per
sensitivity): the limit the Skellam noise approaches at a fine grid, as the noise ledger reports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from secure_fedgraph.models.fedstgd import ModelShape
from secure_fedgraph.privacy.accountant import Steps
from secure_fedgraph.privacy.analysis.prv import prv_epsilon
from secure_fedgraph.privacy.analysis.rdp import gaussian_rdp, rdp_to_epsilon
from secure_fedgraph.privacy.analysis.skellam import ORDERS, skellam_rdp_curve
from secure_fedgraph.protocol.engine.noise_ledger import NoisedSum, sum_release

KINDS = ("normalisation", "pq", "pq-grad", "validation", "test")
MEMBERS = ("training", "validation", "test")


def releases_per_window(config) -> dict[str, dict[str, int]]:
    """How many releases of each kind one window takes part in over a run, per member: a
    training window sits in one batch per epoch (its P/Q sums, and their gradient sums with exact
    gradients) and in the normalisation sum once; a validation window in the evaluation's P/Q
    sums and the validation errors every round; a test window in those of the test once."""
    sums = ModelShape(steps_in=config.steps_in, steps_out=config.steps_out).n_sums if config.cross_client else 0
    epochs = config.rounds * config.local_epochs
    return {"training": {"normalisation": 1, "pq": epochs * sums, "pq-grad": epochs * sums if config.gradients == "exact" else 0},
            "validation": {"pq": config.rounds * sums, "validation": config.rounds},
            "test": {"pq": sums, "test": 1}}


class _Costs:
    """The costliest delivered sum of each kind one client contributed to: its RDP curve (the
    maximum at each order) and its least Gaussian-equivalent noise multiplier."""

    def __init__(self, sums: Iterable[NoisedSum], client: int, *, precision_bits: int, server_sees_inputs: bool, minus: int,
                 cache: dict) -> None:
        self.curves: dict[str, np.ndarray] = {}
        self.sigmas: dict[str, float] = {}
        for s in sums:
            if client not in s.contributors or s.spec.name not in KINDS:
                continue
            release = sum_release(s.spec, len(s.contributors) - minus, precision_bits=precision_bits, server_sees_inputs=server_sees_inputs,
                                  replace_one=True)
            if release not in cache:
                cache[release] = skellam_rdp_curve(release)
            kind = s.spec.name
            self.curves[kind] = np.maximum(self.curves.get(kind, cache[release]), cache[release])
            self.sigmas[kind] = min(self.sigmas.get(kind, math.inf), math.sqrt(release.variance) / release.l2)


def _member_rdp(costs: _Costs, counts: Mapping[str, int], dpsgd: Sequence[tuple[float, float, int]]) -> np.ndarray:
    total = gaussian_rdp(dpsgd, ORDERS) if dpsgd else np.zeros(len(ORDERS))
    for kind, count in counts.items():
        if count and kind in costs.curves:
            total = total + count * costs.curves[kind]
    return total


def _member_history(costs: _Costs, counts: Mapping[str, int], dpsgd: Sequence[tuple[float, float, int]]) -> tuple:
    return tuple((costs.sigmas[k], 1.0, n) for k, n in counts.items() if n and k in costs.sigmas) + tuple(dpsgd)


def report(sums: Sequence[NoisedSum], steps: Mapping[int, Sequence[Steps]], config, *, clients: Iterable[int], unit: str, delta: float,
           precision_bits: int, server_sees_inputs: bool, colluders: int) -> dict:
    """The ``privacy`` entry of a FedSTGD run's metrics with distributed DP (module docstring).

    Args:
        sums: the noised sums delivered (the ledger's, or rebuilt from a transcript).
        steps: each client's DP-SGD steps, as it reported them (none: every planned step).
        clients: every client of the run.
        unit: the privacy unit in words.
        delta, precision_bits, server_sees_inputs, colluders: see NoiseLedger.report.
    """
    counts = releases_per_window(config)
    rdp_cache: dict = {}
    prv_cache: dict[tuple, object] = {}
    per_rdp, per_prv, with_colluders, notes = {}, {}, {}, set()
    planned = [Steps(config.dpsgd_sigma, 1.0, config.rounds * config.local_epochs, config.dpsgd_sensitivity)]
    for client in sorted(clients):  # a client that left before it reported is priced at every step the plan allows
        dpsgd = [(s.sigma / s.sensitivity, s.sample_rate, s.steps) for s in steps.get(client) or planned]
        costs = _Costs(sums, client, precision_bits=precision_bits, server_sees_inputs=server_sees_inputs, minus=0, cache=rdp_cache)
        colluding = _Costs(sums, client, precision_bits=precision_bits, server_sees_inputs=server_sees_inputs,
                           minus=0 if server_sees_inputs else colluders, cache=rdp_cache)
        members = {m: dpsgd if m == "training" else [] for m in MEMBERS}
        per_rdp[str(client)] = max(rdp_to_epsilon(ORDERS, _member_rdp(costs, counts[m], d), delta) for m, d in members.items())
        with_colluders[str(client)] = max(rdp_to_epsilon(ORDERS, _member_rdp(colluding, counts[m], d), delta) for m, d in members.items())
        prv = []
        for m, d in members.items():
            history = _member_history(costs, counts[m], d)
            if history not in prv_cache:
                prv_cache[history] = prv_epsilon(list(history), delta)
            prv.append(prv_cache[history])
        notes.update(p.reason for p in prv if p.reason)
        values = [p.epsilon for p in prv]
        per_prv[str(client)] = None if None in values else max(values)
    prv_values = list(per_prv.values())
    most_steps = max((sum(s.steps for s in steps.get(c, [])) for c in clients), default=0)
    kinds = {}
    for kind in KINDS:
        mine = [s for s in sums if s.spec.name == kind]
        if mine:
            kinds[kind] = {"delivered": len(mine), "l2_clip": mine[0].spec.noise.l2_clip, "unit": mine[0].spec.noise.unit.value,
                           "noise_multiplier": mine[0].spec.noise.noise_multiplier,
                           "fewest_contributors": min(len(s.contributors) for s in mine)}
    epsilon_max = max(per_rdp.values(), default=0.0)
    return {
        "mechanism": (f"distributed Skellam noise in every sum of the windows (multiplier {config.ddp_noise:g}; each client clips every "
                      f"window's part of its contribution and adds its share in the integer ring, before masking) and DP-SGD in local "
                      f"training (per-window clip {config.dpsgd_clip:g}, sigma {config.dpsgd_sigma:g}, priced at sigma / "
                      f"{config.dpsgd_sensitivity:g}); the FedAvg sums are post-processing of the DP-SGD steps"),
        "unit": f"{unit}, replaced by any other window (replace-one)",
        "server_sees": "each noisy input (plain backend): epsilons are per input" if server_sees_inputs else "the noisy sums only",
        "delta": delta,
        "accountant": "Skellam RDP (Agarwal et al. 2021, Thm 3.5) of every noised sum and opacus' Gaussian RDP of the DP-SGD steps, "
                      "added order by order; opacus' RDP-to-DP conversion",
        "epsilon_max": epsilon_max,
        "epsilon_per_client": per_rdp,
        "epsilon_with_colluders": max(with_colluders.values(), default=0.0),
        "colluders": colluders,
        "releases_per_window": {m: {**{k: n for k, n in counts[m].items() if n}, **({"dpsgd": most_steps} if m == "training" else {})}
                                for m in MEMBERS},
        "dpsgd_steps_per_client": {str(c): sum(s.steps for s in steps.get(c, [])) for c in sorted(clients) if steps.get(c)},
        "sums": kinds,
        "accountants": {
            "rdp": {"epsilon_max": epsilon_max, "epsilon_per_client": per_rdp, "note": "Skellam RDP (exact for the integer noise) "
                    "composed with DP-SGD's Gaussian RDP"},
            "prv": {"epsilon_max": None if None in prv_values or not prv_values else max(prv_values), "epsilon_per_client": per_prv,
                    "note": "opacus' PRV of the Gaussian mechanism with the same noise and sensitivity as each sum, with the DP-SGD "
                            "steps: the limit the Skellam noise approaches at a fine grid, not a bound for it"
                            + (f"; {'; '.join(sorted(notes))}" if notes else "")},
        },
    }

