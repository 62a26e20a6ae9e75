"""secure_fedgraph: federated graph learning where the server sees only what threat_model.md allows.

The secure-aggregation layer lives in :mod:`secure_fedgraph.protocol.sum_backends`; primitives in
:mod:`secure_fedgraph.crypto`. See README.md for the commands.
"""

__version__ = "0.1.0"
