"""FedAvg of per-sensor GRU forecasters: CNFGNN's "GRU + FedAvg" baseline (Meng et al., KDD 2021,
Table 7), one client per sensor, as a secure protocol; and its "local GRU" baseline (plan
``local-gru``): the same without step 3, so every sensor keeps the model it trains alone.

Algorithm (numbers match the comments in the code):
  0. Normalisation: each client contributes the mean and mean square of its training speeds;
     the secure sum gives DCRNN's global training statistics without revealing any sensor's.
  1. The server initialises the GRU (seeded) and broadcasts it.
  Each round r = 0 .. R-1 (steps 0 and 1 belong to round 0):
  2. every client trains locally from the current global model: a fresh Adam, MSE on the
     normalised scale, ``local_epochs`` over its training windows (at most ``max_local_steps``
     batches), decoding from its own predictions (CNFGNN's FedAvg baselines use
     cl_decay_steps = 1: no teacher forcing);
  3. FedAvg: a secure sum of the clients' weights; every client and (with mask/plain) the
     server get the sum, and the new global model is sum / number of contributors (unweighted,
     as CNFGNN); if the sum is abandoned (threat_model.md M-ONCE), every client keeps its own
     model for this round. With distributed DP (``ddp_noise`` > 0, beyond the paper: DP-FedAvg,
     McMahan et al. 2018, with the noise added by the clients inside the secure sum) the sum
     is of the updates (local model minus the round's starting model), each clipped to L2 norm
     ``ddp_clip`` and noised before masking (threat_model.md DDP-NOISE); the new model is the
     starting model plus sum / contributors;
  4. validation: a secure sum of each client's squared and absolute errors (mph) and counts;
     the totals give RMSE and MAE and are released to the server.
  5. After the last round: the same for the test windows.

With ``dpsgd_sigma`` > 0 step 2 is DP-SGD (papers/local_dp.py): Poisson samples of an expected
``batch_size`` windows, per-sample clipping to ``dpsgd_clip`` and Gaussian noise, from the
client's own noise source; at the end the server collects each client's step count and reports
epsilon per client (one training window is the unit).

Deviations: normalisation statistics come from a secure sum instead of centralised
preprocessing (the same numbers, within the encoding error); metrics are unmasked, as CNFGNN's.

Resuming (``server --resume``): at each round boundary the server saves the metrics so far and
each client keeps its own model and normalisation statistics (they never leave it; with
``local-gru`` the model is the client's alone), so a resumed run gives the same numbers.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import ClassVar

import torch

from secure_fedgraph.errors import ConfigError, SumAbandoned
from secure_fedgraph.models import GRUSeq2Seq
from secure_fedgraph.validation import positive, positive_number
from secure_fedgraph.papers import local_dp
from secure_fedgraph.papers.dp_options import DDPOptions, DPSGDOptions
from secure_fedgraph.privacy import Unit, UnitKind
from secure_fedgraph.papers.error_totals import errors_spec, released_errors, report_errors
from secure_fedgraph.papers.traffic import (
    SensorPlan,
    check_series_options,
    client_normalisation,
    server_normalisation,
)
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.core.spec import SumSpec
from secure_fedgraph.training.forecasting import error_sums, load_weights, train_local, weights_of
from secure_fedgraph.training.metrics import rmse_mae

@dataclass(frozen=True)
class FedAvgGRUConfig(DPSGDOptions, DDPOptions):
    """Options of the fedavg-gru plan (``secure-fedgraph server --plan fedavg-gru --set KEY=VALUE``).

    Attributes:
        rounds: global rounds.
        dataset: the graph series (METR-LA by default; a name or a folder, data/sources.py).
        sensors: clients = the first ``sensors`` sensors (None: all of them).
        steps_in, steps_out: input and output window lengths (12 and 12, DCRNN's).
        moments_clip: clip range of the normalisation sum (None: 1e4 for speeds, else 1e8; papers/traffic.py).
        hidden_size: GRU hidden units (100: the paper's "GRU 63K").
        local_epochs: local epochs per round.
        max_local_steps: at most this many batches per round (None: whole epochs).
        batch_size: windows per batch.
        lr: Adam learning rate (a fresh Adam every round).
        max_windows: keep only the first windows of each split (small test runs).
        dpsgd_sigma: DP-SGD noise multiplier for local training (0: plain Adam, no DP);
            dpsgd_clip: per-sample L2 clip; dp_delta: the delta epsilon is reported at (papers/dp_options.py).
        seed: run seed (initial model, batch order).
        ddp_noise: distributed DP noise multiplier z on the FedAvg sum (0: none; see SumNoise).
        ddp_clip: L2 bound on each client's update with distributed DP.
        ddp_delta: the delta the run's epsilon is reported at.
    """

    rounds: int = 3
    dataset: str = "metr-la"
    sensors: int | None = None
    steps_in: int = 12
    steps_out: int = 12
    moments_clip: float | None = None
    hidden_size: int = 100
    local_epochs: int = 1
    max_local_steps: int | None = None
    batch_size: int = 128
    lr: float = 1e-3
    max_windows: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()  # dpsgd_sigma, dpsgd_clip, dp_delta, ddp_noise, ddp_clip, ddp_delta
        if self.dpsgd_sigma and self.ddp_noise:
            raise ConfigError("dpsgd_sigma and ddp_noise are both set: choose one (their composition is not accounted)")
        positive("rounds", self.rounds)
        positive("hidden_size", self.hidden_size)
        positive("local_epochs", self.local_epochs)
        positive("batch_size", self.batch_size)
        check_series_options(self)
        for name in ("max_local_steps", "max_windows"):
            positive(name, getattr(self, name), optional=True)
        positive_number("lr", self.lr)


class FedAvgGRU(SensorPlan):
    name = "fedavg-gru"
    Config = FedAvgGRUConfig
    averages: ClassVar[bool] = True  # step 3; False: every client keeps its own model
    dpsgd_unit = Unit(UnitKind.ROW, "one training window (12 input and 12 target steps) of one sensor client")

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> FedAvgGRU:
        """This plan with ``dpsgd_sigma`` calibrated: every client takes ``rounds`` times its
        steps per round at q = batch_size / training windows (the same for every sensor)."""
        c = self.config
        if option not in (None, "dpsgd_sigma"):
            raise ConfigError(f"plan {self.name} calibrates dpsgd_sigma, not {option!r}")
        rate = local_dp.sample_rate(c.batch_size, len(self.load_client_data(0, data_dir).y["train"]))
        sigma = local_dp.calibrated_sigma(c, target_epsilon, rate=rate, steps=c.rounds * local_dp.steps_per_round(rate, c.local_epochs, c.max_local_steps))
        return type(self)(dataclasses.replace(c, dpsgd_sigma=sigma))

    def _model(self) -> GRUSeq2Seq:
        model = GRUSeq2Seq(hidden_size=self.config.hidden_size, horizon=self.config.steps_out)
        model.reset_parameters(torch.Generator().manual_seed(derive_seed(self.seed, "server", "initial model")))
        return model

    def server(self, ctx: ServerContext):
        c = self.config
        weights = weights_of(self._model())
        start, saved = ctx.resume_from({"history": []})
        history = list(saved["history"])
        for r in range(start, c.rounds):
            ctx.checkpoint(r, {"history": history})  # the metrics so far: the models are the clients' (resume)
            with ctx.phase("set-up"):
                yield from ctx.start_round(r)
                if r == 0:
                    yield from server_normalisation(ctx, c)  # 0. normalisation statistics
                    yield from ctx.broadcast("model", weights)  # 1.
            if self.averages:
                with ctx.phase("fedavg"):
                    try:  # 2.-3. local training, FedAvg (of the clipped, noised updates with distributed DP)
                        yield from ctx.secure_sum(SumSpec.of("weights", weights, noise=ctx.sum_noise(noise_multiplier=c.ddp_noise, l2_clip=c.ddp_clip)))
                    except SumAbandoned:
                        pass  # every client keeps its own model this round
            with ctx.phase("evaluation"):
                rmse, mae = rmse_mae((yield from released_errors(ctx, errors_spec("validation"))))  # 4.
                clients = len(ctx.live)
            history.append({"round": r, "clients": clients, "val_rmse": rmse, "val_mae": mae})
            ctx.report(r, clients=clients, val_rmse=rmse, val_mae=mae)
        with ctx.phase("evaluation"):
            test_rmse, test_mae = rmse_mae((yield from released_errors(ctx, errors_spec("test"))))  # 5.
        metrics = {"plan": self.name, "rounds": history, "test_rmse": test_rmse, "test_mae": test_mae, "clients": len(ctx.live)}
        if c.dpsgd_sigma:
            metrics["privacy"] = yield from local_dp.server_report(ctx, c, unit=self.dpsgd_unit, mechanisms=[])
        elif self.averages and c.ddp_noise > 0:
            metrics["privacy"] = ctx.noise_report(c.ddp_delta)
        return metrics

    def client(self, ctx: ClientContext):
        c = self.config
        model = GRUSeq2Seq(hidden_size=c.hidden_size, horizon=c.steps_out)
        start, saved = ctx.resume_from(None)
        if saved is not None:  # a resumed run: this client's own model and statistics at the round it resumes from
            mean, std = saved["mean"], saved["std"]
            data = ctx.data.normalised(mean, std)
            load_weights(model, saved["weights"])
        for r in range(start, c.rounds):
            ctx.checkpoint(r, {"mean": mean, "std": std, "weights": weights_of(model)} if r else None)
            if r == 0:
                data, mean, std = yield from client_normalisation(ctx, ctx.data)  # 0.
                load_weights(model, (yield ctx.receive("model")))  # 1.
            x, y, tod = data.sensor("train", 0)
            if r == start:
                private = local_dp.client_mechanism(ctx, c, samples=len(x), batch_size=c.batch_size)
            round_start = weights_of(model)
            train_local(model, x, y, tod, rng=ctx.rng("batches", r), epochs=c.local_epochs,
                        max_steps=c.max_local_steps, batch_size=c.batch_size, lr=c.lr, private=private)  # 2.
            if self.averages:
                yield from fedavg_step(ctx, model, round_start, updates=c.ddp_noise > 0)  # 3.
            yield from report_errors(ctx, "validation", error_sums(model, *data.sensor("val", 0), mean=mean, std=std))  # 4.
        yield from report_errors(ctx, "test", error_sums(model, *data.sensor("test", 0), mean=mean, std=std))  # 5.
        if c.dpsgd_sigma:
            yield ctx.report_privacy()  # this client's DP-SGD steps, as its optimiser counted them


def fedavg_step(ctx: ClientContext, model, start: dict, *, updates: bool):
    """Client side of step 3: the weights (or, with distributed DP, the update from ``start``)
    into the secure sum, marked as this client's model; the model becomes the average. An
    abandoned sum leaves the local model (threat_model.md M-ONCE)."""
    local = weights_of(model)
    try:
        total = yield ctx.secure_sum("weights", {k: v - start[k] for k, v in local.items()} if updates else local, private=True)
    except SumAbandoned:
        return  # the server gave this round's FedAvg up: keep the local model
    n = len(total.contributors)
    load_weights(model, {k: (start[k] if updates else 0) + v / n for k, v in total.values.items()})


class LocalGRU(FedAvgGRU):
    """CNFGNN's "local GRU" baseline: each sensor trains its own GRU on its own windows only;
    the server broadcasts the initial model and learns only the error totals."""

    name = "local-gru"
    averages = False
