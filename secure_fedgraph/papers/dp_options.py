"""The privacy options plan configs share, each field, default and check written once.

A plan's config inherits the groups it offers and calls ``super().__post_init__()`` from its
own ``__post_init__`` (where the checks run among its own): :class:`PrivacyOptions`, the base
of every group, holds the one set of checks and runs those of the fields the config has. The
field names are the ``--set`` options, the keys of a run's configuration JSON (a Welcome, a
checkpoint, an audit) and what clients compare with their floors (``--min-dp-sigma``,
``--min-dpsgd-sigma``, ``--min-ddp-noise``; papers/base.py).

- :class:`DPOptions`: ``dp_sigma`` (0: off), ``dp_clip`` (1.0), ``dp_delta``; cnfgnn (its
  ``dp_clip`` default is 2.0) and nfedgnn.
- :class:`DPSGDOptions`: ``dpsgd_sigma`` (0: off), ``dpsgd_clip`` (1.0), ``dp_delta``; cnfgnn,
  fedavg-gru, local-gru, fedrel and fedstgd.
- :class:`DeltaOption`: ``dp_delta`` (1e-5), shared by the two groups above (cnfgnn has both
  and one delta).
- :class:`DDPNoise`: ``ddp_noise`` (0: off) and ``ddp_clip``, distributed DP inside secure sums
  (protocol SumNoise), the base of the two groups below:
- :class:`DDPOptions`: ``ddp_noise``, ``ddp_clip`` (1.0), ``ddp_delta`` (1e-5); fedavg-gru,
  local-gru and fedavg-vector (each client's model update is the unit).
- :class:`WindowDDPOptions`: ``ddp_noise``, ``ddp_clip`` (20.0), ``ddp_gradient_clip`` (1e-4),
  ``ddp_reading_clip`` (2000.0), ``ddp_error_clip`` (2.0); fedstgd (one window is the unit,
  and the epsilon composes with DP-SGD's at the plan's ``dp_delta``: papers/fedstgd_dp.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.validation import positive_number

__all__ = ["DDPNoise", "DDPOptions", "DPOptions", "DPSGDOptions", "DeltaOption", "PrivacyOptions", "WindowDDPOptions"]

# each group's noise multiplier (>= 0, 0: off) and the L2 clip it is calibrated to (> 0)
NOISE_AND_CLIP = (("dp_sigma", "dp_clip"), ("dpsgd_sigma", "dpsgd_clip"), ("ddp_noise", "ddp_clip"))
OTHER_BOUNDS = ("ddp_gradient_clip", "ddp_reading_clip", "ddp_error_clip")  # further bounds (> 0) a group may have


class PrivacyOptions:
    """The checks of every group below, written once: a config's ``__post_init__`` reaches this
    through ``super().__post_init__()``, and it checks the groups' fields the config has."""

    def __post_init__(self) -> None:
        present = {f.name for f in dataclasses.fields(self)}
        for noise, clip in NOISE_AND_CLIP:
            if noise in present:
                positive_number(noise, getattr(self, noise), zero_ok=True)
                positive_number(clip, getattr(self, clip))
        for bound in OTHER_BOUNDS:
            if bound in present:
                positive_number(bound, getattr(self, bound))
        if "dp_delta" in present and not (isinstance(self.dp_delta, float) and 0 < self.dp_delta < 1):
            raise ConfigError(f"dp_delta must be a float in (0, 1), got {self.dp_delta!r}")
        if "ddp_delta" in present and (isinstance(self.ddp_delta, bool) or not isinstance(self.ddp_delta, int | float)
                                       or not 0 < self.ddp_delta < 1):
            raise ConfigError(f"ddp_delta must be a number in (0, 1), got {self.ddp_delta!r}")


@dataclass(frozen=True)
class DeltaOption(PrivacyOptions):
    """``dp_delta``: the delta a run's epsilon is reported at, a float in (0, 1)."""

    dp_delta: float = 1e-5


@dataclass(frozen=True)
class DPOptions(DeltaOption):
    """Gaussian noise on each uploaded row (privacy.GaussianRows): ``dp_sigma`` >= 0, its noise
    multiplier (0: no DP), and ``dp_clip`` > 0, each row's L2 bound."""

    dp_sigma: float = 0.0
    dp_clip: float = 1.0


@dataclass(frozen=True)
class DPSGDOptions(DeltaOption):
    """DP-SGD in local training (papers/local_dp.py): ``dpsgd_sigma`` >= 0, its noise multiplier
    (0: plain training, no DP), and ``dpsgd_clip`` > 0, the per-sample L2 clip."""

    dpsgd_sigma: float = 0.0
    dpsgd_clip: float = 1.0


@dataclass(frozen=True)
class DDPNoise(PrivacyOptions):
    """Distributed DP inside a plan's secure sums (protocol SumNoise, threat_model.md
    DDP-NOISE): ``ddp_noise`` >= 0, the noise multiplier z (0: off), and ``ddp_clip`` > 0, the L2
    bound on one unit's contribution; clients compare both with their ``--min-ddp-noise``."""

    ddp_noise: float = 0.0
    ddp_clip: float = 1.0


@dataclass(frozen=True)
class DDPOptions(DDPNoise):
    """Distributed DP on a plan's secure model sums: ``ddp_noise``, ``ddp_clip`` > 0, the L2
    bound on each client's contribution, and ``ddp_delta`` in (0, 1), the delta the run's
    epsilon is reported at."""

    ddp_delta: float = 1e-5


@dataclass(frozen=True)
class WindowDDPOptions(DDPNoise):
    """Distributed DP on every secure sum of a plan's windows (FedSTGD, papers/fedstgd_dp.py;
    threat_model.md ST-DDP), one window of one client being the unit: ``ddp_noise`` z, every
    sum's noise multiplier (0: off); ``ddp_clip`` > 0, the L2 bound on one window's P/Q row;
    ``ddp_gradient_clip`` > 0, on one window's row of a gradient sum (dL/dS, far smaller);
    ``ddp_reading_clip`` > 0, the largest reading (in the data's units: passengers per slot) the
    normalisation sum counts; ``ddp_error_clip`` > 0, E, the cap of one evaluation window's RMSE
    and MAE (in units of the normalisation's standard deviation) and MAPE (a fraction)."""

    ddp_clip: float = 20.0
    ddp_gradient_clip: float = 1e-4
    ddp_reading_clip: float = 2000.0
    ddp_error_clip: float = 2.0
