"""Benchmark: what dealing and opening the share envelopes costs a client, in process.

The CPU time of ``MaskClient._on_share_keys`` (verify the neighbours' keys, derive the pair keys,
split the two secrets, commit to and seal each holder's shares) and ``MaskClient._open_shares``
(open each envelope dealt to this client and check it against its commitments), per client,
summed over one in-process round of n clients on the complete graph (k = n - 1; one process, so
each signature is verified once for all: what is left is the dealing and opening themselves).
Measured with ``time.process_time`` around the two handlers. Run it in two checkouts, alternating,
to compare a change (benchmarks/README.md, "Share envelopes as 128-byte records").

Run:
    .venv/bin/python benchmarks/share_envelopes.py --n 100 --repeat 2

Prints one JSON line per round: n, k, deal_ms_per_client, open_ms_per_client. This is a
benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def one_round(n: int) -> dict:
    from secure_fedgraph.protocol.engine.local import local_session
    from secure_fedgraph.protocol.sum_backends.config import Backend, SecureSumConfig
    from secure_fedgraph.protocol.sum_backends.mask_client import MaskClient
    from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy

    spent = {"deal": 0.0, "open": 0.0}
    originals = {"deal": MaskClient._on_share_keys, "open": MaskClient._open_shares}

    def timed(name):
        def wrapper(*args, **kwargs):
            started = time.process_time()
            try:
                return originals[name](*args, **kwargs)
            finally:
                spent[name] += time.process_time() - started
        return wrapper

    MaskClient._on_share_keys, MaskClient._open_shares = timed("deal"), timed("open")
    try:
        session = local_session(SecureSumConfig(backend=Backend.MASK), range(n), policy=ClientPolicy())
        session.start_round()
        rng = np.random.default_rng(0)
        session.secure_sum("s", {c: {"w": rng.uniform(-1, 1, 16)} for c in range(n)})
    finally:
        MaskClient._on_share_keys, MaskClient._open_shares = originals["deal"], originals["open"]
    return {"n": n, "k": n - 1, "deal_ms_per_client": 1000 * spent["deal"] / n, "open_ms_per_client": 1000 * spent["open"] / n}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100, help="clients (complete graph up to 100 by default)")
    p.add_argument("--repeat", type=int, default=1, help="rounds to measure, each a fresh session")
    args = p.parse_args(argv)
    for _ in range(args.repeat):
        print(json.dumps(one_round(args.n)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
