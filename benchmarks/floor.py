"""Benchmark: the floor of one mask round, what its cryptography must cost on this machine.

Why: a mask round's cost is only "too slow" against what its cryptography must cost. This
counts each primitive one client and the server perform in one round of the mask protocol
(:func:`round_counts`, read off protocol/sum_backends/mask_client.py and mask_server.py), times
each primitive here with the project's own calls (:func:`measure`), and prints CPU seconds per
client, for the server, and the round's cryptography spread over this machine's cores:

    floor = plain round (measured in the same sitting) + (n x client CPU s + server CPU s) / cores

A process hosting many clients checks each signature once for all of them (crypto/keys.py:
``_verified_once``), and builds a sparse epoch's view and graph once (keyring.sparse_view,
neighbours.py): with ``hosts`` (client processes, as the benchmark ran them) the floor counts
what each process computes (:func:`host_verifications`), not n clients' own; ``client_cpu_s``
stays what one client on its own device pays.

Not counted: anything the plain round also pays (gRPC, TLS, encoding, the server's sum of the
inputs), the per-run set-up (session opening, the Welcome's certificates) and Python's own
bookkeeping around the primitives. Degree and threshold default to what the project's default
adversary needs for n (``MaskConfig().resolve``), the ring to the default config's at
``--clip-range`` (``MaskConfig.encoding``).

Run:
    .venv/bin/python benchmarks/floor.py                                  # n=100, L=1e5
    .venv/bin/python benchmarks/floor.py --n 100,200,1000 --L 1e5 --plain-s 0.3
    .venv/bin/python benchmarks/floor.py --n 200 --degree 16 --threshold 9 --json

Other benchmarks call :func:`floor_seconds` (or :func:`floor_of_run` of :func:`mask_plan_of_run`
on a run's metrics.json, or :func:`floor_of_sums` for the sums of one key epoch); primitives are
measured once per process. This is a benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import enum
import functools
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

MB = 1e6


class Primitive(enum.Enum):
    """One cryptographic operation of the mask protocol, as the table names it (and its unit)."""

    KEYSTREAM = ("mask expansion: AES-256-CTR added into the ring", "MB")
    X25519_KEYGEN = ("X25519 key pair (or public key from a private one)", "call")
    X25519 = ("X25519 exchange", "call")
    HKDF = ("HKDF-SHA256 with its label", "call")
    ED25519_SIGN = ("Ed25519 sign", "call")
    ED25519_VERIFY = ("Ed25519 verify (key parsed from the directory)", "call")
    SHARE_SEAL = ("share envelope sealed: its key and AES-256-GCM (keyring.envelope_key, seal_shares)", "call")
    SHARE_OPEN = ("share envelope opened: its key and AES-256-GCM (keyring.envelope_key, open_shares)", "call")
    SHAMIR_SPLIT = ("Shamir split of a 32-byte secret to k holders at threshold t", "secret")
    SHAMIR_COMBINE = ("Shamir combine of t shares", "call")
    SHA256 = ("SHA-256 commitment or statement, with its label", "call")
    DIGEST = ("SHA-256 of the contribution, L float32 (resumable runs)", "call")
    MERKLE_NODE = ("SHA-256 inner node of a pair-seed Merkle tree (crypto/merkle.py)", "call")

    @property
    def text(self) -> str:
        return self.value[0]

    @property
    def unit(self) -> str:
        return self.value[1]


P = Primitive


def round_counts(n: int, L: int, degree: int, threshold: int, ring_bits: int, *, fresh_keys: bool, dropouts: int = 0,
                 resumable: bool = True) -> tuple[Counter[Primitive], Counter[Primitive]]:
    """Primitives one surviving client and the server perform in one round of one sum.

    A round is a key set-up (with ``fresh_keys``; kept keys skip it and the share opening) and
    one non-streaming sum, as fedavg-vector's rounds are. ``dropouts`` clients drop after sealing
    their shares and before their masked input (the case Shamir recovery exists for). The graph
    is complete when ``degree >= n - 1`` (neighbours.py: NeighbourGraph.build). Counts are exact
    without dropouts and with the complete graph; with dropouts on the sparse graph they are
    expectations (a dropped client's neighbours are uniform; the unmask verifications simulated). Keys kept with dropouts: the dropped clients contributed to earlier
    sums, so their mask keys stay secret: each surviving neighbour reveals its pair seed of this
    sum with them (MaskClient._on_pair_seeds, step 4b) and the server removes those masks, with
    no re-key and no Shamir recovery. Merkle inner nodes (crypto/merkle.py, MERKLE_NODE): k - 1
    per client and sum for its commitment to its pair seeds, k - 1 again when it reveals some, and
    per seed the server checks the hashes on its path (:func:`merkle_path_hashes`: their mean
    over the leaf's position, which the floor does not know; floor(log2 k) to ceil(log2 k)).

    Client, key set-up (mask_client.py), k = degree neighbours:
      MaskClient._on_advertise: RoundKeys.generate (2 key pairs); seed_commitment (1 SHA-256);
        sign_keys (1 sign); sparse: keys_hash and graph_commitment (2 SHA-256).
      MaskClient._on_graph (sparse): keys_hash and graph_commitment of its own again (2 SHA-256).
      MaskClient._build_view: graph_commitments of all n (sparse) or keys_hash of all n members
        (complete), and view_digest (n + 1 SHA-256); sparse: NeighbourGraph.build, 8n bytes of keystream.
      MaskClient._on_share_keys: per neighbour verify_keys (k verify), sparse keys_hash (k SHA-256),
        two pair_key (2k exchanges, 2k HKDF); shamir.split_many of seed and mask key (2 secrets); per
        holder two share_commitment (2k SHA-256), envelope_key and seal_shares (k seals).
      MaskClient._open_shares (first sum of an epoch): per envelope envelope_key and open_shares
        (k opens) and _dealt_as_committed (2k SHA-256).
    Client, per sum:
      MaskClient._on_input: self_mask_key (1 HKDF), pair_seed of each of the k live neighbours
        (k HKDF), add_into of the self-mask and of each of the k live neighbours' masks
        ((k + 1)(L + 1) ring elements of keystream), self_mask_commitment and the leaves of the
        commitment to the k pair seeds (1 + k SHA-256) and its tree (k - 1 Merkle nodes); ClientRole._digest_of (1 digest, resumable
        runs: the gRPC runtime's).
      MaskClient._on_consistency: consistency_statement (1 SHA-256), identity.sign (1 sign).
      MaskClient._on_pair_seeds (kept keys with dropouts, a client with a dropped neighbour: all on
        the complete graph, the expected share on the sparse one): its k pair seeds, their leaves and
        tree again (k HKDF, k SHA-256, k - 1 Merkle nodes), _vouch for each dropped neighbour (the verifications below).
      MaskClient._on_unmask: _vouch for itself (t verify), then for each dropped neighbour the
        signers of its group it still needs (complete graph: none; sparse: simulated,
        :func:`_unmask_verifications`; with kept keys the dropped neighbours' groups come first);
        self_mask_key again (1 HKDF).
    Server (mask_server.py):
      MaskServer._key_setup, accept_advert: verify_keys (n verify); _check_fresh_keys (2n
        exchanges with the low-order probe). Sparse, accept_nonce: keys_hash and graph_commitment
        (2n SHA-256); then keys_hash of all n again and view_digest (n + 1 SHA-256; complete: the
        same n + 1 only); NeighbourGraph.build (8n bytes of keystream, sparse).
      MaskServer.aggregate: consistency_statement (1 SHA-256), accept_signature (n - d verify).
      MaskServer._pair_seeds (kept keys with dropouts, in place of the recovery below): each seed's
        leaf (1 SHA-256 per surviving neighbour of a dropped client) and its path (Merkle nodes, the
        mean over positions) and one vector of keystream.
      MaskServer._unmask: _self_key_verified (n - d SHA-256), _share_verified of each revealed
        mask-key share (d x s SHA-256, s = a dropped client's surviving neighbours); per dropped
        client _cancel_pairwise: shamir.combine (1), its public key from the rebuilt private key (1
        key pair), pair_key, pair_seed and add_into with each surviving neighbour (s exchanges, 2s HKDF, s
        vectors of keystream); each survivor's self-mask removed (n - d vectors of keystream).

    Returns:
        (counts per surviving client, counts for the server); KEYSTREAM in MB, SHAMIR_SPLIT in
        secrets (a client splits its two in one call), the rest in calls.
    """
    if not 0 <= dropouts <= n - 2:
        raise ValueError(f"dropouts must be in [0, n - 2] = [0, {n - 2}], got {dropouts}")
    k, t, d = min(degree, n - 1), threshold, dropouts
    vector_mb = (L + 1) * (ring_bits // 8) / MB  # a ring vector: L values and the clipped-count lane
    pair_seeds = not fresh_keys and d > 0  # the dropped contributed to the kept epoch's earlier sums
    client = _client_sum(n, k, t, d, vector_mb, resumable, open_shares=fresh_keys, pair_seeds=pair_seeds)
    server = _server_sum(n, k, d, vector_mb, pair_seeds=pair_seeds)
    if fresh_keys:
        client, server = _client_key_setup(n, k) + client, _server_key_setup(n, k) + server
    return client, server


def _client_key_setup(n: int, k: int) -> Counter[Primitive]:
    sparse = k < n - 1
    return Counter({P.X25519_KEYGEN: 2, P.ED25519_SIGN: 1, P.ED25519_VERIFY: k, P.X25519: 2 * k, P.HKDF: 2 * k,
                    P.SHAMIR_SPLIT: 2, P.SHARE_SEAL: k, P.KEYSTREAM: 8 * n / MB if sparse else 0,
                    P.SHA256: 1 + (n + 1) + 2 * k + (4 + k if sparse else 0)})


def _client_input(k: int, vector_mb: float, resumable: bool) -> Counter[Primitive]:
    return Counter({P.HKDF: 1 + k, P.KEYSTREAM: (k + 1) * vector_mb, P.SHA256: 1 + k, P.DIGEST: int(resumable),
                    P.MERKLE_NODE: max(0, k - 1)})


def _client_sum(n: int, k: int, t: int, d: int, vector_mb: float, resumable: bool, *, open_shares: bool,
                pair_seeds: bool = False) -> Counter[Primitive]:
    counts = _client_input(k, vector_mb, resumable)
    if open_shares:
        counts.update({P.SHARE_OPEN: k, P.SHA256: 2 * k})
    counts.update({P.SHA256: 1, P.ED25519_SIGN: 1, P.ED25519_VERIFY: _unmask_verifications(n, k, t, d, dropped_first=pair_seeds),
                   P.HKDF: 1})
    if pair_seeds:  # asked at 4b when one of its k neighbours dropped: certain on the complete graph
        asked = 1.0 if k >= n - 1 else 1 - math.comb(n - 1 - k, d) / math.comb(n - 1, d)
        counts.update({P.HKDF: k * asked, P.SHA256: k * asked, P.MERKLE_NODE: max(0, k - 1) * asked})
    return counts


@functools.lru_cache(maxsize=256)
def merkle_path_hashes(count: int) -> tuple[int, ...]:
    """Per leaf position of a tree of ``count`` leaves, the inner nodes crypto/merkle.verify
    hashes to open it (an unpaired node moves up unhashed)."""
    lengths = []
    for index in range(count):
        hashes, width = 0, count
        while width > 1:
            hashes += index ^ 1 < width
            index, width = index >> 1, (width + 1) // 2
        lengths.append(hashes)
    return tuple(lengths)


@functools.lru_cache(maxsize=256)
def _unmask_verifications(n: int, k: int, t: int, d: int, *, dropped_first: bool = False, trials: int = 100) -> float:
    """Signatures a survivor checks at unmask (MaskClient._on_unmask, _vouch): t of its own group,
    then for each dropped neighbour, in id order, signers of that one's group, in id order, until t
    of it are verified (``dropped_first``: the dropped neighbours' groups first, at 4b, then its
    own). Exactly t on the complete graph or without dropouts; on the sparse graph
    (a ring, each group the k + 1 clients around one) with d dropped, the mean over ``trials``
    seeded draws of the ring order and the dropped clients (benchmarks are not tests: no global RNG)."""
    if d == 0 or k >= n - 1:
        return float(t)
    import numpy as np

    rng, half, total = np.random.default_rng(0), k // 2, 0
    for _ in range(trials):
        ids = rng.random(n)  # client ids in ring order: sorting by id is sorting by this
        dropped = set(rng.choice(np.arange(1, n), size=d, replace=False).tolist())  # this client sits at 0
        group = lambda c: {(c + j) % n for j in range(-half, half + 1)}  # noqa: E731
        vouched: set[int] = set()
        neighbours = sorted(group(0) & dropped, key=ids.__getitem__)
        for c in [*neighbours, 0] if dropped_first else [0, *neighbours]:
            members = group(c)
            need = t - len(vouched & members)
            if need > 0:
                vouched.update(sorted(members - vouched - dropped, key=ids.__getitem__)[:need])
        total += len(vouched)
    return total / trials


def host_verifications(n: int, k: int, t: int, d: int = 0, *, hosts: int, fresh_keys: bool,
                       ring: Sequence[int] | None = None, dropped: Sequence[int] = (), trials: int | None = None) -> float:
    """Ed25519 verifications all client processes compute in one round of one sum, each
    process checking a (key, signature, message) once for all the clients it hosts.

    ``hosts`` processes hold the clients in contiguous id ranges (runs/launch.py: id_ranges); 0:
    one process with the server, which checks every advert and consistency signature before a
    client sees it, so the clients compute none. A process checks the union of what its clients
    check (:func:`round_counts`): with ``fresh_keys`` the signed keys of every neighbour of one of
    them; per sum, the signers each surviving client vouches with (MaskClient._vouch: t of its
    own group by id, then for each dropped neighbour by id, signers of that one's group by id
    until t). The complete graph gives every process all n keys (n - 1 for a lone client) and the
    same first t signers. The sparse graph is the ring of ``ring`` (client ids in ring order,
    NeighbourGraph's) with the d clients ``dropped`` (exact), or the mean over ``trials`` seeded
    random rings and dropouts (the last d ids of a ring, placed at random, drop).
    """
    if hosts == 0:
        return 0.0
    hosts = min(hosts, n)
    bounds = [round(i * n / hosts) for i in range(hosts + 1)]
    if k >= n - 1:  # t signers for a host with a survivor (exactly, with ``dropped``; else the chance it has one)
        ranges = [range(bounds[i], bounds[i + 1]) for i in range(hosts)]
        alive = [(any(c not in dropped for c in r) if dropped or not d else 1 - math.comb(d, len(r)) / math.comb(n, len(r))) for r in ranges]
        return float(sum((n if len(r) > 1 else n - 1) * fresh_keys + t * a for r, a in zip(ranges, alive, strict=True)))
    import bisect

    import numpy as np

    host_of = [bisect.bisect_right(bounds, i) - 1 for i in range(n)]
    rng, half = np.random.default_rng(0), k // 2
    rings = [list(ring)] if ring is not None else [rng.permutation(n).tolist() for _ in range(trials or (1 if n >= 5000 else 20))]
    total = 0
    for order in rings:
        gone = set(dropped) if ring is not None else set(order[-d:]) if d else set()  # a random ring: its last d are random
        at = {c: i for i, c in enumerate(order)}
        closed = lambda c: [order[(at[c] + j) % n] for j in range(-half, half + 1)]  # noqa: E731
        keys: list[set[int]] = [set() for _ in range(hosts)]
        signers: list[set[int]] = [set() for _ in range(hosts)]
        for c in order:
            host = host_of[c]
            group = closed(c)
            if fresh_keys:
                keys[host].update(x for x in group if x != c)
            if c in gone:
                continue
            vouched: set[int] = set()
            neighbours = sorted(set(group) & gone)
            for v in [*neighbours, c] if not fresh_keys else [c, *neighbours]:  # kept keys: the dropped first (4b, pair seeds)
                members = set(closed(v))
                need = t - len(vouched & members)
                if need > 0:
                    vouched.update(sorted(members - vouched - gone)[:need])
            signers[host] |= vouched
        total += sum(len(x) for x in keys) + sum(len(x) for x in signers)
    return total / len(rings)


def _server_key_setup(n: int, k: int) -> Counter[Primitive]:
    sparse = k < n - 1
    return Counter({P.ED25519_VERIFY: n, P.X25519: 2 * n, P.SHA256: (3 * n + 1) if sparse else (n + 1),
                    P.KEYSTREAM: 8 * n / MB if sparse else 0})


def _server_sum(n: int, k: int, d: int, vector_mb: float, *, pair_seeds: bool = False) -> Counter[Primitive]:
    survivors = n - d
    surviving_neighbours = k * survivors / (n - 1)  # of one dropped client
    if pair_seeds:  # each surviving neighbour's seed checked against its commitment and its mask removed
        path = sum(merkle_path_hashes(k)) / k  # the dropped client's position in each revealer's list: unknown
        return Counter({P.SHA256: 1 + survivors + d * surviving_neighbours, P.ED25519_VERIFY: survivors,
                        P.MERKLE_NODE: d * surviving_neighbours * path, P.KEYSTREAM: (survivors + d * surviving_neighbours) * vector_mb})
    return Counter({P.SHA256: 1 + survivors + d * surviving_neighbours, P.ED25519_VERIFY: survivors, P.SHAMIR_COMBINE: d,
                    P.X25519_KEYGEN: d, P.X25519: d * surviving_neighbours, P.HKDF: 2 * d * surviving_neighbours,
                    P.KEYSTREAM: (survivors + d * surviving_neighbours) * vector_mb})


# --- measuring the primitives ------------------------------------------------------------------
def _seconds_each(call: Callable[[], object], *, batch_s: float = 0.04, batches: int = 5) -> float:
    """CPU seconds one ``call`` takes on this thread: the least mean over ``batches`` batches of
    about ``batch_s`` each (thread CPU time, so other work on a shared machine does not count)."""
    call()
    reps = 1
    while True:  # a batch size that takes about batch_s
        started = time.thread_time()
        for _ in range(reps):
            call()
        spent = time.thread_time() - started
        if spent >= batch_s / 4:
            break
        reps *= 2
    reps = max(1, round(reps * batch_s / spent))
    best = float("inf")
    for _ in range(batches):
        started = time.thread_time()
        for _ in range(reps):
            call()
        best = min(best, (time.thread_time() - started) / reps)
    return best


@functools.cache
def _fixed_costs() -> dict[Primitive, float]:
    """Seconds per call of the primitives whose size does not depend on the run, with the
    project's calls and labels (keyring.py, crypto/keys.py, crypto/envelope.py)."""
    from secure_fedgraph.crypto import keys, merkle, shamir
    from secure_fedgraph.crypto.keys import IdentityKey, RoundKeys, agree, derive_key
    from secure_fedgraph.crypto.labels import Purpose, label
    from secure_fedgraph.protocol.sum_backends.keyring import envelope_key, open_shares, seal_shares, share_commitment

    session = os.urandom(16)
    lab = {"session": session, "round": 3, "epoch": 0}
    ours, theirs = RoundKeys.generate(), RoundKeys.generate()
    identity = IdentityKey.generate()
    statement = label(Purpose.ADVERTISE, session, 3, 0, 17, theirs.share_public, theirs.mask_public, os.urandom(32))
    signature = identity.sign(statement)
    secret, key, view = agree(ours.share, theirs.share_public), os.urandom(32), os.urandom(32)
    payload = os.urandom(2 * shamir.SHARE_BYTES)  # a seed share and a mask-key share
    hashes = {"seed_hash": os.urandom(16), "key_hash": os.urandom(16)}
    sealed = seal_shares(envelope_key(key, **lab, owner=17, holder=42), payload, **hashes, **lab, view=view, owner=17, holder=42)

    def seal_one():
        return seal_shares(envelope_key(key, **lab, owner=17, holder=42), payload, **hashes, **lab, view=view, owner=17, holder=42)

    def open_one():
        return open_shares(envelope_key(key, **lab, owner=17, holder=42), sealed, **hashes, **lab, view=view)
    return {
        P.X25519_KEYGEN: _seconds_each(RoundKeys.generate) / 2,
        P.X25519: _seconds_each(lambda: agree(ours.mask, theirs.mask_public)),
        P.HKDF: _seconds_each(lambda: derive_key(secret, label(Purpose.PAIRWISE_MASK, session, 3, 0, 17, 42))),
        P.ED25519_SIGN: _seconds_each(lambda: identity.sign(statement)),
        P.ED25519_VERIFY: _seconds_each(lambda: keys._verify(identity.public_bytes, signature, statement)),  # a check no process made before
        P.SHARE_SEAL: _seconds_each(seal_one),
        P.SHARE_OPEN: _seconds_each(open_one),
        P.SHA256: _seconds_each(lambda: share_commitment(payload[:shamir.SHARE_BYTES], kind="seed", **lab, owner=17, holder=42)),
        P.MERKLE_NODE: _seconds_each(lambda: merkle._node(key, view)),
    }


@functools.cache
def _keystream_cost(L: int, ring_bits: int) -> float:
    """Seconds per MB of MaskPRG.add_into on a ring vector of L + 1 elements (at most 2^21: the
    rate per byte is flat beyond a few hundred kB)."""
    import numpy as np

    from secure_fedgraph.crypto.prg import MaskPRG, ring_dtype

    acc, prg, key = np.zeros(min(L + 1, 2**21), dtype=ring_dtype(ring_bits)), MaskPRG(), os.urandom(32)
    return _seconds_each(lambda: prg.add_into(acc, key, stream_id=1, sign=1)) / (acc.nbytes / MB)


@functools.cache
def _digest_cost(L: int) -> float:
    """Seconds per SHA-256 of one client's contribution (roles.py: _digest, for R-RESUME)."""
    import numpy as np

    from secure_fedgraph.protocol.sum_backends.roles import _digest

    x = np.zeros(L, dtype=np.float32)
    return _seconds_each(lambda: _digest(x))


@functools.cache
def _shamir_costs(holders: int, threshold: int) -> tuple[float, float]:
    """Seconds per secret of shamir.split_many of two 32-byte secrets to ``holders`` at
    ``threshold`` (a client's seed and mask key, in one call), and per shamir.combine of
    ``threshold`` shares."""
    from secure_fedgraph.crypto import shamir

    secrets, xs = [os.urandom(shamir.SECRET_BYTES) for _ in range(2)], list(range(1, holders + 1))
    shares = shamir.split(secrets[0], xs=xs, threshold=threshold)
    some = dict(list(shares.items())[:threshold])
    return (_seconds_each(lambda: shamir.split_many(secrets, xs=xs, threshold=threshold), batches=3) / len(secrets),
            _seconds_each(lambda: shamir.combine(some, threshold=threshold), batches=3))


def measure(*, L: int, ring_bits: int, degree: int, threshold: int) -> dict[Primitive, float]:
    """CPU seconds per unit of each primitive on this machine (measured once per process and size)."""
    split, combine = _shamir_costs(max(degree, threshold), threshold)
    return {**_fixed_costs(), P.KEYSTREAM: _keystream_cost(L, ring_bits), P.DIGEST: _digest_cost(L),
            P.SHAMIR_SPLIT: split, P.SHAMIR_COMBINE: combine}


def cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def floor_seconds(n: int, L: int, degree: int, threshold: int, ring_bits: int, *, plain_s: float, fresh_keys: bool,
                  measured: Mapping[Primitive, float] | None = None, dropouts: int = 0, resumable: bool = True,
                  cores_used: int | None = None, hosts: int | None = None) -> dict:
    """A mask round's floor: ``plain_s`` (the plain round, measured in the same sitting) plus the
    round's cryptography, n clients' and the server's CPU seconds, spread over the cores
    (clients that drop are charged the key set-up they did before).

    Args:
        n, L, degree, threshold, ring_bits: the round (degree >= n - 1: the complete graph).
        plain_s: seconds of the plain round measured in the same sitting (0: the crypto alone).
        fresh_keys: a key set-up this round (False: keys kept from an earlier round).
        measured: seconds per unit of each primitive (default: :func:`measure`, cached).
        dropouts, resumable: see :func:`round_counts`.
        cores_used: default :func:`cores`.
        hosts: client processes the round ran in, each checking a signature once for all its
            clients (:func:`host_verifications`; 0: one process with the server); None: every
            client on its own device, checking its own.

    Returns:
        JSON-ready: floor_s, plain_s, client_cpu_s (one client on its own device), server_cpu_s,
        crypto_cpu_s, spread_s, cores, hosts, host_verifications, and per primitive its counts and
        microseconds per unit.
    """
    costs = measured if measured is not None else measure(L=L, ring_bits=ring_bits, degree=degree, threshold=threshold)
    client, server = round_counts(n, L, degree, threshold, ring_bits, fresh_keys=fresh_keys, dropouts=dropouts, resumable=resumable)
    dropped = _client_key_setup(n, min(degree, n - 1)) if fresh_keys else Counter()  # what a client that drops did first
    client_s, server_s, dropped_s = (sum(count * costs[p] for p, count in party.items()) for party in (client, server, dropped))
    used = cores_used or cores()
    crypto = (n - dropouts) * client_s + dropouts * dropped_s + server_s
    shared = None
    if hosts is not None:  # a process computes once what its clients compute alike
        verify = costs[P.ED25519_VERIFY]
        shared = host_verifications(n, min(degree, n - 1), threshold, dropouts, hosts=hosts, fresh_keys=fresh_keys)
        crypto += (shared - (n - dropouts) * client[P.ED25519_VERIFY] - dropouts * dropped[P.ED25519_VERIFY]) * verify
        if fresh_keys and degree < n - 1:  # sparse: the n commitments and view digest (keyring.sparse_view), the graph (neighbours._built)
            view_s, graph_s = (n + 1) * costs[P.SHA256], 8 * n / MB * costs[P.KEYSTREAM]
            crypto += (max(hosts, 1) * view_s + hosts * graph_s) - n * (view_s + graph_s)  # in one process the server built the graph
    return {
        "n": n, "L": L, "degree": min(degree, n - 1), "threshold": threshold, "ring_bits": ring_bits, "fresh_keys": fresh_keys,
        "dropouts": dropouts, "cores": used, "hosts": hosts, "host_verifications": shared,
        "plain_s": plain_s, "client_cpu_s": client_s, "server_cpu_s": server_s,
        "crypto_cpu_s": crypto, "spread_s": crypto / used, "floor_s": plain_s + crypto / used,
        "primitives": {p.name: {"client": client[p], "server": server[p], "us_per_unit": costs[p] * 1e6, "unit": p.unit} for p in Primitive},
    }


def default_plan(n: int, L: int, *, clip_range: float | None = None, graph: str = "auto") -> tuple[int, int, int]:
    """(degree, threshold, ring_bits) the project's default config gives n clients summing L values:
    MaskConfig.resolve (the default adversary's graph: complete up to 100 clients unless ``graph``
    is "sparse") and MaskConfig.encoding (the smallest ring that holds the sum at ``clip_range``,
    default the config's)."""
    from secure_fedgraph.protocol.sum_backends.config import GraphKind, MaskConfig

    config = MaskConfig(graph=GraphKind(graph), **({} if clip_range is None else {"clip_range": clip_range}))
    plan = config.resolve(n, None)
    return plan.degree, plan.threshold, config.encoding(n, L).ring_bits


def mask_plan_of_run(metrics: Mapping, *, n: int, L: int) -> dict | None:
    """The degree and threshold a mask run's key set-up announced and the ring its configuration
    gives n clients summing L values, from its metrics.json; None for a run of another backend."""
    from secure_fedgraph.protocol.sum_backends.config import config_from_dict

    plan = metrics.get("key_setup") or {}
    if "degree" not in plan:
        return None
    ring_bits = config_from_dict(metrics["secure_sum"]).mask.encoding(n, L).ring_bits
    return {"degree": plan["degree"], "threshold": plan["threshold"], "ring_bits": ring_bits}


def floor_of_run(plan: Mapping | None, *, n: int, L: int, plain_s: float | None, fresh_keys: bool, hosts: int | None) -> dict | None:
    """:func:`floor_seconds` of a run's :func:`mask_plan_of_run` in ``hosts`` client processes, over
    the plain round of the same sitting; None without either."""
    if plan is None or plain_s is None:
        return None
    return floor_seconds(n, L, plan["degree"], plan["threshold"], plan["ring_bits"], plain_s=plain_s, fresh_keys=fresh_keys, hosts=hosts)


def floor_of_sums(plan: Mapping | None, sums: Sequence[tuple[int, int]], *, n: int, plain_s: float | None, fresh_keys: bool,
                  hosts: int | None, resumable: bool = True, cores_used: int | None = None,
                  measured: Mapping[Primitive, float] | None = None) -> dict:
    """The floor of a timed interval that holds the mask sums ``sums`` among n clients, in order
    and in one key epoch: with ``fresh_keys`` the first comes after a key set-up in the interval
    (:func:`round_counts` with fresh keys: the set-up and the share opening), every other one with
    the keys kept. Each sum's cryptographic CPU (:func:`floor_seconds` over no plain round),
    spread over the cores, is added once to ``plain_s``, the plain interval of the same sitting.

    Args:
        plan: the run's degree and threshold (:func:`mask_plan_of_run`); None only without sums.
        sums: (L, ring_bits) of each sum (:func:`sum_sizes`); none: no mask cryptography at all.
        plain_s: the plain interval of the same sitting; None where the benchmark ran none: then
            floor_s is the cryptography alone and the tables show no floor (:func:`floor_cell`).
        hosts, resumable, cores_used, measured: see :func:`floor_seconds`.

    Returns:
        JSON-ready: floor_s, plain_s, crypto_cpu_s, spread_s, cores, and per distinct sum its L,
        ring_bits, fresh_keys, count and crypto_cpu_s (each).
    """
    if sums and plan is None:
        raise ValueError(f"{len(sums)} mask sums need the run's degree and threshold (plan), got None")
    groups: Counter[tuple[int, int, bool]] = Counter((L, ring_bits, fresh_keys and i == 0) for i, (L, ring_bits) in enumerate(sums))
    used = cores_used or cores()
    each = {(L, ring_bits, fresh): floor_seconds(n, L, plan["degree"], plan["threshold"], ring_bits, plain_s=0.0, fresh_keys=fresh,
                                                 measured=measured, resumable=resumable, cores_used=used, hosts=hosts)["crypto_cpu_s"]
            for L, ring_bits, fresh in groups}
    crypto = sum((count * each[key] for key, count in groups.items()), 0.0)
    return {
        "n": n, "degree": plan and min(plan["degree"], n - 1), "threshold": plan and plan["threshold"], "resumable": resumable, "hosts": hosts,
        "cores": used, "plain_s": plain_s, "crypto_cpu_s": crypto, "spread_s": crypto / used, "floor_s": (plain_s or 0.0) + crypto / used,
        "sums": [{"L": L, "ring_bits": ring_bits, "fresh_keys": fresh, "count": count, "crypto_cpu_s": each[(L, ring_bits, fresh)]}
                 for (L, ring_bits, fresh), count in groups.items()],
    }


def sum_sizes(specs: Sequence, *, mask: object, n: int) -> list[tuple[int, int]]:
    """(L, ring_bits) of each SumSpec in ``specs`` as the MaskConfig ``mask`` encodes it for n
    clients (its own clip range and resolution: MaskConfig.encoding_of)."""
    return [(spec.size, mask.encoding_of(spec, n).ring_bits) for spec in specs]


def ratio_to_floor(seconds: float | None, floor: Mapping | None) -> str:
    """The "÷ floor" cell of a benchmark table: "—" without a floor or its plain round."""
    return "—" if seconds is None or floor is None or floor["plain_s"] is None else f"{seconds / floor['floor_s']:.2f}x"


def floor_cell(floor: Mapping | None, spec: str = ".3f") -> str:
    """The "floor s" cell of a benchmark table: "—" without a floor or its plain round."""
    return "—" if floor is None or floor["plain_s"] is None else format(floor["floor_s"], spec)


# --- the command line ------------------------------------------------------------------------
def _primitive_table(result: dict) -> str:
    n = result["n"]
    lines = ["| primitive | unit | per client | µs per unit | client CPU s | server | server CPU s |", "|---|---|---|---|---|---|---|"]
    for p in Primitive:
        row = result["primitives"][p.name]
        us = row["us_per_unit"]
        lines.append(f"| {p.text} | {p.unit} | {row['client']:,.4g} | {us:,.4g} | {row['client'] * us / 1e6:.4f} | "
                     f"{row['server']:,.4g} | {row['server'] * us / 1e6:.4f} |")
    lines.append(f"| **total** | | | | **{result['client_cpu_s']:.4f}** | | **{result['server_cpu_s']:.4f}** |")
    lines.append(f"\n(n x client + server) / cores = ({n} x {result['client_cpu_s']:.4f} + {result['server_cpu_s']:.4f}) / "
                 f"{result['cores']} = **{result['spread_s']:.3f} s**" if not result["dropouts"] and result["hosts"] is None else
                 f"\ncrypto CPU / cores = {result['crypto_cpu_s']:.3f} / {result['cores']} = **{result['spread_s']:.3f} s** "
                 f"({result['dropouts']} dropped clients charged their key set-up only"
                 + (f"; {result['host_verifications']:,.0f} signature checks in {result['hosts']} client processes, "
                    "each once per process" if result["hosts"] is not None else "") + ")")
    lines.append(f"floor = plain {result['plain_s']:.3f} s + that = **{result['floor_s']:.3f} s**")
    return "\n".join(lines)


def _summary_table(results: list[dict]) -> str:
    lines = ["| n | L | degree | threshold | ring bits | keys | client CPU s | server CPU s | crypto CPU s / cores | plain s | floor s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['n']:,} | {_length(r['L'])} | {r['degree']} | {r['threshold']} | {r['ring_bits']} | "
                     f"{'fresh' if r['fresh_keys'] else 'kept'} | {r['client_cpu_s']:.4f} | {r['server_cpu_s']:.3f} | "
                     f"{r['spread_s']:.3f} | {r['plain_s']:.3f} | {r['floor_s']:.3f} |")
    return "\n".join(lines)


def cpu_model() -> str | None:
    """This machine's CPU as /proc/cpuinfo names it (None elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), None)


def _length(L: int) -> str:
    """1e5 for 100000, as the benchmark tables write L."""
    return f"{L:.0e}".replace("e+0", "e").replace("e+", "e") if L >= 1000 and float(f"{L:.0e}") == L else f"{L:,}"


def int_list(text: str) -> list[int]:
    """A comma list of counts, each written as an int or a float ("1e5")."""
    return [int(float(x)) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    from progress import running  # here: every benchmark imports this module for its floors, not its progress

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int_list, default=[100], help="comma list of client counts (participants of the round)")
    p.add_argument("--L", type=int_list, default=[100_000], help="comma list of vector lengths (values per client)")
    p.add_argument("--degree", type=int, default=None,
                   help="neighbours per client (n - 1 or more: the complete graph); default what the default adversary needs for n")
    p.add_argument("--threshold", type=int, default=None, help="Shamir threshold t; default what the default adversary needs for n")
    p.add_argument("--ring-bits", type=int, choices=(32, 64), default=None,
                   help="ring width; default the smallest the default config gives n clients summing L values at --clip-range")
    p.add_argument("--clip-range", type=float, default=None,
                   help="clip range for the default ring width (default the project's MaskConfig, 8; benchmarks/fedavg_round.py uses 1)")
    p.add_argument("--graph", choices=("auto", "complete", "sparse"), default="auto",
                   help="graph for the default degree and threshold: auto (the project's: complete up to 100 clients), or "
                        "sparse (benchmarks/fedavg_round.py's)")
    p.add_argument("--dropouts", type=int, default=0, help="clients that drop after sealing their shares, before their input")
    p.add_argument("--keys", choices=("fresh", "kept", "both"), default="both",
                   help="a key set-up every round (fresh), one kept from an earlier round (kept), or both")
    p.add_argument("--plain-s", type=float, default=0.0, help="seconds of a plain round measured in the same sitting, added to the floor")
    p.add_argument("--cores", type=int, default=None, help="cores to spread the round's CPU over; default this process's affinity mask")
    p.add_argument("--hosts", type=int, default=None,
                   help="client processes (each checks a signature once for all its clients; 0: one process with the server); "
                        "default every client on its own device")
    p.add_argument("--not-resumable", action="store_true", help="count no contribution digest (plans that cannot resume, in-process runs)")
    p.add_argument("--json", action="store_true", help="print one JSON line per (n, L, keys) and no tables")
    args = p.parse_args(argv)
    started = time.monotonic()
    results = []
    for n in args.n:
        for L in args.L:
            degree, threshold, ring_bits = default_plan(n, L, clip_range=args.clip_range, graph=args.graph)
            degree = args.degree if args.degree is not None else degree
            threshold = args.threshold if args.threshold is not None else threshold
            ring_bits = args.ring_bits or ring_bits
            for fresh in {"fresh": (True,), "kept": (False,), "both": (True, False)}[args.keys]:
                with running(f"floor n={n} L={_length(L)} {'fresh keys' if fresh else 'keys kept'}"):
                    results.append(floor_seconds(n, L, degree, threshold, ring_bits, plain_s=args.plain_s, fresh_keys=fresh,
                                                 dropouts=args.dropouts, resumable=not args.not_resumable, cores_used=args.cores,
                                                 hosts=args.hosts))
    machine = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "cpu": cpu_model(), "python": platform.python_version(),
               "cryptography": metadata.version("cryptography"), "measured_in_s": round(time.monotonic() - started, 1)}
    if args.json:
        for r in results:
            print(json.dumps({"record": "floor", **r, **machine}))
        return 0
    print(f"# floor.py {machine['date']}: {machine['cpu']}, {results[0]['cores']} cores, Python {machine['python']}, cryptography "
          f"{machine['cryptography']}; primitives measured in {machine['measured_in_s']} s")
    for r in results:
        print(f"\n## n={r['n']:,}, L={_length(r['L'])}, degree {r['degree']}, threshold {r['threshold']}, {r['ring_bits']}-bit ring, "
              f"{'fresh keys' if r['fresh_keys'] else 'keys kept'}, {r['dropouts']} dropouts\n")
        print(_primitive_table(r))
    print()
    print(_summary_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
