"""One object per distinct set of client ids in a process, shared by the clients it hosts.

Why: each logical client keeps the sets a sum is about (the live set, the survivors, the
clients whose inputs it has let be exposed), each of n ids. A host process of 2,500 clients at
n = 10,000 kept 2,500 copies of each, several GB, although they are the same sets. A client
still builds and checks the set from its own request; only the stored object is shared, and it
is immutable, so no client can change another's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

_KEPT = 16  # distinct sets remembered: a sum has a few (live, survivors, exposed), and an epoch a few sums
_sets: OrderedDict[frozenset[int], frozenset[int]] = OrderedDict()
_lock = threading.Lock()  # a host's clients answer on a pool of threads


def interned(ids: Iterable[int]) -> frozenset[int]:
    """The process's one frozenset equal to ``ids`` (a new one if none is remembered)."""
    wanted = ids if isinstance(ids, frozenset) else frozenset(ids)
    with _lock:
        kept = _sets.get(wanted)
        if kept is not None:
            _sets.move_to_end(kept)
            return kept
        _sets[wanted] = wanted
        if len(_sets) > _KEPT:
            _sets.popitem(last=False)
        return wanted
