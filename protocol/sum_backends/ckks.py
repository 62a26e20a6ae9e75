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
  4. INPUT        clip, append the count and clipped-fraction lanes, encrypt in chunks; each
                  chunk ends in check lanes: pseudorandom values in [-clip, clip) from a check
                  key dealt with the CKKS secret (the server never has it), per (session, round,
                  sum index, sum name, live set, contributor, chunk). A client contributes once
                  per (round, sum index): each input request must come after its last one.
  5. CONSISTENCY  every contributor signs (round, sum index, sum name, contributor set C) of
                  the sum (once per sum); in a resumed run, not a set other than one an earlier
                  session signed for the same contribution (signed.py, R-RESUME).
  6. DELIVER      the server adds ciphertexts as they arrive and returns the encrypted sum
                  with the signatures; a client needs a majority of the run's clients to have
                  signed its C, so no two clients decrypt sums over different sets (whose
                  difference, both released, would be one client's input);
                  clients decrypt and check the count lane and that every chunk's check lanes
                  are the sum of the claimed contributors' own: the aggregate is exactly one
                  ciphertext of each contributor, not copies, multiples or other sums' pieces
                  (threat_model.md C-CHECK). A client whose check fails keeps nothing and says so.
  7. VERIFY       (only after a complaint) each contributor's ciphertexts go to 2C + 1 other
                  contributors (C: the colluders the run is configured against), each of
                  whom answers only whether their check lanes are that contributor's. Every
                  client holds the same key and check key, so honest checkers agree, and C + 1
                  agreeing verdicts include an honest one: they decide. A sender found invalid
                  is excluded and the sum abandoned; a checker that answered against a decided
                  verdict lied and is excluded; if every contribution is found valid, the
                  aggregate is their sum, so the complaints were lies: the complainers are
                  excluded and the sum stands (C-LIAR).

Clients hand a decrypted sum to the server only when their plan marked it releasable, rounded
to its stated precision (engine.ClientHost; C-RELEASE). The server learns ciphertexts only; any
client holding the key, colluding with the server, learns every client's input (C-COLLUDE).

Labels that cannot be spliced (threat_model.md C-CHECK, C-CONSISTENCY; issue 29, attack E2).
Before, check lanes and statements were labelled by (session, round, sum index) only and
clients did not require either to advance: a server that labelled round B's sum "round 0, sum
0" again delivered round A's ciphertexts of every client but one as round B's aggregate; the
check lanes held (the same label), the clients released it, and round A's released total minus
it was that client's input. What is bound now, and when it is known:
  - at INPUT: (round, sum index) must come after the client's previous input of the session
    (``_advance``), and the lanes are keyed by the sum's name and the request's live set L too;
  - at CONSISTENCY: the statement names the sum and its contributor set C;
  - at DELIVER: C is the set the client signed, lies within L, and a majority of the run signed it.
Why that suffices. A client X holding a contribution made for sum n at (session, round r, index
i) with live set L accepts an aggregate over C only if its check lanes are the tags of exactly
C's members under the label (r, i, n, L) (C-CHECK): tags only key holders can compute, so every
member's part is a ciphertext it made under that label, and an honest client makes at most one
per (r, i) (the advance): the aggregate is the sum of the one contribution each member of C
made for sum n at (r, i), never an earlier round's (E2), never one made for another sum at the
same (r, i) (the name: clients at different points of their plans can be asked for different
sums under one (r, i), which the advance, per client, allows), never one made while the server
showed another live set. Each honest client signs one statement per (r, i), and X needs a
majority of the run on (r, i, n, C), so every client that decrypts at (r, i) decrypts the sum
over the same C (C-CONSISTENCY): each contribution is in at most one decrypted sum, and no two
decrypted sums differ by one client. A new session has a new session id and freshly dealt keys.
The advance and the name in the lanes are what stop a splice. Given them, the live set in the
lanes, the name in the statement and C within L add no protection of their own on this path
(signers are members of C, whose parts were all made for n; a ckks client uses the live set
for nothing else): they tie each ciphertext and signature to the one request it answered, so a
signature says which sum it vouches for and a stray contributor is refused in one line.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from secure_fedgraph.crypto.ckks import CHECK_LANES, PublicContext, SecretContext
from secure_fedgraph.crypto.envelope import open_sealed, seal
from secure_fedgraph.crypto.keys import derive_key, verify_signature
from secure_fedgraph.crypto.labels import Purpose, encode_fields, label
from secure_fedgraph.crypto.prg import mask_vector
from secure_fedgraph.errors import ConfigError, DropoutError, ProtocolError, SumAbandoned
from secure_fedgraph.protocol.sum_backends.config import Backend
from secure_fedgraph.protocol.sum_backends.adversary import majority
from secure_fedgraph.protocol.sum_backends.keyring import open_from, pair_key, seal_for, sign_keys, verify_keys
from secure_fedgraph.protocol.sum_backends.plain import abandoned_streaming
from secure_fedgraph.protocol.sum_backends.messages import (
    Ack,
    AdvertiseRequest,
    AdvertiseResponse,
    ConsistencyRequest,
    ConsistencyResponse,
    DeliverRequest,
    DeliverResponse,
    InputRequest,
    InputResponse,
    KeyDealRequest,
    KeyDealResponse,
    KeyInstallRequest,
    Sealed,
    Signature,
    SignedKeys,
    VerifyRequest,
    VerifyResponse,
)
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole, StepGen
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec
from secure_fedgraph.protocol.core.stages import Stage

_NO_GRAPH = "none"
CHECK_KEY_BYTES = 32
VERIFY_BUDGET_BYTES = 1 << 30  # the most ciphertext bytes per sum the server keeps to find a bad sender


def contributor_statement(session: bytes, round_index: int, epoch: int, sum_index: int, name: str, contributors: tuple[int, ...]) -> bytes:
    """What each contributor of a ckks sum signs (threat_model.md C-CONSISTENCY): the sum, by its
    (round, index) and its name, and its contributor set; a SHA-256 digest, so signing costs the
    same for any number of clients."""
    return hashlib.sha256(label(Purpose.CKKS_CONTRIBUTORS, session, round_index, epoch, sum_index, name, sorted(contributors))).digest()


def signers_needed(n_run: int, floor: int) -> int:
    """Signatures a ckks aggregate needs on its contributor set: the survivor floor, and never
    fewer than a majority of the run, so two different sets cannot both be signed (each client
    signs one set per sum)."""
    return max(floor, majority(n_run))


def _uniform(key: bytes, count: int) -> np.ndarray:
    """``count`` values uniform in [-1, 1) from the AES-CTR stream of ``key``."""
    bits = mask_vector(key, stream_id=0, count=count, ring_bits=64)
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-52 - 1.0


class CheckLanes:
    """A linear MAC on every ciphertext of one sum, keyed by the check key that the dealer seals
    with the CKKS secret (the server never has it; threat_model.md C-CHECK).

    Contributor i puts tag = m_i + <r, lanes> in each chunk's check lanes: m_i is its own
    pseudorandom value (in [-clip, clip)), r a pseudorandom vector shared by all clients
    (entries in [-1, 1) / chunk length), both fresh per (session, round, sum index, sum name,
    live set, chunk). The tags of an honest aggregate add up to sum(m_i over the claimed
    contributors) + <r, summed lanes>. A server without the key cannot make any other ciphertext
    pass: copies or multiples of one contribution, pieces of other sums (of this round or an
    earlier one, under this name or another), spliced lanes, or a plaintext offset change one
    side and not the other, except with probability about the error bound over the tag's spread.
    The live set enters as a digest, so a key derivation costs the same for any number of clients.
    """

    def __init__(self, check_key: bytes, *, session: bytes, round: int, sum_index: int, name: str, live: tuple[int, ...],
                 clip_range: float) -> None:
        self._key, self._clip = check_key, max(clip_range, 1.0)
        self._label = (session, round, sum_index, name, hashlib.sha256(encode_fields(sorted(live))).digest())

    def _stream(self, *fields, count: int) -> np.ndarray:
        return _uniform(derive_key(self._key, label(Purpose.CKKS_CHECK, *self._label, *fields)), count)

    def own(self, client: int, chunks: int) -> np.ndarray:
        """m_i of every chunk, (chunks, CHECK_LANES): one key derivation per contributor and sum."""
        return self._clip * self._stream("own", client, chunks, count=CHECK_LANES * chunks).reshape(chunks, CHECK_LANES)

    def weights(self, chunk: int, length: int) -> np.ndarray:
        """r of one chunk: (CHECK_LANES, length), the same for every client."""
        return self._stream("weights", chunk, length, count=CHECK_LANES * length).reshape(CHECK_LANES, length) / length

    def tagger(self, client: int, chunks: int) -> Callable[[int, np.ndarray], np.ndarray]:
        """``check`` for :meth:`SecretContext.encrypt`: chunk j's tag, m_i[j] + <r_j, lanes>."""
        own = self.own(client, chunks)
        return lambda j, lanes: own[j] + self.weights(j, lanes.size) @ lanes

    def holds(self, chunks: list[tuple[np.ndarray, np.ndarray]], contributors, *, tolerance: float) -> bool:
        """Whether a decrypted aggregate's check lanes are exactly its contributors' tags."""
        owns = sum(self.own(c, len(chunks)) for c in contributors)
        for j, (lanes, check) in enumerate(chunks):
            expected = owns[j] + self.weights(j, lanes.size) @ lanes
            if not np.all(np.abs(check - expected) <= tolerance):
                return False
        return True


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
        clip_range, scale_bits = self.config.ckks.encoding(spec, len(self.clients))
        needed = self._needed
        self._require(len(self.live), needed, "remain live for a new sum")
        index, self._sum_index = self._sum_index, self._sum_index + 1
        sizes = params.chunk_sizes(spec.size)
        acc: list = [None]
        kept: dict[int, tuple[bytes, ...]] = {}  # to find a bad sender if the aggregate fails its check

        def accept_input(client: int, response: InputResponse) -> None:
            if len(response.ciphertexts) != len(sizes):
                raise ProtocolError(f"input: client {client} sent {len(response.ciphertexts)} ciphertexts, expected {len(sizes)}")
            vectors = [self.context.load(blob) for blob in response.ciphertexts]
            if [v.size() for v in vectors] != sizes:
                raise ProtocolError(f"input: client {client}'s ciphertexts hold the wrong number of values")
            acc[0] = PublicContext.add(acc[0], vectors)
            if sum(map(len, response.ciphertexts)) * (len(kept) + 1) <= VERIFY_BUDGET_BYTES:
                kept[client] = response.ciphertexts

        live = tuple(sorted(self.live))
        outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, None, live)), accept_input)
        self._note(Stage.INPUT, outcome)
        abandoned_streaming(self, spec, set(live), set(outcome.accepted))
        contributors = tuple(sorted(outcome.accepted))
        self.live = set(contributors)
        self._require(len(contributors), needed, "sent encrypted inputs")
        statement = self._statement(index, spec.name, contributors)
        signatures: dict[int, bytes] = {}

        def accept_signature(client: int, response: ConsistencyResponse) -> None:
            try:
                verify_signature(self.directory[client], response.signature, statement)
            except Exception as exc:
                raise ProtocolError(f"consistency: signature of client {client} does not verify") from exc
            signatures[client] = response.signature

        outcome = yield self._step(
            Stage.CONSISTENCY, lambda h: self._per_client(h, contributors, ConsistencyRequest, lambda c: (contributors,)), accept_signature
        )
        self._note(Stage.CONSISTENCY, outcome)
        self.live = set(signatures)
        self._require(len(signatures), signers_needed(len(self.clients), needed), "signed the contributor set")
        signed = tuple(Signature(c, signatures[c]) for c in sorted(signatures))
        blobs = tuple(v.serialize() for v in acc[0])
        complaints: dict[int, str] = {}

        def accept_delivery(client: int, response: DeliverResponse) -> None:
            if not response.accepted:
                complaints[client] = response.reason

        outcome = yield self._step(
            Stage.DELIVER,
            lambda h: self._per_client(h, tuple(sorted(signatures)), DeliverRequest, lambda c: (index, contributors, None, blobs, None, signed)),
            accept_delivery,
        )
        self._note(Stage.DELIVER, outcome)
        self.live &= set(outcome.accepted)
        if complaints:
            self.log.append(f"round {self.round}: sum {spec.name!r} failed its check at clients {sorted(complaints)}")
            bad, valid, misjudged = yield from self._find_bad_senders(index, kept)
            for client, reason in sorted(misjudged.items()):
                self._exclude(client, reason)
            self.live -= set(misjudged)
            if self._complaints_refuted(bad, valid, contributors):
                for client in sorted(complaints):
                    self._exclude(client, f"complained about sum {spec.name!r}, whose every contribution its checkers found valid")
                self.live -= set(complaints)
            else:
                for client in bad:
                    self._exclude(client, f"sent ciphertexts for sum {spec.name!r} that fail their check lanes")
                self.live -= bad
                raise SumAbandoned(f"sum {spec.name!r}: the aggregate failed its check at {len(complaints)} clients; "
                                   f"{'senders ' + str(sorted(bad)) + ' excluded' if bad else 'no sender identified'}; abandoned")
        bound = params.error_bound(len(contributors), clip_range=clip_range, scale_bits=scale_bits)
        return SumResult(spec, None, frozenset(contributors), None, bound)

    def _statement(self, index: int, name: str, contributors: tuple[int, ...]) -> bytes:
        return contributor_statement(self.session, self.round, self._epoch, index, name, contributors)

    def _verdicts_needed(self) -> int:
        """How many agreeing checkers decide a contribution: one more than the clients that may
        collude (the configured adversary), so that at least one of them is honest."""
        return self.config.mask.adversary.colluders(len(self.clients)) + 1

    @staticmethod
    def _complaints_refuted(bad: set[int], valid: set[int], contributors: tuple[int, ...]) -> bool:
        """Every contribution was found valid by enough checkers: the aggregate (the server's
        own sum of them) is right, and whoever complained about it lied (C-LIAR)."""
        return not bad and valid == set(contributors)

    def _find_bad_senders(self, index: int, kept: dict[int, tuple[bytes, ...]]) -> StepGen[tuple[set[int], set[int], dict[int, str]]]:
        """7. Each kept contribution goes to the next 2d - 1 live contributors in turn (one VERIFY
        step per turn, one contribution per client and step), d = :meth:`_verdicts_needed`: d
        agreeing verdicts decide it (they hold an honest one, and honest checkers agree), and
        with at most d - 1 liars among 2d - 1 checkers the honest ones always decide. Returns
        (owners found invalid, owners found valid, checkers that answered against a decided
        verdict, with why); nothing when fewer than 2d - 1 others can check."""
        checkers = sorted(self.live & set(kept))
        decide = self._verdicts_needed()
        turns = 2 * decide - 1
        if len(checkers) < turns + 1:
            self.log.append(f"round {self.round}: only {len(checkers)} contributors can check each other, need {turns + 1}: no sender judged")
            return set(), set(), {}
        verdicts: dict[int, dict[int, bool]] = {owner: {} for owner in checkers}
        for turn in range(1, turns + 1):
            owner_of = {checkers[(i + turn) % len(checkers)]: owner for i, owner in enumerate(checkers)}

            def accept_verdict(client: int, response: VerifyResponse, owner_of=owner_of) -> None:
                if response.owner != owner_of[client]:
                    raise ProtocolError(f"verify: client {client} answered for client {response.owner}, not {owner_of[client]}")
                verdicts[response.owner][client] = response.valid

            outcome = yield self._step(
                Stage.VERIFY, lambda h, owner_of=owner_of: {c: VerifyRequest(h, index, o, kept[o]) for c, o in owner_of.items()},
                accept_verdict,
            )
            self._note(Stage.VERIFY, outcome)
        bad, valid, misjudged = set(), set(), {}
        for owner, answers in verdicts.items():
            votes = list(answers.values())
            decided = True if votes.count(True) >= decide else False if votes.count(False) >= decide else None
            if decided is None:
                continue
            (valid if decided else bad).add(owner)
            for checker, answer in answers.items():
                if answer is not decided:
                    misjudged[checker] = (f"answered that client {owner}'s ciphertexts are {'' if answer else 'in'}valid, against "
                                          f"{votes.count(decided)} other checkers")
        return bad, valid, misjudged


@dataclass(frozen=True)
class _Pending:
    """The sum a client contributed to and waits for: what its check lanes were keyed by."""

    sum_index: int
    round: int
    spec: SumSpec
    live: tuple[int, ...]  # the live set its input request showed
    clip_range: float
    scale_bits: int


class CkksClient(ClientRole):
    backend = Backend.CKKS
    round_entry = frozenset({Stage.ADVERTISE, Stage.INPUT})
    continuing = frozenset({Stage.CONSISTENCY, Stage.DELIVER, Stage.VERIFY})

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._context: SecretContext | None = None
        self._check_key: bytes | None = None  # dealt with the secret context; the server never has it
        self._share_key: X25519PrivateKey | None = None
        self._epoch, self._participants = -1, ()
        self._pending: _Pending | None = None
        self._last_input = (-1, -1)  # (round, sum index) of this client's latest input in this session
        self._signed: tuple[int, tuple[int, ...]] | None = None  # (sum index, contributor set) this client signed
        self._digest: bytes | None = None  # of the pending contribution, in runs that can resume (R-RESUME)

    def _labels(self, request) -> dict:
        return {"session": self.session, "round": request.header.round, "epoch": self._epoch}

    def _handler(self, stage: Stage) -> Callable[[Any], Any]:
        return {
            Stage.ADVERTISE: self._on_advertise,
            Stage.KEY_DEAL: self._on_key_deal,
            Stage.KEY_INSTALL: self._on_key_install,
            Stage.INPUT: self._on_input,
            Stage.CONSISTENCY: self._on_consistency,
            Stage.DELIVER: self._on_deliver,
            Stage.VERIFY: self._on_verify,
        }[stage]

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
        self._check_key = os.urandom(CHECK_KEY_BYTES)
        content_key = os.urandom(32)
        sealed_context = seal(content_key, self._check_key + self._context.secret_bytes(), self._context_aad(request, self.client_id))
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
        if len(secret) <= CHECK_KEY_BYTES:
            raise ProtocolError(f"client {self.client_id}: the sealed CKKS secret is too short to hold the check key")
        self._check_key = secret[:CHECK_KEY_BYTES]
        self._context = SecretContext.from_bytes(secret[CHECK_KEY_BYTES:], self.config.ckks.params)
        return Ack(self._header(request))

    def _checks(self, pending: _Pending) -> CheckLanes:
        return CheckLanes(self._check_key, session=self.session, round=pending.round, sum_index=pending.sum_index, name=pending.spec.name,
                          live=pending.live, clip_range=pending.clip_range)

    def _matches(self, chunks, owners, pending: _Pending, bound: float) -> bool:
        """Whether a decrypted aggregate is exactly one ciphertext of each of ``owners``, made for
        ``pending``'s sum (threat_model.md C-CHECK): its check lanes are their tags, and it has their chunks."""
        if len(chunks) != self.config.ckks.params.chunks(pending.spec.size):
            return False
        return self._checks(pending).holds(chunks, owners, tolerance=3 * bound)

    def _advance(self, round_index: int, sum_index: int) -> None:
        """One contribution per (round, sum index) in a session: each input request must come
        after this client's previous one, so no label of its check lanes covers two of its
        contributions (an earlier round's ciphertexts relabelled as a later sum's: issue 29 E2;
        threat_model.md C-CHECK)."""
        if (round_index, sum_index) <= self._last_input:
            last_round, last_index = self._last_input
            raise ProtocolError(f"client {self.client_id}: input request for sum {sum_index} of round {round_index} does not come after "
                                f"sum {last_index} of round {last_round}, which this client already contributed to (a reused label "
                                "would let the server splice an earlier sum's ciphertexts into this one)")
        self._last_input = (round_index, sum_index)

    def _on_input(self, request: InputRequest) -> InputResponse:
        if self._context is None:
            raise ProtocolError(f"client {self.client_id}: asked for an encrypted input before the CKKS keys were installed")
        live = tuple(request.live)
        if self.client_id not in live or list(live) != sorted(set(live)):
            raise ProtocolError(f"client {self.client_id}: the live set of sum {request.sum_index} must be sorted, unique and include this client")
        params = self.config.ckks.params
        self.policy.check_noise(request.spec, live=len(live), least=len(live), private=request.spec.name in self._private,
                                precision_bits=None)  # no grid: ckks refuses a noised sum just below
        clip_range, scale_bits = self.config.ckks.encoding(request.spec, len(self._participants))  # refuses a noised sum
        x = self._fresh(request.spec)
        self._advance(request.header.round, request.sum_index)
        self._digest = self._digest_of(x)
        pending = _Pending(request.sum_index, request.header.round, request.spec, live, clip_range, scale_bits)
        ciphertexts, _ = self._context.encrypt(x, params=params, clip_range=clip_range, scale_bits=scale_bits,
                                               check=self._checks(pending).tagger(self.client_id, params.chunks(request.spec.size)))
        self._expose(request.spec)  # any key holder can decrypt it from now on
        self._pending = pending
        return InputResponse(self._header(request), None, tuple(ciphertexts))

    def _within_live(self, sum_index: int, contributors) -> None:
        """A sum's contributors are among the live set its input request showed, the set its check
        lanes were keyed by (the lanes already refuse anyone else's part: this names the stray)."""
        outside = sorted(set(contributors) - set(self._pending.live))
        if outside:
            raise ProtocolError(f"client {self.client_id}: sum {sum_index} lists contributors {outside[:8]} outside the live set its "
                                "input request showed")

    def _on_consistency(self, request: ConsistencyRequest) -> ConsistencyResponse:
        """Sign the sum's contributor set, once per sum (threat_model.md C-CONSISTENCY)."""
        members = request.survivors
        if self._pending is None or list(members) != sorted(set(members)) or self.client_id not in members:
            raise ProtocolError(f"client {self.client_id}: a contributor set must be sorted, unique and include this client")
        if len(members) < self.policy.floor(self.n_run):
            raise ProtocolError(f"client {self.client_id}: contributor set of {len(members)} is below this client's floor of "
                                f"{self.policy.floor(self.n_run)} (--min-survivors-fraction)")
        pending = self._pending
        self._within_live(pending.sum_index, members)
        self._bind(pending.spec.name, self._digest, frozenset(members))  # R-RESUME: before anyone may decrypt it
        self._signed = (pending.sum_index, tuple(members))
        statement = contributor_statement(self.session, pending.round, self._epoch, pending.sum_index, pending.spec.name, tuple(members))
        return ConsistencyResponse(self._header(request), self.identity.sign(statement))

    def _vouched(self, request: DeliverRequest) -> None:
        """The delivered sum is over the set this client signed, and enough of its members signed
        it too: no other client decrypts a sum over a different set."""
        if self._signed != (request.sum_index, tuple(request.contributors)):
            raise ProtocolError(f"client {self.client_id}: delivered sum {request.sum_index} is not over the contributor set this client signed")
        pending = self._pending
        statement = contributor_statement(self.session, pending.round, self._epoch, request.sum_index, pending.spec.name,
                                          tuple(request.contributors))
        valid = set()
        for sig in request.signatures:
            if sig.client in request.contributors and sig.client not in valid:
                try:
                    verify_signature(self.directory[sig.client], sig.signature, statement)
                except Exception:
                    continue
                valid.add(sig.client)
        needed = signers_needed(self.n_run, self.policy.floor(self.n_run))
        if len(valid) < needed:
            raise ProtocolError(f"client {self.client_id}: only {len(valid)} contributors signed the set of sum {request.sum_index}, "
                                f"need {needed}: the server may have shown clients different sets")

    def _on_deliver(self, request: DeliverRequest) -> DeliverResponse:
        contributors = frozenset(request.contributors)
        pending = self._pending
        if pending is None or pending.sum_index != request.sum_index or request.header.round != pending.round \
                or self.client_id not in contributors:
            raise ProtocolError(f"client {self.client_id}: delivered sum {request.sum_index} is not the one this client contributed to")
        self._vouched(request)
        if len(contributors) != len(request.contributors) or len(contributors) < self.policy.floor(self.n_run):
            raise ProtocolError(f"client {self.client_id}: delivered sum {request.sum_index} lists {len(request.contributors)} "
                                f"contributors, repeated or below this client's floor of {self.policy.floor(self.n_run)}")
        self._within_live(request.sum_index, contributors)
        spec = pending.spec
        bound = self.config.ckks.params.error_bound(len(contributors), clip_range=pending.clip_range, scale_bits=pending.scale_bits)
        try:
            values, clipped, chunks = self._context.decrypt_checked(request.ciphertexts, n_values=spec.size, n_contributors=len(contributors))
        except ProtocolError as exc:
            return DeliverResponse(self._header(request), False, str(exc))
        if not self._matches(chunks, contributors, pending, bound):
            return DeliverResponse(self._header(request), False, "the aggregate is not the sum of its contributors' ciphertexts (check lanes)")
        self._finish(SumResult(spec, spec.unflatten(values), contributors, clipped, bound))  # kept pending: another
        return DeliverResponse(self._header(request), True)  # contributor's complaint may still have this client check ciphertexts

    def _on_verify(self, request: VerifyRequest) -> VerifyResponse:
        """Check one contributor's ciphertexts alone; answer only valid or not (the values stay here)."""
        pending = self._pending
        if pending is None or pending.sum_index != request.sum_index or request.owner == self.client_id:
            raise ProtocolError(f"client {self.client_id}: asked to verify sum {request.sum_index} of client {request.owner}, "
                                "not another contributor of the sum this client has pending")
        bound = self.config.ckks.params.error_bound(1, clip_range=pending.clip_range, scale_bits=pending.scale_bits)
        try:
            _, _, chunks = self._context.decrypt_checked(request.ciphertexts, n_values=pending.spec.size, n_contributors=1)
            valid = self._matches(chunks, (request.owner,), pending, bound)
        except ProtocolError:
            valid = False
        return VerifyResponse(self._header(request), request.owner, valid)
