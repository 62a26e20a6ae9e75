"""benchmarks/floor.py: the primitives it counts per round are the ones a real in-process mask
round performs, counted by wrapping the project's own calls (client roles while they handle a
request, the server otherwise), and its floor is plain + (n x client + server) / cores."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

import secure_fedgraph.protocol.sum_backends.keyring as keyring
import secure_fedgraph.protocol.sum_backends.mask_client as mask_client
import secure_fedgraph.protocol.sum_backends.mask_server as mask_server
import secure_fedgraph.protocol.sum_backends.neighbours as neighbours
import secure_fedgraph.protocol.sum_backends.roles as roles
from secure_fedgraph.crypto import merkle, shamir
from secure_fedgraph.crypto.keys import IdentityKey, RoundKeys
from secure_fedgraph.crypto.prg import MaskPRG
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions
from tests.helpers import SHAPES, make_inputs, sparse_config



def _load_benchmark(name: str, *, as_name: str):
    """benchmarks/<name>.py by its path, as module ``as_name``: a script folder, not a package (and
    opacus installs a top-level package called ``benchmarks``)."""
    spec = importlib.util.spec_from_file_location(as_name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


floor = _load_benchmark("floor", as_name="floor")  # the names the other benchmarks import them by
_load_benchmark("progress", as_name="progress")
MB, Primitive, floor_seconds, round_counts = floor.MB, floor.Primitive, floor.floor_seconds, floor.round_counts
P = Primitive
L = sum(math.prod(shape) for shape in SHAPES.values())  # 27 values per client


class Tally:
    """Primitives performed, by party: a client id while that client's role handles a request,
    "server" otherwise."""

    def __init__(self) -> None:
        self.party: int | str = "server"
        self.counts: dict[int | str, Counter] = defaultdict(Counter)
        self.checked: dict[int | str, set] = defaultdict(set)  # (key, signature, message) each party verified

    def per_host(self, n: int, hosts: int) -> int:
        """Distinct signatures the clients checked, per host process of contiguous ids (as
        id_ranges places them), summed over the hosts."""
        bounds = [round(i * n / hosts) for i in range(hosts + 1)]
        return sum(len(set().union(*(self.checked[c] for c in range(bounds[h], bounds[h + 1])))) for h in range(hosts))

    def wrap(self, call, primitive: Primitive, amount=lambda *args, **kwargs: 1):
        def counted(*args, **kwargs):
            self.counts[self.party][primitive] += amount(*args, **kwargs)
            if primitive is P.ED25519_VERIFY:
                self.checked[self.party].add(args)
            return call(*args, **kwargs)
        return counted

    def handling(self, handle):
        def as_client(role, request):
            keyring.sparse_view.cache_clear()  # every client counted as on its own device, not sharing a host's
            neighbours._built.cache_clear()
            before, self.party = self.party, role.client_id
            try:
                return handle(role, request)
            finally:
                self.party = before
        return as_client


@pytest.fixture
def tally(monkeypatch) -> Tally:
    t = Tally()
    patch = monkeypatch.setattr
    patch(mask_client.MaskClient, "handle", t.handling(mask_client.MaskClient.handle))
    patch(MaskPRG, "keystream", t.wrap(MaskPRG.keystream, P.KEYSTREAM, lambda *a, count, ring_bits, **k: count * ring_bits / 8 / MB))
    patch(RoundKeys, "generate", classmethod(t.wrap(RoundKeys.generate.__func__, P.X25519_KEYGEN, lambda *a: 2)))
    patch(keyring, "agree", t.wrap(keyring.agree, P.X25519))
    patch(mask_server, "X25519PublicKey", SimpleNamespace(from_public_bytes=t.wrap(X25519PublicKey.from_public_bytes, P.X25519)))
    patch(mask_server, "X25519PrivateKey", SimpleNamespace(
        generate=X25519PrivateKey.generate, from_private_bytes=t.wrap(X25519PrivateKey.from_private_bytes, P.X25519_KEYGEN)))
    patch(keyring, "derive_key", t.wrap(keyring.derive_key, P.HKDF))
    patch(IdentityKey, "sign", t.wrap(IdentityKey.sign, P.ED25519_SIGN))
    for module in (keyring, mask_client, mask_server):
        patch(module, "verify_signature", t.wrap(module.verify_signature, P.ED25519_VERIFY))
    patch(mask_client, "seal_shares", t.wrap(keyring.seal_shares, P.SHARE_SEAL))
    patch(mask_client, "open_shares", t.wrap(keyring.open_shares, P.SHARE_OPEN))
    patch(shamir, "split_many", t.wrap(shamir.split_many, P.SHAMIR_SPLIT, lambda secrets, **k: len(secrets)))  # split calls it too
    patch(shamir, "combine", t.wrap(shamir.combine, P.SHAMIR_COMBINE))
    patch(keyring, "_sha256", t.wrap(keyring._sha256, P.SHA256))
    patch(roles, "_digest", t.wrap(roles._digest, P.DIGEST))
    patch(merkle, "_node", t.wrap(merkle._node, P.MERKLE_NODE))
    return t


def _session(config: SecureSumConfig, n: int, **kwargs):
    """A resumable session (clients keep signed contributions, as the gRPC runtime's do)."""
    return local_session(config, range(n), signed={c: SignedContributions() for c in range(n)}, **kwargs)


def _check(tally: Tally, session, plan: dict, *, n: int, survivors, fresh_keys: bool, dropouts: int = 0) -> None:
    """``plan``: the key epoch's as the round began (a re-key announces another)."""
    ring_bits = session.server.config.mask.encoding(n, L).ring_bits
    client, server = round_counts(n, L, plan["degree"], plan["threshold"], ring_bits, fresh_keys=fresh_keys, dropouts=dropouts)
    table = lambda counts: {p: counts[p] for p in Primitive}  # noqa: E731
    for c in survivors:
        assert table(tally.counts[c]) == pytest.approx(table(client)), f"client {c}"
    # the server's Merkle paths: the floor counts their mean over positions, a round its own
    k, opened = min(plan["degree"], n - 1), tally.counts["server"][P.MERKLE_NODE]
    seeds = opened and server[P.MERKLE_NODE] / (sum(floor.merkle_path_hashes(k)) / k)
    assert min(floor.merkle_path_hashes(k)) * seeds <= opened <= max(floor.merkle_path_hashes(k)) * seeds
    assert bool(opened) == bool(server[P.MERKLE_NODE])
    others = lambda counts: {p: v for p, v in table(counts).items() if p is not P.MERKLE_NODE}  # noqa: E731
    assert others(tally.counts["server"]) == pytest.approx(others(server))


def test_merkle_path_hashes_are_what_verify_hashes(tally):
    """Per position, the inner nodes merkle.verify computes to open a leaf (counted by wrapping
    merkle._node), for tree sizes with and without unpaired nodes."""
    import hashlib

    for count in (1, 2, 5, 6, 7, 8, 13):
        leaves = [hashlib.sha256(bytes([i])).digest() for i in range(count)]
        tree = merkle.levels(leaves)
        for index, expected in enumerate(floor.merkle_path_hashes(count)):
            tally.counts.clear()
            assert merkle.verify(leaves[index], index=index, count=count, path=merkle.opening(tree, index), root=tree[-1][0])
            assert tally.counts["server"][P.MERKLE_NODE] == expected, (count, index)


def test_sparse_round_with_fresh_keys_then_kept(tally):
    n = 12
    session = _session(sparse_config(4), n)
    session.start_round()
    session.secure_sum("s0", make_inputs(range(n), seed=0))
    plan = session.server.describe()
    assert plan["graph"] == "sparse"
    _check(tally, session, plan, n=n, survivors=range(n), fresh_keys=True)
    tally.counts.clear()
    session.secure_sum("s1", make_inputs(range(n), seed=1))  # the same key epoch: keys kept
    _check(tally, session, plan, n=n, survivors=range(n), fresh_keys=False)


def test_complete_round_with_a_dropout(tally):
    """Client 3 drops before its input: the server rebuilds its mask key and removes its masks."""
    n = 7
    session = _session(SecureSumConfig(backend=Backend.MASK), n, drop={Stage.INPUT: {3}})
    session.start_round()
    result = session.secure_sum("s0", make_inputs(range(n)))
    assert result.contributors == frozenset(range(n)) - {3}
    _check(tally, session, session.server.describe(), n=n, survivors=result.contributors, fresh_keys=True, dropouts=1)


def test_kept_keys_and_a_dropout_reveal_pair_seeds(tally):
    """With keys kept, a client that contributed before and drops keeps its mask key: its
    neighbours reveal their pair seeds of this sum with it, and the epoch goes on (no re-key)."""
    n = 7
    session = _session(SecureSumConfig(backend=Backend.MASK), n, drop={CrashPoint(Stage.INPUT, nth=2): {3}})
    session.start_round()
    session.secure_sum("s0", make_inputs(range(n), seed=0))
    plan, epoch = session.server.describe(), session.server._epoch
    tally.counts.clear()
    result = session.secure_sum("s1", make_inputs(range(n), seed=1))
    assert result.contributors == frozenset(range(n)) - {3}
    assert session.server._epoch == epoch and session.server.describe()["degree"] == n - 1  # the same key epoch
    _check(tally, session, plan, n=n, survivors=result.contributors, fresh_keys=False, dropouts=1)


@pytest.mark.parametrize("hosts", [1, 3, 12])
def test_host_verifications_are_the_distinct_signatures_each_process_checks(tally, hosts):
    """A process checks a signature once for all its clients (keys._verified_once): the floor's
    count per host is the union of what a real round's clients verified, host by host, on the
    round's own ring; a kept epoch's sum checks only consistency signatures."""
    n = 12
    session = _session(sparse_config(4), n)
    session.start_round()
    session.secure_sum("s0", make_inputs(range(n), seed=0))
    plan, ring = session.server.describe(), session.server._graph._ring
    k, t = plan["degree"], plan["threshold"]
    assert tally.per_host(n, hosts) == floor.host_verifications(n, k, t, hosts=hosts, fresh_keys=True, ring=ring)
    if hosts == n:  # one client a process: every check its own
        assert tally.per_host(n, hosts) == sum(tally.counts[c][P.ED25519_VERIFY] for c in range(n))
    tally.counts.clear(), tally.checked.clear()
    session.secure_sum("s1", make_inputs(range(n), seed=1))
    assert tally.per_host(n, hosts) == floor.host_verifications(n, k, t, hosts=hosts, fresh_keys=False, ring=ring)


def test_host_verifications_with_a_dropout_and_the_complete_graph(tally):
    """Client 3 drops before its input: every host vouches with the same first t signers."""
    n = 7
    session = _session(SecureSumConfig(backend=Backend.MASK), n, drop={Stage.INPUT: {3}})
    session.start_round()
    session.secure_sum("s0", make_inputs(range(n)))
    plan = session.server.describe()
    for hosts in (1, 2, 7):
        assert tally.per_host(n, hosts) == floor.host_verifications(n, plan["degree"], plan["threshold"], 1, hosts=hosts, fresh_keys=True,
                                                                    dropped=[3])


def test_in_process_clients_compute_no_verification_the_server_made(monkeypatch):
    """In one process with the server, which checks every signed key and consistency signature
    before a client sees it, the clients' checks compute nothing more (hosts=0)."""
    from secure_fedgraph.crypto import keys

    keys._verified_once.cache_clear()
    computed = []
    real = keys._verify
    monkeypatch.setattr(keys, "_verify", lambda *triple: computed.append(triple) or real(*triple))
    n = 12
    session = _session(sparse_config(4), n)
    session.start_round()
    session.secure_sum("s0", make_inputs(range(n), seed=0))
    plan = session.server.describe()
    _, server = round_counts(n, L, plan["degree"], plan["threshold"], 32, fresh_keys=True)
    assert len(computed) == server[P.ED25519_VERIFY] == 2 * n
    assert floor.host_verifications(n, plan["degree"], plan["threshold"], hosts=0, fresh_keys=True) == 0


def test_floor_is_plain_plus_the_crypto_spread_over_the_cores():
    costs = dict.fromkeys(Primitive, 1e-6)
    client, server = round_counts(100, 1000, 20, 15, 32, fresh_keys=True)
    floor = floor_seconds(100, 1000, 20, 15, 32, plain_s=0.5, fresh_keys=True, measured=costs, cores_used=4)
    assert floor["client_cpu_s"] == pytest.approx(sum(client.values()) * 1e-6)
    assert floor["floor_s"] == pytest.approx(0.5 + (100 * sum(client.values()) + sum(server.values())) * 1e-6 / 4)


@pytest.fixture
def unit_costs(monkeypatch) -> dict:
    """Every primitive 1 µs per unit: floors without measuring."""
    costs = dict.fromkeys(Primitive, 1e-6)
    monkeypatch.setattr(floor, "measure", lambda **kwargs: costs)
    return costs


def test_secure_sum_floor_is_its_own_runs(unit_costs):
    """A mask cell's floor: its own degree, threshold and ring, one key set-up and sum on one core
    without a digest, over the plain wall of the same (n, L); no plain cell, no floor in the table."""
    secure_sum = _load_benchmark("secure_sum", as_name="secure_sum_benchmark")
    cell = {"L": 1000, "peak_rss_mb": 100.0}
    records = [{"backend": "plain", "n": 12, "wall_seconds": 0.25, **cell},
               {"backend": "mask", "n": 12, "wall_seconds": 2.0, "graph": "complete", "degree": 11, "threshold": 8, "ring_bits": 32, **cell},
               {"backend": "mask", "n": 30, "wall_seconds": 5.0, "graph": "complete", "degree": 29, "threshold": 20, "ring_bits": 64, **cell}]
    found = secure_sum.floors(records)
    expected = floor_seconds(12, 1000, 11, 8, 32, plain_s=0.25, fresh_keys=True, resumable=False, cores_used=1, hosts=0)
    assert found[(12, 1000)]["floor_s"] == pytest.approx(expected["floor_s"])
    alone = floor_seconds(30, 1000, 29, 20, 64, plain_s=0.0, fresh_keys=True, resumable=False, cores_used=1, hosts=0)
    assert found[(30, 1000)]["plain_s"] is None and found[(30, 1000)]["floor_s"] == pytest.approx(alone["floor_s"])
    rows = secure_sum.tables(records, {}, SimpleNamespace(backends=["plain", "mask"]), found).splitlines()
    assert f"| {expected['floor_s']:.3g} | {2.0 / expected['floor_s']:.2f}x |" in rows[2]
    assert "| — | — |" in rows[3]


def test_fedrel_floor_counts_its_sums_after_one_key_setup(unit_costs):
    """FedRel's round: a key set-up, d_hat (m values, opening the shares), then the relevance sum
    in its own (64-bit) ring with the keys kept, over the plain round, all on one core."""
    fedrel_round = _load_benchmark("fedrel_round", as_name="fedrel_round_benchmark")
    args = fedrel_round.parse_args(["--clients", "3"])
    found = fedrel_round.round_floor(args, "relevance", {"degree": 2, "threshold": 3}, 0.5)
    m, values = (s.size for s in fedrel_round.FedRelSums(fedrel_round.run_config(args, "relevance")).per_round())
    crypto = sum(floor_seconds(3, L, 2, 3, ring, plain_s=0.0, fresh_keys=fresh, cores_used=1, hosts=0)["crypto_cpu_s"]
                 for L, ring, fresh in ((m, 32, True), (values, 64, False)))
    assert [(s["L"], s["ring_bits"], s["fresh_keys"]) for s in found["sums"]] == [(m, 32, True), (values, 64, False)]
    assert found["floor_s"] == pytest.approx(0.5 + crypto)
