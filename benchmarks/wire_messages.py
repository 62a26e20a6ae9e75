"""Benchmark: what a key set-up's repeated messages cost on and off the wire, in process.

A key set-up sends every client the members' signed keys (``ShareKeysRequest``: one body for all,
which the server encodes once and each client process decodes once) and, at unmask, the k + 1
consistency signatures that vouch for it (``UnmaskRequest``: one of its own per client, encoded by
the server and decoded by the client). This measures, per message, ``codec.encode`` and
``codec.decode`` (the least of 5 batches of thread CPU time), and the server's building of the
round's n unmask requests (``MaskServer._vouching`` and ``ServerRole._per_client``), at n clients
of degree k in ``--hosts`` client processes. Run it with each checkout's interpreter, alternating,
to compare a change (benchmarks/README.md, "Repeated messages in one call each").

Run:
    .venv/bin/python benchmarks/wire_messages.py --n 100 --degree 56 --hosts 4

Prints one JSON line: n, k, hosts, the message sizes and the µs of each step, per message, and
the milliseconds a round spends on them, server and client processes together. This is a
benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import types


def _best_us(call, batch: int = 200, tries: int = 5) -> float:
    """Least thread CPU time of one call over ``tries`` batches of ``batch`` calls, in µs."""
    best = float("inf")
    for _ in range(tries):
        started = time.thread_time()
        for _ in range(batch):
            call()
        best = min(best, time.thread_time() - started)
    return 1e6 * best / batch


def measure(n: int, degree: int, hosts: int) -> dict:
    from secure_fedgraph.protocol.core.messages import Header
    from secure_fedgraph.protocol.core.stages import Stage
    from secure_fedgraph.protocol.sum_backends.config import GraphKind
    from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer
    from secure_fedgraph.protocol.sum_backends.messages import ShareKeysRequest, Signature, SignedKeys, UnmaskRequest
    from secure_fedgraph.protocol.sum_backends.neighbours import NeighbourGraph
    from secure_fedgraph.protocol.sum_backends.roles import ServerRole
    from secure_fedgraph.protocol.transports import codec

    header = Header(os.urandom(32), 3, 4, Stage.SHARE_KEYS, -1)
    peers = tuple(SignedKeys(c, os.urandom(32), os.urandom(32), os.urandom(32), os.urandom(64)) for c in range(n))
    share_keys = ShareKeysRequest(header, peers, os.urandom(32 * n), os.urandom(32 * n))
    unmask = UnmaskRequest(header, tuple(Signature(c, os.urandom(64)) for c in range(degree + 1)))
    out: dict = {"n": n, "k": degree, "hosts": hosts}
    for name, message in (("share_keys", share_keys), ("unmask", unmask)):
        data = codec.encode(message)
        out[f"{name}_bytes"] = len(data)
        out[f"{name}_encode_us"] = _best_us(lambda m=message: codec.encode(m))
        out[f"{name}_decode_us"] = _best_us(lambda d=data: codec.decode(d))
    graph = NeighbourGraph.build(kind=GraphKind.SPARSE, participants=range(n), degree=degree, seed=os.urandom(32))
    signatures = {c: os.urandom(64) for c in range(n)}
    server = types.SimpleNamespace(_graph=graph)  # what _vouching reads of the server

    def unmask_requests() -> None:
        vouching = MaskServer._vouching(server, signatures)
        ServerRole._per_client(header, sorted(signatures), UnmaskRequest, lambda c: (vouching({c}),))

    out["unmask_requests_ms_per_round"] = _best_us(unmask_requests, batch=5) / 1000
    out["codec_ms_per_round"] = (out["share_keys_encode_us"] + hosts * out["share_keys_decode_us"]
                                 + n * (out["unmask_encode_us"] + out["unmask_decode_us"])) / 1000
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100, help="clients of the round")
    p.add_argument("--degree", type=int, default=56, help="neighbours per client (the default adversary's at n = 100: 56)")
    p.add_argument("--hosts", type=int, default=4, help="client processes, each decoding the key set-up's one body once")
    args = p.parse_args(argv)
    if not 2 <= args.degree < args.n:
        p.error(f"--degree must be in [2, n - 1], got {args.degree}")
    print(json.dumps(measure(args.n, args.degree, args.hosts)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
