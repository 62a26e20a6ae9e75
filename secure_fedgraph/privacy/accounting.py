"""(epsilon, delta) of a run's Gaussian releases, from opacus' RDP accountant.

Each CNFGNN upload releases every window of a split once (no subsampling: rate 1), so a
window's privacy loss composes over the number of times its split is uploaded. Different
windows are disjoint rows (parallel composition), so a client's epsilon is that of its most
released window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from opacus.accountants import RDPAccountant

from secure_fedgraph.errors import ConfigError


@dataclass(frozen=True)
class PrivacySpent:
    """What one client's uploads cost: ``epsilon`` at ``delta`` for ``releases`` Gaussian
    releases with noise multiplier ``sigma`` and sampling rate ``sample_rate``."""

    epsilon: float
    delta: float
    sigma: float
    releases: int
    sample_rate: float
    accountant: str = "opacus RDP"
    unit: str = "one window (12 input steps) of one sensor client"

    def as_dict(self) -> dict:
        return asdict(self)


def gaussian_report(releases: Mapping[int, int], *, sigma: float, delta: float, mechanism: str, unit: str | None = None) -> dict:
    """The ``privacy`` entry of a run's metrics: each client's epsilon from its most released
    row's count (``releases``, from a :class:`~secure_fedgraph.privacy.ledger.ReleaseLedger`);
    ``unit`` names the privacy unit (default: CNFGNN's window)."""
    spent = {i: epsilon_of(sigma, n, delta, unit=unit or PrivacySpent.unit) for i, n in releases.items() if n}
    return {
        "mechanism": mechanism,
        "unit": next(iter(spent.values())).unit if spent else None,
        "delta": delta,
        "epsilon_max": max((s.epsilon for s in spent.values()), default=0.0),
        "epsilon_per_client": {str(i): s.epsilon for i, s in sorted(spent.items())},
        "releases_per_client": {str(i): n for i, n in sorted(releases.items())},
    }


def epsilon_of(sigma: float, releases: int, delta: float, *, sample_rate: float = 1.0, unit: str = PrivacySpent.unit) -> PrivacySpent:
    """Epsilon after ``releases`` Gaussian releases (infinite without noise)."""
    if not 0 < delta < 1:
        raise ConfigError(f"delta must be in (0, 1), got {delta!r}")
    if not 0 < sample_rate <= 1:
        raise ConfigError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if sigma <= 0 or releases <= 0:
        epsilon = math.inf if releases > 0 else 0.0
    else:
        accountant = RDPAccountant()
        accountant.history = [(sigma, sample_rate, releases)]
        epsilon = float(accountant.get_epsilon(delta))
    return PrivacySpent(epsilon, delta, sigma, releases, sample_rate, unit=unit)
