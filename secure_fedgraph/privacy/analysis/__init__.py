"""Pure functions of a release history: epsilon from opacus' RDP accountant (:mod:`.rdp`) and
from its PRV accountant (:mod:`.prv`), the noise multiplier that reaches a target
(:mod:`.calibration`), how many releases one member of a privacy unit takes part in
(:mod:`.units`), and the Skellam mechanism's RDP for distributed DP (:mod:`.skellam`, which
the protocol's noise ledger imports itself). No state lives here: :mod:`secure_fedgraph.privacy.accountant` keeps the
history and calls these.

A history is opacus' own: a sequence of (noise multiplier sigma, sampling rate q, steps).
"""

from secure_fedgraph.privacy.analysis.calibration import calibrate_sigma
from secure_fedgraph.privacy.analysis.prv import PrvEpsilon, prv_epsilon
from secure_fedgraph.privacy.analysis.rdp import History, check_history, rdp_epsilon
from secure_fedgraph.privacy.analysis.units import Unit, UnitKind, member_releases

__all__ = ["History", "PrvEpsilon", "Unit", "UnitKind", "calibrate_sigma", "check_history", "member_releases", "prv_epsilon", "rdp_epsilon"]
