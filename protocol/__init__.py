"""The protocol layer, on floors that import only downwards (tests/test_layers.py): core/ (the
vocabulary: specs, stages, steps, messages, sessions), sum_backends/ (the secure-sum backends) and
collectives/ (the clients' needs), transports/ (the wire codec, in one process, over gRPC), and engine/ (the contexts a plan
runs in, the client host, one process's wiring).

Installed as ``secure_fedgraph.protocol`` (pyproject package-dir); import it by that name.
"""
