"""Differential privacy for split-learning uploads: the Gaussian mechanism applied by the client
before a tensor leaves (:mod:`.gaussian`), the ledger of what went out (:mod:`.ledger`, kept by
the server's upload collective) and its accounting with opacus (:mod:`.accounting`)."""

from secure_fedgraph.privacy.accounting import PrivacySpent, epsilon_of, gaussian_report
from secure_fedgraph.privacy.gaussian import GaussianRows
from secure_fedgraph.privacy.ledger import ReleaseLedger

__all__ = ["GaussianRows", "PrivacySpent", "ReleaseLedger", "epsilon_of", "gaussian_report"]
