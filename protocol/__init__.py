"""The protocol layer: secure-sum backends now; collectives, round plans and transports next.

Installed as ``secure_fedgraph.protocol`` (pyproject package-dir); import it by that name.
"""
