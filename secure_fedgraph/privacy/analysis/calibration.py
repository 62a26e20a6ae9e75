"""The noise multiplier that reaches a target (epsilon, delta), through opacus'
``get_noise_multiplier`` (a doubling then bisection search on the accountant's epsilon): the
result never overshoots the target, and is within ``tolerance`` below it."""

from __future__ import annotations

import math

from secure_fedgraph.errors import ConfigError, PrivacyBudgetError

ACCOUNTANTS = ("rdp", "prv")


def calibrate_sigma(*, target_epsilon: float, delta: float, sample_rate: float, steps: int, accountant: str = "rdp",
                    tolerance: float = 0.01) -> float:
    """The least noise multiplier (within the search's tolerance) whose epsilon after ``steps``
    releases at ``sample_rate`` is at most ``target_epsilon`` at ``delta``.

    Raises:
        ConfigError: a parameter out of range or an unknown accountant.
        PrivacyBudgetError: the target cannot be reached (opacus gives up past sigma 1e6).
    """
    if accountant not in ACCOUNTANTS:
        raise ConfigError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    if not (math.isfinite(target_epsilon) and target_epsilon > 0):
        raise ConfigError(f"target epsilon must be a finite number > 0, got {target_epsilon!r}")
    if not (isinstance(delta, float) and 0 < delta < 1):
        raise ConfigError(f"delta must be a float in (0, 1), got {delta!r}")
    if not 0 < sample_rate <= 1:
        raise ConfigError(f"sampling rate must be in (0, 1], got {sample_rate!r}")
    if int(steps) != steps or steps < 1:
        raise ConfigError(f"steps must be an integer >= 1, got {steps!r}")
    from opacus.accountants.utils import get_noise_multiplier

    try:
        return float(get_noise_multiplier(target_epsilon=target_epsilon, target_delta=delta, sample_rate=sample_rate, steps=int(steps),
                                          accountant=accountant, epsilon_tolerance=tolerance))
    except ValueError as exc:  # "The privacy budget is too low."
        raise PrivacyBudgetError(f"epsilon {target_epsilon:g} at delta {delta:g} cannot be reached with {steps} releases at sampling rate "
                                 f"{sample_rate:g} (no noise multiplier up to 1e6 does; opacus: {exc}); ask for a larger epsilon or "
                                 "fewer releases") from None
