"""FedRel (Zhang et al., "FedRel: An Adaptive Federated Relevance Framework for Spatial Temporal
Graph Learning", IEEE TAI 2024), Algorithm 1, as a protocol in which relevance is computed from
secure sums only: the server never sees a participant's distribution vector, relevance or weights.

K participants each hold their own cases of a UEA archive (BasicMotions or JapaneseVowels,
standing in for SHL_Small and ISRUC_S3; data/uea.py), split non-IID (data/label_split.py), and
their share of the test cases. Each trains a DIIG classifier (models/diig.py) with the global
distribution estimator g_theta (models/distribution_estimator.py).

Algorithm (numbers match the comments in the code; "line n" is Algorithm 1's):
  0. Set-up: every participant contributes per-channel sums, sums of squares and counts of its
     training values; the secure sum gives one z-score per channel. The server initialises
     Theta (DIIG) and theta (g_theta) and the VAE (seeded, Xavier; line 1) and broadcasts them.
  1. (relevance only) The VAE of section IV-C is "learnt beforehand": ``vae_rounds`` of
     ``vae_local_steps`` local Adam steps and a secure FedAvg, so every participant encodes
     into one latent space; then each computes d_k, the mean posterior mean of its own cases
     (eq. 17; line 2). d_k never leaves the participant.
  Each round r = 0 .. R-1 (lines 3-20; the paper's round starts with the upload, ours with the
  local training that follows the previous round's aggregation, so the round ends with a
  global model to evaluate):
  2. ``local_steps`` Adam steps on batches of the participant's cases, loss eq. 22:
     cross-entropy + MSE(g_theta(d_k), d_tilde) with the previous round's d_tilde (none in
     round 0; lines 14-18). Each participant keeps its own Adam state.
  3. d_hat_k = g_theta(d_k) (eq. 18, line 5) goes to a secure sum; every participant gets the
     sum and d_tilde = sum / K (eq. 19, line 8).
  4. Each participant computes e_k = exp(tau ||d_hat_k - d_tilde|| - c) itself (eq. 20's
     numerator, shifted by the public c) and contributes [e_k Theta_k, e_k] to one secure sum
     (two tensors, one sum); Theta = first / second is eq. 21 (lines 9-10, 13), with theta
     aggregated alongside Theta (the paper uploads both, line 6, and says both "contribute to the
     federated learning process").
     With ``aggregation="uniform"`` (the FedAvg baseline: the same model, r_k = 1/K) steps 1, 3
     and 4 are one secure sum of Theta_k instead, and eq. 22 has no MSE term.
  5. Every participant evaluates the global model on its test cases; a secure sum of their
     confusion matrices, released, gives accuracy and macro-F1 of the whole test set.

The run resumes after a server restart (``server --resume``): at each round boundary the server
checkpoints the metrics so far, and each participant keeps its model, Adam state, dropout
generator, normalised cases, d_k and d_tilde in its own memory.

The server learns d_tilde and the two sums with mask (the clients' sums with ckks: nothing, not
even those; threat_model.md FR-SUMS), never a d_hat_k, e_k, r_k or Theta_k.

Deviations (beyond the stand-in data): a case of the archive becomes P spatial graphs (segments)
where ISRUC's would be consecutive 30-s epochs, and every graph t >= w of a case is labelled with
its class; the feature transformation net is trained with DIIG and aggregated with it (the
paper's is "pre-trained", which would need pooled data); eq. 14's output layer is linear, eq.
12 correlates consecutive graphs and sigma is ELU in eqs. 2, 4 and 11 (models/); g_theta ends in tanh so the relevance sums
have a stated range (training/relevance.py); the centralised upper bound is ``clients=1``: one
party holding every case, run by the same plan (``simulate_one_party``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from secure_fedgraph.data.label_split import split_cases
from secure_fedgraph.data.uea import UEA, load_uea, uea_shape
from secure_fedgraph.errors import ConfigError, SumAbandoned
from secure_fedgraph.models.diig import DIIG
from secure_fedgraph.models.distribution_estimator import DistributionEstimator
from secure_fedgraph.models.distribution_vae import DistributionVAE
from secure_fedgraph.models.generator_dropout import use_generator
from secure_fedgraph import privacy
from secure_fedgraph.papers import local_dp
from secure_fedgraph.papers.dp_options import DPSGDOptions
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.papers.error_totals import released_errors, report_errors
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.training.classification import accuracy_and_macro_f1, best_round, confusion_matrix, fedrel_loss
from secure_fedgraph.training.forecasting import load_weights, weights_of
from secure_fedgraph.training.relevance import RelevancePrecision, relevance_term, weighted_contribution, weights_from_sums
from secure_fedgraph.validation import positive, positive_number

SPLITS = {"class": "class", "speaker": "disjoint", "iid": "iid"}  # plan option -> data/label_split.py's split
AGGREGATIONS = ("relevance", "uniform")


@dataclass(frozen=True)
class FedRelConfig(DPSGDOptions):
    """Options of the fedrel plan (``--set KEY=VALUE``); defaults are the paper's where it gives them.

    Attributes:
        dataset: "basicmotions" (SHL_Small's stand-in: 6 IMU channels, 4 activities) or
            "japanesevowels" (12 channels, 9 speakers).
        clients: K, the participants (2, 3 or 5 in Table IV; 1 is the centralised upper bound).
        split: "class" (partial non-IID: adjacent overlapping classes, STFL's split generalised),
            "speaker" (japanesevowels only: each speaker, i.e. class, wholly at one participant)
            or "iid".
        aggregation: "relevance" (eqs. 19-21) or "uniform" (FedAvg with r_k = 1/K).
        rounds: communication rounds (150).
        local_steps: Adam steps per participant and round (1: Algorithm 1's lines 15-18).
        batch_size: cases per step (8). lr: Adam's learning rate (1.5e-3). dropout: 0.3.
        segments: P, spatial graphs per case. window: w (2: the paper's best on SHL_Small).
        features, hidden: d and the node embedding size (32).
        latent: m, the size of d_k and d_hat_k. vae_rounds, vae_local_steps, vae_lr: the VAE's
            federated pre-training (relevance only).
        temperature: tau in r_k proportional to exp(tau ||d_hat_k - d_tilde||): 1 is eq. 20; -1
            weights participants near d_tilde more.
        weight_clip, aggregation_error: the range weights are clipped to and the largest error
            of an aggregated weight; they set the relevance sum's range and resolution.
        eval_every: evaluate the global model every this many rounds (and after the last).
        dpsgd_sigma, dpsgd_clip, dp_delta: DP-SGD for DIIG's local steps (papers/local_dp.py;
            0: off). With ``aggregation="uniform"`` only: relevance also releases d_hat_k and e_k,
            functions of d_k (a statistic of every case, from a VAE trained without DP).
        seed: run seed (initialisation, splits, batches, dropout).
    """

    dataset: str = "basicmotions"
    clients: int = 3
    split: str = "class"
    aggregation: str = "relevance"
    rounds: int = 150
    local_steps: int = 1
    batch_size: int = 8
    lr: float = 1.5e-3
    dropout: float = 0.3
    segments: int = 5
    window: int = 2
    features: int = 32
    hidden: int = 32
    latent: int = 8
    vae_rounds: int = 20
    vae_local_steps: int = 5
    vae_lr: float = 1e-3
    temperature: float = 1.0
    weight_clip: float = 8.0
    aggregation_error: float = 1e-5
    eval_every: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dataset not in UEA:
            raise ConfigError(f"dataset must be one of {sorted(UEA)}, got {self.dataset!r}")
        if self.split not in SPLITS:
            raise ConfigError(f"split must be one of {sorted(SPLITS)}, got {self.split!r}")
        if self.split == "speaker" and self.dataset != "japanesevowels":
            raise ConfigError(f"split='speaker' needs speaker labels: dataset='japanesevowels', got {self.dataset!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        for name in ("clients", "rounds", "local_steps", "batch_size", "segments", "features", "hidden", "latent", "vae_rounds",
                     "vae_local_steps", "eval_every"):
            positive(name, getattr(self, name))
        positive("window", self.window, 0)
        for name in ("lr", "vae_lr", "weight_clip", "aggregation_error"):
            positive_number(name, getattr(self, name))
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, int | float) or not math.isfinite(self.temperature) or self.temperature == 0:
            raise ConfigError(f"temperature must be a finite non-zero number, got {self.temperature!r}")
        length = uea_shape(self.dataset).length
        if length % self.segments:
            raise ConfigError(f"segments must divide the {length} steps of a {self.dataset} case, got {self.segments}")
        if self.window >= self.segments:
            raise ConfigError(f"window must be below segments ({self.segments}), got {self.window}")
        super().__post_init__()  # dpsgd_sigma, dpsgd_clip, dp_delta
        if self.dpsgd_sigma and self.relevance:
            raise ConfigError("dpsgd_sigma needs aggregation='uniform': relevance aggregation also releases functions of d_k, every "
                              "case's statistic from a VAE trained without DP, which DP-SGD does not cover")

    @property
    def relevance(self) -> bool:
        return self.aggregation == "relevance"

    @property
    def precision(self) -> RelevancePrecision:
        bound = DistributionEstimator(self.latent).distance_bound
        return RelevancePrecision(bound, self.temperature, self.weight_clip, self.aggregation_error)


def build_model(config: FedRelConfig) -> nn.ModuleDict:
    """Theta (the DIIG classifier) and theta (g_theta) as one module: what the rounds aggregate."""
    shape = uea_shape(config.dataset)
    diig = DIIG(classes=len(shape.classes), segments=config.segments, window=config.window, features=config.features,
                hidden=config.hidden, dropout=config.dropout)
    return nn.ModuleDict({"diig": diig, "estimator": DistributionEstimator(config.latent)})


def build_vae(config: FedRelConfig) -> DistributionVAE:
    shape = uea_shape(config.dataset)
    return DistributionVAE(shape.channels * shape.length, config.latent)


def initial_weights(config: FedRelConfig) -> dict[str, dict[str, np.ndarray]]:
    """Line 1: Theta, theta and the VAE, Xavier-initialised from the run seed (server side)."""
    generator = torch.Generator().manual_seed(derive_seed(config.seed, "server", "initial model"))
    model, vae = build_model(config), build_vae(config)
    for part in (*model.values(), vae):
        part.reset_parameters(generator)
    return {"model": weights_of(model), "vae": weights_of(vae)}


class FedRelSums:
    """The secure sums of a FedRel run, built alike by the server (to ask) and for tests."""

    def __init__(self, config: FedRelConfig) -> None:
        self.config = config
        shape = uea_shape(config.dataset)
        weights = initial_weights(config)
        self.channels, self.classes = shape.channels, len(shape.classes)
        self.model = SumSpec.of("weights", weights["model"], clip_range=config.weight_clip)  # uniform: FedAvg of Theta
        self.vae = SumSpec.of("vae", weights["vae"], clip_range=config.weight_clip)
        self.distribution = SumSpec("distribution", (TensorSpec("d_hat", (config.latent,)),), clip_range=1.0)  # d_hat in (-1, 1)^m
        precision = config.precision
        self.relevance = SumSpec.of("relevance", weighted_contribution(1.0, weights["model"]), clip_range=precision.clip_range,
                                    resolution=precision.resolution)
        self.normalisation = SumSpec("normalisation", (TensorSpec("sum", (self.channels,)), TensorSpec("sum_sq", (self.channels,)),
                                                       TensorSpec("count", (1,))), clip_range=1e8)
        self.test = SumSpec("test", (TensorSpec("confusion", (self.classes, self.classes)),), clip_range=1e4)

    def per_round(self) -> list[SumSpec]:
        """The sums of one training round, in order (evaluation not included)."""
        return [self.distribution, self.relevance] if self.config.relevance else [self.model]

    def elements_per_round(self) -> int:
        """Values each participant uploads per round through the aggregation sums."""
        return sum(s.size for s in self.per_round())


@functools.lru_cache(maxsize=2)
def _archive(name: str, data_dir: str | None):
    return load_uea(name, data_dir)


@dataclass(frozen=True)
class ClientData:
    """One participant's own cases, raw: training (its non-IID share) and test (every K-th case)."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray

    def training_sums(self) -> dict[str, np.ndarray]:
        x = self.train_x.astype(np.float64)
        return {"sum": x.sum(axis=(0, 2)), "sum_sq": (x**2).sum(axis=(0, 2)), "count": np.array([float(x.shape[0] * x.shape[2])])}


def client_cases(config: FedRelConfig, data_dir: str | os.PathLike | None) -> list[ClientData]:
    """Every participant's cases (for tests and the loader; a participant reads only its own)."""
    archive = _archive(config.dataset, None if data_dir is None else str(data_dir))
    rng = np.random.default_rng(derive_seed(config.seed, "split", config.split))
    train = split_cases(archive.train_y, parts=config.clients, how=SPLITS[config.split], n_classes=len(archive.shape.classes), rng=rng)
    test = [np.arange(k, len(archive.test_y), config.clients) for k in range(config.clients)]
    return [ClientData(archive.train_x[tr], archive.train_y[tr], archive.test_x[te], archive.test_y[te]) for tr, te in zip(train, test)]


def _batch(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    chosen = rng.choice(len(y), size=min(size, len(y)), replace=False)
    return torch.as_tensor(x[chosen]), torch.as_tensor(y[chosen])


class FedRel(Plan):
    name = "fedrel"
    Config = FedRelConfig
    clients_field: ClassVar[str] = "clients"
    one_party = True  # clients=1: every case at one party, the centralised upper bound

    def client_ids(self) -> list[int]:
        return list(range(self.config.clients))

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> ClientData:
        return client_cases(self.config, data_dir)[client_id]

    dpsgd_unit = privacy.Unit(privacy.UnitKind.ROW, "one training case (a recording) of one participant")

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> FedRel:
        """This plan with ``dpsgd_sigma`` calibrated for the participant with the fewest cases
        (the largest sampling rate, so every participant's epsilon is at most the target)."""
        c = self.config
        if option not in (None, "dpsgd_sigma"):
            raise ConfigError(f"plan {self.name} calibrates dpsgd_sigma, not {option!r}")
        fewest = min(len(case.train_y) for case in client_cases(c, None if data_dir is None else str(data_dir)))
        rate = local_dp.sample_rate(c.batch_size, fewest)
        sigma = local_dp.calibrated_sigma(c, target_epsilon, rate=rate, steps=c.rounds * c.local_steps)
        return FedRel(dataclasses.replace(c, dpsgd_sigma=sigma))

    # -- server: starts the sums, releases only the confusion matrices ------------------------

    def server(self, ctx: ServerContext):
        c = self.config
        sums = FedRelSums(c)
        start, saved = ctx.resume_from({"history": [], "clipped": 0})
        history, clipped = list(saved["history"]), saved["clipped"]
        for r in range(start, c.rounds):
            ctx.checkpoint(r, {"history": history, "clipped": clipped})  # the metrics so far: the models are the participants'
            with ctx.phase("set-up"):
                yield from ctx.start_round(r)
                if r == 0:
                    yield from ctx.secure_sum(sums.normalisation)  # 0.
                    weights = initial_weights(c)
                    yield from ctx.broadcast("model", {f"{part}/{k}": v for part in ("model", "vae") for k, v in weights[part].items()})  # line 1
                    if c.relevance:
                        for _ in range(c.vae_rounds):  # 1.
                            yield from self._abandonable(ctx, sums.vae)
            with ctx.phase("aggregation"):  # 2. happens at the participants; 3.-4.
                try:
                    for spec in sums.per_round():
                        result = yield from ctx.secure_sum(spec)
                        clipped += result.clipped or 0
                except SumAbandoned:
                    pass  # every participant keeps its own model this round
            if r % c.eval_every == 0 or r == c.rounds - 1:
                with ctx.phase("evaluation"):
                    totals = yield from released_errors(ctx, sums.test)  # 5.
                acc, f1 = accuracy_and_macro_f1(totals["confusion"]) if totals is not None else (math.nan, math.nan)
                history.append({"round": r, "clients": len(ctx.live), "acc": acc, "f1": f1})
                ctx.report(r, clients=len(ctx.live), test_acc=acc, test_f1=f1)
        best_acc, acc_round = best_round(history, "acc")
        best_f1, f1_round = best_round(history, "f1")
        metrics = {"plan": self.name, "rounds": history, "test_acc": history[-1]["acc"], "test_f1": history[-1]["f1"],
                   "best_acc": best_acc, "best_acc_round": acc_round, "best_f1": best_f1, "best_f1_round": f1_round,
                   "clients": len(ctx.live), "clipped_values": clipped,
                   "cost": {"secure_sums_per_round": len(sums.per_round()), "elements_up_per_client_per_round": sums.elements_per_round()}}
        if c.dpsgd_sigma:
            metrics["privacy"] = yield from local_dp.server_report(ctx, c, unit=self.dpsgd_unit, mechanisms=[])
        return metrics

    @staticmethod
    def _abandonable(ctx: ServerContext, spec: SumSpec):
        try:
            yield from ctx.secure_sum(spec)
        except SumAbandoned:
            pass

    # -- client: Algorithm 1 at participant k --------------------------------------------------

    def client(self, ctx: ClientContext):
        c = self.config
        model = build_model(c)
        dropout = torch.Generator().manual_seed(derive_seed(c.seed, "client", ctx.client_id, "dropout"))
        use_generator(model, dropout)
        start, saved = ctx.resume_from(None)
        if saved is None:
            ctx.checkpoint(0, None)
            state = dict(zip(("train_x", "test_x", "d_k"), (yield from self._set_up(ctx, model))), d_tilde=None)  # 0.-1.
        else:  # a resumed run: this participant's own state at the round it resumes from
            state = {k: saved[k] for k in ("train_x", "test_x", "d_k", "d_tilde")}
            load_weights(model, saved["weights"])
            dropout.set_state(saved["dropout"])
        samples = len(state["train_x"])
        private = local_dp.client_mechanism(ctx, c, samples=samples, batch_size=c.batch_size)  # DP-SGD, or None
        with contextlib.ExitStack() as dp:
            if private is None:
                optimiser = torch.optim.Adam(model.parameters(), lr=c.lr)
            else:  # DIIG alone: with uniform aggregation the estimator takes no step
                _, optimiser = dp.enter_context(private.training(model["diig"], lambda p: torch.optim.Adam(p, lr=c.lr), samples=samples,
                                                                 per_sample="loop"))
            if saved is not None:
                optimiser.load_state_dict(saved["optimiser"])
            yield from self._rounds(ctx, model, optimiser, private, dropout, state, start)
        if private is not None:
            yield ctx.report_privacy()  # this participant's DP-SGD steps, as its optimiser counted them

    def _rounds(self, ctx: ClientContext, model: nn.ModuleDict, optimiser, private, dropout: torch.Generator, state: dict[str, Any], start: int):
        """Lines 3-20 at participant k from round ``start``: local steps (DP-SGD with ``private``),
        the aggregation, evaluation. At each round boundary the participant keeps its model, Adam
        state, dropout generator, normalised cases, d_k and d_tilde (``server --resume``)."""
        c, data = self.config, ctx.data
        train_x, test_x, d_k, d_tilde = state["train_x"], state["test_x"], state["d_k"], state["d_tilde"]
        for r in range(start, c.rounds):
            if r:
                ctx.checkpoint(r, {"train_x": train_x, "test_x": test_x, "d_k": d_k, "d_tilde": d_tilde, "weights": weights_of(model),
                                   "optimiser": optimiser.state_dict(), "dropout": dropout.get_state()})
            model.train()
            for step in range(c.local_steps):  # 2. lines 14-18
                optimiser.zero_grad()
                if private is not None:  # a Poisson sample of the participant's cases; each case's gradient clipped, noise added
                    batch = private.sample(len(train_x))
                    one = lambda i: fedrel_loss(model["diig"](torch.as_tensor(train_x[i : i + 1])), torch.as_tensor(data.train_y[i : i + 1]))  # noqa: E731
                    private.loop_gradients(model["diig"], one, batch)
                    optimiser.step()
                    continue
                x, y = _batch(train_x, data.train_y, ctx.rng("batch", r, step), c.batch_size)
                d_hat = model["estimator"](d_k) if d_tilde is not None else None
                fedrel_loss(model["diig"](x), y, d_hat, d_tilde).backward()
                optimiser.step()
            try:
                if c.relevance:
                    with torch.no_grad():
                        d_hat = model["estimator"](d_k).numpy()  # line 5, eq. 18
                    total = yield ctx.secure_sum("distribution", {"d_hat": d_hat})  # 3.
                    d_tilde_np = total.values["d_hat"] / len(total.contributors)  # eq. 19
                    e_k = relevance_term(d_hat, d_tilde_np, c.precision)  # 4.
                    total = yield ctx.secure_sum("relevance", weighted_contribution(e_k, weights_of(model)))
                    load_weights(model, weights_from_sums(total.values))  # eq. 21, line 13
                    d_tilde = torch.as_tensor(d_tilde_np, dtype=torch.float32)
                else:
                    total = yield ctx.secure_sum("weights", weights_of(model))
                    load_weights(model, {k: v / len(total.contributors) for k, v in total.values.items()})
            except SumAbandoned:
                pass  # the server gave this round's aggregation up: keep the local model
            if r % c.eval_every == 0 or r == c.rounds - 1:
                yield from report_errors(ctx, "test", {"confusion": self._confusion(model["diig"], test_x, data.test_y)})  # 5.

    def _set_up(self, ctx: ClientContext, model: nn.Module):
        """Steps 0-1: z-scores from the secure sum of the participants' moments, the initial
        weights (line 1) and, for relevance, d_k from the federated VAE. Returns the normalised
        training and test cases and d_k (None for uniform aggregation)."""
        c, data = self.config, ctx.data
        moments = (yield ctx.secure_sum("normalisation", data.training_sums())).values  # 0.
        mean = moments["sum"] / moments["count"][0]
        std = np.sqrt(np.maximum(moments["sum_sq"] / moments["count"][0] - mean**2, 1e-12))
        z = lambda x: ((x - mean[None, :, None]) / std[None, :, None]).astype(np.float32)  # noqa: E731
        received = yield ctx.receive("model")  # line 1
        vae = build_vae(c)
        load_weights(model, {k[len("model/"):]: v for k, v in received.items() if k.startswith("model/")})
        load_weights(vae, {k[len("vae/"):]: v for k, v in received.items() if k.startswith("vae/")})
        train_x = z(data.train_x)
        d_k = (yield from self._train_vae(ctx, vae, train_x)) if c.relevance else None  # 1.
        return train_x, z(data.test_x), d_k

    def _train_vae(self, ctx: ClientContext, vae: DistributionVAE, train_x: np.ndarray):
        """Step 1: the VAE, pre-trained by secure FedAvg; returns d_k (eq. 17) as a tensor."""
        c = self.config
        flat = train_x.reshape(len(train_x), -1)
        noise = torch.Generator().manual_seed(derive_seed(c.seed, "client", ctx.client_id, "vae noise"))
        for v in range(c.vae_rounds):
            optimiser = torch.optim.Adam(vae.parameters(), lr=c.vae_lr)
            for step in range(c.vae_local_steps):
                rng = ctx.rng("vae batch", v, step)
                x = torch.as_tensor(flat[rng.choice(len(flat), size=min(c.batch_size, len(flat)), replace=False)])
                optimiser.zero_grad()
                vae.loss(x, noise).backward()
                optimiser.step()
            try:
                total = yield ctx.secure_sum("vae", weights_of(vae))
                load_weights(vae, {k: v / len(total.contributors) for k, v in total.values.items()})
            except SumAbandoned:
                pass
        return vae.distribution_vector(torch.as_tensor(flat))

    @staticmethod
    def _confusion(diig: DIIG, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        diig.eval()
        with torch.no_grad():
            predicted = diig.case_probabilities(torch.as_tensor(x)).argmax(dim=-1).numpy()
        return confusion_matrix(y, predicted, diig.options["classes"])
