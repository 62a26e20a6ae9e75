"""The ckks backend: clients encrypt, the server adds ciphertexts, clients decrypt the sum.

Key set-up, once per run (fresh keys every run, never in the package or a config file):
  1. ADVERTISE    each client signs a fresh X25519 public key with its identity key.
  2. KEY_DEAL     the lowest-id client that answers (the dealer) verifies its peers' keys,
                  makes a fresh TenSEAL CKKS context, seals it once with AES-GCM under a fresh
                  content key, and seals that key to each peer under an X25519 pair key (so
                  its upload grows by ~60 bytes per peer, not by a context per peer); it gives
                  the server a context serialised with no keys (parameters only), checked there.
  3. KEY_INSTALL  each peer verifies the dealer's signed key, opens and installs the context.
Per sum:
  4. INPUT        clip, append the count and clipped-fraction lanes, encrypt in N/2-slot chunks.
  5. DELIVER      the server adds ciphertexts as they arrive and returns the encrypted sum;
                  clients decrypt and check the count lane (a wrong key cannot pass).

The server learns ciphertexts only; any client holding the key, colluding with the server,
learns every client's input (threat_model.md claim C-COLLUDE).
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from secure_fedgraph.crypto.ckks import PublicContext, SecretContext
from secure_fedgraph.crypto.envelope import open_sealed, seal
from secure_fedgraph.crypto.labels import Purpose, label
from secure_fedgraph.errors import ConfigError, DropoutError, ProtocolError
from secure_fedgraph.protocol.secure_sum.config import Backend
from secure_fedgraph.protocol.secure_sum.keyring import open_from, pair_key, seal_for, sign_keys, verify_keys
from secure_fedgraph.protocol.secure_sum.plain import abandoned_streaming
from secure_fedgraph.protocol.secure_sum.messages import (
    Ack,
    AdvertiseRequest,
    AdvertiseResponse,
    DeliverRequest,
    InputRequest,
    InputResponse,
    KeyDealRequest,
    KeyDealResponse,
    KeyInstallRequest,
    Sealed,
    SignedKeys,
)
from secure_fedgraph.protocol.secure_sum.roles import ClientRole, ServerRole, StepGen
from secure_fedgraph.protocol.spec import SumResult, SumSpec
from secure_fedgraph.protocol.secure_sum.stages import Stage

_NO_GRAPH = "none"


class CkksServer(ServerRole):
    backend = Backend.CKKS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.context: PublicContext | None = None
        self._installed: set[int] = set()
        self._epoch = -1

    def setup(self, round_index: int, participants=None) -> StepGen[None]:
        chosen = self._begin_round(round_index, participants)
        self._needed = self.config.survivors_needed(len(self.clients))
        self._sum_index = 0
        if self.context is None:
            yield from self._deal_keys(chosen)
        self.live = set(self._installed) & set(chosen)

    def _deal_keys(self, chosen: list[int]) -> StepGen[None]:
        self._epoch += 1
        needed = self._needed
        lab = {"session": self.session, "round": self.round, "epoch": self._epoch}
        participants = tuple(chosen)
        adverts: dict[int, SignedKeys] = {}

        def accept_advert(client: int, response: AdvertiseResponse) -> None:
            keys = response.keys
            if keys.client != client or len(keys.share_public) != 32 or keys.mask_public or keys.seed_commitment:
                raise ProtocolError(f"advertise: malformed keys from client {client}")
            verify_keys(keys, directory=self.directory, **lab)
            adverts[client] = keys

        outcome = yield self._step(
            Stage.ADVERTISE,
            lambda h: {c: AdvertiseRequest(h, self._epoch, participants, _NO_GRAPH, 0, 0, needed) for c in participants},
            accept_advert,
        )
        self._note(Stage.ADVERTISE, outcome)
        advertised = sorted(adverts)
        self._require(len(advertised), needed, "advertised keys")
        dealt: dict[int, Sealed] = {}
        sealed_context: list[bytes] = []
        for dealer in advertised:  # the lowest id deals; if it is silent, the next one
            peers = [c for c in advertised if c != dealer]

            def accept_deal(client: int, response: KeyDealResponse) -> None:
                context = PublicContext(response.public_context)  # refuses a context with a secret key
                if sorted(s.holder for s in response.sealed) != peers or any(s.owner != client for s in response.sealed):
                    raise ProtocolError(f"key_deal: dealer {client} must seal the content key to each of its {len(peers)} peers once")
                if not response.sealed_context:
                    raise ProtocolError(f"key_deal: dealer {client} sent no sealed context")
                self.context = context
                dealt.update({s.holder: s for s in response.sealed})
                sealed_context.append(response.sealed_context)

            outcome = yield self._step(Stage.KEY_DEAL, lambda h: {dealer: KeyDealRequest(h, tuple(adverts[p] for p in peers))}, accept_deal)
            self._note(Stage.KEY_DEAL, outcome)
            if dealer in outcome.accepted:
                break
        else:
            raise DropoutError(f"round {self.round}: no client dealt the CKKS keys")
        outcome = yield self._step(
            Stage.KEY_INSTALL, lambda h: {p: KeyInstallRequest(h, adverts[dealer], dealt[p], sealed_context[-1]) for p in peers}, lambda c, r: None
        )
        self._note(Stage.KEY_INSTALL, outcome)
        self._installed = {dealer} | set(outcome.accepted)
        self._require(len(self._installed), needed, "installed the CKKS keys")

    def aggregate(self, spec: SumSpec) -> StepGen[SumResult]:
        if spec.server_only:
            raise ConfigError(f"sum {spec.name!r} is server_only, but with ckks only the clients can decrypt a sum")
        params = self.config.ckks.params
        clip_range = self.config.ckks.clip_range if spec.clip_range is None else spec.clip_range
        scale_bits = params.scale_for(n_clients=len(self.clients), clip_range=clip_range)
        needed = self._needed
        self._require(len(self.live), needed, "remain live for a new sum")
        index, self._sum_index = self._sum_index, self._sum_index + 1
        total_lanes = spec.size + 2
        sizes = [min(params.slots, total_lanes - i) for i in range(0, total_lanes, params.slots)]
        acc: list = [None]

        def accept_input(client: int, response: InputResponse) -> None:
            if len(response.ciphertexts) != len(sizes):
                raise ProtocolError(f"input: client {client} sent {len(response.ciphertexts)} ciphertexts, expected {len(sizes)}")
            vectors = [self.context.load(blob) for blob in response.ciphertexts]
            if [v.size() for v in vectors] != sizes:
                raise ProtocolError(f"input: client {client}'s ciphertexts hold the wrong number of values")
            acc[0] = PublicContext.add(acc[0], vectors)

        live = tuple(sorted(self.live))
        outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, None, live, ())), accept_input)
        self._note(Stage.INPUT, outcome)
        abandoned_streaming(self, spec, set(live), set(outcome.accepted))
        contributors = tuple(sorted(outcome.accepted))
        self.live = set(contributors)
        self._require(len(contributors), needed, "sent encrypted inputs")
        blobs = tuple(v.serialize() for v in acc[0])
        outcome = yield self._step(
            Stage.DELIVER,
            lambda h: self._per_client(h, contributors, DeliverRequest, lambda c: (index, contributors, None, blobs, None)),
            lambda c, r: None,
        )
        self._note(Stage.DELIVER, outcome)
        self.live &= set(outcome.accepted)
        bound = params.error_bound(len(contributors), clip_range=clip_range, scale_bits=scale_bits)
        return SumResult(spec, None, frozenset(contributors), None, bound)


class CkksClient(ClientRole):
    backend = Backend.CKKS
    round_entry = frozenset({Stage.ADVERTISE, Stage.INPUT})
    continuing = frozenset({Stage.DELIVER})

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._context: SecretContext | None = None
        self._share_key: X25519PrivateKey | None = None
        self._epoch, self._participants = -1, ()
        self._pending: tuple | None = None  # (sum index, spec, clip range, scale bits)

    def _labels(self, request) -> dict:
        return {"session": self.session, "round": request.header.round, "epoch": self._epoch}

    def _on_advertise(self, request: AdvertiseRequest) -> AdvertiseResponse:
        participants = request.participants
        if list(participants) != sorted(set(participants)) or self.client_id not in participants:
            raise ProtocolError(f"client {self.client_id}: participant list must be sorted, unique and include this client")
        floor = self.policy.floor(self.n_run)
        if request.min_survivors < floor:
            raise ProtocolError(f"client {self.client_id}: server announced min_survivors={request.min_survivors}, below the {floor} of "
                                f"the run's {self.n_run} clients this client's policy needs (--min-survivors-fraction)")
        self._epoch, self._participants = request.epoch, participants
        self._context, self._share_key = None, X25519PrivateKey.generate()
        signed = sign_keys(
            self.identity, **self._labels(request), client=self.client_id, share_public=self._share_key.public_key().public_bytes_raw()
        )
        return AdvertiseResponse(self._header(request), signed)

    def _transport_key(self, request, peer: SignedKeys) -> bytes:
        if self._share_key is None:
            raise ProtocolError(f"client {self.client_id}: key material requested before this client advertised its key")
        if peer.client == self.client_id or peer.client not in self._participants:
            raise ProtocolError(f"client {self.client_id}: keys of client {peer.client} are not a peer's")
        verify_keys(peer, directory=self.directory, **self._labels(request))
        return pair_key(self._share_key, peer.share_public, purpose=Purpose.CKKS_KEY_TRANSPORT, **self._labels(request), a=self.client_id, b=peer.client)

    def _on_key_deal(self, request: KeyDealRequest) -> KeyDealResponse:
        if len({p.client for p in request.peers}) != len(request.peers):
            raise ProtocolError(f"client {self.client_id}: duplicate peers in key_deal")
        keys = {p.client: self._transport_key(request, p) for p in request.peers}
        self._context = SecretContext.generate(self.config.ckks.params)
        content_key = os.urandom(32)
        sealed_context = seal(content_key, self._context.secret_bytes(), self._context_aad(request, self.client_id))
        sealed = tuple(
            seal_for(k, content_key, aad_purpose=Purpose.CKKS_KEY_AAD, **self._labels(request), owner=self.client_id, holder=c)
            for c, k in sorted(keys.items())
        )
        return KeyDealResponse(self._header(request), self._context.public_bytes(), sealed_context, sealed)

    def _context_aad(self, request, dealer: int) -> bytes:
        lab = self._labels(request)
        return label(Purpose.CKKS_CONTEXT_AAD, lab["session"], lab["round"], lab["epoch"], dealer)

    def _on_key_install(self, request: KeyInstallRequest) -> Ack:
        key = self._transport_key(request, request.dealer)
        sealed = request.sealed
        if sealed.owner != request.dealer.client or sealed.holder != self.client_id:
            raise ProtocolError(f"client {self.client_id}: key envelope is not from the dealer to this client")
        content_key = open_from(key, sealed, aad_purpose=Purpose.CKKS_KEY_AAD, **self._labels(request))
        try:
            secret = open_sealed(content_key, request.sealed_context, self._context_aad(request, request.dealer.client))
        except (InvalidTag, ValueError) as exc:
            raise ProtocolError(f"client {self.client_id}: the sealed CKKS context fails authentication (tampered or replayed)") from exc
        self._context = SecretContext.from_bytes(secret, self.config.ckks.params)
        return Ack(self._header(request))

    def _on_input(self, request: InputRequest) -> InputResponse:
        if self._context is None:
            raise ProtocolError(f"client {self.client_id}: asked for an encrypted input before the CKKS keys were installed")
        if self.client_id not in request.live:
            raise ProtocolError(f"client {self.client_id}: not in the live set of sum {request.sum_index}")
        params = self.config.ckks.params
        clip_range = self.config.ckks.clip_range if request.spec.clip_range is None else request.spec.clip_range
        scale_bits = params.scale_for(n_clients=len(self._participants), clip_range=clip_range)
        x = self._fresh(request.spec)
        ciphertexts, _ = self._context.encrypt(x, params=params, clip_range=clip_range, scale_bits=scale_bits)
        self._expose(request.spec)  # any key holder can decrypt it from now on
        self._pending = (request.sum_index, request.spec, clip_range, scale_bits)
        return InputResponse(self._header(request), None, tuple(ciphertexts))

    def _on_deliver(self, request: DeliverRequest) -> Ack:
        if self._pending is None or self._pending[0] != request.sum_index or self.client_id not in request.contributors:
            raise ProtocolError(f"client {self.client_id}: delivered sum {request.sum_index} is not the one this client contributed to")
        if len(set(request.contributors)) < self.policy.floor(self.n_run):
            raise ProtocolError(f"client {self.client_id}: delivered sum {request.sum_index} has {len(set(request.contributors))} "
                                f"contributors, below this client's floor of {self.policy.floor(self.n_run)}")
        _, spec, clip_range, scale_bits = self._pending
        values, clipped = self._context.decrypt_sum(request.ciphertexts, n_values=spec.size, n_contributors=len(request.contributors))
        bound = self.config.ckks.params.error_bound(len(request.contributors), clip_range=clip_range, scale_bits=scale_bits)
        self._finish(SumResult(spec, spec.unflatten(values), frozenset(request.contributors), clipped, bound))
        self._pending = None
        return Ack(self._header(request))
