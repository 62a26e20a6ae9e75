"""fedavg-vector: one FedAvg round over a length-L vector, the workload of the peer benchmark
(shared/research/peer-benchmark.md): the server broadcasts the model, every client returns
the model plus a seeded update in [-1, 1), and the server averages them with a secure sum.
A resumed run (``server --resume``) goes on from the model the server saved at the round's start."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from secure_fedgraph.errors import SumAbandoned
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.papers.dp_options import DDPOptions
from secure_fedgraph.validation import positive
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec


@dataclass(frozen=True)
class FedAvgVectorConfig(DDPOptions):
    """Attributes: clients, length (L), rounds, seed, and fresh_keys_every: start a new
    secure-sum key set-up every this many rounds (1: every round, like SecAgg+; larger values
    keep one key epoch, i.e. fresh per-sum masks under the same pairwise keys, for several
    FedAvg rounds). ddp_noise, ddp_clip, ddp_delta: distributed DP on the sum (0: off; as
    fedavg-gru's): the clients then send their update, clipped and noised inside the sum, and
    the server adds the average update to the model."""

    clients: int = 10
    length: int = 100_000
    rounds: int = 1
    seed: int = 0
    fresh_keys_every: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()  # ddp_noise, ddp_clip, ddp_delta
        positive("clients", self.clients, 2)
        positive("length", self.length)
        positive("rounds", self.rounds)
        positive("fresh_keys_every", self.fresh_keys_every)


class FedAvgVector(Plan):
    name = "fedavg-vector"
    Config = FedAvgVectorConfig
    clients_field = "clients"

    def client_ids(self) -> list[int]:
        return list(range(self.config.clients))

    def server(self, ctx: ServerContext):
        c = self.config
        # mask/plain: only the server needs the sum (the next round broadcasts the model), as in
        # Flower's round; ckks: the clients must decrypt it, so it goes to them
        shape = (TensorSpec("w", (c.length,)),)
        start, saved = ctx.resume_from({"history": [], "model": np.zeros(c.length, dtype=np.float32)})
        model, history = saved["model"], list(saved["history"])
        for r in range(start, c.rounds):
            ctx.checkpoint(r, {"history": history, "model": model})
            started = time.perf_counter()
            if r % c.fresh_keys_every == 0 or r == start:  # a resumed run's new session has no keys yet
                yield from ctx.start_round(r)
            yield from ctx.broadcast("model", {"w": model})
            noise = ctx.sum_noise(noise_multiplier=c.ddp_noise, l2_clip=c.ddp_clip)
            try:
                total = yield from ctx.secure_sum(SumSpec("update", shape, server_only=ctx.server_reads_sums, noise=noise))
            except SumAbandoned:
                total = None  # the model stays as it was this round
            if total is not None and total.values is not None:  # the average model, or with distributed DP the model plus the average update
                model = ((model if noise else 0) + total.values["w"] / len(total.contributors)).astype(np.float32)
            seconds = time.perf_counter() - started  # the round itself: key set-up, broadcast, secure sum
            clients = len(total.contributors) if total is not None else 0
            history.append({"round": r, "clients": clients, "round_seconds": seconds})
            ctx.report(r, clients=clients, round_seconds=seconds)
        # the model the run ended with, as a digest: runs that must agree (gRPC and in-process,
        # a run with a fuzzer and one without) compare it
        metrics = {"plan": self.name, "rounds": history, "model_sha256": hashlib.sha256(model.tobytes()).hexdigest()}
        if c.ddp_noise > 0:
            metrics["privacy"] = ctx.noise_report(c.ddp_delta)
        return metrics

    def client(self, ctx: ClientContext):
        c = self.config
        start, _ = ctx.resume_from(None)
        for r in range(start, c.rounds):
            ctx.checkpoint(r, None)  # nothing to keep: the model comes with each round
            model = (yield ctx.receive("model"))["w"]
            rng = np.random.default_rng(derive_seed(c.seed, "client", ctx.client_id, r, "update"))
            update = rng.uniform(-1, 1, c.length).astype(np.float32)
            local = np.clip(model + update, -1, 1)
            try:
                yield ctx.secure_sum("update", {"w": local - model if c.ddp_noise > 0 else local}, private=True)
            except SumAbandoned:
                pass
