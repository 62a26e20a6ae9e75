"""Configuration of the secure-sum layer: which backend, and each backend's parameters.

Every field is validated at construction (``__post_init__``) or when resolved for a concrete
number of clients (:meth:`MaskConfig.resolve`); errors name the field, the value and the bound.
Clients check that what the server announces equals what their own config resolves to, so a
server cannot quietly weaken a threshold.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from secure_fedgraph.crypto.ckks import PRESETS, CkksParams
from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.errors import CapacityError, ConfigError
from secure_fedgraph.protocol.sum_backends.adversary import (
    MAX_KEY_EPOCHS,
    Adversary,
    Threat,
    complete_threshold,
    sparse_at_degree,
    sparse_check,
    sparse_parameters,
    survivor_floor,
)
from secure_fedgraph.protocol.core.spec import SumSpec
from secure_fedgraph.validation import positive


class Backend(enum.Enum):
    """How a secure sum is computed (threat_model.md, section per backend)."""

    PLAIN = "plain"  # baseline: the server sees every individual tensor
    MASK = "mask"  # pairwise + self masks, Shamir recovery; the server sees the sum only
    CKKS = "ckks"  # TenSEAL CKKS; the server sees ciphertexts only, clients decrypt the sum


class GraphKind(enum.Enum):
    """Which pairs of clients share masks."""

    AUTO = "auto"  # complete up to MaskConfig.complete_up_to clients, sparse above
    COMPLETE = "complete"  # every pair (Bonawitz et al. 2017)
    SPARSE = "sparse"  # random Harary graph of degree O(log n) (Bell et al. 2020, SecAgg+)


@dataclass(frozen=True)
class MaskPlan:
    """MaskConfig resolved for a concrete set of participants (announced in ADVERTISE)."""

    graph: GraphKind  # COMPLETE or SPARSE, never AUTO
    degree: int  # neighbours per client
    threshold: int  # Shamir threshold: shares needed to recover one client's secret
    min_survivors: int  # fewest contributors a released sum may have (relative to the run's start)
    max_dropped: int  # sparse: most neighbours of a client that may be missing from a sum's survivors
    streaming: bool = False  # sums marked SumSpec.streaming use the streaming variant

    def streams(self, spec: SumSpec) -> bool:
        """Whether this sum takes the streaming variant (both sides decide it the same way)."""
        return self.streaming and spec.streaming


@dataclass(frozen=True)
class MaskConfig:
    """Pairwise-mask secure aggregation.

    Attributes:
        clip_range: inputs are clipped to [-clip_range, clip_range] (and counted).
        precision_bits: fixed-point fractional bits; the sum is exact to n * 2^-(precision_bits+1).
        ring_bits: 32 or 64; None picks 32 when n * clip_range * 2^precision_bits fits, else 64.
        graph: which pairs share masks (see GraphKind).
        complete_up_to: with graph=AUTO, the largest n that uses the complete graph.
        adversary: what the thresholds and the graph must hold against (corrupt and dropout
            fractions, security bits, deviating or honest-but-curious server;
            protocol/sum_backends/adversary.py). Clients check the same against their own policy.
        degree: neighbours per client in the sparse graph (even); None = the least degree
            meeting Bell et al.'s bounds for ``adversary``. An explicit value must meet them too.
        threshold: Shamir threshold; None = the least that holds against ``adversary`` (2t > group
            + colluders against a deviating server). Lower values are refused.
        streaming: allow the streaming variant for sums that ask for it (SumSpec.streaming),
            with the complete graph only: pairwise masks from the round's keys, no self-mask,
            no per-sum consistency or unmask step; a dropout abandons the sum (its inputs are
            never masked again). False runs every sum through the full protocol (threat_model.md M-STREAM).
        max_rekeys_per_round: key epochs a round may add after its first (each follows a dropout
            that a sum could not recover from without revealing a secret); clients refuse more.
        max_key_epochs: key epochs a whole run may hold (every round's first and its re-keys).
            The sparse graph's bounds hold for the run, not one epoch: each epoch's graph must
            fail with probability at most 2^-(security_bits + ceil(log2 max_key_epochs)), so a
            server that aborts epochs whose graph it dislikes and starts others gains nothing
            (clients count the epochs and refuse past their own cap). Default 1024: a 200-round
            run with every round using all 4 default re-keys (1,000 epochs) fits, for 10 bits.
    """

    clip_range: float = 8.0
    precision_bits: int = 20
    ring_bits: int | None = None
    graph: GraphKind = GraphKind.AUTO
    complete_up_to: int = 100
    adversary: Adversary = field(default_factory=Adversary)
    degree: int | None = None
    threshold: int | None = None
    streaming: bool = True
    max_rekeys_per_round: int = 4
    max_key_epochs: int = MAX_KEY_EPOCHS

    def __post_init__(self) -> None:
        FixedPoint(self.clip_range, self.precision_bits, self.ring_bits or 64)  # validates all three
        if not isinstance(self.graph, GraphKind):
            raise ConfigError(f"graph must be a GraphKind, got {self.graph!r}")
        if not isinstance(self.adversary, Adversary):
            raise ConfigError(f"adversary must be an Adversary, got {self.adversary!r}")
        positive("complete_up_to", self.complete_up_to, 2)
        if self.degree is not None:
            positive("degree", self.degree, 2)
            if self.degree % 2:
                raise ConfigError(f"degree must be even (a Harary graph links degree/2 clients on each side), got {self.degree}")
        if self.threshold is not None:
            positive("threshold", self.threshold, 2)
        if not isinstance(self.streaming, bool):
            raise ConfigError(f"streaming must be a bool, got {self.streaming!r}")
        positive("max_rekeys_per_round", self.max_rekeys_per_round, 0)
        positive("max_key_epochs", self.max_key_epochs, 1)

    def survivor_floor(self, n_run: int) -> int:
        """The default min_survivors: a majority of the run's clients, and two more than the colluders."""
        return survivor_floor(n_run, 0.5, self.adversary.colluders(n_run))

    def resolve(self, n_clients: int, min_survivors: int | None, *, n_run: int | None = None) -> MaskPlan:
        """Resolve graph, degree, threshold and min_survivors for ``n_clients`` participants of a
        run that started with ``n_run`` clients (default ``n_clients``). min_survivors and the
        colluders count on the run, so neither a re-key nor a later, smaller round lowers the bar.

        Raises:
            ConfigError: naming the parameter whose value cannot hold against ``adversary``.
        """
        positive("number of clients", n_clients, 2)
        n_run = n_clients if n_run is None else n_run
        colluders = self.adversary.colluders(n_run)
        if colluders + 2 > n_run:  # no sum could hold two honest inputs: the colluders would learn the rest
            raise ConfigError(
                f"a run of {n_run} clients cannot put two honest inputs into a sum against {colluders} colluding "
                f"(adversary corrupt_fraction={self.adversary.corrupt_fraction:.3g} counts at least one in any run): run at least "
                f"{self.adversary.smallest_run()} clients, or assume none (corrupt_fraction=0; --corrupt-fraction 0)"
            )
        floor = self.survivor_floor(n_run)
        survivors = floor if min_survivors is None else min_survivors
        if not floor <= survivors <= n_run:
            raise ConfigError(
                f"min_survivors={survivors} must be between {floor} (a majority of the run's {n_run} clients, and two more "
                f"than its {colluders} colluders) and {n_run}"
            )
        sparse = self.graph is GraphKind.SPARSE or (self.graph is GraphKind.AUTO and n_clients > self.complete_up_to)
        if sparse and self.degree is None:
            found = sparse_parameters(n_clients, colluders, self.adversary, max_key_epochs=self.max_key_epochs)
            sparse = found is not None and (self.threshold is None or self.threshold >= found.threshold)
            if sparse:
                degree, threshold, max_dropped = found.degree, self.threshold or found.threshold, found.max_dropped
        elif sparse and self.degree < n_clients - 1:
            degree = self.degree
            found = sparse_at_degree(n_clients, colluders, degree, self.adversary, max_key_epochs=self.max_key_epochs)
            if found is None:
                raise ConfigError(f"degree={degree} cannot hold against a {self.adversary.describe()} with {n_clients} participants: "
                                  f"leave degree unset (the least degree that holds), or state a weaker adversary")
            threshold, max_dropped = self.threshold or found.threshold, found.max_dropped
            why = sparse_check(n_clients, colluders=colluders, degree=degree, threshold=threshold, max_dropped=max_dropped, adversary=self.adversary,
                               max_key_epochs=self.max_key_epochs)
            if why is not None:
                raise ConfigError(f"threshold={threshold} at degree={degree} does not hold against a {self.adversary.describe()}: {why}")
        else:
            sparse = False
        if not sparse:
            degree, max_dropped = n_clients - 1, n_clients - 1
            needed = complete_threshold(n_clients, colluders, self.adversary.threat)
            threshold = needed if self.threshold is None else self.threshold
            if not needed <= threshold <= n_clients:
                raise ConfigError(
                    f"threshold={threshold} must be between {needed} (what a {self.adversary.describe()} needs for "
                    f"{n_clients} participants) and {n_clients}"
                )
        # streaming needs every client masked with every live client: with the sparse graph a server
        # could show a few neighbours live sets that pair only them, and nothing would catch it
        streaming = self.streaming and not sparse
        return MaskPlan(GraphKind.SPARSE if sparse else GraphKind.COMPLETE, degree, threshold, survivors, max_dropped, streaming)

    def encoding(self, n_clients: int, n_values: int, clip_range: float | None = None, resolution: float | None = None) -> FixedPoint:
        """The fixed-point encoding for a sum of ``n_values`` values over ``n_clients`` clients:
        ``clip_range`` the sum's own range, else the config's; the config's precision, or more
        where ``resolution`` (the sum's largest acceptable error per element) needs it."""
        bits = self.precision_bits if resolution is None else max(self.precision_bits, FixedPoint.bits_for(n_clients, resolution))
        return FixedPoint.for_sum(
            n_clients=n_clients,
            clip_range=clip_range or self.clip_range,
            precision_bits=bits,
            ring_bits=self.ring_bits,
            count_lane_max=n_values,
        )

    def encoding_of(self, spec: SumSpec, n_clients: int) -> FixedPoint:
        """:meth:`encoding` of sum ``spec``. Server and clients derive it alike, and a client
        refuses a sum its ring cannot hold rather than let it wrap.

        Raises:
            CapacityError: the range and resolution do not fit the ring (names the sum).
        """
        try:
            if spec.noise is not None:  # the range covers the clip and the noise's tail: the capacity check holds the noise too
                bits = spec.noise.grid_bits(self.precision_bits)
                bound = spec.noise.value_bound(size=spec.size, precision_bits=bits, security_bits=self.adversary.security_bits)
                return FixedPoint.for_sum(n_clients=n_clients, clip_range=bound, precision_bits=bits, ring_bits=self.ring_bits,
                                          count_lane_max=spec.size)
            return self.encoding(n_clients, spec.size, spec.clip_range_or(self.clip_range), spec.resolution)
        except CapacityError as exc:
            raise CapacityError(f"sum {spec.name!r}: {exc}") from None


@dataclass(frozen=True)
class CkksConfig:
    """CKKS via TenSEAL.

    Attributes:
        params: CKKS parameters; default the add-only 'lean' preset (see crypto.ckks.PRESETS).
        clip_range: inputs are clipped to [-clip_range, clip_range] so the sum cannot wrap.
    """

    params: CkksParams = field(default_factory=lambda: PRESETS["lean"])
    clip_range: float = 8.0

    def encoding(self, spec: SumSpec, n_clients: int) -> tuple[float, int]:
        """(clip range, scale bits) of sum ``spec`` over ``n_clients`` clients, the same on
        both sides.

        Raises:
            CapacityError: the sum's resolution is finer than the stated error bound (names the sum).
        """
        if spec.noise is not None:
            raise ConfigError(f"sum {spec.name!r} asks for distributed DP noise, which is added in the integer ring of the mask "
                              "backend (plain adds the same for comparison); ckks does not implement it: use --backend mask")
        clip_range = spec.clip_range_or(self.clip_range)
        scale_bits = self.params.scale_for(n_clients=n_clients, clip_range=clip_range)
        bound = self.params.error_bound(n_clients, clip_range=clip_range, scale_bits=scale_bits)
        if spec.resolution is not None and bound > spec.resolution:
            raise CapacityError(f"sum {spec.name!r} needs a resolution of {spec.resolution:g}, but ckks states an error bound of "
                                f"{bound:.3g} for {n_clients} clients at clip range {clip_range:g}; use the mask backend, or a larger CKKS scale")
        return clip_range, scale_bits

    def __post_init__(self) -> None:
        if not isinstance(self.params, CkksParams):
            raise ConfigError(f"params must be a CkksParams, got {type(self.params).__name__}")
        FixedPoint(self.clip_range, 0, 64)


@dataclass(frozen=True)
class SecureSumConfig:
    """The secure-sum layer of one run.

    Attributes:
        backend: plain, mask or ckks.
        min_survivors: fewest clients a released sum may contain, counted on the run's start;
            None = a majority of the run's clients (and two more than the colluders the mask
            adversary names). Below it a sum fails with DropoutError and nothing is released.
        mask, ckks: the backends' own parameters.
    """

    backend: Backend = Backend.MASK
    min_survivors: int | None = None
    mask: MaskConfig = field(default_factory=MaskConfig)
    ckks: CkksConfig = field(default_factory=CkksConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.backend, Backend):
            raise ConfigError(f"backend must be a Backend, got {self.backend!r}")
        if self.min_survivors is not None:
            positive("min_survivors", self.min_survivors, 1)

    def survivors_needed(self, n_run: int) -> int:
        """min_survivors for a run that started with ``n_run`` clients (the plain and ckks
        backends; mask resolves its own, with the same default)."""
        needed = self.min_survivors if self.min_survivors is not None else self.mask.survivor_floor(n_run)
        if needed > n_run:
            raise ConfigError(f"min_survivors={needed} exceeds the {n_run} clients of the run")
        return needed


def config_to_dict(config: SecureSumConfig) -> dict:
    """A JSON-ready description of a secure-sum configuration (sent to clients in Welcome)."""
    mask = dataclasses.asdict(config.mask)
    mask["graph"] = config.mask.graph.value
    mask["adversary"] = {**mask["adversary"], "threat": config.mask.adversary.threat.value}
    params = config.ckks.params
    return {
        "backend": config.backend.value,
        "min_survivors": config.min_survivors,
        "mask": mask,
        "ckks": {
            "clip_range": config.ckks.clip_range,
            "poly_modulus_degree": params.poly_modulus_degree,
            "coeff_mod_bit_sizes": list(params.coeff_mod_bit_sizes),
            "scale_bits": params.scale_bits,
        },
    }


def config_from_dict(data: dict) -> SecureSumConfig:
    """Inverse of :func:`config_to_dict`; every field is validated again."""
    try:
        mask = dict(data["mask"])
        mask["graph"] = GraphKind(mask["graph"])
        adversary = dict(mask["adversary"])
        mask["adversary"] = Adversary(**{**adversary, "threat": Threat(adversary["threat"])})
        ckks = data["ckks"]
        params = CkksParams(int(ckks["poly_modulus_degree"]), tuple(int(b) for b in ckks["coeff_mod_bit_sizes"]), int(ckks["scale_bits"]))
        return SecureSumConfig(
            backend=Backend(data["backend"]),
            min_survivors=data["min_survivors"],
            mask=MaskConfig(**mask),
            ckks=CkksConfig(params=params, clip_range=float(ckks["clip_range"])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"malformed secure-sum configuration: {exc}") from None
