"""DP mechanisms, applied by the client before anything leaves it: the Gaussian mechanism on
uploaded rows (:mod:`.gaussian`) and the noise source mechanisms draw from (:mod:`.noise`).
Each mechanism is one module here; the accountant (``privacy/accountant.py``) records what they
released, and ``privacy/analysis/`` prices it."""

from secure_fedgraph.privacy.mechanisms.gaussian import GaussianRows, clip_rows
from secure_fedgraph.privacy.mechanisms.noise import NoiseSource, gaussian_noise

__all__ = ["GaussianRows", "NoiseSource", "clip_rows", "gaussian_noise"]
