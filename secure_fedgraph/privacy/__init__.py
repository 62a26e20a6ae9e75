"""Differential privacy for split-learning uploads: the Gaussian mechanism applied by the client
before a tensor leaves (:mod:`.gaussian`), the ledger of what went out (:mod:`.ledger`, kept by
the server's upload collective) and its accounting with opacus (:mod:`.accounting`).

The accounting names load on first use: importing opacus takes seconds (it brings scipy and
torch.distributed), and every server and client process imports the ledger, while only runs
with DP noise account for it."""

from typing import Any

from secure_fedgraph.privacy.gaussian import GaussianRows
from secure_fedgraph.privacy.ledger import ReleaseLedger

__all__ = ["GaussianRows", "PrivacySpent", "ReleaseLedger", "epsilon_of", "gaussian_report"]
_ACCOUNTING = frozenset({"PrivacySpent", "epsilon_of", "gaussian_report"})


def __getattr__(name: str) -> Any:
    if name in _ACCOUNTING:
        from secure_fedgraph.privacy import accounting

        return getattr(accounting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
