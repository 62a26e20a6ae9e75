"""The protocol layer: the round engine (plans' contexts and the client host, engine.py), the
four collectives (collectives/), the secure-sum backends (secure_sum/), the wire codec and
messages, and the transports that carry steps (transports/: in one process, over gRPC).

Installed as ``secure_fedgraph.protocol`` (pyproject package-dir); import it by that name.
"""
