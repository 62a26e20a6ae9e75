"""Checks of numeric options, shared by plans, training and baselines: one wording for every
bad value ("rounds must be an int >= 1, got 0"), raised as :class:`ConfigError`.
"""

from __future__ import annotations

import math
from typing import Any

from secure_fedgraph.errors import ConfigError

__all__ = ["positive", "positive_number"]


def positive(name: str, value: Any, minimum: int = 1, *, optional: bool = False) -> None:
    """An int option >= ``minimum`` (None too, when ``optional``: "no cap")."""
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}, got {value!r}")


def positive_number(name: str, value: Any, *, zero_ok: bool = False) -> None:
    """A finite real option > 0 (>= 0 when ``zero_ok``): learning rates, clipping bounds, noise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise ConfigError(f"{name} must be a finite number {'>=' if zero_ok else '>'} 0, got {value!r}")
