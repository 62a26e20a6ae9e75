"""Transports execute protocol steps: in one process, or across processes over gRPC.

Both implement :class:`secure_fedgraph.protocol.core.steps.Transport` and know nothing of stages,
backends or crypto; they move encoded messages and report who answered.
"""
