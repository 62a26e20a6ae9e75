"""Client role of pairwise-mask secure aggregation (Bonawitz et al. 2017; Bell et al. 2020).

Per round (one key epoch; a re-key starts another, among fewer participants):
  1. ADVERTISE    check the announced graph, degree, threshold and survivor floor against
                  this client's own policy (policy.py); make X25519 keys (share, mask) and a
                  256-bit self-mask seed b; sign the public keys and a commitment to b; with
                  the sparse graph also commit to a fresh graph nonce.
  1b. GRAPH       (sparse graph) receive every member's commitment, then reveal the nonce.
  2. SHARE_KEYS   check the nonces against the commitments; the view digest (participants,
                  members, their signed keys, commitments, nonces) seeds the graph, so no one
                  chose it; of every member's signed keys (one body for all clients, so a host
                  receives them once) verify the neighbours'; derive pair keys; Shamir-share
                  b and the mask private key among the neighbours (threshold t); commit to each
                  share and seal each pair of shares to its holder under a key of that direction
                  (AES-GCM, its AAD the view, the pair and the commitments: keyring.seal_shares).
Per sum s (any number per epoch, each with its own PRG streams):
  3. INPUT        (first sum: open the shares, check them against the dealers' commitments;
                  complain, with the envelope's key, about an envelope that opens but does not
                  hold them: the server excludes the dealer or the complainer, whichever lied)
                  with distributed DP (SumSpec.noise): x clipped, Skellam noise added (noise.py)
                  y = encode(x) + PRG(K_self,s) + sum over live neighbours v of +-PRG(k_uv,s)
                  [+ if u < v, - if u > v], k_uv,s = HKDF(K_uv, s) the pair seed of this sum
                  (keyring.pair_seed: revealing it opens this pair's mask in this sum only),
                  with a commitment to K_self,s and a Merkle root over the k_uv,s (keyring.
                  pair_seed_leaves, crypto/merkle.py).
  4. CONSISTENCY  sign (view, live set, survivor set): the server cannot show clients
                  different sets, or different epochs; in a resumed run, a contribution an
                  earlier session signed into another set is refused (signed.py, R-RESUME).
                  Live neighbours the set leaves out: never their seed shares in this epoch.
  4b. PAIR_SEEDS  (only if a neighbour v that contributed earlier in the epoch is missing)
                  reveal k_uv,s and its Merkle opening, after t valid signatures from v's
                  group (see _vouch); v's mask key, which opens every sum, stays secret.
  5. UNMASK       reveal K_self,s (our own, for this sum only) and our shares of the mask keys
                  of dropped neighbours that contributed to no earlier sum of the epoch, each
                  only after checking t valid signatures on the same sets from the client
                  concerned and its neighbours (see _vouch).
  6. RECOVER      for survivors that went silent after INPUT (or revealed a key that fails its
                  commitment): reveal our shares of their b, after the same check.
  7. DELIVER      decode the ring sum; refuse it if its clipped-count lane is impossible.

Streaming sums (SumSpec.streaming, complete graph; for the many sums per batch of FedSTGD):
step 3 without the self-mask, then straight to 7. The pairwise masks cancel only if every live
client's input arrives; a dropout abandons the sum. Every live client of one is treated as
having contributed (its mask key must stay secret for the rest of the epoch).

The rules that keep every input hidden (threat_model.md M-BOTH, M-ONCE): for each peer we
reveal its seed share, or its mask-key share, or our pair seeds with it, never two of them; we
reveal a mask-key share only for a peer that was in no survivor set we signed in this epoch and
sent no streaming input in it (for one that did, the pair seed of the sum it dropped from); we
never reveal a seed share of a neighbour a survivor set we signed left out while live, and never
list live again a peer whose seed or mask-key share we revealed; a contribution that may have
been unmasked is never masked again (roles.py).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from secure_fedgraph.crypto import merkle, shamir
from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.crypto.keys import RoundKeys, verify_signature
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.crypto.prg import MaskPRG, ring_dtype
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.sum_backends.config import Backend, GraphKind, MaskPlan
from secure_fedgraph.protocol.sum_backends.keyring import (
    consistency_statement,
    envelope_key,
    graph_commitment,
    keys_hash,
    open_shares,
    pair_key,
    pair_seed,
    pair_seed_leaves,
    seal_shares,
    seed_commitment,
    self_mask_commitment,
    self_mask_key,
    share_commitment,
    sign_keys,
    sparse_view,
    verify_keys,
    view_digest,
)
from secure_fedgraph.protocol.sum_backends.messages import (
    Complaint,
    DealtToNeighbours,
    DeliverResponse,
    AdvertiseRequest,
    AdvertiseResponse,
    ConsistencyRequest,
    ConsistencyResponse,
    DeliverRequest,
    GraphRequest,
    GraphResponse,
    InputRequest,
    InputResponse,
    PairSeed,
    PairSeedsRequest,
    PairSeedsResponse,
    RecoverRequest,
    RecoverResponse,
    Share,
    ShareCommitment,
    ShareKeysRequest,
    ShareKeysResponse,
    SignedKeys,
    UnmaskRequest,
    UnmaskResponse,
)
from secure_fedgraph.protocol.sum_backends import mask_format
from secure_fedgraph.protocol.sum_backends.mask_format import NONCE_BYTES
from secure_fedgraph.protocol.sum_backends.interned import interned
from secure_fedgraph.protocol.sum_backends.neighbours import NeighbourGraph
from secure_fedgraph.protocol.sum_backends.roles import ClientRole
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec

def _nth(blob: bytes, i: int, size: int = NONCE_BYTES) -> bytes:
    """The i-th of the ``size``-byte values concatenated in ``blob``."""
    return blob[i * size : (i + 1) * size]


@dataclass
class _Epoch:
    """One key epoch's secrets and bookkeeping (lives inside the no-pickle client role)."""

    round: int
    epoch: int
    plan: MaskPlan
    participants: tuple[int, ...]
    keys: RoundKeys
    seed: bytes
    nonce: bytes
    rekeys: int = 0  # key epochs this round had before this one
    commitments: bytes | None = None  # sparse graph: every member's graph commitment, as one blob (shared by a host's clients)
    graph: NeighbourGraph | None = None
    view: bytes = b""
    peers: dict[int, SignedKeys] = field(default_factory=dict)
    pairwise: dict[int, bytes] = field(default_factory=dict)
    sealing: dict[int, bytes] = field(default_factory=dict)
    held: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # owner -> (seed share, mask-key share)
    bad_dealers: set[int] = field(default_factory=set)  # owners whose shares did not match their commitments
    shares_opened: bool = False
    live: frozenset[int] | None = None
    exposed: frozenset[int] = frozenset()  # interned, as live and survivors are: one object per host process
    gave_seed_share: set[int] = field(default_factory=set)
    gave_key_share: set[int] = field(default_factory=set)
    left_out: set[int] = field(default_factory=set)  # live neighbours a survivor set we signed left out: never their seed shares
    seeded: frozenset[int] = frozenset()  # dropped neighbours whose pair seeds of the current sum we revealed
    own_keys: SignedKeys | None = None  # what this client advertised (its hash enters the view digest)
    key_hashes: dict[int, bytes] = field(default_factory=dict)  # sparse graph: each neighbour's committed keys_hash
    sum_index: int = -1
    spec: SumSpec | None = None
    digest: bytes | None = None  # of the current sum's contribution, in runs that can resume (R-RESUME)
    encoding: FixedPoint | None = None
    survivors: frozenset[int] | None = None
    statement: bytes = b""
    signatures: dict[int, bytes] = field(default_factory=dict)  # consistency signatures offered
    vouched: set[int] = field(default_factory=set)  # ... and those verified
    verified: bool = False
    streaming: bool = False  # the current sum takes the streaming variant


class MaskClient(ClientRole):
    backend = Backend.MASK
    round_entry = frozenset({Stage.ADVERTISE})
    continuing = frozenset({Stage.CONSISTENCY, Stage.PAIR_SEEDS, Stage.UNMASK, Stage.RECOVER, Stage.DELIVER})

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._epoch: _Epoch | None = None
        self._done_sum = (-1, -1)  # (round, highest finished sum index)
        self._prg = MaskPRG()

    # --- helpers ---------------------------------------------------------------------------
    def _fail(self, what: str) -> ProtocolError:
        return ProtocolError(f"client {self.client_id}: {what}")

    def _current(self, request) -> _Epoch:
        ep = self._epoch
        if ep is None or ep.round != request.header.round:
            raise self._fail(f"no key epoch for round {request.header.round}")
        return ep

    def _labels(self, ep: _Epoch) -> dict:
        return {"session": self.session, "round": ep.round, "epoch": ep.epoch}

    # --- 1. advertise ----------------------------------------------------------------------
    def _handler(self, stage: Stage) -> Callable[[Any], Any]:
        return {
            Stage.ADVERTISE: self._on_advertise,
            Stage.GRAPH: self._on_graph,
            Stage.SHARE_KEYS: self._on_share_keys,
            Stage.INPUT: self._on_input,
            Stage.CONSISTENCY: self._on_consistency,
            Stage.PAIR_SEEDS: self._on_pair_seeds,
            Stage.UNMASK: self._on_unmask,
            Stage.RECOVER: self._on_recover,
            Stage.DELIVER: self._on_deliver,
        }[stage]

    def _on_advertise(self, request: AdvertiseRequest) -> AdvertiseResponse:
        participants = request.participants
        if list(participants) != sorted(set(participants)) or self.client_id not in participants:
            raise self._fail(f"participant list must be sorted, unique and include this client, got {participants[:8]}...")
        unknown = [c for c in participants if c not in self.directory]
        if unknown:
            raise self._fail(f"participants {unknown[:8]} are not in the identity directory")
        ep = self._epoch
        rekeys = 0
        if ep is not None and ep.round == request.header.round:  # a re-key: after a dropout, among fewer clients
            if request.epoch <= ep.epoch:
                raise self._fail(f"key epoch {request.epoch} does not follow epoch {ep.epoch} of round {ep.round}")
            if not set(participants) < set(ep.participants):
                raise self._fail("a re-key must be among fewer participants than the epoch it replaces (it follows a dropout)")
            rekeys = ep.rekeys + 1
        try:
            plan = MaskPlan(GraphKind(request.graph), request.degree, request.threshold, request.min_survivors,
                            request.max_dropped, request.streaming)
        except ValueError:
            raise self._fail(f"unknown graph kind {request.graph!r}") from None
        if plan.graph is GraphKind.AUTO:
            raise self._fail("the announced graph must be complete or sparse")
        self.policy.check_mask_round(plan, n=len(participants), n_run=self.n_run, rekeys=rekeys, key_epoch=self.key_epochs.seen + 1)
        self.key_epochs.seen += 1  # counted once accepted: over the run, across sessions (ClientPolicy.max_key_epochs)
        keys, seed, nonce = RoundKeys.generate(), os.urandom(shamir.SECRET_BYTES), self._graph_nonce()
        self._epoch = _Epoch(request.header.round, request.epoch, plan, participants, keys, seed, nonce, rekeys)
        lab = self._labels(self._epoch)
        signed = sign_keys(
            self.identity, **lab, client=self.client_id, share_public=keys.share_public,
            mask_public=keys.mask_public, seed_commitment=seed_commitment(seed, **lab, client=self.client_id),
        )
        self._epoch.own_keys = signed
        committed = graph_commitment(nonce, keys_hash(signed), **lab, client=self.client_id) if plan.graph is GraphKind.SPARSE else b""
        return AdvertiseResponse(self._header(request), signed, committed)

    @staticmethod
    def _graph_nonce() -> bytes:
        """Fresh randomness this client adds to the sparse graph's seed (threat_model.md
        M-GRAPH-SPARSE): committed to before any nonce is revealed, so nobody, the server
        included, can steer the graph by trying session ids or participant lists."""
        return os.urandom(NONCE_BYTES)

    # --- 1b. graph (sparse only): commitments fixed, then our nonce revealed -------------------
    def _on_graph(self, request: GraphRequest) -> GraphResponse:
        ep = self._current(request)
        if ep.plan.graph is not GraphKind.SPARSE or ep.commitments is not None:
            raise self._fail("a graph step belongs to a sparse key epoch, once")
        committed = request.commitments
        if len(committed) != len(ep.participants) * NONCE_BYTES:
            raise self._fail("the graph commitments must be one per announced participant")
        at = bisect.bisect_left(ep.participants, self.client_id) * NONCE_BYTES  # participants are sorted (_on_advertise)
        if committed[at : at + NONCE_BYTES] != graph_commitment(ep.nonce, keys_hash(ep.own_keys), **self._labels(ep), client=self.client_id):
            raise self._fail("the graph commitments do not include this client's own")
        ep.commitments = committed  # n values: kept as the blob the host received, not n objects per client
        return GraphResponse(self._header(request), ep.nonce)

    def _build_view(self, ep: _Epoch, request: ShareKeysRequest) -> None:
        """The epoch's view digest and graph (see keyring.view_digest)."""
        if ep.plan.graph is GraphKind.SPARSE:
            if ep.commitments is None:
                raise self._fail("a sparse key epoch needs the graph step before its keys are shared")
            n = len(ep.participants)
            if len(request.nonces) != n * NONCE_BYTES or len(request.key_hashes) != n * NONCE_BYTES:
                raise self._fail("the graph nonces and key hashes must be one per participant")
            checked = sparse_view(**self._labels(ep), participants=ep.participants, commitments=ep.commitments,
                                  nonces=request.nonces, key_hashes=request.key_hashes)
            if checked.mismatch is not None:
                raise self._fail(f"client {checked.mismatch}'s graph nonce and keys do not match its commitment")
            members = ep.participants
            ep.view = checked.view
        else:
            if request.nonces or request.key_hashes:
                raise self._fail("graph nonces sent for a complete-graph epoch")
            relayed = {p.client: p for p in request.peers}  # every member's, this client's own among them
            members = tuple(sorted({self.client_id} | set(relayed)))
            if not set(members) <= set(ep.participants):
                raise self._fail("the server sent keys of clients that are not participants")
            keys = tuple(keys_hash(ep.own_keys if c == self.client_id else relayed[c]) for c in members)
            ep.view = view_digest(**self._labels(ep), participants=ep.participants, members=members, keys=keys)
        ep.graph = NeighbourGraph.build(kind=ep.plan.graph, participants=members, degree=ep.plan.degree, seed=ep.view)
        if ep.plan.graph is GraphKind.SPARSE:  # the committed key hashes of the neighbours only: k values, not n
            ep.key_hashes = {v: _nth(request.key_hashes, bisect.bisect_left(ep.participants, v)) for v in ep.graph.of(self.client_id)}

    # --- 2. share keys ---------------------------------------------------------------------
    def _on_share_keys(self, request: ShareKeysRequest) -> ShareKeysResponse:
        ep = self._current(request)
        self._deal_once(ep)
        ids = [peer.client for peer in request.peers]
        if any(a >= b for a, b in zip(ids, ids[1:])):
            raise self._fail("the relayed keys must be one entry per member, in id order")
        self._build_view(ep, request)
        lab = self._labels(ep)
        seen_keys = {ep.keys.share_public, ep.keys.mask_public}
        for v in sorted(ep.graph.of(self.client_id)):  # the neighbours' keys; the others' are relayed for other clients
            at = bisect.bisect_left(ids, v)
            if at == len(ids) or ids[at] != v:
                continue  # not relayed: no pair key, so not a holder (and a live set naming it is refused)
            peer = request.peers[at]
            verify_keys(peer, directory=self.directory, **lab)
            if ep.key_hashes and ep.key_hashes[peer.client] != keys_hash(peer):
                raise self._fail(f"the keys relayed for client {peer.client} are not the keys it committed to")
            if {peer.share_public, peer.mask_public} & seen_keys or peer.share_public == peer.mask_public:
                raise self._fail(f"client {peer.client} advertises a public key already in use")
            seen_keys |= {peer.share_public, peer.mask_public}
            ep.peers[peer.client] = peer
        for v, peer in ep.peers.items():
            ep.sealing[v] = pair_key(ep.keys.share, peer.share_public, purpose=Purpose.SHARE_ENCRYPTION, **lab, a=self.client_id, b=v)
            ep.pairwise[v] = pair_key(ep.keys.mask, peer.mask_public, purpose=Purpose.PAIRWISE_MASK, **lab, a=self.client_id, b=v)
        holders = sorted(ep.peers)
        xs = [v + 1 for v in holders]
        seed_shares, key_shares = shamir.split_many((ep.seed, ep.keys.mask_private_bytes()), xs=xs, threshold=ep.plan.threshold)
        dealt = []
        for v in holders:
            seed_share, key_share = seed_shares[v + 1], key_shares[v + 1]
            seed_hash = share_commitment(seed_share, kind="seed", **lab, owner=self.client_id, holder=v)
            key_hash = share_commitment(key_share, kind="mask_key", **lab, owner=self.client_id, holder=v)
            envelope = seal_shares(envelope_key(ep.sealing[v], **lab, owner=self.client_id, holder=v), seed_share + key_share,
                                   seed_hash=seed_hash, key_hash=key_hash, **lab, view=ep.view, owner=self.client_id, holder=v)
            dealt.append((envelope, ShareCommitment(self.client_id, v, seed_hash, key_hash)))
        return ShareKeysResponse(self._header(request), DealtToNeighbours.of(dealt))  # in holder order: the server knows who they are

    def _deal_once(self, ep: _Epoch) -> None:
        """Shares are dealt once per key epoch. Each direction's envelope key seals one envelope,
        with a nonce of zero (keyring.seal_shares): a second dealing would seal new shares under
        the same keystream, and a server holding both envelopes to a holder would have the XOR
        of the two share sets."""
        if ep.graph is not None:
            raise self._fail("keys were already shared in this key epoch")

    # --- 3. masked input -------------------------------------------------------------------
    def _open_shares(self, ep: _Epoch, request: InputRequest) -> tuple[Complaint, ...]:
        """Open the envelopes dealt to this client (first sum of the epoch). One that does not hold
        the shares its dealer committed to is set aside, never revealed (so the dealer cannot have
        the server blame this client), and, where it opened under the key this client derives,
        complained about with that key: the server then sees who lied (threat_model.md M-LIAR).
        Nothing a dealer seals makes this client leave the run."""
        if ep.shares_opened:
            if request.dealt.records:
                raise self._fail("shares arrived again after the first sum of the epoch")
            return ()
        complaints, lab = [], self._labels(ep)
        for sealed, committed in request.dealt.pairs():  # each envelope with its dealer's commitments (DealtShares)
            owner = sealed.owner
            if sealed.holder != self.client_id or owner not in ep.peers or owner in ep.held or owner in ep.bad_dealers:
                raise self._fail(f"unexpected share envelope from client {owner} to {sealed.holder}")
            key = envelope_key(ep.sealing[owner], **lab, owner=owner, holder=self.client_id)
            payload = open_shares(key, sealed, seed_hash=committed.seed_hash, key_hash=committed.key_hash, **lab, view=ep.view)
            shares = self._opened(ep, committed, payload)
            if shares is not None:
                ep.held[owner] = shares
                continue
            ep.bad_dealers.add(owner)  # revealing these would make the server blame us: withhold them
            if self._sealed_by_dealer(payload):
                complaints.append(Complaint(owner, key))
        ep.shares_opened = True
        return tuple(complaints)

    def _opened(self, ep: _Epoch, committed: ShareCommitment, payload: bytes | None) -> tuple[bytes, bytes] | None:
        """The (seed, mask-key) shares of an opened envelope, or None if it did not open (altered
        in transit, or sealed under another key) or holds other shares than its dealer committed
        to."""
        if payload is None:
            return None
        seed_share, key_share = payload[: shamir.SHARE_BYTES], payload[shamir.SHARE_BYTES :]
        return (seed_share, key_share) if self._dealt_as_committed(ep, committed, seed_share, key_share) else None

    @staticmethod
    def _sealed_by_dealer(payload: bytes | None) -> bool:
        """Whether the envelope opened under the key this client derives (its tag held, AAD and
        commitments included): only the dealer (or this client) could seal it, so a complaint,
        which reveals that key, shows what the dealer sealed and nothing else. An envelope or
        commitment the server altered in transit does not open, so the server cannot make this
        client reveal a key that would open the dealer's real envelope; nor does one a dealer
        sealed under another key, so it cannot have this client complain with a key the server
        would refuse."""
        return payload is not None

    def _dealt_as_committed(self, ep: _Epoch, committed: ShareCommitment, seed_share: bytes, key_share: bytes) -> bool:
        """Whether the shares a dealer sealed to us are the ones it committed to (threat_model.md
        M-LIAR): a dealer sealing others would have the server blame us when we reveal them."""
        lab, owner = self._labels(ep), committed.owner
        return (committed.seed_hash, committed.key_hash) == (
            share_commitment(seed_share, kind="seed", **lab, owner=owner, holder=self.client_id),
            share_commitment(key_share, kind="mask_key", **lab, owner=owner, holder=self.client_id),
        )

    def _new_sum_index(self, ep: _Epoch, s: int) -> None:
        """Never mask two inputs under one (key epoch, sum index): the masks would be the same,
        and the difference of the two uploads the difference of the inputs (M-ONCE)."""
        if s <= ep.sum_index or (ep.round, s) <= self._done_sum:
            raise self._fail(f"sum {s} was already masked in this epoch or finished (never mask twice with one key)")

    def _check_live(self, ep: _Epoch, live: tuple[int, ...]) -> frozenset[int]:
        members = interned(live)
        if list(live) != sorted(members) or self.client_id not in members or not members <= set(ep.graph.participants):
            raise self._fail("live set must be sorted, unique, within the members and include this client")
        if ep.live is not None and not members <= ep.live:
            raise self._fail(f"live set re-admits clients {sorted(members - ep.live)[:8]} that had dropped")
        self._none_revealed(ep, members)
        unkeyed = (members & ep.graph.of(self.client_id)) - set(ep.peers)
        if unkeyed:
            raise self._fail(f"live set lists neighbours {sorted(unkeyed)[:8]} whose signed keys never arrived")
        if len(members) < ep.plan.min_survivors:
            raise self._fail(f"live set of {len(members)} is below min_survivors={ep.plan.min_survivors}")
        self._masked_by_enough(ep, members)
        return members

    def _masked_by_enough(self, ep: _Epoch, members: frozenset[int]) -> None:
        """Sparse graph: refuse a live set that leaves out more than max_dropped of this client's
        neighbours. This client masks its input with the live ones only; shown a live set without
        them, it would send its input under its self-mask alone, and a server that then has its
        neighbours (shown another live set, this client among the survivors) rebuild its seed would
        read it (threat_model.md M-GRAPH-SPARSE). The same bound as what survivors accept of a
        client's missing neighbours before revealing anything about it (_not_isolated)."""
        missing = len(ep.graph.of(self.client_id) - members)
        if missing > ep.plan.max_dropped:
            raise self._fail(f"the live set leaves out {missing} of this client's neighbours, more than max_dropped="
                             f"{ep.plan.max_dropped}: its input would be masked by too few of them")

    def _none_revealed(self, ep: _Epoch, members: frozenset[int]) -> None:
        """Refuse a live set that lists a client whose seed or mask-key share this client revealed
        in this epoch: it never masks with it again, so it never holds (and never reveals) a pair
        seed with a client whose seed the server may hold (threat_model.md M-BOTH)."""
        revealed = members & (ep.gave_seed_share | ep.gave_key_share)
        if revealed:
            raise self._fail(f"live set lists clients {sorted(revealed)[:8]} whose recovery secrets were revealed")

    def _on_input(self, request: InputRequest) -> InputResponse:
        ep = self._current(request)
        if ep.graph is None:
            raise self._fail("masked input before the keys of the epoch were shared")
        self._new_sum_index(ep, request.sum_index)
        s = request.sum_index
        expected = self.config.mask.encoding_of(request.spec, len(ep.participants))
        if request.encoding != expected:
            raise self._fail(f"server's encoding {request.encoding} differs from this client's {expected}")
        complaints = self._open_shares(ep, request)
        live = self._check_live(ep, request.live)
        streaming = ep.plan.streams(request.spec)
        x = self._fresh(request.spec)
        digest = self._digest_of(x)
        x = self._with_noise(request.spec, x, live=len(live), least=ep.plan.min_survivors,  # what a consistency check may accept
                             precision_bits=expected.precision_bits)  # in the ring, before the masks
        if streaming:  # the input leaves under pairwise masks only: its set is the live set, fixed now
            self._bind(request.spec.name, digest, live)
        y = np.empty(request.spec.size + 1, dtype=ring_dtype(expected.ring_bits))
        _, y[-1] = expected.encode(x, out=y[:-1])
        lab = self._labels(ep)
        committed = root = b""
        if not streaming:
            key = self_mask_key(ep.seed, **lab, sum_index=s)
            self._prg.add_into(y, key, stream_id=0, sign=1)
            committed = self_mask_commitment(key, **lab, sum_index=s, client=self.client_id)
        seeds = self._pair_seeds(ep, live, s)
        for v, seed in seeds.items():
            self._prg.add_into(y, seed, stream_id=0, sign=1 if self.client_id < v else -1)
        self._prg.release()
        if not streaming and seeds:  # committed before anyone is said to have dropped (threat_model.md M-LIAR)
            root = merkle.root(pair_seed_leaves(seeds, **lab, sum_index=s, owner=self.client_id))
        ep.sum_index, ep.spec, ep.encoding, ep.live, ep.streaming, ep.digest = s, request.spec, expected, live, streaming, digest
        ep.survivors, ep.verified, ep.seeded = None, False, frozenset()
        if streaming:  # inputs under pairwise masks only: exposed now, and no live client's mask key may ever be revealed
            ep.exposed = interned(ep.exposed | live)
            self._expose(request.spec)
        return InputResponse(self._header(request), y, (), committed, complaints, root)

    def _pair_seeds(self, ep: _Epoch, live: frozenset[int], s: int) -> dict[int, bytes]:
        """This sum's pair seeds with the live neighbours, in id order (keyring.pair_seed)."""
        lab = self._labels(ep)
        return {v: pair_seed(ep.pairwise[v], **lab, sum_index=s, a=self.client_id, b=v) for v in sorted(live & ep.graph.of(self.client_id))}

    # --- 4. consistency --------------------------------------------------------------------
    def _on_consistency(self, request: ConsistencyRequest) -> ConsistencyResponse:
        ep = self._current(request)
        if ep.streaming:
            raise self._fail(f"sum {ep.sum_index} is a streaming sum: it has no consistency step")
        survivors = interned(request.survivors)
        if ep.live is None or list(request.survivors) != sorted(survivors) or not survivors <= ep.live:
            raise self._fail("survivor set must be sorted, unique and within the live set")
        if self.client_id not in survivors or len(survivors) < ep.plan.min_survivors:
            raise self._fail(f"survivor set of {len(survivors)} excludes this client or is below min_survivors")
        self._bind(ep.spec.name, ep.digest, survivors)  # before signing: nothing about it is revealed without that signature
        self._signing_exposes(ep, survivors)
        self._signing_leaves_out(ep, survivors)
        ep.survivors = survivors
        ep.statement = consistency_statement(**self._labels(ep), view=ep.view, sum_index=ep.sum_index, live=tuple(ep.live),
                                             survivors=request.survivors)
        ep.signatures, ep.vouched = {}, set()
        return ConsistencyResponse(self._header(request), self.identity.sign(ep.statement))

    @staticmethod
    def _signing_exposes(ep: _Epoch, survivors: frozenset[int]) -> None:
        """Once this client signs a survivor set, every survivor may reveal its self-mask key for
        this sum (the server needs t signatures, and this one may complete them), whether or not
        the server ever asks this client to unmask: from here on none of their mask keys may be
        revealed in this epoch (threat_model.md M-BOTH)."""
        ep.exposed = interned(ep.exposed | survivors)

    def _signing_leaves_out(self, ep: _Epoch, survivors: frozenset[int]) -> None:
        """Once this client signs a survivor set that leaves out a live neighbour v, the server
        may gather t such signatures and have v's other neighbours reveal their pair seeds of this
        sum with v (and this client its own, if asked): from here on this client never reveals a
        share of v's seed in this epoch (threat_model.md M-BOTH). Whether or not it is asked for
        its own pair seed: a server that held v's seed would have v's self-mask for this sum, and
        so v's input wherever it holds the pair seeds v masked it with (which may be few: the
        server chose the live set v was shown). t signers each refusing leaves fewer than t
        holders, since 2t exceeds v's group plus the colluders."""
        ep.left_out |= (ep.live - survivors) & ep.graph.of(self.client_id)

    # --- 5. unmask (and 4b) ------------------------------------------------------------------
    def _offer(self, ep: _Epoch, signatures) -> None:
        """Collect consistency signatures offered by the server (verified lazily by _vouch)."""
        for sig in signatures:
            if sig.client not in ep.survivors or ep.signatures.get(sig.client, sig.signature) != sig.signature:
                raise self._fail(f"consistency signature from client {sig.client}: not a survivor, or a second, different one")
            ep.signatures[sig.client] = sig.signature

    def _vouch(self, ep: _Epoch, client: int) -> None:
        """Require t valid signatures on our (view, live set, survivor set) from ``client`` and
        its neighbours before revealing anything about ``client``.

        Why this suffices (threat_model.md M-CONSISTENCY): the server could learn an input only
        by getting the client's self-mask key (revealed when the client is shown among the
        survivors) and its mask key (revealed by its neighbours when shown it dropped). Honest
        parties sign one survivor set per sum, and 2t exceeds the group plus its colluders, so
        two contradicting sets cannot both gather t signatures from that group.
        """
        group = ep.graph.closed(client)
        need = ep.plan.threshold
        have = len(ep.vouched & group)
        for signer in sorted((set(ep.signatures) & group) - ep.vouched):
            if have >= need:
                break
            try:
                verify_signature(self.directory[signer], ep.signatures[signer], ep.statement)
            except Exception as exc:
                raise self._fail(f"consistency signature of client {signer} does not verify: the server showed clients different sets") from exc
            ep.vouched.add(signer)
            have += 1
        if have < need:
            raise self._fail(f"only {have} consistency signatures from client {client} and its neighbours, need {need}")

    def _not_isolated(self, ep: _Epoch, client: int) -> None:
        """Sparse graph: refuse to reveal anything about ``client`` when more than max_dropped of
        its neighbours are missing from the survivors: a server that "drops" the honest
        neighbours of a client it targets would cut it off from every other honest input
        (adversary.py, condition (C))."""
        missing = len(ep.graph.of(client) - ep.survivors)
        if missing > ep.plan.max_dropped:
            raise self._fail(f"{missing} of client {client}'s neighbours are missing from the survivors, more than "
                             f"{ep.plan.max_dropped}: refusing to reveal anything about it (it could be isolated)")

    # --- 4b. pair seeds (only when a neighbour dropped after contributing earlier) -----------------
    def _on_pair_seeds(self, request: PairSeedsRequest) -> PairSeedsResponse:
        """Reveal this sum's pair seed with each live neighbour that is missing from the survivors
        and contributed to an earlier sum of the epoch (its self-mask for that sum is known, so its
        mask key, which opens every sum's pair masks, must stay secret; threat_model.md M-BOTH),
        each with its opening against the commitment sent with our input (only after the
        consistency step of this sum: TRANSITIONS). Nothing of our own contribution is spent here:
        a server that finds a seed missing or false may still re-key and ask for the sum again
        (M-ONCE)."""
        ep = self._current(request)
        self._offer(ep, request.signatures)
        dropped = sorted((ep.live - ep.survivors) & ep.graph.of(self.client_id) & ep.exposed)
        for v in dropped:
            self._may_reveal_pair_seed(ep, v)
        seeds = self._pair_seeds(ep, ep.live, ep.sum_index)
        tree = merkle.levels(pair_seed_leaves(seeds, **self._labels(ep), sum_index=ep.sum_index, owner=self.client_id)) if dropped else []
        order = list(seeds)  # id order: a seed's position in the tree
        ep.seeded = frozenset(dropped)
        return PairSeedsResponse(self._header(request), tuple(PairSeed(v, seeds[v], merkle.opening(tree, order.index(v))) for v in dropped))

    def _may_reveal_pair_seed(self, ep: _Epoch, v: int) -> None:
        """t valid signatures on our statement (v left out) from v's group (_vouch) before our
        pair seed with v leaves. Without them a server could have a few neighbours of v reveal
        theirs, having shown v a live set of those few and colluders, and then rebuild v's seed
        in a later sum from the shares of the many that never signed v out (_signing_leaves_out
        bars only signers): v's input of this sum. With them, t signers bar v's seed for good."""
        self._vouch(ep, v)

    # --- 5. unmask -------------------------------------------------------------------------
    def _on_unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        ep = self._current(request)
        if ep.survivors is None:
            raise self._fail("unmask before the consistency check")
        self._offer(ep, request.signatures)
        self._vouch(ep, self.client_id)
        self._not_isolated(ep, self.client_id)
        ep.verified = True
        shares = []
        for owner in sorted(((ep.live - ep.survivors) & set(ep.held)) - ep.seeded):  # the seeded: their pair seeds went at 4b
            self._vouch(ep, owner)
            self._may_reveal_mask_key(ep, owner)
            ep.gave_key_share.add(owner)
            shares.append(Share(owner, ep.held[owner][1]))
        key = self_mask_key(ep.seed, **self._labels(ep), sum_index=ep.sum_index)
        self._expose(ep.spec)  # the self-mask key leaves: this contribution is this sum's or no sum's
        return UnmaskResponse(self._header(request), key, tuple(shares))

    def _may_reveal_mask_key(self, ep: _Epoch, owner: int) -> None:
        """Refuse a share of ``owner``'s mask key once its self-mask for some sum of this epoch
        may be known (it was in a survivor set this client signed, or sent a streaming input),
        or its seed share left (threat_model.md M-BOTH): with both, the server would unmask that
        earlier input."""
        if owner in ep.exposed:
            raise self._fail(
                f"refusing to reveal client {owner}'s mask-key share: it contributed to an earlier sum of this key "
                "epoch, so its self-mask is known; the server must re-key instead"
            )
        if owner in ep.gave_seed_share:
            raise self._fail(f"refusing to reveal client {owner}'s mask-key share after its seed share")

    # --- 6. recover ------------------------------------------------------------------------
    def _on_recover(self, request: RecoverRequest) -> RecoverResponse:
        ep = self._current(request)
        missing = set(request.missing)
        if not ep.verified or len(missing) != len(request.missing) or not missing <= ep.survivors or self.client_id in missing:
            raise self._fail("recover request must name verified survivors other than this client, once each")
        self._offer(ep, request.signatures)
        shares = []
        for owner in sorted(missing & set(ep.held)):
            self._vouch(ep, owner)
            self._not_isolated(ep, owner)
            if owner in ep.gave_key_share:
                raise self._fail(f"refusing to reveal client {owner}'s seed share after its mask-key share")
            if owner in ep.left_out:
                raise self._fail(f"refusing to reveal client {owner}'s seed share: a survivor set this client signed in this key "
                                 "epoch left it out while live, so pair seeds with it may have been revealed")
            ep.gave_seed_share.add(owner)
            shares.append(Share(owner, ep.held[owner][0]))
        return RecoverResponse(self._header(request), tuple(shares))

    # --- 7. deliver ------------------------------------------------------------------------
    def _on_deliver(self, request: DeliverRequest) -> DeliverResponse:
        ep = self._current(request)
        spec, encoding = ep.spec, ep.encoding
        agg = request.aggregate
        contributors = ep.live if ep.streaming else ep.survivors  # streaming: all live, or the masks did not cancel
        if not (ep.streaming or ep.verified) or request.sum_index != ep.sum_index or frozenset(request.contributors) != contributors:
            raise self._fail(f"delivered sum {request.sum_index} does not match the verified sum {ep.sum_index}")
        self._done_sum = (ep.round, ep.sum_index)
        if agg is None and spec.server_only:
            self._finish(SumResult(spec, None, contributors, request.clipped, encoding.error_bound(len(contributors))))
            return DeliverResponse(self._header(request), True)
        if agg is None or agg.shape != (spec.size + 1,) or agg.dtype != np.dtype(f"<u{encoding.ring_bits // 8}"):
            raise self._fail("delivered aggregate has the wrong shape or dtype")
        clipped = encoding.decode_count(agg[-1])
        if not mask_format.clipped_count_is_possible(clipped, contributors=len(contributors), values=spec.size):
            raise self._fail(f"delivered sum {request.sum_index} is corrupt: its clipped count {clipped} is impossible")
        values = encoding.decode_sum(np.ascontiguousarray(agg[:-1]))
        self._finish(SumResult(spec, spec.unflatten(values), contributors, clipped, encoding.error_bound(len(contributors))))
        return DeliverResponse(self._header(request), True)
