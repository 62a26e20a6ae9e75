"""Per secure-sum backend, which request stage may follow which (the transition tables).

A client role is a state machine: its state is the stage of the last request it answered
(``None`` before the first). A request whose stage is not in ``TRANSITIONS[backend][state]``
is refused with a ProtocolError before any of its content is looked at. Replays are refused
separately, by the strictly increasing step number in every header.

A sum may be abandoned (a dropout in a streaming sum, a secret that cannot be recovered): the
server then goes on with the next sum's INPUT, or a re-key, from whatever stage it reached;
the client gives that sum's contribution up for good (roles.py, ``settle``).
"""

from __future__ import annotations

from secure_fedgraph.protocol.sum_backends.config import Backend
from secure_fedgraph.protocol.core.stages import Stage

__all__ = ["TRANSITIONS"]


_S = Stage
TRANSITIONS: dict[Backend, dict[Stage | None, frozenset[Stage]]] = {
    Backend.PLAIN: {
        None: frozenset({_S.INPUT}),
        _S.INPUT: frozenset({_S.DELIVER, _S.INPUT}),
        _S.DELIVER: frozenset({_S.INPUT}),
    },
    Backend.MASK: {
        None: frozenset({_S.ADVERTISE}),
        _S.ADVERTISE: frozenset({_S.GRAPH, _S.SHARE_KEYS, _S.ADVERTISE}),  # GRAPH: sparse graph only
        _S.GRAPH: frozenset({_S.SHARE_KEYS, _S.ADVERTISE}),
        _S.SHARE_KEYS: frozenset({_S.INPUT, _S.ADVERTISE}),
        _S.INPUT: frozenset({_S.CONSISTENCY, _S.DELIVER, _S.INPUT, _S.ADVERTISE}),  # DELIVER: streaming sums
        _S.CONSISTENCY: frozenset({_S.PAIR_SEEDS, _S.UNMASK, _S.INPUT, _S.ADVERTISE}),  # PAIR_SEEDS: a contributor dropped
        _S.PAIR_SEEDS: frozenset({_S.UNMASK, _S.INPUT, _S.ADVERTISE}),  # ADVERTISE: a seed missing or false, so a re-key
        _S.UNMASK: frozenset({_S.RECOVER, _S.DELIVER, _S.INPUT, _S.ADVERTISE}),
        _S.RECOVER: frozenset({_S.DELIVER, _S.INPUT, _S.ADVERTISE}),
        _S.DELIVER: frozenset({_S.INPUT, _S.ADVERTISE}),
    },
    Backend.CKKS: {
        None: frozenset({_S.ADVERTISE}),
        _S.ADVERTISE: frozenset({_S.KEY_DEAL, _S.KEY_INSTALL, _S.ADVERTISE}),
        _S.KEY_DEAL: frozenset({_S.INPUT, _S.ADVERTISE}),
        _S.KEY_INSTALL: frozenset({_S.INPUT, _S.ADVERTISE}),
        _S.INPUT: frozenset({_S.CONSISTENCY, _S.INPUT, _S.ADVERTISE}),
        _S.CONSISTENCY: frozenset({_S.DELIVER, _S.INPUT, _S.ADVERTISE}),
        _S.DELIVER: frozenset({_S.INPUT, _S.ADVERTISE, _S.VERIFY}),  # VERIFY: the aggregate failed its check somewhere
        _S.VERIFY: frozenset({_S.VERIFY, _S.INPUT, _S.ADVERTISE}),  # VERIFY again: each contribution has C + 1 checkers, one per step
    },
}
