"""A client's own security minimums: what it accepts from a server, whatever the server says.

The server chooses a run's configuration and announces it (the Welcome, every ADVERTISE).
A client never takes those values as its own: it checks them against its policy and refuses,
with one line naming the option, anything weaker (threat_model.md M-POLICY). The defaults are
the secure choices; each weaker one is an explicit option with its cost stated in docs/running.md (the client options).

What stays the server's to choose: the plan and its options, the backend among those the
client accepts, the clipping range and precision (accuracy, not secrecy), who takes part, and
stronger settings than the client's minimums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.privacy.analysis.skellam import noise_per_sensitivity
from secure_fedgraph.protocol.sum_backends.adversary import MAX_KEY_EPOCHS, Adversary, complete_threshold, sparse_check, survivor_floor
from secure_fedgraph.protocol.sum_backends.config import Backend, GraphKind, MaskPlan, SecureSumConfig
from secure_fedgraph.protocol.core.spec import NoiseUnit, SumSpec

# the command-line option of `secure-fedgraph client` behind each policy field (for error messages)
OPTION = {
    "adversary": "--corrupt-fraction / --dropout-fraction / --security-bits / --honest-but-curious",
    "min_survivors_fraction": "--min-survivors-fraction",
    "allow_sparse": "--no-sparse",
    "allow_streaming": "--no-streaming",
    "backends": "--backend",
    "min_dp_sigma": "--min-dp-sigma",
    "min_ddp_noise": "--min-ddp-noise",
    "min_dpsgd_sigma": "--min-dpsgd-sigma",
    "allow_seeded_randomness": "--allow-seeded-randomness",
    "max_rekeys_per_round": "--max-rekeys",
    "min_run_clients": "--min-run-clients",
    "max_key_epochs": "--max-key-epochs",
}


def _shown(value: float) -> str:
    """A noise level below a floor, rounded down (0.9999995 shows as 0.999, never as 1)."""
    return f"{math.floor(value * 1000) / 1000:g}"


@dataclass
class KeyEpochCount:
    """How many mask key epochs one logical client has taken part in over its run (every round's
    first and its re-keys), which :meth:`ClientPolicy.check_mask_round` caps. One lives for the
    whole run: :class:`~secure_fedgraph.protocol.engine.resume.RunMemory` holds it and hands it to the
    client's role of every session, as it does the signed contributions, so a server that
    "restarts" cannot reset it (threat_model.md M-GRAPH-SPARSE)."""

    seen: int = 0


@dataclass(frozen=True)
class ClientPolicy:
    """What a client accepts.

    Attributes:
        adversary: the adversary this client assumes (corrupt and dropout fractions, security
            bits, deviating or honest-but-curious server); thresholds and graphs must hold
            against it.
        min_survivors_fraction: a sum must hold more than this fraction of the clients that
            started the run (and two more than the colluders), however many are left.
        allow_sparse: accept the sparse neighbour graph (when its parameters hold).
        allow_streaming: accept mask's streaming variant for the sums a plan marks.
        backends: the secure-sum backends accepted (mask by default; ckks and plain only when
            listed: ckks gives every input away to one colluding client, plain to the server).
        min_dp_sigma: the least noise multiplier a plan that uploads activations may use.
        min_ddp_noise: the least distributed-DP noise multiplier on the sums a plan marks
            private (its model: FedAvg's weights; its data: FedSTGD's sums of its windows), per
            unit of privacy's (a contribution's, or one row's) real L2
            sensitivity: the clip's, plus what rounding to the sum's grid adds (on a coarse grid
            a rounded contribution can reach twice its clip); 0 accepts those sums without noise,
            as every sum is by default.
        min_dpsgd_sigma: the least DP-SGD noise multiplier a plan's local training may use
            (0: a plan may train without DP-SGD, as every plan does by default).
        max_rekeys_per_round: key epochs a round may add after its first (each needs a dropout).
        max_key_epochs: mask key epochs this client takes part in over its whole run (rounds and
            re-keys, across resumed sessions). Each epoch draws a fresh sparse graph, and a server
            may abort any epoch whose graph it dislikes and start another: the cap bounds those
            tries, and the graph's parameters must hold at 2^-(security bits + ceil(log2 cap)) per
            epoch, so at 2^-security_bits over the run. Default 1024 (adversary.MAX_KEY_EPOCHS, the
            server's default too): a 200-round run with all 4 re-keys in every round fits.
        min_run_clients: the fewest clients a run may have started with (3 by default: a sum of
            two tells each contributor the other's input, and a server with one of them on its
            side the other's; a run too small to hide anyone is refused at the Welcome and at
            every key set-up, whatever adversary this client assumes).
        allow_seeded_randomness: accept a plan whose clients draw private state (nFedGNN's W_i^(0)
            and dropout masks) from the run seed, which the server knows (off: refused, NF-INIT).
    """

    adversary: Adversary = field(default_factory=Adversary)
    min_survivors_fraction: float = 0.5
    allow_sparse: bool = True
    allow_streaming: bool = True
    backends: frozenset[Backend] = frozenset({Backend.MASK})
    min_dp_sigma: float = 1.0
    min_ddp_noise: float = 0.0
    min_dpsgd_sigma: float = 0.0
    max_rekeys_per_round: int = 4
    allow_seeded_randomness: bool = False
    min_run_clients: int = 3
    max_key_epochs: int = MAX_KEY_EPOCHS

    def __post_init__(self) -> None:
        if not isinstance(self.adversary, Adversary):
            raise ConfigError(f"adversary must be an Adversary, got {self.adversary!r}")
        f = self.min_survivors_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not 0 <= f < 1:
            raise ConfigError(f"min_survivors_fraction must be a number in [0, 1), got {f!r}")
        for name in ("allow_sparse", "allow_streaming", "allow_seeded_randomness"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if not self.backends or not all(isinstance(b, Backend) for b in self.backends):
            raise ConfigError(f"backends must be a non-empty set of Backend, got {self.backends!r}")
        for name in ("min_dp_sigma", "min_ddp_noise", "min_dpsgd_sigma"):
            s = getattr(self, name)
            if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {s!r}")
        r = self.max_rekeys_per_round
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise ConfigError(f"max_rekeys_per_round must be an int >= 0, got {r!r}")
        m = self.min_run_clients
        if isinstance(m, bool) or not isinstance(m, int) or m < 2:
            raise ConfigError(f"min_run_clients must be an int >= 2, got {m!r}")
        e = self.max_key_epochs
        if isinstance(e, bool) or not isinstance(e, int) or e < 1:
            raise ConfigError(f"max_key_epochs must be an int >= 1, got {e!r}")

    @classmethod
    def accepting(cls, config: SecureSumConfig) -> ClientPolicy:
        """The policy of clients run by the same user as the server (``secure-fedgraph run``,
        tests, benchmarks): exactly what ``config`` asks for, so nothing is refused (a run of two
        included, where ``config``'s adversary lets the server hold one)."""
        return cls(adversary=config.mask.adversary, allow_streaming=config.mask.streaming, backends=frozenset({config.backend}),
                   min_dp_sigma=0.0, max_rekeys_per_round=config.mask.max_rekeys_per_round, allow_seeded_randomness=True,
                   min_run_clients=2, max_key_epochs=config.mask.max_key_epochs)

    def colluders(self, n_run: int) -> int:
        return self.adversary.colluders(n_run)

    def floor(self, n_run: int) -> int:
        """The fewest contributors this client lets a released sum have."""
        return survivor_floor(n_run, self.min_survivors_fraction, self.colluders(n_run))

    def _refuse(self, what: str, option: str) -> ProtocolError:
        return ProtocolError(f"{what}; this client's policy refuses it ({OPTION[option]})")

    def _check_run_size(self, n_run: int) -> None:
        """A run too small to hide anyone (threat_model.md M-POLICY): in a run of two, each
        client reads the other's input from the sum (the server does too, with one of them)."""
        if n_run < self.min_run_clients:
            raise self._refuse(f"the run has {n_run} clients, fewer than {self.min_run_clients} (a sum of so few gives each "
                               "contributor's input to the others)", "min_run_clients")

    def _check_key_epochs(self, key_epoch: int) -> None:
        """Grinding (threat_model.md M-GRAPH-SPARSE): a server may abort any key epoch whose graph
        it dislikes and start another; the graph's bounds hold over ``max_key_epochs`` epochs of a
        run (adversary.epoch_security_bits), so the next one is refused."""
        if key_epoch > self.max_key_epochs:
            raise self._refuse(f"server started key epoch {key_epoch} of this run, more than {self.max_key_epochs} (the sparse graph's "
                               "bounds hold over that many; a server aborting epochs until it likes a graph gets no more tries)",
                               "max_key_epochs")

    def _check_two_honest(self, n_run: int) -> None:
        """The colluder floor: every released sum must hold two honest inputs, so a run needs
        two clients more than its colluders (at least one whenever corrupt_fraction > 0)."""
        c = self.colluders(n_run)
        if c + 2 > n_run:
            raise self._refuse(f"a run of {n_run} clients with {c} colluding cannot put two honest inputs into any sum (it needs "
                               f"{self.adversary.smallest_run()} clients against a {self.adversary.describe()})", "adversary")

    @staticmethod
    def _noise_per_unit(*, noise_multiplier: float, l2_clip: float | None, precision_bits: int | None, dimension: int,
                        contributors: int, expected: int) -> float:
        """What :attr:`min_ddp_noise` bounds (threat_model.md DDP-FLOOR): the noise a sum over
        ``contributors`` of ``expected`` clients carries per unit of one contribution's rounded
        L2 sensitivity, z C 2^p sqrt(min(1, m / E)) / d2 with d2 = C 2^p + sqrt(d) / 2
        (privacy/analysis/skellam.py, the accountant's own sensitivity). Without a grid (ckks,
        which refuses a noised sum anyway) or a clip (not announced), z sqrt(min(1, m / E)): the
        rounding's share is then unknown and counted as none."""
        if precision_bits is None or l2_clip is None:
            return noise_multiplier * math.sqrt(min(1.0, contributors / expected))
        return noise_per_sensitivity(noise_multiplier=noise_multiplier, l2_clip=l2_clip, precision_bits=precision_bits,
                                     dimension=dimension, contributors=contributors, expected=expected)

    # --- checks ----------------------------------------------------------------------------
    def check_run(self, config: SecureSumConfig, *, n_run: int, uploads_activations: bool = False, dp_sigma: float | None = None,
                  ddp_noise: float | None = None, ddp_clip: float | None = None, dpsgd_sigma: float | None = None,
                  seeded_randomness: bool = False) -> None:
        """A run's configuration, as a Welcome announces it (before anything is sent).

        The distributed DP floor is checked as far as a Welcome allows: the sums' dimensions are
        not known yet, so the rounding's share of the sensitivity is taken at its least (one
        value, d = 1), with the announced clip ``ddp_clip`` and the backend's grid. That refuses
        what no sum could pass; each sum is checked with its own dimension before it leaves
        (:meth:`check_noise`).

        Raises:
            ProtocolError: one line naming what is refused and the option that governs it.
        """
        if config.backend not in self.backends:
            raise self._refuse(f"the server runs the {config.backend.value} backend, and this client accepts "
                               f"{', '.join(sorted(b.value for b in self.backends))}", "backends")
        self._check_run_size(n_run)
        if config.backend is Backend.MASK:
            self._check_two_honest(n_run)
        if config.backend is Backend.MASK and config.mask.streaming and not self.allow_streaming:
            raise self._refuse("the server's mask backend allows the streaming variant (start it with --no-streaming)", "allow_streaming")
        if config.min_survivors is not None and config.min_survivors < self.floor(n_run):
            raise self._refuse(f"the server's min_survivors={config.min_survivors} is below {self.floor(n_run)} of the run's "
                               f"{n_run} clients", "min_survivors_fraction")
        if uploads_activations and (dp_sigma or 0.0) < self.min_dp_sigma:
            raise self._refuse(f"the plan uploads activations with dp_sigma={dp_sigma or 0.0:g}, below {self.min_dp_sigma:g} (the "
                               f"server would see them with less noise; start the server with --dp-sigma {self.min_dp_sigma:g})",
                               "min_dp_sigma")
        if self.min_ddp_noise > 0:
            least = max(config.min_survivors or 0, self.floor(n_run))
            bits = None if config.backend is Backend.CKKS else config.mask.precision_bits  # plain adds mask's noise on mask's grid
            have = self._noise_per_unit(noise_multiplier=ddp_noise or 0.0, l2_clip=ddp_clip, precision_bits=bits, dimension=1,
                                        contributors=least, expected=n_run)
            if have < self.min_ddp_noise:
                offered = "has no distributed DP on its model sums" if ddp_noise is None else \
                    f"sums its model with ddp_noise={ddp_noise:g}, which leaves {_shown(have)} in a sum of the {least} of {n_run} clients it may be delivered with"
                per_unit = 1.0 if not ddp_noise else ddp_noise * math.sqrt(min(1.0, least / n_run)) / have  # the grid's share
                need = self.min_ddp_noise * math.sqrt(n_run / least) * per_unit
                grid = "" if per_unit < 1.0005 else \
                    f", or more --precision-bits: rounding to the grid 2^-{bits} adds to each contribution's sensitivity, and more in sums of more values"
                raise self._refuse(f"the plan {offered}, and this client requires a noise multiplier of at least {self.min_ddp_noise:g} "
                                   f"in any sum of its model (start the server with --set ddp_noise={math.ceil(need * 1000) / 1000:g} or more"
                                   f"{grid})", "min_ddp_noise")
        if self.min_dpsgd_sigma > 0 and (dpsgd_sigma or 0.0) < self.min_dpsgd_sigma:
            offered = "has no DP-SGD in its local training" if dpsgd_sigma is None else f"trains with dpsgd_sigma={dpsgd_sigma:g}"
            raise self._refuse(f"the plan {offered}, and this client requires a DP-SGD noise multiplier of at least {self.min_dpsgd_sigma:g} "
                               "(start the server with --set dpsgd_sigma=...)", "min_dpsgd_sigma")
        if seeded_randomness and not self.allow_seeded_randomness:
            raise self._refuse("the plan draws each user's initial weights and dropout masks from the run seed (user_randomness=run_seed), "
                               "which the server knows: it could recompute them and invert this client's first latents",
                               "allow_seeded_randomness")

    def check_noise(self, spec: SumSpec, *, live: int, least: int, private: bool, precision_bits: int | None) -> None:
        """The distributed DP noise of one sum, as its input request announces it (SumSpec.noise),
        before this client's contribution leaves it. ``private``: the plan marked this
        contribution as its model or its data (Contribute(..., private=True): FedAvg's update,
        FedSTGD's sums of its windows); ``live``: the clients asked;
        ``least``: the fewest contributors the sum may be delivered with (the survivor floor this
        client enforces; ``live`` where the server sees every input anyway); ``precision_bits``:
        the grid 2^-p of the sum's encoding, which the contribution is rounded to (None: no
        grid, ckks). The noise counted is what the sum carries in that worst case, per unit of
        the rounded L2 sensitivity of one unit of privacy (the contribution, or one row of it:
        SumNoise.unit), z C 2^p sqrt(min(live, least) / expected) / (C 2^p + sqrt(d) / 2), d the
        unit's values: a deviating server that discards honest inputs down to the
        floor (claiming they dropped), or announces a coarse grid where rounding alone can
        double a contribution's norm, gets no less (threat_model.md DDP-FLOOR).

        Raises:
            ProtocolError: a private sum with less noise than this client's floor, or none.
        """
        if not private or self.min_ddp_noise <= 0:
            return
        noise = spec.noise
        fewest = min(live, least)
        have = 0.0 if noise is None else self._noise_per_unit(
            noise_multiplier=noise.noise_multiplier, l2_clip=noise.l2_clip, precision_bits=precision_bits, dimension=spec.unit_size,
            contributors=fewest, expected=noise.expected_contributors)
        if have < self.min_ddp_noise:
            spread = "" if noise is None or noise.expected_contributors <= fewest else \
                (f" (multiplier {noise.noise_multiplier:g} spread over {noise.expected_contributors} expected contributors, "
                 f"{live} asked, {fewest} may be all it is delivered with)")
            grid = ""
            if noise is not None and precision_bits is not None:
                scaled = noise.l2_clip * 2.0**precision_bits
                if math.sqrt(spec.unit_size) / 2 > 0.0005 * scaled:  # rounding costs more than a rounding error of the multiplier
                    grid = (f" (rounded to the grid 2^-{precision_bits}, a {'contribution' if noise.unit is NoiseUnit.CONTRIBUTION else 'row'} of {spec.unit_size} values clipped to "
                            f"{noise.l2_clip:g} can reach L2 norm {(scaled + math.sqrt(spec.unit_size) / 2) / 2.0**precision_bits:.3g})")
            raise self._refuse(f"sum {spec.name!r} of this client's model or data carries distributed DP noise multiplier {_shown(have)}{spread}{grid} "
                               f"per unit of its sensitivity, below {self.min_ddp_noise:g} (the server could see a sum with less noise)",
                               "min_ddp_noise")

    def check_mask_round(self, plan: MaskPlan, *, n: int, n_run: int, rekeys: int, key_epoch: int) -> None:
        """A mask key epoch among ``n`` participants, as an ADVERTISE announces it: the
        ``rekeys``-th re-key of its round, and the ``key_epoch``-th key epoch (from 1) this
        client takes part in over its run (:class:`KeyEpochCount`).

        Raises:
            ProtocolError: naming the announced value, the bound, and the option.
        """
        self._check_run_size(n_run)
        self._check_two_honest(n_run)
        c = self.colluders(n_run)
        if plan.min_survivors < self.floor(n_run):
            raise self._refuse(f"server announced min_survivors={plan.min_survivors}, below {self.floor(n_run)} of the run's "
                               f"{n_run} clients", "min_survivors_fraction")
        if rekeys > self.max_rekeys_per_round:
            raise self._refuse(f"server started re-key {rekeys} of this round, more than {self.max_rekeys_per_round}", "max_rekeys_per_round")
        self._check_key_epochs(key_epoch)
        if plan.graph is GraphKind.SPARSE:
            if not self.allow_sparse:
                raise self._refuse("server announced the sparse graph", "allow_sparse")
            why = sparse_check(n, colluders=c, degree=plan.degree, threshold=plan.threshold, max_dropped=plan.max_dropped,
                               adversary=self.adversary, max_key_epochs=self.max_key_epochs)
            if why is not None:
                raise self._refuse(f"server announced a sparse graph that does not hold: {why}", "adversary")
        else:
            if plan.degree != n - 1:
                raise self._refuse(f"server announced a complete graph of degree {plan.degree} over {n} participants", "adversary")
            needed = complete_threshold(n, c, self.adversary.threat)
            if plan.threshold < needed:
                raise self._refuse(f"server announced threshold {plan.threshold} for {n} participants, below the {needed} that an "
                                   f"{self.adversary.describe()} needs", "adversary")
        if plan.streaming:
            if not self.allow_streaming:
                raise self._refuse("server announced the streaming variant", "allow_streaming")
            if plan.graph is not GraphKind.COMPLETE:
                raise self._refuse("server announced the streaming variant with the sparse graph", "allow_streaming")
