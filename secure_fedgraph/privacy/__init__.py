"""Differential privacy, laid out as opacus lays out its accountants:

- :mod:`.mechanisms`: what a client applies before data leaves it (Gaussian rows on uploads,
  DP-SGD for local training) and the noise source they draw from;
- :mod:`.accountant`: the history of each client's releases (fed by the collectives and the
  DP-SGD optimiser, never counted by a plan) and the run's report;
- :mod:`.analysis`: pure functions of a history: epsilon by RDP and by PRV (both through
  opacus), sigma calibrated to a target epsilon, and the releases one member of a privacy
  unit takes part in.

Nothing here imports opacus at import time: importing it takes seconds (scipy,
torch.distributed), and every server and client process imports the accountant, while only
runs with DP noise account.
"""

from secure_fedgraph.privacy.accountant import USER_FEATURES, WINDOW, PrivacyAccountant, RowRelease, Steps
from secure_fedgraph.privacy.analysis import PrvEpsilon, Unit, UnitKind, calibrate_sigma, member_releases, prv_epsilon, rdp_epsilon
from secure_fedgraph.privacy.mechanisms import GaussianRows, NoiseSource

__all__ = ["USER_FEATURES", "WINDOW", "GaussianRows", "NoiseSource", "PrivacyAccountant", "PrvEpsilon", "RowRelease", "Steps", "Unit", "UnitKind",
           "calibrate_sigma", "member_releases", "prv_epsilon", "rdp_epsilon"]
