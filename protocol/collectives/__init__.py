"""The protocol's vocabulary: four collectives every paper's plan is written in.

| collective | who sends | who learns what |
| --- | --- | --- |
| ``contribute`` | every client | the sum only (server with mask/plain; clients only with ckks); the server side is the sum backend's ``aggregate`` |
| ``upload`` | every client, individually | the server sees each client's tensor (privacy hook first) |
| ``scatter`` | server | each client gets its own tensors |
| ``broadcast`` | server | every client gets the same tensors |

Server side, each (but the sum's, which its backend runs) is a generator of steps (``yield from``); client side, a plan yields the
matching *need* (:class:`Receive`, :class:`Contribute`, :class:`Upload`) and is resumed with
what it was waiting for.
"""

from secure_fedgraph.protocol.collectives.broadcast import Receive, broadcast
from secure_fedgraph.protocol.collectives.scatter import scatter
from secure_fedgraph.protocol.collectives.contribute import Contribute
from secure_fedgraph.protocol.collectives.upload import PrivacyHook, Upload, upload

__all__ = ["Contribute", "PrivacyHook", "Receive", "Upload", "broadcast", "scatter", "upload"]
