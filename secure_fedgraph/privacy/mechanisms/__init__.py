"""DP mechanisms, applied by the client before anything leaves it: the Gaussian mechanism on
uploaded rows (:mod:`.gaussian`), the noise source mechanisms draw from (:mod:`.noise`), and
Skellam noise for distributed DP inside the secure sum (:mod:`.skellam`; it needs scipy, so
only the runs that use it import it).
Each mechanism is one module here; the accountant (``privacy/accountant.py``) records what they
released, and ``privacy/analysis/`` prices it."""

from secure_fedgraph.privacy.mechanisms.gaussian import GaussianRows, clip_rows
from secure_fedgraph.privacy.mechanisms.noise import NoiseSource, gaussian_noise

__all__ = ["GaussianRows", "NoiseSource", "clip_rows", "gaussian_noise"]
