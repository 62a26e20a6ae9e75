"""What every backend's server and client roles share: steps, headers, transition checks.

A server role is written as generators of :class:`~secure_fedgraph.protocol.core.steps.Step`
(see :mod:`secure_fedgraph.protocol.core.steps`); a transport executes them. Request headers come
from the session's :class:`~secure_fedgraph.protocol.core.session.Sequencer`, shared with the other
collectives so step numbers increase over the whole session.

A client role is a state machine: :meth:`ClientRole.handle` checks the header and the stage
transition before dispatching to the handler its backend lists for the stage (``_handler``).

Contributions are single-use (threat_model.md M-ONCE). Once any of a contribution could have
been unmasked (a revealed self-mask key, a streaming input, a ciphertext), it is *exposed*:
if its sum is then abandoned (the server goes on without delivering it), the contribution is
never masked again, since a second sum over the same inputs without one client would give
that client's input away. Only the digest of an abandoned contribution is kept, to refuse it.
"""

from __future__ import annotations

import hashlib
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from secure_fedgraph.crypto.keys import IdentityKey, SecretMaterial
from secure_fedgraph.errors import ConfigError, DropoutError, ProtocolError
from secure_fedgraph.protocol.sum_backends.config import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.ddp_noise import noised
from secure_fedgraph.protocol.sum_backends.messages import REQUESTS, RESPONSES, SERVER, Header, Message
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy, KeyEpochCount
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions
from secure_fedgraph.protocol.core.spec import SumResult, SumSpec, as_array
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.sum_backends.transitions import TRANSITIONS
from secure_fedgraph.protocol.core.session import SESSION_BYTES, Sequencer
from secure_fedgraph.protocol.core.steps import BuiltOnRead, Step, StepGen, StepOutcome

__all__ = ["ServerRole", "ClientRole", "Step", "StepGen", "StepOutcome", "new_session_id", "check_directory", "IdentityDirectory"]


def new_session_id() -> bytes:
    """A fresh random session id; binds every signature, label and header to one run."""
    return os.urandom(SESSION_BYTES)


class IdentityDirectory(Mapping[int, bytes]):
    """A validated, read-only identity directory: client id -> 32-byte Ed25519 public key. One
    serves every client of a process (a host of hundreds of nFedGNN users holds one, not one
    copy of n keys per user: n x n)."""

    __slots__ = ("_keys",)

    def __init__(self, directory: Mapping[int, bytes]) -> None:
        keys = {}
        for client, key in directory.items():
            if isinstance(client, bool) or not isinstance(client, int) or client < 0:
                raise ConfigError(f"client ids must be non-negative ints, got {client!r}")
            if not isinstance(key, bytes) or len(key) != 32:
                raise ConfigError(f"identity key of client {client} must be 32 bytes")
            keys[client] = key
        self._keys = keys

    def __getitem__(self, client: int) -> bytes:
        return self._keys[client]

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"IdentityDirectory({len(self._keys)} clients)"


def check_directory(directory: Mapping[int, bytes]) -> IdentityDirectory:
    """Validate the identity directory (once: a directory already checked is returned as it is)."""
    return directory if isinstance(directory, IdentityDirectory) else IdentityDirectory(directory)


class ServerRole(ABC):
    """Server side of one backend for one session."""

    backend: Backend
    min_clients = 2  # a sum of one is that client's value: only OnePartyServer, outside any protocol, allows it

    def __init__(
        self,
        config: SecureSumConfig,
        *,
        session: bytes,
        directory: Mapping[int, bytes],
        clients: list[int],
        sequencer: Sequencer | None = None,
    ) -> None:
        self.config = config
        self.seq = sequencer if sequencer is not None else Sequencer(session)
        if self.seq.session != session:
            raise ConfigError("the sequencer belongs to another session")
        self.session = session
        self.directory = check_directory(directory)
        unknown = sorted(set(clients) - set(self.directory))
        if unknown:
            raise ConfigError(f"clients {unknown} have no identity key in the directory")
        if len(set(clients)) != len(clients) or len(clients) < self.min_clients:
            raise ConfigError(f"a secure sum needs at least {self.min_clients} distinct clients, got {clients}")
        self.clients = sorted(clients)
        self._round_started = -1
        self.log: list[str] = []  # stage-level events (ids, counts, reasons); never payloads
        self.excluded: dict[int, str] = {}  # clients caught lying (a share or key that fails its commitment), and why

    @property
    def round(self) -> int:
        return self.seq.round

    @abstractmethod
    def setup(self, round_index: int, participants: Collection[int] | None = None) -> StepGen[None]:
        """Start a round (key set-up where the backend needs one) among ``participants``
        (default: every client of the session; a runtime passes the clients still alive)."""

    @abstractmethod
    def aggregate(self, spec: SumSpec) -> StepGen[SumResult]:
        """One secure sum within the current round."""

    def _begin_round(self, round_index: int, participants: Collection[int] | None) -> list[int]:
        if round_index <= self._round_started:
            raise ConfigError(f"round {round_index} does not follow round {self._round_started}")
        self._round_started = round_index
        self.seq.round = round_index
        chosen = sorted(self.clients if participants is None else participants)
        if not set(chosen) <= set(self.clients):
            raise ConfigError(f"participants {sorted(set(chosen) - set(self.clients))} are not clients of this session")
        return chosen

    def _step(self, stage: Stage, build: Callable[[Header], Mapping[int, Message]], accept: Callable[[int, Any], None]) -> Step:
        """A step of this backend (fresh step number, header checks around ``accept``)."""
        return self.seq.step(stage, build, accept, RESPONSES[stage])

    @staticmethod
    def _per_client(header: Header, clients, cls: type, fields: Callable[[int], tuple], *, lazy: bool = False) -> Mapping[int, Message]:
        """One request per client, built as ``cls(header, *fields(client))``, reusing one object
        for clients that get the same content, so a transport encodes it once; or, ``lazy``, each
        built only as the transport reads it (requests that are each large and all different)."""
        if lazy:
            return BuiltOnRead(tuple(clients), lambda client: cls(header, *fields(client)))
        made: dict[int, Message] = {}
        out: dict[int, Message] = {}
        for client in clients:
            args = fields(client)
            key = tuple(id(a) if isinstance(a, np.ndarray) else a for a in args)  # arrays: by identity
            found = made.get(key)  # a key of k signatures hashes k objects: once or twice, not three times
            if found is None:
                found = made[key] = cls(header, *args)
            out[client] = found
        return out

    def _require(self, count: int, needed: int, what: str) -> None:
        if count < needed:
            self.log.append(f"round {self.round}: abort: {what}: {count} < {needed}")
            raise DropoutError(
                f"round {self.round}: only {count} clients {what}, fewer than the {needed} required "
                "(min_survivors / threshold); no aggregate is released"
            )

    def describe(self) -> dict[str, Any]:
        """What the last key set-up announced (for metrics): graph, degree, threshold, floor."""
        return {}

    def _exclude(self, client: int, reason: str) -> None:
        """A client caught lying: out of the run, named in its metrics."""
        self.excluded.setdefault(client, reason)
        self.log.append(f"round {self.round}: excluded client {client}: {reason}")

    def _note(self, stage: Stage, outcome: StepOutcome) -> None:
        parts = [f"round {self.round} {stage.value}: {len(outcome.accepted)} answered"]
        if outcome.silent:
            parts.append(f"silent {sorted(outcome.silent)}")
        if outcome.rejected:
            parts.append("rejected " + "; ".join(f"{c}: {r}" for c, r in sorted(outcome.rejected.items())))
        self.log.append(", ".join(parts))


def _digest(x: np.ndarray) -> bytes:
    return hashlib.sha256(x.dtype.str.encode() + repr(x.shape).encode() + np.ascontiguousarray(x).tobytes()).digest()


class ClientRole(SecretMaterial, ABC):
    """Client side of one backend for one session. Holds secrets: no repr, no pickle.

    ``policy`` is this client's own security minimums (default: accept exactly what ``config``
    asks for, for runs where one user plays every party); ``directory`` lists every client
    the run started with. ``signed``: the contributor sets this client signed its contributions
    into in earlier sessions of the same run (a resumed run; threat_model.md R-RESUME), shared
    by its roles of every session; None outside runs that can resume. ``key_epochs``: the key
    epochs this client took part in over its run, shared the same way (a fresh count, this
    session's only, when None; ClientPolicy.max_key_epochs caps it).
    """

    backend: Backend
    round_entry: frozenset[Stage]  # stages that may open a new round
    continuing: frozenset[Stage]  # stages that carry on a sum after its contribution was exposed

    def __init__(
        self,
        config: SecureSumConfig,
        *,
        client_id: int,
        session: bytes,
        identity: IdentityKey,
        directory: Mapping[int, bytes],
        policy: ClientPolicy | None = None,
        signed: SignedContributions | None = None,
        key_epochs: KeyEpochCount | None = None,
    ) -> None:
        self.config = config
        self.signed = signed
        self.key_epochs = key_epochs if key_epochs is not None else KeyEpochCount()
        self.client_id = client_id
        self.session = session
        self.identity = identity
        self.directory = check_directory(directory)
        if self.directory.get(client_id) != identity.public_bytes:
            raise ConfigError(f"the directory's identity key for client {client_id} is not this client's key")
        self.policy = policy if policy is not None else ClientPolicy.accepting(config)
        self.state: Stage | None = None
        self.round = -1
        self._last_step = 0
        self._contributions: dict[str, Any] = {}
        self._private: set[str] = set()  # sums the plan marked as its model (ClientPolicy.min_ddp_noise)
        self._exposed: dict[str, np.ndarray] = {}  # name -> contribution that may already be unmasked
        self._abandoned: dict[str, set[bytes]] = {}  # name -> digests of exposed contributions never delivered
        self.abandoned: list[str] = []  # sums this client saw abandoned (its host resumes the plan with them)
        self.last_result: SumResult | None = None  # only the latest: a long run must not accumulate sums

    @property
    def n_run(self) -> int:
        """How many clients the run started with (every one of them is in the directory)."""
        return len(self.directory)

    def contribute(self, name: str, tensors: Mapping[str, Any], *, private: bool = False) -> None:
        """Stage this client's tensors for the sum called ``name`` (used when the server asks).
        ``private``: the plan marks them as its model, which this client's policy may require
        distributed DP noise on (ClientPolicy.min_ddp_noise)."""
        self._contributions[name] = {k: as_array(v) for k, v in tensors.items()}
        if private:
            self._private.add(name)
        else:
            self._private.discard(name)

    def _with_noise(self, spec: SumSpec, x: np.ndarray, *, live: int, least: int, precision_bits: int) -> np.ndarray:
        """Distributed DP (SumSpec.noise): the announced noise checked against this client's
        policy over the fewest contributors (``least``) the sum may be delivered with, then ``x``
        clipped and noised on the grid 2^-precision_bits before anything of it leaves
        (protocol/sum_backends/ddp_noise.py; threat_model.md DDP-NOISE, DDP-FLOOR)."""
        self.policy.check_noise(spec, live=live, least=least, private=spec.name in self._private, precision_bits=precision_bits)
        return x if spec.noise is None else noised(x, spec, precision_bits=precision_bits)

    def _contribution(self, spec: SumSpec):
        if spec.name not in self._contributions:
            raise ProtocolError(f"client {self.client_id}: the server asked for sum {spec.name!r}, which this client has not contributed to")
        return spec.flatten(self._contributions[spec.name])

    # --- single-use contributions (threat_model.md M-ONCE) -----------------------------------
    def _expose(self, spec: SumSpec) -> None:
        """The staged contribution to ``spec`` may now be unmasked (a self-mask key revealed, a
        streaming input or a ciphertext sent): from here on it is this sum's or no sum's."""
        self._exposed[spec.name] = spec.flatten(self._contributions.pop(spec.name))

    def exposed(self, name: str) -> bool:
        return name in self._exposed

    def _fresh(self, spec: SumSpec) -> np.ndarray:
        """The staged contribution to ``spec``, refused if it may already have been unmasked for
        a sum that was never delivered (masking it again would give it away)."""
        if spec.name in self._exposed:
            raise ProtocolError(f"client {self.client_id}: the contribution to sum {spec.name!r} may already be unmasked; "
                                "refusing to mask it again (a sum is never asked for twice)")
        x = self._contribution(spec)
        abandoned = self._abandoned.get(spec.name)
        if abandoned and _digest(x) in abandoned:  # hashed only after an abandonment: no cost in a normal run
            raise ProtocolError(f"client {self.client_id}: sum {spec.name!r} was abandoned after its contribution could be "
                                "unmasked; refusing to mask the same contribution again (the plan must supply a fresh one)")
        return x

    # --- contributions of a resumed run (threat_model.md R-RESUME) ----------------------------
    def _digest_of(self, x: np.ndarray) -> bytes | None:
        """The digest :meth:`_bind` needs, computed only in runs that can resume."""
        return None if self.signed is None else _digest(x)

    def _bind(self, name: str, digest: bytes | None, contributors: frozenset[int]) -> None:
        """Before this client signs ``contributors`` for its contribution to sum ``name`` (and so
        lets it be unmasked or decrypted): a contribution an earlier session of the run signed
        into another set is refused (signed.py says why this suffices)."""
        if self.signed is not None and digest is not None:
            self.signed.sign(name, digest, frozenset(contributors), session=self.session, client=self.client_id)

    def settle(self, request: Any) -> list[str]:
        """Before answering ``request``: a sum with an exposed contribution goes on only with its
        own later stages (``continuing``); any other request means the server abandoned it. Its
        contribution is then given up for good (only its digest is kept, to refuse it later).
        Returns the sums abandoned now; they are also queued on ``abandoned`` for the host."""
        stage = getattr(getattr(request, "header", None), "stage", None)
        if not self._exposed or stage in self.continuing:
            return []
        gone = list(self._exposed)
        for name in gone:
            self._abandoned.setdefault(name, set()).add(_digest(self._exposed.pop(name)))
        self.abandoned.extend(gone)
        return gone

    def handle(self, request: Message) -> Message:
        """Check header and transition, then run the stage's handler; returns the response."""
        h = getattr(request, "header", None)
        if h is None or REQUESTS.get(h.stage) is not type(request):
            raise ProtocolError(f"client {self.client_id}: {type(request).__name__} is not a request for stage {getattr(h, 'stage', None)}")
        if h.session != self.session or h.sender != SERVER:
            raise ProtocolError(f"client {self.client_id}: request from another session or not from the server")
        if h.step <= self._last_step:
            raise ProtocolError(f"client {self.client_id}: step {h.step} is not after step {self._last_step} (replayed or reordered request)")
        if h.stage not in TRANSITIONS[self.backend][self.state]:
            raise ProtocolError(
                f"client {self.client_id}: unexpected stage {h.stage.value} after {self.state.value if self.state else 'start'}"
            )
        if h.round < max(self.round, 0) or (h.round > self.round and h.stage not in self.round_entry):
            raise ProtocolError(f"client {self.client_id}: request for round {h.round} at stage {h.stage.value} while in round {self.round}")
        self._last_step = h.step
        self.settle(request)
        response = self._handler(h.stage)(request)
        self.round, self.state = h.round, h.stage
        return response

    @abstractmethod
    def _handler(self, stage: Stage) -> Callable[[Any], Message]:
        """This backend's handler of requests at ``stage`` (one of its TRANSITIONS)."""

    def _header(self, request: Message) -> Header:
        h = request.header
        return Header(self.session, h.round, h.step, h.stage, self.client_id)

    def _finish(self, result: SumResult) -> None:
        self.last_result = result
        self._contributions.pop(result.spec.name, None)
        self._exposed.pop(result.spec.name, None)
