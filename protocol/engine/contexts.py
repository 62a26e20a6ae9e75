"""Round plans over the collectives: the server's context, the client's context and host.

A paper is a plan: a server function and a client function written against the collectives
only. The server function is a generator of steps that calls ``ctx.broadcast(...)``,
``ctx.secure_sum(...)`` etc. with ``yield from``. The client function is a generator that
yields what it waits for (``Receive``, ``Contribute``, ``Upload``) and is resumed with it, so
both read like the paper's algorithm box. A :class:`ClientHost` runs one logical client's
plan against the requests of any transport, in order; the secure-sum key set-up happens
underneath, in the client's secure-sum role.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import math

import numpy as np

from secure_fedgraph.crypto.keys import SecretMaterial
from secure_fedgraph.errors import ProtocolError, SumAbandoned
from secure_fedgraph.protocol import collectives
from secure_fedgraph.protocol.collectives import Receive, Contribute, Upload
from secure_fedgraph.protocol.engine.noise_ledger import NoiseLedger
from secure_fedgraph.protocol.core.messages import (
    SERVER,
    Ack,
    BroadcastRequest,
    EndRequest,
    Header,
    ScatterRequest,
    UploadRequest,
    UploadResponse,
    named,
    tensors_of,
)
from secure_fedgraph.protocol.sum_backends.config import Backend
from secure_fedgraph.protocol.sum_backends.roles import ClientRole, ServerRole
from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumResult, SumSpec, TensorSpec, as_array
from secure_fedgraph.protocol.core.session import Sequencer
from secure_fedgraph.protocol.core.stages import SECURE_SUM_STAGES, Stage
from secure_fedgraph.protocol.core.steps import StepGen, StepOutcome
from secure_fedgraph.privacy.accountant import PrivacyAccountant, RowRelease, Steps
from secure_fedgraph.privacy.mechanisms.noise import NoiseSource
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.training.device import single_thread

Need = Receive | Contribute | Upload
RELEASE_PREFIX = "release:"  # an upload of this name asks for an aggregate the client already holds
DPSGD_REPORT = SumSpec("privacy:dpsgd", (TensorSpec("steps", (4,)),))  # a client's DP-SGD (sigma, sample rate, steps, sensitivity)
ClientPlan = Generator[Need, Any, None]


@dataclass(frozen=True)
class Resumed:
    """Where a resumed run starts (``server --resume``): a checkpointed round and the state one
    side of the plan saved there (the server's in the run folder; a client's in its memory)."""

    round: int
    state: Any


class Resumable:
    """What a plan's server and client sides use to resume: both save their state at each round
    boundary (``checkpoint``) and start from where a resumed run begins (``resume_from``)."""

    resumed: Resumed | None = None
    on_checkpoint: Callable[[int, Any], None] | None = None

    def resume_from(self, fresh: Any) -> tuple[int, Any]:
        """(round to start at, its state): (0, ``fresh``) in a new run, else the checkpoint's."""
        return (0, fresh) if self.resumed is None else (self.resumed.round, self.resumed.state)

    def checkpoint(self, round_index: int, state: Any) -> None:
        """Round ``round_index`` begins: ``state`` is all this side needs to go on from it (the
        server calls it before the round's key set-up, so any request of the round follows it)."""
        if self.on_checkpoint is not None:
            self.on_checkpoint(round_index, state)


@dataclass
class RoundReport:
    """What the server plan reports after a round (the runtime adds bytes and seconds)."""

    round: int
    metrics: dict[str, float] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # cumulative wall seconds per phase so far


class ServerContext(Resumable):
    """The server side of a plan: collectives over the clients still in the run.

    A client that is silent or rejected at any step is out of the run from then on (it is
    not asked again, so one dead process costs one deadline, not one per step).

    ``elements`` counts the tensor elements each phase moved (``up``: clients to server,
    ``down``: server to clients, every recipient counted), the unit of the papers' cost
    formulas; the transports count wire bytes per phase. ``data`` is what the plan's
    ``load_server_data`` read (e.g. CNFGNN's graph). ``resumed`` and ``on_checkpoint``: see
    :class:`Resumable`; :meth:`snapshot` is what a checkpoint keeps of this context.
    """

    def __init__(
        self,
        *,
        sequencer: Sequencer,
        role: ServerRole,
        clients: Iterable[int],
        report: Callable[[RoundReport], None] | None = None,
        data: Any = None,
        resumed: Resumed | None = None,
        on_checkpoint: Callable[[int, Any], None] | None = None,
    ) -> None:
        self.resumed, self.on_checkpoint = resumed, on_checkpoint
        self.seq = sequencer
        self.data = data
        self.elements: dict[str, dict[str, int]] = defaultdict(lambda: {"up": 0, "down": 0})
        self.seconds: dict[str, float] = defaultdict(float)  # wall time inside each phase (steps and server work)
        self.role = role
        self.clients = sorted(clients)
        self.live = set(self.clients)
        self.dropped: dict[int, str] = {}
        self.abandoned: dict[str, int] = {}  # sums given up, by name (metrics: abandoned_sums)
        self.accountant = PrivacyAccountant()  # what went out through DP mechanisms, per client (fed by upload and collect_privacy)
        self.noised = NoiseLedger()  # secure sums released with distributed DP noise (SumSpec.noise)
        self._report = report
        self._keyless_round: int | None = None  # the round start_round(keys=False) began, if the current one

    @property
    def round(self) -> int:
        return self.seq.round

    def snapshot(self) -> dict[str, Any]:
        """What a checkpoint keeps of this context (JSON): the clients still in the run, who left
        and why, abandoned sums, and element counts and seconds per phase so far."""
        return {"live": sorted(self.live), "dropped": {str(c): r for c, r in sorted(self.dropped.items())},
                "abandoned": dict(self.abandoned), "elements": {p: dict(e) for p, e in self.elements.items()}, "seconds": dict(self.seconds)}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Go on from a checkpoint's :meth:`snapshot` (who is live is who rejoined)."""
        self.dropped.update({int(c): r for c, r in snapshot["dropped"].items()})
        self.abandoned.update(snapshot["abandoned"])
        for phase, counts in snapshot["elements"].items():
            self.elements[phase].update(counts)
        self.seconds.update(snapshot["seconds"])

    @property
    def server_reads_sums(self) -> bool:
        """Whether the backend lets the server read a sum (mask, plain) or only the clients can
        decrypt it (ckks), so a plan can ask for ``server_only`` sums without naming backends."""
        return self.role.backend is not Backend.CKKS

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Steps inside belong to phase ``name`` (traffic and element counts by phase)."""
        previous, self.seq.phase = self.seq.phase, name
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seq.phase = previous
            self.seconds[name] += time.perf_counter() - started

    def _count(self, direction: str, elements: int) -> None:
        self.elements[self.seq.phase][direction] += int(elements)

    def _track(self, outcome: StepOutcome, stage: Stage) -> None:
        for client in outcome.silent:
            self.dropped.setdefault(client, f"silent at {stage.value} in round {self.round}")
        for client, reason in outcome.rejected.items():
            self.dropped.setdefault(client, f"rejected at {stage.value} in round {self.round}: {reason}")
        self.live -= set(outcome.silent) | set(outcome.rejected)

    def _follow_role(self, what: str) -> None:
        """Clients the secure-sum backend lost are out of the run too (the transport's log says
        how each one left); those it caught lying are named as excluded."""
        for client, reason in self.role.excluded.items():
            if client in self.live:
                self.dropped.setdefault(client, f"excluded in round {self.round}: {reason}")
        for client in sorted(self.live - set(self.role.live)):
            self.dropped.setdefault(client, f"left during {what} in round {self.round}")
        self.live &= set(self.role.live)
        self.live -= set(self.role.excluded)

    def start_round(self, round_index: int, *, keys: bool = True) -> StepGen[None]:
        """Begin a round: the secure-sum backend's key set-up among the live clients. A round
        with no secure sum in it (nFedGNN's per-user weights: uploads and scatters only) passes
        ``keys=False`` and skips the set-up, whose cost grows with the clients (thousands of
        users); a secure sum in such a round is refused."""
        if not keys:
            if round_index <= self.seq.round:
                raise ProtocolError(f"round {round_index} does not follow round {self.seq.round}")
            self.seq.round, self._keyless_round = round_index, round_index
            return
        yield from self.role.setup(round_index, participants=sorted(self.live))
        self._follow_role("the key set-up")

    def broadcast(self, name: str, tensors: Mapping[str, Any]) -> StepGen[frozenset[int]]:
        outcome = yield from collectives.broadcast(self.seq, sorted(self.live), name, tensors)
        self._track(outcome, Stage.BROADCAST)
        self._count("down", len(outcome.accepted) * sum(as_array(v).size for v in tensors.values()))
        return outcome.accepted

    def scatter(self, name: str, per_client: Mapping[int, Mapping[str, Any]]) -> StepGen[frozenset[int]]:
        outcome = yield from collectives.scatter(self.seq, {c: t for c, t in per_client.items() if c in self.live}, name)
        self._track(outcome, Stage.SCATTER)
        self._count("down", sum(as_array(v).size for c in outcome.accepted for v in per_client[c].values()))
        return outcome.accepted

    def upload(self, name: str, spec: SumSpec, *, releases: RowRelease | None = None) -> StepGen[dict[int, dict[str, np.ndarray]]]:
        """Each live client's own tensors. ``releases``: the upload goes out through the
        clients' DP hook and releases those rows of each client's data; the accountant
        (``self.accountant``) records them for every client whose upload arrived."""
        before = set(self.live)
        received = yield from collectives.upload(self.seq, sorted(self.live), name, spec)
        if releases is not None:
            for client in received:
                self.accountant.record(client, releases)
        self.live &= set(received)
        for client in before - set(received):
            self.dropped.setdefault(client, f"no valid upload {name!r} in round {self.round}")
        self._count("up", len(received) * spec.size)
        return received

    def collect_privacy(self) -> StepGen[None]:
        """Every live client's DP-SGD steps (its optimiser counted them: :meth:`ClientContext.report_privacy`),
        into the accountant. A client reports its own budget: one that under-reports misstates
        only its own privacy, which it controls anyway."""
        received = yield from self.upload(DPSGD_REPORT.name, DPSGD_REPORT)
        for client, tensors in received.items():
            sigma, rate, steps, sensitivity = (float(v) for v in tensors["steps"])
            if steps > 0:  # a sensitivity below one clip (or NaN) would understate epsilon: priced at one clip
                self.accountant.record_steps(client, Steps(sigma, rate, int(steps), max(1.0, sensitivity)))

    def secure_sum(self, spec: SumSpec) -> StepGen[SumResult]:
        """One secure sum. Raises :class:`SumAbandoned` when the backend gave it up (a dropout
        in a streaming sum, a secret that could not be recovered): the plan decides whether to
        skip the step; every client's plan is told the same when its next request arrives."""
        if self._keyless_round == self.round:
            raise ProtocolError(f"secure sum {spec.name!r} in round {self.round}, which started without a key set-up (start_round(keys=False))")
        try:
            result = yield from self.role.aggregate(spec)
        except SumAbandoned:
            self.abandoned[spec.name] = self.abandoned.get(spec.name, 0) + 1
            raise
        finally:
            self._follow_role(f"secure sum {spec.name!r}")
        self.noised.record(self.round, spec, result.contributors)
        self._count("up", len(result.contributors) * spec.size)
        if not spec.server_only:
            self._count("down", len(result.contributors) * spec.size)
        return result

    def sum_noise(self, *, noise_multiplier: float, l2_clip: float, unit: NoiseUnit = NoiseUnit.CONTRIBUTION, min_precision_bits: int = 0,
                  max_rows: int = 1) -> SumNoise | None:
        """Distributed DP for a sum of the live clients' models or data (None when
        ``noise_multiplier`` is 0): each client's share of the noise is scaled for the survivors
        the adversary's dropout fraction leaves, ceil(live (1 - dropout_fraction)), so a sum with
        that many carries noise_multiplier * l2_clip per element, and one with all the live
        clients more. ``unit``, ``min_precision_bits``, ``max_rows``: see SumNoise."""
        if noise_multiplier <= 0:
            return None
        expected = max(1, math.ceil(len(self.live) * (1 - self.role.config.mask.adversary.dropout_fraction)))
        return SumNoise(l2_clip=l2_clip, noise_multiplier=noise_multiplier, expected_contributors=expected, unit=unit,
                        min_precision_bits=min_precision_bits, max_rows=max_rows)

    def noise_terms(self) -> dict[str, Any]:
        """What the accounting of the noised sums needs of this run (NoiseLedger.report's
        keywords but delta): the mask backend's precision, whether the server sees each input
        (plain) and how many clients may collude with it."""
        config = self.role.config
        return {"precision_bits": config.mask.precision_bits, "server_sees_inputs": self.role.backend is Backend.PLAIN,
                "colluders": config.mask.adversary.colluders(len(self.clients))}

    def noise_report(self, delta: float) -> dict | None:
        """(epsilon, delta) of the noised sums so far, per client (protocol/engine/noise_ledger.py):
        the survivors' noise only; with plain, per input (the server sees each one)."""
        return self.noised.report(delta=delta, **self.noise_terms())

    def release(self, result: SumResult) -> StepGen[dict[str, np.ndarray]]:
        """The values of a sum, for the server: its own view with mask and plain; with ckks
        (where the server cannot decrypt) the clients release the sum they decrypted. Use it
        only for sums meant to be public (error statistics), never for model weights.

        Raises:
            ProtocolError: with ckks, if the clients' released sums disagree beyond the bound.
        """
        if result.values is not None:
            return dict(result.values)
        received = yield from self.upload(RELEASE_PREFIX + result.spec.name, result.spec)
        if not received:
            raise ProtocolError(f"no client released sum {result.spec.name!r}")
        values = [v for _, v in sorted(received.items())]
        for other in values[1:]:
            for k in other:
                if np.max(np.abs(other[k] - values[0][k]), initial=0.0) > 2 * result.error_bound:
                    raise ProtocolError(f"clients released different values of sum {result.spec.name!r}")
        return values[0]

    def end(self, reason: str = "done") -> StepGen[None]:
        """Tell every live client the run is over."""
        yield self.seq.step(Stage.END, lambda h: dict.fromkeys(sorted(self.live), EndRequest(h, reason)), lambda c, r: None, Ack)

    def report(self, round_index: int, **metrics: float) -> None:
        if self._report is not None:
            self._report(RoundReport(round_index, dict(metrics), dict(self.seconds)))


@dataclass
class ClientContext(Resumable):
    """What a client plan knows: its id, the run seed, its own data, and the needs it yields;
    in a resumed run, the state it saved at the round it resumes from (:class:`Resumable`).

    ``accountant`` is this client's own record of what its DP mechanisms released (the DP-SGD
    optimiser feeds it). ``reproducible_noise`` is the client's opt-in to its private randomness
    (:meth:`noise`: DP noise, and whatever else a plan draws from it, as nFedGNN's W_i^(0) and
    dropout masks) derived from the run seed (the same numbers on every transport; the server,
    which knows the seed, could draw it too): off by default, where every draw is fresh OS
    randomness."""

    client_id: int
    seed: int
    data: Any = None
    resumed: Resumed | None = None
    on_checkpoint: Callable[[int, Any], None] | None = None
    reproducible_noise: bool = False
    accountant: PrivacyAccountant = field(default_factory=PrivacyAccountant)

    def noise(self, *labels: str | int) -> NoiseSource:
        """The noise source of one DP mechanism of this client (fresh OS randomness unless it
        opted into reproducible noise)."""
        if not self.reproducible_noise:
            return NoiseSource()
        return NoiseSource.reproducible(derive_seed(self.seed, "client", self.client_id, "dp noise", *labels).to_bytes(8, "big"))

    def report_privacy(self) -> Upload:
        """Answer :meth:`ServerContext.collect_privacy`: this client's DP-SGD steps, as its
        optimiser counted them (zeros without DP-SGD)."""
        steps = self.accountant.steps_of(self.client_id)
        if len(steps) > 1:
            raise ProtocolError(f"client {self.client_id}: DP-SGD ran at {len(steps)} (sigma, sample rate) settings; one is reported")
        row = [steps[0].sigma, steps[0].sample_rate, steps[0].steps, steps[0].sensitivity] if steps else [0.0, 0.0, 0.0, 1.0]
        return Upload(DPSGD_REPORT.name, {"steps": np.array(row, dtype=np.float64)})

    def rng(self, *labels: str | int) -> np.random.Generator:
        """A numpy generator for one purpose of this client (batch order, local noise, ...)."""
        return client_rng(self.seed, self.client_id, *labels)

    @staticmethod
    def receive(name: str) -> Receive:
        return Receive(name)

    @staticmethod
    def secure_sum(name: str, tensors: Mapping[str, Any], *, releasable: bool = False, private: bool = False) -> Contribute:
        return Contribute(name, tensors, releasable, private)

    @staticmethod
    def upload(name: str, tensors: Mapping[str, Any], privacy=None) -> Upload:
        return Upload(name, tensors, privacy)


def client_rng(seed: int, client_id: int, *labels: str | int) -> np.random.Generator:
    """Client ``client_id``'s generator for one purpose (:meth:`ClientContext.rng`): from the run
    seed, so experimental randomness only; whoever knows the seed (the server) can draw it too."""
    return np.random.default_rng(derive_seed(seed, "client", client_id, *labels))


def rounded_to_bound(values: np.ndarray, error_bound: float) -> np.ndarray:
    """``values`` rounded to the power of two at or above ``error_bound``: what a client releases
    of a decrypted CKKS sum. The digits below the stated precision are encryption noise, which
    key-recovery attacks on CKKS decryptions read (Li and Micciancio 2021)."""
    if not error_bound > 0:
        return np.asarray(values, dtype=np.float64)
    quantum = 2.0 ** math.ceil(math.log2(error_bound))
    return np.round(np.asarray(values, dtype=np.float64) / quantum) * quantum


class ClientHost(SecretMaterial):
    """One logical client: its secure-sum role and its plan, answering the server in order.

    A sum the server abandons reaches the plan as :class:`SumAbandoned`, raised at the
    ``yield`` of its Contribute need, when the next request shows the server went on without it.
    """

    def __init__(self, *, role: ClientRole, plan: Callable[[ClientContext], ClientPlan], context: ClientContext) -> None:
        self.role = role
        self.client_id = role.client_id
        self.session = role.session
        self.context = context
        self.ended = False
        self.finished = False
        # audit hook (local only): this client's secure-sum inputs in the clear, and its uploads before the DP hook
        self.on_contribute: Callable[[Header, str, Mapping[str, Any]], None] | None = None
        self._last_step = 0
        self._round = -1
        self._plan = plan(context)
        self._held: dict[str, tuple[SumResult, bool]] = {}  # the latest result of each sum, and whether the plan marked it releasable
        self._pending: Contribute | None = None  # contributed, not delivered yet
        self._need: Need | None = None
        self._resume(None, first=True)

    @property
    def waiting_for(self) -> Need | None:
        return self._need

    def _resume(self, value: Any, *, first: bool = False) -> None:
        try:
            with single_thread():  # the host, not the plan, owns the thread setting: plans run up to their next yield
                self._need = next(self._plan) if first else self._plan.send(value)
        except StopIteration:
            self._need, self.finished = None, True

    def _abort(self, name: str) -> None:
        """Tell the plan that sum ``name`` was abandoned (it raises SumAbandoned at its yield)."""
        self._pending = None
        try:
            with single_thread():
                self._need = self._plan.throw(SumAbandoned(f"client {self.client_id}: the server abandoned sum {name!r}"))
        except StopIteration:
            self._need, self.finished = None, True

    def _continues_pending(self, request: Any) -> bool:
        """Whether ``request`` belongs to the pending sum: its secure-sum stages, or (before any
        of its contribution could be unmasked) a re-key and the same sum asked for again."""
        stage = request.header.stage
        if stage not in SECURE_SUM_STAGES:
            return False
        return stage is not Stage.INPUT or request.spec.name == self._pending.name

    def _fail(self, what: str) -> ProtocolError:
        return ProtocolError(f"client {self.client_id}: {what}")

    def _expect(self, kind: type, name: str) -> Any:
        need = self._need
        if not isinstance(need, kind) or need.name != name:
            raise self._fail(f"the server asked for {kind.__name__.lower()} {name!r} but this client's plan waits for {need!r}")
        return need

    def _may_release(self, name: str, spec: SumSpec) -> SumResult:
        """The sum this client may hand to the server: one it holds, of the asked shape, that
        its plan marked releasable when it contributed (threat_model.md C-RELEASE)."""
        held, releasable = self._held.get(name, (None, False))
        if held is None or held.spec != spec or not releasable:
            raise self._fail(f"asked to release {name!r}: not a sum this client holds and its plan marked releasable")
        return held

    def handle(self, request: Any) -> Any:
        """Answer one request (the transport calls this once per request, in order)."""
        h = getattr(request, "header", None)
        if not isinstance(h, Header) or h.session != self.session or h.sender != SERVER:
            raise self._fail("request without a header from this session's server")
        if h.step <= self._last_step or h.round < self._round:
            raise self._fail(f"step {h.step} of round {h.round} is not after step {self._last_step} of round {self._round} (replayed or reordered)")
        if self.ended:
            raise self._fail("request after the end of the run")
        abandoned = self.role.settle(request) + self.role.abandoned
        self.role.abandoned.clear()
        if self._pending is not None and (self._pending.name in abandoned or not self._continues_pending(request)):
            self._abort(self._pending.name)
        if h.stage in SECURE_SUM_STAGES:
            if h.stage is Stage.INPUT:
                need = self._expect(Contribute, request.spec.name)
                self.role.contribute(need.name, need.tensors, private=need.private)
                if self.on_contribute is not None:
                    self.on_contribute(h, need.name, need.tensors)
            response = self.role.handle(request)
            if h.stage is Stage.INPUT:
                self._pending = need
            if h.stage is Stage.DELIVER and response.accepted:  # refused (ckks: a failed check): the sum stays pending
                result, pending = self.role.last_result, self._pending
                self._pending = None
                self._held[result.spec.name] = (result, pending is not None and pending.releasable)
                self._resume(result)
        elif isinstance(request, BroadcastRequest | ScatterRequest):
            self._expect(Receive, request.name)
            self._resume(tensors_of(request.tensors))
            response = Ack(self._reply_header(h))
        elif isinstance(request, UploadRequest) and request.name.startswith(RELEASE_PREFIX):
            held = self._may_release(request.name[len(RELEASE_PREFIX) :], request.spec)
            rounded = {k: rounded_to_bound(v, held.error_bound) for k, v in held.values.items()}
            response = UploadResponse(self._reply_header(h), request.name, named(rounded))
        elif isinstance(request, UploadRequest):
            need = self._expect(Upload, request.name)
            tensors = {k: as_array(v) for k, v in need.tensors.items()}
            if self.on_contribute is not None:  # before the DP hook: the audit's ground truth, on this client's own disk
                self.on_contribute(h, request.name, tensors)
            if need.privacy is not None:
                tensors = need.privacy(tensors)
            request.spec.flatten(tensors)  # shapes and names must match what the server asked for
            response = UploadResponse(self._reply_header(h), request.name, named(tensors))
            self._resume(None)
        elif isinstance(request, EndRequest):
            self.ended = True
            response = Ack(self._reply_header(h))
        else:
            raise self._fail(f"no handler for {type(request).__name__}")
        self._last_step, self._round = h.step, h.round
        return response

    def _reply_header(self, h: Header) -> Header:
        return Header(self.session, h.round, h.step, h.stage, self.client_id)
