"""One exception vocabulary for the whole project, rooted at :class:`SecureFedGraphError`.

Every message says what was expected, what arrived, and what to change. Failures of the
cryptographic primitives keep their ``cryptography.exceptions`` type (``InvalidSignature``,
``InvalidTag``) so callers can tell forgery from misconfiguration.
"""

from __future__ import annotations


class SecureFedGraphError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigError(SecureFedGraphError, ValueError):
    """A setting or an argument is out of its documented range."""


class CapacityError(ConfigError):
    """The fixed-point ring (or CKKS modulus) cannot hold the sum: n * range * scale too large."""


class ProtocolError(SecureFedGraphError):
    """A message arrived at the wrong stage, for the wrong round, or failed a protocol check."""


class DropoutError(ProtocolError):
    """Too few parties remain to finish a secure sum; no partial aggregate is released."""


class SumAbandoned(ProtocolError):
    """A secure sum was given up after some of its inputs could already have been unmasked
    (a dropout in a streaming sum, a secret that could not be recovered, a corrupt sum).
    Nothing was released, and no client ever masks those contributions again
    (threat_model.md M-ONCE): a plan catches this where it can skip the step, or supplies
    fresh contributions; anywhere else it ends the run."""


class PrivacyBudgetError(SecureFedGraphError):
    """A requested privacy budget cannot be met."""


class DataNotFoundError(SecureFedGraphError, FileNotFoundError):
    """A dataset file is missing; the message names the file and where it was looked for."""


class DataFormatError(SecureFedGraphError, ValueError):
    """A dataset file is there but does not hold what its format says; the message names the
    file and what is wrong with it."""


class TransportError(SecureFedGraphError):
    """A message could not be delivered (deadline, size limit, connection)."""
