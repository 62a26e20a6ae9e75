"""The engine: a toy plan that uses every collective, on every backend, in one process."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.protocol.engine.contexts import ClientContext, ClientHost, ServerContext
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.core.messages import SERVER, BroadcastRequest, Header, NamedTensor
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage, SumSpec, TensorSpec, make_client
from secure_fedgraph.runs.simulate import simulate


@dataclass(frozen=True)
class ToyConfig:
    clients: int = 4
    seed: int = 3


def _halve(tensors):
    """A privacy hook: runs on the client before its upload leaves."""
    return {k: v / 2 for k, v in tensors.items()}


class Toy(Plan):
    """broadcast -> scatter -> upload (with a hook) -> secure_sum -> release."""

    name = "toy"
    Config = ToyConfig
    clients_field = "clients"

    def client_ids(self):
        return list(range(self.config.clients))

    def server(self, ctx: ServerContext):
        yield from ctx.start_round(0)
        yield from ctx.broadcast("offset", {"o": np.array([10.0])})
        yield from ctx.scatter("own", {c: {"v": np.array([float(c)])} for c in ctx.clients})
        uploads = yield from ctx.upload("echo", SumSpec("echo", (TensorSpec("v", (1,)),)))
        total = yield from ctx.secure_sum(SumSpec("total", (TensorSpec("x", (1,)),), clip_range=100.0))
        released = yield from ctx.release(total)
        return {"uploads": {c: float(u["v"][0]) for c, u in uploads.items()}, "total": float(released["x"][0]),
                "server_sees_sum": total.values is not None}

    def client(self, ctx: ClientContext):
        offset = (yield ctx.receive("offset"))["o"][0]
        own = (yield ctx.receive("own"))["v"][0]
        yield ctx.upload("echo", {"v": np.array([own])}, privacy=_halve)
        result = yield ctx.secure_sum("total", {"x": np.array([own + offset])}, releasable=True)
        assert result.values["x"][0] == pytest.approx(6.0 + 40.0, abs=result.error_bound)


@pytest.mark.parametrize("backend", list(Backend), ids=lambda b: b.value)
def test_every_collective_on_every_backend(backend):
    result = simulate(Toy(), SecureSumConfig(backend=backend))
    metrics = result.metrics
    assert metrics["uploads"] == {0: 0.0, 1: 0.5, 2: 1.0, 3: 1.5}  # the hook ran client-side
    assert metrics["total"] == pytest.approx(46.0, abs=1e-6)
    assert metrics["server_sees_sum"] is (backend is not Backend.CKKS)  # ckks: only a release shows it
    assert all(host.ended for host in result.hosts.values())


def test_a_request_the_plan_does_not_wait_for_is_refused():
    from secure_fedgraph.crypto.keys import IdentityKey

    identity = IdentityKey.generate()
    session = bytes(16)
    role = make_client(SecureSumConfig(backend=Backend.PLAIN), client_id=0, session=session, identity=identity, directory={0: identity.public_bytes})
    host = ClientHost(role=role, plan=Toy().client, context=ClientContext(0, 0))
    wrong = BroadcastRequest(Header(session, 0, 1, Stage.BROADCAST, SERVER), "own", (NamedTensor("v", np.zeros(1)),))
    with pytest.raises(ProtocolError, match="asked for receive 'own' but this client's plan waits for Receive\\(name='offset'\\)"):
        host.handle(wrong)
    right = BroadcastRequest(Header(session, 0, 2, Stage.BROADCAST, SERVER), "offset", (NamedTensor("o", np.zeros(1)),))
    host.handle(right)
    with pytest.raises(ProtocolError, match="not after step 2"):
        host.handle(right)  # a replay


def test_derived_seeds_differ_by_label_and_repeat_by_value():
    assert derive_seed(0, "client", 1) == derive_seed(0, "client", 1)
    assert len({derive_seed(0, "client", c) for c in range(100)} | {derive_seed(1, "client", 0)}) == 101


def test_fedavg_with_ckks_releases_error_sums_only_never_weights():
    """threat_model.md C-RELEASE: the server sees the validation and test error sums (released
    by the clients) and nothing else in the clear."""
    from secure_fedgraph.papers import FedAvgGRU
    from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
    from secure_fedgraph.protocol.transports import codec
    from secure_fedgraph.protocol.core.messages import UploadResponse

    config = FedAvgGRUConfig(rounds=2, sensors=4, hidden_size=8, max_windows=24, max_local_steps=1)
    result = simulate(FedAvgGRU(config), SecureSumConfig(backend=Backend.CKKS), record=True)
    released = {codec.decode(data).name for stage, _, data in result.received if isinstance(codec.decode(data), UploadResponse)}
    assert released == {"release:validation", "release:test"}
    assert result.metrics["test_rmse"] > 0


@dataclass(frozen=True)
class RetryConfig:
    clients: int = 5
    seed: int = 0


class Retry(Plan):
    """A streaming sum that may be abandoned; the plan then asks again with fresh inputs."""

    name = "retry"
    Config = RetryConfig
    clients_field = "clients"
    spec = SumSpec("s", (TensorSpec("x", (1,)),), clip_range=100.0, streaming=True)

    def client_ids(self):
        return list(range(self.config.clients))

    def server(self, ctx: ServerContext):
        from secure_fedgraph.errors import SumAbandoned

        yield from ctx.start_round(0)
        try:
            total = yield from ctx.secure_sum(self.spec)
        except SumAbandoned:
            total = yield from ctx.secure_sum(self.spec)  # the plan's own choice: a second sum of fresh inputs
        return {"total": float(total.values["x"][0]), "contributors": sorted(total.contributors)}

    def client(self, ctx: ClientContext):
        from secure_fedgraph.errors import SumAbandoned

        try:
            yield ctx.secure_sum("s", {"x": np.array([ctx.client_id + 1.0])})
        except SumAbandoned:
            yield ctx.secure_sum("s", {"x": np.array([ctx.client_id + 1.5])})  # fresh: never the abandoned contribution


@pytest.mark.parametrize("backend", [Backend.PLAIN, Backend.MASK], ids=lambda b: b.value)  # the server reads this sum: not ckks
def test_an_abandoned_sum_reaches_every_plan_which_may_go_on_with_fresh_inputs(backend):
    """Client 4 vanishes during a streaming sum: the sum is abandoned, each client's plan is
    told at its yield (SumAbandoned) and supplies fresh inputs, the server's plan asks again,
    and the metrics count the abandoned sum."""
    def vanish(direction, stage, client, data):
        return None if (direction, stage, client) == ("up", Stage.INPUT, 4) else data

    result = simulate(Retry(), SecureSumConfig(backend=backend), intercept=vanish)
    assert result.metrics["contributors"] == [0, 1, 2, 3]
    assert result.metrics["total"] == pytest.approx(1.5 + 2.5 + 3.5 + 4.5, abs=1e-5)
    assert result.metrics["abandoned_sums"] == {"s": 1}
    assert all(result.hosts[c].finished for c in range(4))


def test_released_values_are_rounded_to_the_stated_precision():
    """threat_model.md C-RELEASE: a client releases a decrypted sum rounded to the power of two at
    or above its error bound, so the decryption noise (what CKKS key-recovery attacks read)
    stays with the client."""
    from secure_fedgraph.protocol.engine.contexts import rounded_to_bound

    x = np.array([1.2345678, -0.5, 3e-7])
    rounded = rounded_to_bound(x, 1e-3)  # quantum 2^-9
    assert np.all(rounded * 2**9 == np.round(rounded * 2**9)) and np.max(np.abs(rounded - x)) <= 2**-10
    assert np.array_equal(rounded_to_bound(x, 0.0), x)
    result = simulate(Toy(), SecureSumConfig(backend=Backend.CKKS))
    params = SecureSumConfig().ckks.params
    bound = params.error_bound(4, clip_range=100.0, scale_bits=params.scale_for(n_clients=4, clip_range=100.0))
    quantum = 2.0 ** np.ceil(np.log2(bound))
    total = result.metrics["total"]
    assert total / quantum == round(total / quantum)  # on the grid: the decryption noise below it stays with the client
    assert abs(total - 46.0) <= bound + quantum


class _ThreadProbe(Plan):
    """Records the torch thread count its code sees on both sides."""

    name = "thread-probe"
    Config = ToyConfig
    clients_field = "clients"
    seen: list[int] = []

    def client_ids(self):
        return list(range(self.config.clients))

    def server(self, ctx: ServerContext):
        import torch

        self.seen.append(torch.get_num_threads())
        yield from ctx.broadcast("go", {"x": np.zeros(1)})
        self.seen.append(torch.get_num_threads())
        return {}

    def client(self, ctx: ClientContext):
        import torch

        self.seen.append(torch.get_num_threads())
        yield ctx.receive("go")
        self.seen.append(torch.get_num_threads())


def test_the_hosts_not_the_plans_hold_one_torch_thread():
    """Plan code runs on one torch thread whoever calls it (BLAS results can depend on the
    count; in one process many clients share the thread), and the caller's count is restored."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _ThreadProbe.seen.clear()
        simulate(_ThreadProbe(ToyConfig(clients=3)), SecureSumConfig(backend=Backend.PLAIN))
        assert _ThreadProbe.seen and set(_ThreadProbe.seen) == {1}
        assert len(_ThreadProbe.seen) == 2 + 3 * 2
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


class Released(Toy):
    """Three DP uploads naming the rows they release, then the clients' DP-SGD reports."""

    def server(self, ctx: ServerContext):
        from secure_fedgraph.privacy import RowRelease

        yield from ctx.start_round(0)
        for rows in ([0, 1], [2, 3], [1, 2]):
            yield from ctx.upload("h", SumSpec("h", (TensorSpec("h", (2, 1)),)), releases=RowRelease("train", rows, 1.0))
        yield from ctx.collect_privacy()
        return {"most_released": [ctx.accountant.most_released(c) for c in ctx.clients],
                "dpsgd_steps": [[s.steps for s in ctx.accountant.steps_of(c)] for c in ctx.clients]}

    def client(self, ctx: ClientContext):
        from secure_fedgraph.privacy import Steps

        for _ in range(3):
            yield ctx.upload("h", {"h": np.zeros((2, 1))})
        ctx.accountant.record_steps(ctx.client_id, Steps(1.5, 0.25, 4 + ctx.client_id))  # what a DP-SGD optimiser records
        yield ctx.report_privacy()


def test_the_collectives_feed_the_accountant_a_plan_only_names_the_rows():
    """upload records the rows it received per client (rows 1 and 2 went out twice), never
    for a client whose upload did not arrive; collect_privacy records each client's DP-SGD steps."""
    result = simulate(Released(), SecureSumConfig(backend=Backend.PLAIN), drop={Stage.UPLOAD: [3]})
    assert result.metrics["most_released"] == [2, 2, 2, 0]
    assert result.metrics["dpsgd_steps"] == [[4], [5], [6], []]