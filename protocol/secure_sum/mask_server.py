"""Server role of pairwise-mask secure aggregation; see mask_client.py for the algorithm box.

The server relays keys and sealed shares, sums masked inputs as they arrive (it keeps one
running ring vector, never an individual input), and removes masks:

* survivors' self-masks, from the per-sum keys they reveal (or, for a survivor that went
  silent after INPUT, from its seed rebuilt from t seed shares);
* pairwise masks between survivors and clients that dropped before INPUT, from the dropped
  client's mask key rebuilt from t mask-key shares, when that client has not contributed to
  an earlier sum of the key epoch. When it has, its mask key must stay secret (its earlier
  self-mask is known), so the server re-keys the survivors and asks for the sum again.

Streaming sums (see mask_client.py) stop after step 3: with every live client's input in, the
pairwise masks cancel and the running sum is the encoded sum. With one missing they cannot be
removed without a secret that would expose someone, so the server re-keys the survivors and
asks again.

``revealed`` records which recovery secret the server obtained for each client; the
invariant (tested, and audited from transcripts) is that no client appears with both.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from secure_fedgraph.crypto import shamir
from secure_fedgraph.crypto.keys import verify_signature
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.crypto.prg import MaskPRG, ring_dtype
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.secure_sum.config import Backend
from secure_fedgraph.protocol.secure_sum.keyring import (
    consistency_statement,
    pair_key,
    seed_commitment,
    self_mask_key,
    verify_keys,
)
from secure_fedgraph.protocol.secure_sum.mask_client import SEALED_SHARES_BYTES
from secure_fedgraph.protocol.secure_sum.messages import (
    AdvertiseRequest,
    AdvertiseResponse,
    ConsistencyRequest,
    ConsistencyResponse,
    DeliverRequest,
    InputRequest,
    InputResponse,
    RecoverRequest,
    RecoverResponse,
    Sealed,
    ShareKeysRequest,
    ShareKeysResponse,
    Signature,
    SignedKeys,
    UnmaskRequest,
    UnmaskResponse,
)
from secure_fedgraph.protocol.secure_sum.neighbours import NeighbourGraph
from secure_fedgraph.protocol.secure_sum.roles import ServerRole, StepGen
from secure_fedgraph.protocol.spec import SumResult, SumSpec
from secure_fedgraph.protocol.secure_sum.stages import Stage

_SEALED_BYTES = 12 + SEALED_SHARES_BYTES + 16  # nonce + shares + GCM tag


class MaskServer(ServerRole):
    backend = Backend.MASK

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._prg = MaskPRG()
        self.revealed: dict[tuple[int, int, int], set[str]] = defaultdict(set)  # (round, epoch, client) -> {"seed", "mask_key"}

    def _labels(self) -> dict:
        return {"session": self.session, "round": self.round, "epoch": self._epoch}

    # --- rounds and key epochs ---------------------------------------------------------------
    def setup(self, round_index: int, participants=None) -> StepGen[None]:
        chosen = self._begin_round(round_index, participants)
        self._epoch = -1
        self._next_sum = 0
        yield from self._key_setup(set(chosen))

    def _key_setup(self, candidates: set[int]) -> StepGen[None]:
        """Steps 1-2: advertise signed keys, then seal Shamir shares to neighbours."""
        self._epoch += 1
        participants = tuple(sorted(candidates))
        if self._epoch == 0:
            self._round_clients = len(participants)
        needed = self.config.mask.resolve(self._round_clients, self.config.min_survivors).min_survivors
        self._require(len(participants), needed, "remain for a key set-up")
        plan = self.config.mask.resolve(len(participants), self.config.min_survivors, round_clients=self._round_clients)
        lab = self._labels()
        graph = NeighbourGraph.build(kind=plan.graph, participants=participants, degree=plan.degree, **lab)
        adverts: dict[int, SignedKeys] = {}

        def accept_advert(client: int, response: AdvertiseResponse) -> None:
            keys = response.keys
            if keys.client != client or any(len(b) != 32 for b in (keys.share_public, keys.mask_public, keys.seed_commitment)):
                raise ProtocolError(f"advertise: malformed keys from client {client}")
            verify_keys(keys, directory=self.directory, **lab)
            adverts[client] = keys

        outcome = yield self._step(
            Stage.ADVERTISE,
            lambda h: {
                c: AdvertiseRequest(h, self._epoch, participants, plan.graph.value, plan.degree, plan.threshold, plan.min_survivors)
                for c in participants
            },
            accept_advert,
        )
        self._note(Stage.ADVERTISE, outcome)
        advertised = set(adverts)
        self._require(len(advertised), plan.min_survivors, "advertised keys")
        inbox: dict[int, list[Sealed]] = defaultdict(list)

        def accept_shares(client: int, response: ShareKeysResponse) -> None:
            expected = graph.of(client) & advertised
            holders = [s.holder for s in response.sealed]
            if sorted(holders) != sorted(expected) or any(s.owner != client for s in response.sealed):
                raise ProtocolError(f"share_keys: client {client} must seal one share pair to each of its {len(expected)} neighbours")
            if any(len(s.data) != _SEALED_BYTES for s in response.sealed):
                raise ProtocolError(f"share_keys: client {client} sent an envelope of the wrong size")
            for s in response.sealed:
                inbox[s.holder].append(s)

        outcome = yield self._step(
            Stage.SHARE_KEYS,
            lambda h: {c: ShareKeysRequest(h, tuple(adverts[v] for v in sorted(graph.of(c) & advertised))) for c in sorted(advertised)},
            accept_shares,
        )
        self._note(Stage.SHARE_KEYS, outcome)
        shared = set(outcome.accepted)
        self._require(len(shared), plan.min_survivors, "sealed their shares")
        self._plan, self._graph, self._participants = plan, graph, participants
        self._keys = {c: adverts[c] for c in shared}
        self.live = shared
        self._pending_shares = {c: tuple(s for s in inbox[c] if s.owner in shared) for c in shared}
        self._exposed: set[int] = set()

    # --- one secure sum ----------------------------------------------------------------------
    def aggregate(self, spec: SumSpec) -> StepGen[SumResult]:
        index, self._next_sum = self._next_sum, self._next_sum + 1
        self._require(len(self.live), self._plan.min_survivors, "remain live for a new sum")
        while True:  # 3. masked input (again under new keys if a re-key is needed)
            streaming = self._plan.streams(spec)
            encoding = self.config.mask.encoding(len(self._participants), spec.size, spec.clip_range)
            live = tuple(sorted(self.live))
            acc = np.zeros(spec.size + 1, dtype=ring_dtype(encoding.ring_bits))
            pending, self._pending_shares = self._pending_shares, {}

            def accept_input(client: int, response: InputResponse) -> None:
                y = response.payload
                if y is None or y.shape != acc.shape or y.dtype != acc.dtype:
                    raise ProtocolError(f"input: client {client} sent {None if y is None else (y.dtype, y.shape)}, expected {(acc.dtype, acc.shape)}")
                np.add(acc, y, out=acc)

            outcome = yield self._step(
                Stage.INPUT,
                lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, encoding, live, pending.get(c, ()))),
                accept_input,
            )
            self._note(Stage.INPUT, outcome)
            survivors = set(outcome.accepted)
            dropped = set(live) - survivors
            if not dropped or not (streaming or dropped & self._exposed):
                break
            why = "during a streaming sum" if streaming else "after contributing earlier"
            self.log.append(f"round {self.round}: clients {sorted(dropped)} dropped {why}; re-keying")
            yield from self._key_setup(survivors)
        plan, graph, lab = self._plan, self._graph, self._labels()
        self._require(len(survivors), plan.min_survivors, "sent masked inputs")
        if streaming:  # every live input is in: the pairwise masks cancel in acc
            self._exposed |= survivors
            return (yield from self._deliver(index, spec, encoding, acc, survivors))

        # 4. consistency: every survivor signs (live, survivors)
        survivor_list = tuple(sorted(survivors))
        statement = consistency_statement(**lab, sum_index=index, live=live, survivors=survivor_list)
        signatures: dict[int, bytes] = {}

        def accept_signature(client: int, response: ConsistencyResponse) -> None:
            try:
                verify_signature(self.directory[client], response.signature, statement)
            except (InvalidSignature, ValueError) as exc:
                raise ProtocolError(f"consistency: signature of client {client} does not verify") from exc
            signatures[client] = response.signature

        outcome = yield self._step(
            Stage.CONSISTENCY, lambda h: self._per_client(h, survivor_list, ConsistencyRequest, lambda c: (survivor_list,)), accept_signature
        )
        self._note(Stage.CONSISTENCY, outcome)
        self._require(len(signatures), plan.min_survivors, "signed the survivor set")
        vouching = self._vouching(signatures)

        # 5. unmask: per-sum self-mask keys, and mask-key shares of clients that dropped
        self_keys: dict[int, bytes] = {}
        key_shares: dict[int, dict[int, bytes]] = defaultdict(dict)

        def accept_unmask(client: int, response: UnmaskResponse) -> None:
            owners = [s.owner for s in response.mask_key_shares]
            if len(response.self_mask_key) != 32 or len(set(owners)) != len(owners):
                raise ProtocolError(f"unmask: malformed answer from client {client}")
            for s in response.mask_key_shares:
                if s.owner not in dropped or client not in graph.of(s.owner) or len(s.value) != shamir.SHARE_BYTES:
                    raise ProtocolError(f"unmask: client {client} sent a share of client {s.owner}, which it does not hold")
            self_keys[client] = response.self_mask_key
            for s in response.mask_key_shares:
                key_shares[s.owner][client + 1] = s.value

        outcome = yield self._step(
            Stage.UNMASK,
            lambda h: self._per_client(h, sorted(signatures), UnmaskRequest, lambda c: (vouching({c} | (graph.of(c) & dropped)),)),
            accept_unmask,
        )
        self._note(Stage.UNMASK, outcome)
        self._exposed |= survivors
        for u in sorted(dropped):
            self._cancel_pairwise(acc, u, key_shares[u], survivors, index)

        # 6. recover the self-masks of survivors that went silent after sending input
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
                    seed_shares[s.owner][client + 1] = s.value

            outcome = yield self._step(
                Stage.RECOVER,
                lambda h: self._per_client(h, sorted(self_keys), RecoverRequest, lambda c: (missing_list, vouching(graph.of(c) & missing))),
                accept_recover,
            )
            self._note(Stage.RECOVER, outcome)
            for u in missing_list:
                seed = self._rebuild(u, seed_shares[u], "seed")
                if seed_commitment(seed, **lab, client=u) != self._keys[u].seed_commitment:
                    raise ProtocolError(f"recover: shares of client {u}'s seed do not match its commitment (a holder sent a bad share)")
                self_keys[u] = self_mask_key(seed, **lab, sum_index=index)
        for v in survivor_list:
            self._prg.add_into(acc, self_keys[v], stream_id=0, sign=-1)
        self.live = survivors - missing
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
        everyone = tuple(Signature(c, signatures[c]) for c in sorted(signatures))

        def pick(clients: set[int]) -> tuple[Signature, ...]:
            if graph.complete or not clients:
                return everyone if clients else ()
            wanted = set().union(*(graph.closed(c) for c in clients)) & set(signatures)
            return tuple(Signature(c, signatures[c]) for c in sorted(wanted))

        return pick

    def _rebuild(self, client: int, shares: dict[int, bytes], kind: str) -> bytes:
        """Shamir-combine one client's secret; record which kind of secret was obtained."""
        self._require(len(shares), self._plan.threshold, f"returned shares of client {client}'s {kind}")
        try:
            secret = shamir.combine(shares, threshold=self._plan.threshold)
        except ValueError as exc:
            raise ProtocolError(f"shares of client {client}'s {kind} are inconsistent: {exc}") from exc
        self.revealed[(self.round, self._epoch, client)].add(kind)
        return secret

    def _cancel_pairwise(self, acc: np.ndarray, u: int, shares: dict[int, bytes], survivors: set[int], index: int) -> None:
        """Remove the masks survivors added with dropped client u, from u's rebuilt mask key."""
        mask_key = self._rebuild(u, shares, "mask_key")
        if X25519PrivateKey.from_private_bytes(mask_key).public_key().public_bytes_raw() != self._keys[u].mask_public:
            raise ProtocolError(f"shares of client {u}'s mask key rebuild a key that is not its advertised key (a holder sent a bad share)")
        for v in sorted(self._graph.of(u) & survivors):
            k = pair_key(mask_key, self._keys[v].mask_public, purpose=Purpose.PAIRWISE_MASK, **self._labels(), a=u, b=v)
            self._prg.add_into(acc, k, stream_id=index, sign=-1 if v < u else 1)
