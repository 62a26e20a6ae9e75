"""Test helpers: seeded inputs, plaintext reference sums, configs."""

from __future__ import annotations

import dataclasses
import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from secure_fedgraph.protocol.secure_sum import Adversary, Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig
from secure_fedgraph.protocol.secure_sum.config import MaskPlan
from secure_fedgraph.protocol.secure_sum.mask_server import MaskServer

SHAPES = {"weight": (3, 4), "bias": (7,), "cube": (2, 2, 2)}


def make_inputs(clients, *, seed: int = 0, scale: float = 1.0, shapes=SHAPES, dtype=np.float64):
    """Seeded random tensors of several shapes, one dict per client."""
    rng = np.random.default_rng(seed)
    return {c: {k: (rng.uniform(-scale, scale, s)).astype(dtype) for k, s in shapes.items()} for c in clients}


def plain_sum(inputs, contributors, *, clip_range: float | None = None):
    """The float64 reference sum over ``contributors`` (of the clipped inputs, if a range is given)."""
    names = next(iter(inputs.values())).keys()
    out = {}
    for k in names:
        parts = [np.asarray(inputs[c][k], dtype=np.float64) for c in sorted(contributors)]
        if clip_range is not None:
            parts = [np.clip(p, -clip_range, clip_range) for p in parts]
        out[k] = np.sum(parts, axis=0)
    return out


def max_error(values, reference) -> float:
    return max(float(np.abs(values[k] - reference[k]).max()) for k in reference)


def config_for(backend: Backend, **mask_kwargs) -> SecureSumConfig:
    return SecureSumConfig(backend=backend, mask=MaskConfig(**mask_kwargs), ckks=CkksConfig())


# No colluding clients assumed (the server may still deviate): the bounds then allow small sparse
# graphs, so tests of the sparse graph's mechanics stay small and fast. Never a default.
NO_COLLUDERS = Adversary(corrupt_fraction=0.0, dropout_fraction=0.05)


def sparse_config(degree: int, **mask_kwargs) -> SecureSumConfig:
    """A sparse graph of a small explicit degree, valid under NO_COLLUDERS."""
    return SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=degree, adversary=NO_COLLUDERS, **mask_kwargs))



# Runs the command line (its arguments) in a fresh interpreter and reports whether torch got
# imported: usage errors must come before the heavy imports.
TORCH_PROBE = textwrap.dedent("""
    import sys
    from secure_fedgraph.cli import main
    try:
        status = main(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code
    print("torch imported" if "torch" in sys.modules else "torch not imported")
    sys.exit(status)
""")

VECTORS = Path(__file__).resolve().parent / "vectors"


def read_vectors(name: str) -> list[dict[str, str]]:
    """Parse a `KEY = VALUE` vector file in tests/vectors: '#' lines are comments, blank lines end a record."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in (VECTORS / name).read_text().splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                records.append(current)
                current = {}
            continue
        key, _, value = line.partition("=")
        current[key.strip()] = value.strip()
    return records


def pooled_normalisation(raws) -> tuple[float, float]:
    """DCRNN's training mean and std over all sensors, from each sensor's moments: the numbers
    the plans' normalisation secure sum gives (reference for centralised recomputations)."""
    moments = np.array([raw.training_moments() for raw in raws], dtype=np.float64)
    mean = float(moments[:, 0].mean())
    return mean, float(np.sqrt(moments[:, 1].mean() - mean**2))


def assert_no_readings(name: str, tensors, speeds) -> None:
    """No tensor in ``tensors`` carries a sensor's speed readings (mph, to 4 decimals): fewer
    than 1% of any sensor's readings above 1 mph appear among its values."""
    for value in tensors.values():
        flat = np.round(np.asarray(value, dtype=np.float64).ravel(), 4)
        for s in speeds:
            s = np.round(np.asarray(s, dtype=np.float64).ravel(), 4)
            assert np.isin(s[s > 1], flat).mean() < 0.01, name


SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _data_dir_holding(dataset: str, files: tuple[str, ...]) -> Path | None:
    """$SECURE_FEDGRAPH_DATA, else ../shared/data beside the repository, if it holds ``files`` of ``dataset``."""
    for candidate in (os.environ.get("SECURE_FEDGRAPH_DATA"), SHARED_DATA):
        if candidate and all((Path(candidate) / dataset / f).is_file() for f in files):
            return Path(candidate)
    return None


def _hzmetro_dir() -> Path | None:
    from secure_fedgraph.data import HZMetro

    return _data_dir_holding("hzmetro", HZMetro.raw_files)


def _planetoid_dir() -> Path | None:
    from secure_fedgraph.data.planetoid import raw_files

    return _data_dir_holding("planetoid", raw_files("Cora") + raw_files("CiteSeer"))


def _uea_dir() -> Path | None:
    from secure_fedgraph.data.uea import UEA

    found = [_data_dir_holding(shape.folder, shape.raw_files) for shape in UEA.values()]
    return found[0] if None not in found and len(set(found)) == 1 else None


HZMETRO_DIR = _hzmetro_dir()
needs_hzmetro = pytest.mark.skipif(HZMETRO_DIR is None, reason="HZMetro not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
UEA_DIR = _uea_dir()
ISRUC_DIR = _data_dir_holding("isruc_s3", ("DistanceMatrix.npy",))
needs_isruc = pytest.mark.skipif(ISRUC_DIR is None, reason="ISRUC_S3's DistanceMatrix.npy not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
needs_uea = pytest.mark.skipif(UEA_DIR is None, reason="UEA BasicMotions and JapaneseVowels not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
PLANETOID_DIR = _planetoid_dir()
needs_planetoid = pytest.mark.skipif(PLANETOID_DIR is None, reason="Cora and CiteSeer not found under $SECURE_FEDGRAPH_DATA or ../shared/data")


class ServerThatNeverRekeys(MaskServer):
    """A curious server: after a dropout it asks for the mask-key shares of a client that had
    already contributed (whose self-mask it knows) instead of re-keying."""

    @property
    def _exposed(self):
        return set()

    @_exposed.setter
    def _exposed(self, value):
        pass


class WeakServer(MaskServer):
    """Announces whatever graph, threshold and survivor floor suits it (a round of two)."""

    weak = MaskPlan(GraphKind.COMPLETE, 1, 2, 2, 1, False)

    def _plan_for(self, n):
        return dataclasses.replace(self.weak, degree=n - 1, max_dropped=n - 1)

    def _require(self, count, needed, what):
        pass


class SplicingCkksServer:
    """Attack E2 (issue 29), as a mixin over CkksServer (:func:`splicing_ckks_server`): a plan's
    releasable sum ``target`` runs honestly in the plan's first round, but the server keeps every
    client's ciphertexts of it. From the next round on it labels every request round 0 again and
    gives ``target`` the sum index it had then; it asks every live client for its input (the live
    set of the first time, so only the reuse of the label differs), claims ``victim`` dropped,
    has the others sign their set, and delivers the first round's ciphertexts of the others as
    the aggregate. Released, that is the first round's total without the victim: the first
    round's released total minus it is the victim's contribution."""

    target, victim = "validation", 3

    def setup(self, round_index, participants=None):
        index = getattr(self, "_sum_index", 0)
        yield from super().setup(round_index, participants)
        if round_index > 0:
            self.seq.round, self._sum_index = 0, index  # later rounds reuse the first round's labels
            self.relabelled_after = getattr(self, "relabelled_after", self.seq.current)  # the last step labelled honestly

    def aggregate(self, spec):
        from secure_fedgraph.crypto.ckks import PublicContext
        from secure_fedgraph.protocol.secure_sum.messages import ConsistencyRequest, DeliverRequest, InputRequest, Signature
        from secure_fedgraph.protocol.core.spec import SumResult
        from secure_fedgraph.protocol.core.stages import Stage

        if spec.name != self.target:
            return (yield from super().aggregate(spec))
        first = not hasattr(self, "kept")
        if first:
            self.kept_index = self._sum_index
        index = self.kept_index
        self._sum_index = max(self._sum_index, index + 1)
        live = tuple(sorted(self.live))
        inputs: dict = {}
        outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, None, live, ())),
                                   lambda c, r: inputs.__setitem__(c, [self.context.load(b) for b in r.ciphertexts]))
        contributors = tuple(c for c in sorted(outcome.accepted) if first or c != self.victim)
        if first:
            self.kept = inputs
        signatures: dict = {}
        yield self._step(Stage.CONSISTENCY, lambda h: self._per_client(h, contributors, ConsistencyRequest, lambda c: (contributors,)),
                         lambda c, r: signatures.__setitem__(c, r.signature))
        total = None
        for c in contributors:
            total = PublicContext.add(total, self.kept[c])
        blobs = tuple(v.serialize() for v in total)
        signed = tuple(Signature(c, sig) for c, sig in sorted(signatures.items()))
        yield self._step(Stage.DELIVER, lambda h: self._per_client(h, contributors, DeliverRequest,
                                                                   lambda c: (index, contributors, None, blobs, None, signed)), lambda c, r: None)
        self.live = set(contributors)
        clip_range, scale_bits = self.config.ckks.encoding(spec, len(self.clients))
        bound = self.config.ckks.params.error_bound(len(contributors), clip_range=clip_range, scale_bits=scale_bits)
        return SumResult(spec, None, frozenset(contributors), None, bound)


def splicing_ckks_server(target: str = "validation", victim: int = 3) -> type:
    """A CkksServer class running attack E2 on sum ``target`` against client ``victim``."""
    from secure_fedgraph.protocol.secure_sum.ckks import CkksServer

    return type("Splicing", (SplicingCkksServer, CkksServer), {"target": target, "victim": victim})


def defence_stops(attack: Callable[[], bool], monkeypatch: pytest.MonkeyPatch, target: object, name: str, replacement: object) -> None:
    """Run ``attack`` against the real code, where it must fail, then against the same code with
    exactly one defence switched off (``target.name`` replaced), where it must succeed. A test
    that passes with its defence removed proves nothing; tests/test_threat_model.py requires
    this helper in every test a claim against a deviating server, colluders or a malicious
    client cites.

    ``attack()`` returns True when it obtained what it was after (an honest input, a corrupt
    sum released, an honest client excluded); a refusal by an honest party (a
    SecureFedGraphError) counts as the attack failing, but only while the defence is on.
    """
    from secure_fedgraph.errors import SecureFedGraphError

    try:
        stopped = not attack()
    except SecureFedGraphError:
        stopped = True
    assert stopped, "the attack succeeded against the real code"
    with monkeypatch.context() as switched_off:
        switched_off.setattr(target, name, replacement)
        assert attack(), f"the attack failed with {getattr(target, '__name__', target)}.{name} switched off: the test proves nothing"


_EXEC_UNDER_LIMIT = ("import os, resource, sys; soft, hard = int(sys.argv[1]), int(sys.argv[2]); "
                     "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1] if hard < 0 else hard; "
                     "resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard)); os.execv(sys.argv[3], sys.argv[3:])")


def under_open_file_limit(argv: list[str], soft: int, hard: int = -1) -> list[str]:
    """``argv`` run under a soft limit of ``soft`` open files (and ``hard``; -1 keeps it), set by
    a small launcher that then execs ``argv``. Not ``preexec_fn``: it makes Python fork this
    process, gRPC's fork handler restarts its poller in the child, and the child can abort with
    ``epoll_wait error: Bad file descriptor`` before it execs (grpc/grpc#43055)."""
    import sys

    return [sys.executable, "-c", _EXEC_UNDER_LIMIT, str(soft), str(hard), *argv]


def default_policy_session(*args, policy=None, **kwargs):
    """``local_session`` with every client on its default policy (``ClientPolicy()``, the one a
    user gets) unless the test passes another: attack tests run against the defaults, and a test
    about a weaker option says so (``policy=ClientPolicy.accepting(config)``)."""
    from secure_fedgraph.protocol.engine.local import local_session
    from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy

    return local_session(*args, policy=ClientPolicy() if policy is None else policy, **kwargs)
