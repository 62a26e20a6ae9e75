"""Epsilon of a history of (subsampled) Gaussian releases by Renyi DP, through opacus.

Mironov, "Renyi Differential Privacy", CSF 2017 (composition: RDP adds up over releases);
Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism", 2019
(the subsampled Gaussian's RDP, opacus' ``compute_rdp``); the conversion to (epsilon, delta) is
opacus' ``get_privacy_spent`` (Balle et al. 2020, Prop. 12). opacus' own test pins sigma 1.5,
q 0.04, 2,250 steps, delta 1e-5 at epsilon 7.32911117143, and so do ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from secure_fedgraph.errors import ConfigError

History = Sequence[tuple[float, float, int]]  # (noise multiplier, sampling rate, steps): opacus' history


def check_history(history: History, delta: float) -> list[tuple[float, float, int]]:
    """The entries of ``history`` that release anything (steps > 0 and q > 0), checked.

    Raises:
        ConfigError: delta outside (0, 1), a sampling rate outside [0, 1], a negative sigma
            or step count.
    """
    if not (isinstance(delta, float) and 0 < delta < 1):
        raise ConfigError(f"delta must be a float in (0, 1), got {delta!r}")
    kept = []
    for sigma, rate, steps in history:
        if not (math.isfinite(sigma) and sigma >= 0):
            raise ConfigError(f"noise multiplier must be a finite number >= 0, got {sigma!r}")
        if not 0 <= rate <= 1:
            raise ConfigError(f"sampling rate must be in [0, 1], got {rate!r}")
        if int(steps) != steps or steps < 0:
            raise ConfigError(f"steps must be an integer >= 0, got {steps!r}")
        if steps and rate:
            kept.append((float(sigma), float(rate), int(steps)))
    return kept


def rdp_epsilon(history: History, delta: float) -> float:
    """Epsilon at ``delta`` after every release of ``history`` (0 with no release; infinite
    when a release has no noise)."""
    releases = check_history(history, delta)
    if not releases:
        return 0.0
    if any(sigma == 0 for sigma, _, _ in releases):
        return math.inf
    from opacus.accountants import RDPAccountant  # opacus loads scipy: only accounting pays for it

    accountant = RDPAccountant()
    accountant.history = list(releases)
    return float(accountant.get_epsilon(delta))


def gaussian_rdp(history: History, orders: Sequence[float]) -> np.ndarray:
    """The RDP at each of ``orders`` of every release of ``history`` composed (opacus'
    ``compute_rdp`` per entry, added up): what another mechanism's RDP composes with at the
    same orders (FedSTGD's DP-SGD steps beside its Skellam-noised sums). Infinite without noise."""
    from opacus.accountants.analysis.rdp import compute_rdp

    total = np.zeros(len(orders))
    for sigma, rate, steps in check_history(history, 0.5):
        if sigma == 0:
            return np.full(len(orders), math.inf)
        total += np.asarray(compute_rdp(q=rate, noise_multiplier=sigma, steps=steps, orders=list(orders)), dtype=np.float64)
    return total


def rdp_to_epsilon(orders: Sequence[float], rdp: Sequence[float], delta: float) -> float:
    """(epsilon, delta)-DP of a mechanism with RDP ``rdp`` at ``orders``: opacus' conversion
    (``get_privacy_spent``, Balle et al. 2020, Prop. 12), the best order. Infinite RDP at every
    order gives infinity."""
    from opacus.accountants.analysis.rdp import get_privacy_spent

    if not (isinstance(delta, float) and 0 < delta < 1):
        raise ConfigError(f"delta must be a float in (0, 1), got {delta!r}")
    if all(math.isinf(value) for value in rdp):
        return math.inf
    epsilon, _ = get_privacy_spent(orders=list(orders), rdp=list(rdp), delta=delta)
    return float(epsilon)
