"""Differential privacy for split-learning uploads: the Gaussian mechanism applied by the client
before a tensor leaves (:mod:`.gaussian`) and its accounting with opacus (:mod:`.accounting`)."""

from secure_fedgraph.privacy.accounting import PrivacySpent, epsilon_of
from secure_fedgraph.privacy.gaussian import GaussianRows

__all__ = ["GaussianRows", "PrivacySpent", "epsilon_of"]
