"""Server role of pairwise-mask secure aggregation; see mask_client.py for the algorithm box.

The server relays keys and sealed shares, sums masked inputs as they arrive (it keeps one
running ring vector, never an individual input), and removes masks:

* survivors' self-masks, from the per-sum keys they reveal, each checked against the
  commitment sent with the input (a survivor that went silent after INPUT, or revealed a key
  that fails its commitment, has its seed rebuilt from t seed shares instead);
* pairwise masks between survivors and clients that dropped before INPUT, from the dropped
  client's mask key rebuilt from t mask-key shares or, for a dropped client that contributed to
  an earlier sum of the key epoch (its self-mask for it is known, so its mask key must stay
  secret), from its surviving neighbours' pair seeds of this sum (step 4b, ``_pair_seeds``), each
  checked against the Merkle root its revealer sent with its input.

Every revealed share is checked against its dealer's commitment: a holder that reveals a
wrong share is excluded from the run and named (``excluded``), and its share is not used; a
dealer whose verified shares rebuild a secret other than the one it committed to is excluded
and named too.

Before anything is revealed for a sum, the server re-keys the survivors and asks for the same
sum again (under fresh keys) whenever the sum could not be finished: too few holders of a
dropped client's shares (or, for one that contributed earlier, of its neighbours to vouch for
its drop) survive, too few survivors could vouch for each other, (sparse graph) some survivor
lost more than max_dropped neighbours, or a surviving neighbour's pair seed with a dropped
contributor did not come or failed its commitment (4b comes before any self-mask key). After
the reveals the contributions are spent: if the sum still cannot be finished, or its unmasked
clipped-count lane is impossible, it is abandoned (``SumAbandoned``), never redone.

Streaming sums (see mask_client.py) stop after step 3: with every live client's input in, the
pairwise masks cancel and the running sum is the encoded sum. With one missing the sum is
abandoned.

``revealed`` records which recovery secret the server obtained for each client ("seed",
"mask_key", or "pair_seed": its neighbours' pair seeds with it of one sum); the invariant
(tested, and audited from transcripts) is that no client appears with two.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from secure_fedgraph.crypto import merkle, shamir
from secure_fedgraph.crypto.keys import verify_signature
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.crypto.prg import MaskPRG, ring_dtype
from secure_fedgraph.errors import DropoutError, ProtocolError, SumAbandoned
from secure_fedgraph.protocol.sum_backends.config import Backend, GraphKind, MaskPlan
from secure_fedgraph.protocol.sum_backends.keyring import (
    consistency_statement,
    graph_commitment,
    keys_hash,
    open_shares,
    pair_key,
    pair_seed,
    pair_seed_leaves,
    seed_commitment,
    self_mask_commitment,
    self_mask_key,
    share_commitment,
    verify_keys,
    view_digest,
)
from secure_fedgraph.protocol.sum_backends import mask_format
from secure_fedgraph.protocol.sum_backends.mask_format import NONCE_BYTES
from secure_fedgraph.protocol.sum_backends.envelope_store import EnvelopeStore
from secure_fedgraph.protocol.sum_backends.messages import (
    AdvertiseRequest,
    Complaint,
    AdvertiseResponse,
    ConsistencyRequest,
    ConsistencyResponse,
    DealtShares,
    DeliverRequest,
    GraphRequest,
    GraphResponse,
    InputRequest,
    InputResponse,
    PairSeedsRequest,
    PairSeedsResponse,
    RecoverRequest,
    RecoverResponse,
    Sealed,
    ShareCommitment,
    ShareKeysRequest,
    ShareKeysResponse,
    Signature,
    SignedKeys,
    UnmaskRequest,
    UnmaskResponse,
)
from secure_fedgraph.protocol.sum_backends.neighbours import NeighbourGraph
from secure_fedgraph.protocol.sum_backends.roles import ServerRole, StepGen
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec


class MaskServer(ServerRole):
    backend = Backend.MASK

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._prg = MaskPRG()
        self._public_keys: set[bytes] = set()  # every round key advertised in this session (none may come again)
        self._probe = X25519PrivateKey.generate()  # agreement with it fails for a low-order key
        self.revealed: dict[tuple[int, int, int], set[str]] = defaultdict(set)  # (round, epoch, client) -> {"seed" | "mask_key" | "pair_seed"}

    def _labels(self) -> dict:
        return {"session": self.session, "round": self.round, "epoch": self._epoch}

    # --- rounds and key epochs ---------------------------------------------------------------
    def setup(self, round_index: int, participants=None) -> StepGen[None]:
        chosen = self._begin_round(round_index, participants)
        self._epoch, self._rekeys = -1, -1
        self._next_sum = 0
        yield from self._key_setup(set(chosen) - set(self.excluded))

    def _key_setup(self, candidates: set[int]) -> StepGen[None]:
        """Steps 1-2: advertise signed keys, (sparse) fix the graph from committed nonces, then
        seal Shamir shares to neighbours."""
        self._epoch += 1
        self._rekeys += 1
        if self._rekeys > self.config.mask.max_rekeys_per_round:
            raise DropoutError(f"round {self.round}: no key set-up held within {self.config.mask.max_rekeys_per_round} re-keys "
                               "(max_rekeys_per_round); no aggregate is released")
        participants = tuple(sorted(candidates))
        n_run = len(self.clients)
        self._require(len(participants), self.config.survivors_needed(n_run), "remain for a key set-up")
        plan = self._plan_for(len(participants))
        lab = self._labels()
        adverts: dict[int, AdvertiseResponse] = {}
        sparse = plan.graph is GraphKind.SPARSE

        def accept_advert(client: int, response: AdvertiseResponse) -> None:
            keys = response.keys
            if keys.client != client or any(len(b) != 32 for b in (keys.share_public, keys.mask_public, keys.seed_commitment)):
                raise ProtocolError(f"advertise: malformed keys from client {client}")
            if len(response.graph_commitment) != (32 if sparse else 0):
                raise ProtocolError(f"advertise: client {client} sent a malformed graph commitment")
            verify_keys(keys, directory=self.directory, **lab)
            self._check_fresh_keys(client, keys)
            adverts[client] = response

        outcome = yield self._step(
            Stage.ADVERTISE,
            lambda h: {
                c: AdvertiseRequest(h, self._epoch, participants, plan.graph.value, plan.degree, plan.threshold, plan.min_survivors,
                                    plan.max_dropped, plan.streaming)
                for c in participants
            },
            accept_advert,
        )
        self._note(Stage.ADVERTISE, outcome)
        advertised = set(adverts)
        self._require(len(advertised), plan.min_survivors, "advertised keys")
        if sparse:
            if advertised != set(participants):  # the announced degree and threshold were for these participants
                self.log.append(f"round {self.round}: clients {sorted(set(participants) - advertised)} did not advertise; re-keying")
                return (yield from self._key_setup(advertised))
            commitments = tuple(adverts[c].graph_commitment for c in participants)
            committed = b"".join(commitments)
            nonces: dict[int, bytes] = {}

            def accept_nonce(client: int, response: GraphResponse) -> None:
                if len(response.nonce) != NONCE_BYTES or graph_commitment(response.nonce, keys_hash(adverts[client].keys), **lab,
                                                                         client=client) != adverts[client].graph_commitment:
                    raise ProtocolError(f"graph: client {client}'s nonce does not match its commitment")
                nonces[client] = response.nonce

            outcome = yield self._step(Stage.GRAPH, lambda h: dict.fromkeys(participants, GraphRequest(h, committed)), accept_nonce)
            self._note(Stage.GRAPH, outcome)
            if set(nonces) != set(participants):  # every committed nonce seeds the graph: no one may withhold one
                self.log.append(f"round {self.round}: clients {sorted(set(participants) - set(nonces))} withheld graph nonces; re-keying")
                return (yield from self._key_setup(set(nonces)))
            hashes = tuple(keys_hash(adverts[c].keys) for c in participants)
            view = view_digest(**lab, participants=participants, members=participants, keys=hashes, commitments=commitments,
                               nonces=tuple(nonces[c] for c in participants))
            nonce_list, hash_list = b"".join(nonces[c] for c in participants), b"".join(hashes)
            members = participants
        else:
            members = tuple(sorted(advertised))
            view = view_digest(**lab, participants=participants, members=members, keys=tuple(keys_hash(adverts[c].keys) for c in members))
            nonce_list = hash_list = b""
        graph = NeighbourGraph.build(kind=plan.graph, participants=members, degree=plan.degree, seed=view)
        envelopes = EnvelopeStore()

        def accept_shares(client: int, response: ShareKeysResponse) -> None:
            holders = sorted(graph.of(client) & advertised)  # each record holds an envelope and its commitments, in holder order
            if len(response.dealt) != len(holders):
                raise ProtocolError(f"share_keys: client {client} must seal one share pair to each of its {len(holders)} neighbours")
            envelopes.deal(client, response.dealt.to_holders(client, holders))

        everyone = tuple(adverts[v].keys for v in sorted(advertised))  # one body for all: each client takes its neighbours'
        outcome = yield self._step(
            Stage.SHARE_KEYS, lambda h: dict.fromkeys(sorted(advertised), ShareKeysRequest(h, everyone, nonce_list, hash_list)), accept_shares,
        )
        self._note(Stage.SHARE_KEYS, outcome)
        shared = set(outcome.accepted)
        self._require(len(shared), plan.min_survivors, "sealed their shares")
        self._plan, self._graph, self._participants, self._view = plan, graph, participants, view
        self._keys: dict[int, SignedKeys] = {c: adverts[c].keys for c in shared}
        envelopes.fix_dealers(shared)
        self._envelopes = envelopes
        self.live = shared
        self._first_sum_of_epoch = True
        self._exposed: set[int] = set()

    def describe(self) -> dict:  # pragma: no mutate block (the plan as metrics.json reports it, not a check)
        plan = getattr(self, "_plan", None)
        return {} if plan is None else {"graph": plan.graph.value, "degree": plan.degree, "threshold": plan.threshold,
                                         "min_survivors": plan.min_survivors, "max_dropped": plan.max_dropped, "streaming": plan.streaming}

    def _plan_for(self, n: int) -> MaskPlan:
        """The graph, degree, threshold and floor this server announces for n participants."""
        return self.config.mask.resolve(n, self.config.min_survivors, n_run=len(self.clients))

    # --- one secure sum ----------------------------------------------------------------------
    def aggregate(self, spec: SumSpec) -> StepGen[SumResult]:
        index, self._next_sum = self._next_sum, self._next_sum + 1
        while True:  # 3.-4., again under new keys while nothing has been revealed and a re-key is needed
            self._require(len(self.live), self._plan.min_survivors, "remain live for a new sum")
            thin = self._thinly_masked(set(self.live))
            if thin is not None:  # its client would refuse the live set (mask_client._masked_by_enough): new keys first
                self.log.append(f"round {self.round}: {thin}; re-keying before sum {spec.name!r}")
                yield from self._key_setup(set(self.live))
                continue
            streaming = self._plan.streams(spec)
            encoding = self.config.mask.encoding_of(spec, len(self._participants))
            live = tuple(sorted(self.live))
            live_set = set(live)
            acc = np.zeros(spec.size + 1, dtype=ring_dtype(encoding.ring_bits))
            committed: dict[int, tuple[bytes, bytes]] = {}  # client -> commitments to its self-mask key and its pair seeds
            envelopes, first, self._first_sum_of_epoch = self._envelopes, self._first_sum_of_epoch, False

            def accept_input(client: int, response: InputResponse) -> None:
                self._check_upload(client, response.payload, acc)
                if len(response.self_mask_commitment) != (0 if streaming else 32):
                    raise ProtocolError(f"input: client {client} sent a malformed self-mask commitment")
                if len(response.pair_seed_root) != (0 if streaming or not self._graph.of(client) & live_set else 32):
                    raise ProtocolError(f"input: client {client} sent a malformed commitment to its pair seeds")
                routed = {sealed.owner: (sealed, c) for sealed, c in envelopes.routed(client).pairs()} if first and response.complaints else {}
                dealers = [c.dealer for c in response.complaints]
                if len(set(dealers)) != len(dealers) or any(d not in routed or len(c.key) != 32 for d, c in zip(dealers, response.complaints)):
                    raise ProtocolError(f"input: client {client} complained about envelopes it was not dealt")
                np.add(acc, response.payload, out=acc)
                committed[client] = (response.self_mask_commitment, response.pair_seed_root)
                for complaint in response.complaints:
                    self._judge(client, complaint, *routed[complaint.dealer])
                envelopes.delivered(client)

            def input_request(c: int) -> tuple:
                return index, spec, encoding, live, envelopes.routed(c) if first else DealtShares()

            outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, input_request, lazy=first),
                                       accept_input)
            envelopes.delivered_all()  # the silent ones too: only the share hashes are needed from here on
            self._note(Stage.INPUT, outcome)
            caught = set(outcome.accepted) & set(self.excluded)  # a dealer or a complainer that lied (M-LIAR)
            survivors = set(outcome.accepted) - caught
            dropped = set(live) - survivors
            if streaming:  # every live client's input is in, or the sum is lost: no secret may remove a missing mask
                self._exposed |= set(live)
                if dropped:
                    self.live = survivors
                    self.log.append(f"round {self.round}: clients {sorted(dropped)} dropped during streaming sum {spec.name!r}; abandoned")
                    raise SumAbandoned(f"streaming sum {spec.name!r}: clients {sorted(dropped)} dropped, so the pairwise masks cannot "
                                       "cancel; abandoned (its contributions are never masked again)")
                self._require(len(survivors), self._plan.min_survivors, "sent masked inputs")
                return (yield from self._deliver(index, spec, encoding, acc, survivors))
            self._require(len(survivors), self._plan.min_survivors, "sent masked inputs")
            why = f"clients {sorted(caught)} were caught lying about their share envelopes" if caught else \
                self._rekey_reason(set(live), survivors, survivors)
            if why is None:
                # 4. consistency: every survivor signs (view, live, survivors)
                lab = self._labels()
                survivor_list = tuple(sorted(survivors))
                statement = consistency_statement(**lab, view=self._view, sum_index=index, live=live, survivors=survivor_list)
                signatures: dict[int, bytes] = {}

                def accept_signature(client: int, response: ConsistencyResponse) -> None:
                    try:
                        verify_signature(self.directory[client], response.signature, statement)
                    except (InvalidSignature, ValueError) as exc:
                        raise ProtocolError(f"consistency: signature of client {client} does not verify") from exc
                    signatures[client] = response.signature

                outcome = yield self._step(
                    Stage.CONSISTENCY, lambda h: self._per_client(h, survivor_list, ConsistencyRequest, lambda c: (survivor_list,)),
                    accept_signature,
                )
                self._note(Stage.CONSISTENCY, outcome)
                self._require(len(signatures), self._plan.min_survivors, "signed the survivor set")
                why = self._rekey_reason(set(live), survivors, set(signatures))
                if why is None:  # 4b. nothing is spent yet: a pair seed missing or false still means a re-key
                    seeds, failed = yield from self._pair_seeds(index, live, survivors, signatures, committed)
                    if not failed:
                        break
                    why = f"clients {sorted(failed)} did not reveal their pair seeds of this sum, or revealed false ones"
                    survivors = set(signatures) - failed - set(self.excluded)
                else:
                    survivors = set(signatures)
            self.log.append(f"round {self.round}: {why}; re-keying")
            yield from self._key_setup(survivors)
        return (yield from self._unmask(index, spec, encoding, acc, set(live), survivors, signatures, committed, seeds))

    def _check_fresh_keys(self, client: int, keys: SignedKeys) -> None:
        """A client's round keys must be two distinct keys nobody advertised before in this session
        and of full order (threat_model.md M-LIAR): a duplicate, reused or low-order key would make
        every honest peer's key agreement or key check fail, so its sender, not they, is refused."""
        pair = (keys.share_public, keys.mask_public)
        if pair[0] == pair[1] or set(pair) & self._public_keys:
            raise ProtocolError(f"advertise: client {client} advertised a public key twice or one already in use")
        for public in pair:
            try:
                self._probe.exchange(X25519PublicKey.from_public_bytes(public))
            except ValueError:
                raise ProtocolError(f"advertise: client {client} advertised a low-order public key") from None
        self._public_keys.update(pair)

    def _judge(self, holder: int, complaint: Complaint, sealed: Sealed, committed: ShareCommitment) -> None:
        """A holder complains that ``complaint.dealer``'s envelope does not hold the shares the
        dealer committed to, revealing the envelope's key: one of the two lied, and is excluded
        (threat_model.md M-LIAR). The server holds the envelope and commitments as the dealer sent
        them to it. The envelope must open under the key, else the holder lied (it is not the key
        the dealer sealed with); it must not hold the committed shares, else the holder lied; then
        the dealer lied. The key is that one direction's: revealing it shows only what that dealer
        sealed to that holder."""
        dealer = complaint.dealer
        if not self._key_committed(complaint.key, sealed, committed):
            self._exclude(holder, f"complained about client {dealer}'s envelope with a key {dealer} did not commit to")
        elif self._holds_committed_shares(complaint.key, dealer, holder, sealed, committed):
            self._exclude(holder, f"complained about client {dealer}'s envelope, which holds the shares {dealer} committed to")
        else:
            self._exclude(dealer, f"sealed an envelope for client {holder} that does not hold the shares it committed to")

    def _opened(self, key: bytes, sealed: Sealed, committed: ShareCommitment) -> bytes | None:
        return open_shares(key, sealed, seed_hash=committed.seed_hash, key_hash=committed.key_hash, **self._labels(), view=self._view)

    def _key_committed(self, key: bytes, sealed: Sealed, committed: ShareCommitment) -> bool:
        return self._opened(key, sealed, committed) is not None

    def _holds_committed_shares(self, key: bytes, dealer: int, holder: int, sealed: Sealed, committed: ShareCommitment) -> bool:
        """Whether the envelope opens under ``key`` to the shares the dealer committed to."""
        lab, payload = self._labels(), self._opened(key, sealed, committed)
        if payload is None:
            return False
        seed, mask_key = payload[: shamir.SHARE_BYTES], payload[shamir.SHARE_BYTES :]
        return (committed.seed_hash, committed.key_hash) == (
            share_commitment(seed, kind="seed", **lab, owner=dealer, holder=holder),
            share_commitment(mask_key, kind="mask_key", **lab, owner=dealer, holder=holder))

    @staticmethod
    def _check_upload(client: int, y, acc: np.ndarray) -> None:
        """A masked input must be a ring vector of the sum's exact size (threat_model.md M-INPUT):
        anything else rejects its sender, and the sum goes on with the others."""
        if y is None or y.shape != acc.shape or y.dtype != acc.dtype:
            raise ProtocolError(f"input: client {client} sent {None if y is None else (y.dtype, y.shape)}, expected {(acc.dtype, acc.shape)}")

    def _thinly_masked(self, live: set[int]) -> str | None:
        """Why some live client's input would be masked by too few neighbours (sparse graph: more
        than max_dropped of them not live since the key set-up), or None."""
        gone = set(self._graph.participants) - live
        near = set().union(*(self._graph.of(v) for v in gone)) & live  # only they can have lost neighbours
        for u in sorted(near):
            missing = len(self._graph.of(u) & gone)
            if missing > self._plan.max_dropped:
                return f"client {u} has {missing} neighbours no longer live, more than {self._plan.max_dropped}"
        return None

    def _rekey_reason(self, live: set[int], survivors: set[int], vouchers: set[int]) -> str | None:
        """Why this sum cannot be finished without a re-key (checked before anything about it is
        revealed), or None. ``vouchers``: the clients whose signatures will vouch.

        A dropped client that contributed to an earlier sum of the epoch (``_exposed``) keeps its
        mask key: its surviving neighbours reveal their pair seeds of this sum with it instead
        (4b), each after t signatures of its group; one that cannot makes a re-key there."""
        dropped = live - survivors
        graph, plan = self._graph, self._plan
        for u in sorted(dropped):
            if len(graph.of(u) & vouchers) < plan.threshold:
                return f"too few holders of client {u}'s shares remain" if u not in self._exposed else \
                    f"too few of client {u}'s neighbours remain to vouch for its drop"
        for u in sorted(survivors):
            if len(graph.closed(u) & vouchers) < plan.threshold:
                return f"too few of client {u}'s group remain to vouch for it"
            if len(graph.of(u) - survivors) > plan.max_dropped:
                return f"more than {plan.max_dropped} of client {u}'s neighbours dropped"
        return None

    def _pair_seeds(self, index: int, live: tuple[int, ...], survivors: set[int], signatures: dict[int, bytes],
                    committed: dict[int, tuple[bytes, bytes]]) -> StepGen[tuple[dict[tuple[int, int], bytes], set[int]]]:
        """4b. For clients that dropped after contributing to an earlier sum of the epoch, each
        surviving neighbour reveals its pair seed of this sum with them, opened against the root it
        sent with its input (threat_model.md M-BOTH, M-LIAR). Returns the verified seeds, (survivor,
        dropped) -> seed, and the clients that revealed none, or a false one (excluded): with any,
        the caller re-keys, as nothing of the sum has been revealed that spends it."""
        graph = self._graph
        dropped = (set(live) - survivors) & self._exposed
        asked = sorted(u for u in survivors if graph.of(u) & dropped)
        if not asked:
            return {}, set()
        vouching, live_set = self._vouching(signatures), set(live)
        seeds: dict[tuple[int, int], bytes] = {}
        revealed: set[int] = set()  # the clients whose seeds all verified

        def accept(client: int, response: PairSeedsResponse) -> None:
            self._one_seed_per_drop(client, response, graph.of(client) & dropped)
            for p in response.pair_seeds:
                if not self._pair_seed_verified(client, p.peer, p.seed, p.path, live_set, committed[client][1], index):
                    self._exclude(client, f"revealed a pair seed with client {p.peer} for sum {index} that fails its commitment")
                    return
            seeds.update({(client, p.peer): p.seed for p in response.pair_seeds})
            revealed.add(client)

        outcome = yield self._step(
            Stage.PAIR_SEEDS, lambda h: self._per_client(h, asked, PairSeedsRequest, lambda c: (vouching(graph.of(c) & dropped),)), accept,
        )
        self._note(Stage.PAIR_SEEDS, outcome)
        return seeds, set(asked) - revealed

    @staticmethod
    def _one_seed_per_drop(client: int, response: PairSeedsResponse, expected: set[int]) -> None:
        """A survivor reveals exactly one 32-byte seed with each of its neighbours that dropped
        after contributing, and nothing else: a seed with a neighbour that survived (even one that
        opens against its commitment) would take a mask out of the sum that cancels in it."""
        peers = [p.peer for p in response.pair_seeds]
        if len(set(peers)) != len(peers) or set(peers) != expected or any(len(p.seed) != 32 for p in response.pair_seeds):
            raise ProtocolError(f"pair seeds: client {client} must reveal one seed with each of its dropped neighbours {sorted(expected)}")

    def _pair_seed_verified(self, client: int, peer: int, seed: bytes, path: bytes, live: set[int], root: bytes, index: int) -> bool:
        """Whether ``seed`` opens at ``peer``'s position of the Merkle root ``client`` sent with its
        input (its leaves: its pair seeds with its live neighbours, in id order); a client revealing
        another seed than it committed to is excluded (threat_model.md M-LIAR)."""
        peers = sorted(self._graph.of(client) & live)
        leaf = pair_seed_leaves({peer: seed}, **self._labels(), sum_index=index, owner=client)[0]
        return merkle.verify(leaf, index=bisect.bisect_left(peers, peer), count=len(peers), path=path, root=root)

    def _abandon(self, spec: SumSpec, why: str, live: set[int]) -> SumAbandoned:
        self.live = live - set(self.excluded)
        self.log.append(f"round {self.round}: sum {spec.name!r} abandoned: {why}")
        return SumAbandoned(f"sum {spec.name!r}: {why}; abandoned after its self-masks were revealed (its contributions are never masked again)")

    def _unmask(self, index, spec, encoding, acc, live, survivors, signatures, committed, pair_seeds) -> StepGen[SumResult]:
        """5.-7. Reveals: from here on the contributions are spent; failures abandon the sum.
        ``pair_seeds`` (4b) remove the masks of dropped clients that had contributed earlier; the
        others' masks go with their mask keys, rebuilt from shares."""
        graph, lab = self._graph, self._labels()
        dropped = live - survivors - self._exposed  # their mask keys are rebuilt
        vouching = self._vouching(signatures)
        self_keys: dict[int, bytes] = {}
        key_shares: dict[int, dict[int, bytes]] = defaultdict(dict)

        def accept_unmask(client: int, response: UnmaskResponse) -> None:
            owners = [s.owner for s in response.mask_key_shares]
            if len(response.self_mask_key) != 32 or len(set(owners)) != len(owners):
                raise ProtocolError(f"unmask: malformed answer from client {client}")
            for s in response.mask_key_shares:
                if s.owner not in dropped or client not in graph.of(s.owner) or len(s.value) != shamir.SHARE_BYTES:
                    raise ProtocolError(f"unmask: client {client} sent a share of client {s.owner}, which it does not hold")
            if self._self_key_verified(client, response.self_mask_key, committed[client][0], index):
                self_keys[client] = response.self_mask_key
            else:  # its self-mask is rebuilt from its seed shares instead (6.)
                self._exclude(client, f"revealed a self-mask key for sum {spec.name!r} that fails its commitment")
            for s in response.mask_key_shares:
                if self._share_verified(s.owner, client, "mask_key", s.value):
                    key_shares[s.owner][client + 1] = s.value

        outcome = yield self._step(
            Stage.UNMASK,
            lambda h: self._per_client(h, sorted(signatures), UnmaskRequest, lambda c: (vouching({c} | (graph.of(c) & dropped)),)),
            accept_unmask,
        )
        self._note(Stage.UNMASK, outcome)
        for (u, v), seed in sorted(pair_seeds.items()):  # u added +PRG(k_uv) if u < v, else -PRG(k_uv)
            self._prg.add_into(acc, seed, stream_id=0, sign=-1 if u < v else 1)
        for v in sorted({v for _, v in pair_seeds}):
            self.revealed[(self.round, self._epoch, v)].add("pair_seed")
        self._exposed |= survivors
        for u in sorted(dropped):
            if not self._cancel_pairwise(acc, u, key_shares[u], survivors, index):
                raise self._abandon(spec, f"client {u}'s mask key could not be rebuilt", survivors)

        # 6. recover the self-masks of survivors that went silent after sending input, or lied about them
        missing = survivors - set(self_keys)
        if missing:
            seed_shares: dict[int, dict[int, bytes]] = defaultdict(dict)
            missing_list = tuple(sorted(missing))

            def accept_recover(client: int, response: RecoverResponse) -> None:
                owners = [s.owner for s in response.self_seed_shares]
                if len(set(owners)) != len(owners) or any(
                    o not in missing or client not in graph.of(o) or len(s.value) != shamir.SHARE_BYTES
                    for o, s in zip(owners, response.self_seed_shares, strict=True)
                ):
                    raise ProtocolError(f"recover: client {client} sent shares it does not hold")
                for s in response.self_seed_shares:
                    if self._share_verified(s.owner, client, "seed", s.value):
                        seed_shares[s.owner][client + 1] = s.value

            helpers = sorted(set(self_keys) - set(self.excluded))
            outcome = yield self._step(
                Stage.RECOVER,
                lambda h: self._per_client(h, helpers, RecoverRequest, lambda c: (missing_list, vouching(graph.of(c) & missing))),
                accept_recover,
            )
            self._note(Stage.RECOVER, outcome)
            for u in missing_list:
                seed = self._rebuild(u, seed_shares[u], "seed")
                if seed is None:
                    raise self._abandon(spec, f"client {u}'s self-mask could not be rebuilt", set(self_keys))
                if seed_commitment(seed, **lab, client=u) != self._keys[u].seed_commitment:
                    self._exclude(u, "dealt seed shares that do not rebuild its committed seed")
                    raise self._abandon(spec, f"client {u}'s seed shares are inconsistent", set(self_keys))
                self_keys[u] = self_mask_key(seed, **lab, sum_index=index)
        for v in sorted(survivors):
            self._prg.add_into(acc, self_keys[v], stream_id=0, sign=-1)
        clipped = encoding.decode_count(acc[-1])
        if not mask_format.clipped_count_is_possible(clipped, contributors=len(survivors), values=spec.size):
            raise self._abandon(spec, f"the unmasked sum is corrupt (clipped count {clipped}): some contributor sent garbage",
                                survivors - missing)
        self.live = survivors - missing - set(self.excluded)
        return (yield from self._deliver(index, spec, encoding, acc, survivors))

    def _deliver(self, index: int, spec: SumSpec, encoding, acc: np.ndarray, contributors: set[int]) -> StepGen[SumResult]:
        """7. Decode the unmasked ring sum and send it to the live clients."""
        values = encoding.decode_sum(np.ascontiguousarray(acc[:-1]))
        clipped = encoding.decode_count(acc[-1])
        listed = tuple(sorted(contributors))
        outcome = yield self._step(
            Stage.DELIVER,
            lambda h: self._per_client(
                h, sorted(self.live), DeliverRequest, lambda c: (index, listed, None if spec.server_only else acc, (), clipped)
            ),
            lambda c, r: None,
        )
        self.live &= set(outcome.accepted)
        return SumResult(spec, spec.unflatten(values), frozenset(contributors), clipped, encoding.error_bound(len(contributors)))

    def _vouching(self, signatures: dict[int, bytes]):
        """Signatures a client needs to vouch for some clients: from each one and its neighbours
        (all of them in the complete graph, where every neighbourhood is everyone)."""
        graph = self._graph
        signed = {c: Signature(c, signatures[c]) for c in sorted(signatures)}  # one object each, shared by every request
        everyone = tuple(signed.values())

        def pick(clients: set[int]) -> tuple[Signature, ...]:
            if graph.complete or not clients:
                return everyone if clients else ()
            wanted = set().union(*(graph.closed(c) for c in clients)).intersection(signed)
            return tuple(signed[c] for c in sorted(wanted))

        return pick

    def _self_key_verified(self, client: int, key: bytes, committed: bytes, index: int) -> bool:
        """Whether a revealed self-mask key is the one committed to with the masked input
        (threat_model.md M-LIAR); a wrong one would make the released sum garbage."""
        return self_mask_commitment(key, **self._labels(), sum_index=index, client=client) == committed

    def _share_verified(self, owner: int, holder: int, kind: str, value: bytes) -> bool:
        """Whether a revealed share is the one ``owner`` committed to sealing to ``holder``; a
        holder revealing another is excluded (threat_model.md M-LIAR)."""
        committed = self._envelopes.commitment(owner, holder)
        expected = None if committed is None else committed[0 if kind == "seed" else 1]
        if expected is not None and share_commitment(value, kind=kind, **self._labels(), owner=owner, holder=holder) == expected:
            return True
        self._exclude(holder, f"revealed a {kind} share of client {owner} that fails {owner}'s commitment")
        return False

    def _rebuild(self, client: int, shares: dict[int, bytes], kind: str) -> bytes | None:
        """Shamir-combine one client's secret from verified shares (None if too few, or they
        do not interpolate); record which kind of secret was obtained."""
        if len(shares) < self._plan.threshold:
            self.log.append(f"round {self.round}: only {len(shares)} valid shares of client {client}'s {kind}, need {self._plan.threshold}")
            return None
        try:
            secret = shamir.combine(shares, threshold=self._plan.threshold)
        except ValueError:
            self._exclude(client, f"dealt {kind} shares that do not interpolate")
            return None
        self.revealed[(self.round, self._epoch, client)].add(kind)
        return secret

    def _cancel_pairwise(self, acc: np.ndarray, u: int, shares: dict[int, bytes], survivors: set[int], index: int) -> bool:
        """Remove the masks survivors added with dropped client u, from u's rebuilt mask key;
        False when the key cannot be rebuilt (too few valid shares, or a dishonest dealer)."""
        mask_key = self._rebuild(u, shares, "mask_key")
        if mask_key is None:
            return False
        if X25519PrivateKey.from_private_bytes(mask_key).public_key().public_bytes_raw() != self._keys[u].mask_public:
            self._exclude(u, "dealt mask-key shares that do not rebuild its advertised key")
            return False
        lab = self._labels()
        for v in sorted(self._graph.of(u) & survivors):
            k = pair_key(mask_key, self._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **lab, a=u, b=v)
            self._prg.add_into(acc, pair_seed(k, **lab, sum_index=index, a=u, b=v), stream_id=0, sign=-1 if v < u else 1)
        return True
