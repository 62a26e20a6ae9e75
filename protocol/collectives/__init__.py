"""The protocol's vocabulary: four collectives every paper's plan is written in.

| collective | who sends | who learns what |
| --- | --- | --- |
| ``secure_sum`` | every client | the sum only (server with mask/plain; clients only with ckks) |
| ``upload`` | every client, individually | the server sees each client's tensor (privacy hook first) |
| ``scatter`` | server | each client gets its own tensors |
| ``broadcast`` | server | every client gets the same tensors |

Server side, each is a generator of steps (``yield from``); client side, a plan yields the
matching *need* (:class:`Receive`, :class:`SecureSum`, :class:`Upload`) and is resumed with
what it was waiting for.
"""

from secure_fedgraph.protocol.collectives.broadcast import Receive, broadcast
from secure_fedgraph.protocol.collectives.scatter import scatter
from secure_fedgraph.protocol.collectives.secure_sum import SecureSum, secure_sum
from secure_fedgraph.protocol.collectives.upload import PrivacyHook, Upload, upload

__all__ = ["Receive", "SecureSum", "Upload", "PrivacyHook", "broadcast", "scatter", "secure_sum", "upload"]
