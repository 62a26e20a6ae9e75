"""nFedGNN (issue 15): the plan's rounds are the split model's training computed directly (per-user
W_i and their Adams, the Laplacian term, the FedAvg'ed option), the server receives latents only,
and DP noise goes on every h_i before it leaves, accounted per user."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.papers.nfedgnn import NFedGNN, NFedGNNConfig, initial_user_weight
from secure_fedgraph.privacy import USER_FEATURES, rdp_epsilon
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import tensors_of
from secure_fedgraph.protocol.sum_backends.config import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.training.node_classification import laplacian_penalty, normalise_rows
from tests.helpers import PLANETOID_DIR, defence_stops, needs_planetoid

pytestmark = needs_planetoid
PLAIN = SecureSumConfig(backend=Backend.PLAIN)


def _run(backend=Backend.PLAIN, **options):
    config = NFedGNNConfig(**{"users": 160, "rounds": 2, **options})
    return simulate(NFedGNN(config), SecureSumConfig(backend=backend), data_dir=PLANETOID_DIR, record=True)


def _reference_losses(plan: NFedGNN) -> list[float]:
    """The same training written as one model: every user's W_i a slice of one (N, F, d) tensor
    under one torch Adam (Adam is elementwise, so that is N separate Adams), dropout off. The
    users' decay is AdamW's, applied only where their gradient is non-zero (node_user.Adam
    ``decoupled_where_touched``); the server's Adam is torch's own."""
    c = plan.config
    graph = plan.load_server_data(PLANETOID_DIR)
    x = torch.stack([torch.as_tensor(plan.load_client_data(i, PLANETOID_DIR)) for i in range(graph.nodes)])
    w = torch.nn.Parameter(torch.as_tensor(initial_user_weight(c.seed, graph.features, c.latent_size)).expand(graph.nodes, -1, -1).clone())
    users = torch.optim.Adam([w], lr=c.users_lr)
    model = plan.server_model(graph)
    server = torch.optim.Adam(model.parameters(), lr=c.model_lr, weight_decay=c.weight_decay)
    losses = []
    for _ in range(c.rounds):
        h = torch.einsum("nf,nfd->nd", x, w.detach()).requires_grad_()
        loss = F.cross_entropy(model.train()(h, graph.edge_index)[graph.train_mask], graph.y[graph.train_mask])
        loss = loss + c.laplacian * laplacian_penalty(h, graph.edge_index)
        server.zero_grad()
        loss.backward()
        server.step()
        grad = torch.einsum("nf,nd->nfd", x, h.grad)  # user i's dL/dW_i = x_i^T dL/dh_i
        if c.user_weights == "fedsgd":  # every user steps on the sum of all users' gradients
            grad = grad.sum(0, keepdim=True).expand_as(grad)
        with torch.no_grad():  # AdamW's decoupled decay, only on the entries with a gradient
            w.mul_(torch.where(grad != 0, 1 - c.users_lr * c.weight_decay, 1.0))
        w.grad = grad
        users.step()
        if c.user_weights == "fedavg":
            with torch.no_grad():
                w.copy_(w.mean(0, keepdim=True).expand_as(w))
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize("model,user_weights,users", [("gcn", "own", 160), ("gat", "own", 150), ("gcn", "fedavg", 150), ("gcn", "fedsgd", 150)])
def test_rounds_equal_the_split_model_trained_directly(model, user_weights, users):
    config = NFedGNNConfig(users=users, rounds=3, model=model, user_weights=user_weights, dropout=0.0, laplacian=0.01,
                           user_randomness="run_seed")  # every user starts from the seeded W^(0), as the reference does
    result = simulate(NFedGNN(config), PLAIN, data_dir=PLANETOID_DIR)
    got = [row["train_loss"] for row in result.metrics["rounds"]]
    np.testing.assert_allclose(got, _reference_losses(NFedGNN(config)), rtol=1e-5)
    assert len(set(got)) == len(got)  # it trains
    assert result.metrics["users"] == users and not result.dropped


def test_the_laplacian_term_is_the_sum_over_undirected_edges():
    h = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 2.0]])
    edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # {0,1} and {1,2}, both directions
    assert float(laplacian_penalty(h, edges)) == pytest.approx(1.0 + 4.0)
    laplacian = torch.diag(torch.tensor([1.0, 2.0, 1.0])) - torch.tensor([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=torch.float32)
    assert float(laplacian_penalty(h, edges)) == pytest.approx(float(torch.trace(h.T @ laplacian @ h)))  # eq. 6: tr(H^T L H)


def _uploads(result, name="h"):
    out = []
    for stage, client, data in result.received:
        if stage is Stage.UPLOAD:
            message = codec.decode(data)
            out.append((client, message.name, tensors_of(message.tensors)))
    return out


def test_the_server_receives_latents_only():
    result = _run(eval_every=1)
    plan = NFedGNN(NFedGNNConfig(users=160))
    features = [plan.load_client_data(i, PLANETOID_DIR) for i in range(160)]
    uploads = _uploads(result)
    assert uploads and {name for _, name, _ in uploads} == {"h", "h_eval"}
    for client, _, tensors in uploads:
        for value in tensors.values():
            assert value.shape == (1, 16)  # d values: a user's x_i (1,433) or W_i (1,433 x 16) cannot fit
    opening = [codec.decode(d) for s, _, d in result.received if s in (Stage.WELCOME, Stage.SESSION)]
    assert all(type(m).__name__ == "Ack" or (type(m).__name__ == "Joined" and len(m.nonce) == 32) for m in opening)  # fresh randomness only
    scatters = [s for s, _, _ in result.received if s not in (Stage.UPLOAD, Stage.SCATTER, Stage.END, Stage.WELCOME, Stage.SESSION)]
    assert scatters == []  # per-user W_i: no other collective carries anything of a user
    assert all(np.count_nonzero(x) > 1 for x in features[:5])


def test_dp_noise_is_applied_before_upload_and_accounted():
    sigma, clip = 1.0, 0.5
    plain, noisy = _run(), _run(dp_sigma=sigma, dp_clip=clip)
    privacy = noisy.metrics["privacy"]
    releases = 2 * 2 + 1  # each round h and h_eval, then the final h_eval
    assert set(privacy["releases_per_client"].values()) == {releases}
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(sigma / 2, 1.0, releases)], 1e-5))  # replace-one: sensitivity 2 x clip
    assert privacy["unit"] == USER_FEATURES.description
    values = np.concatenate([t["h"] for _, name, t in _uploads(noisy) if name == "h"]).astype(np.float64)
    noise, rows = (sigma * clip) ** 2, clip**2 / values.shape[-1]
    slack = 6 * np.sqrt(2 / values.size) * (noise + rows)
    assert noise - slack <= np.mean(values**2) <= noise + rows + slack
    assert "privacy" not in plain.metrics


def _named_by_their_first_latent(result, users: int = 160) -> int:
    """The matching attack: the server holds the set of feature vectors but not whose is whose,
    and computes each one's x W^(0) with the W^(0) it derives from the run seed; a user's first
    evaluation latent names its owner when it lies nearest to its own candidate."""
    plan = NFedGNN(NFedGNNConfig(users=users))
    candidates = np.stack([plan.load_client_data(i, PLANETOID_DIR) for i in range(users)]) @ initial_user_weight(0, 1433, 16)
    first = {c: t["h_eval"][0] for c, name, t in _uploads(result) if name == "h" and "h_eval" in t}
    return sum(int(np.argmin(np.linalg.norm(candidates - h, axis=1)) == c) for c, h in first.items())


def test_attack_matching_a_users_first_latent_to_candidate_feature_vectors(monkeypatch):
    """NF-DP, against a server that knows W^(0) (users drawing it from the run seed): without
    noise, x_i W^(0) names its owner; with DP it does not."""
    defence_stops(lambda: _named_by_their_first_latent(_run(rounds=1, dp_sigma=1.0, dp_clip=0.05, user_randomness="run_seed")) > 0.9 * 160,
                  monkeypatch, NFedGNN, "privacy_hook", lambda self, ctx: None)


def test_attack_a_server_inverting_first_latents_with_the_w0_it_derives_from_the_run_seed(monkeypatch):
    """NF-INIT, without any DP: each user draws its own W_i^(0) and dropout masks (fresh OS
    randomness), so the server's W^(0) from the run seed matches nobody's; with the users
    drawing them from the run seed instead, the server names nearly every user."""
    named = []

    def attack() -> bool:
        named.append(_named_by_their_first_latent(_run(rounds=1)))
        return named[-1] > 0.9 * 160

    defence_stops(attack, monkeypatch, NFedGNN, "seeded_randomness", property(lambda self: True))
    assert named[0] < 10  # about one in 160 by chance


def test_a_user_refuses_seeded_randomness_unless_it_opted_in(monkeypatch):
    """NF-INIT against a deviating server: it announces user_randomness=run_seed to clients that
    did not start with --allow-seeded-randomness. The Welcome check refuses it; without the
    check the users would draw W^(0) from the run seed and the server would name them."""
    announced = NFedGNN(NFedGNNConfig(users=160, rounds=1, user_randomness="run_seed"))
    policy = ClientPolicy(min_dp_sigma=0.0, backends=frozenset({Backend.PLAIN}))

    def attack() -> bool:
        policy.check_run(PLAIN, n_run=160, uploads_activations=True, dp_sigma=0.0, seeded_randomness=announced.seeded_randomness)
        return _named_by_their_first_latent(simulate(announced, PLAIN, data_dir=PLANETOID_DIR, record=True)) > 0.9 * 160

    with pytest.raises(ProtocolError, match=r"user_randomness=run_seed.*\(--allow-seeded-randomness\)"):
        policy.check_run(PLAIN, n_run=160, seeded_randomness=True)
    dataclasses.replace(policy, allow_seeded_randomness=True).check_run(PLAIN, n_run=160, seeded_randomness=True)  # the opt-in: accepted
    defence_stops(attack, monkeypatch, ClientPolicy, "check_run", lambda self, config, **kw: None)


def test_a_users_private_draws_differ_between_users_and_repeat_only_when_reproducible():
    """Private randomness: every user's W^(0) is its own (not the seeded one, not a neighbour's);
    two runs differ, unless the clients opted into reproducible randomness, which repeats them."""
    from secure_fedgraph.protocol.engine.contexts import ClientContext

    plan = NFedGNN(NFedGNNConfig(users=4))
    weights = [plan.initial_weight(plan.user_draws(ClientContext(c, 0)), 1433) for c in (0, 1, 0)]
    assert not np.allclose(weights[0], weights[1]) and not np.allclose(weights[0], weights[2])
    assert not np.allclose(weights[0], initial_user_weight(0, 1433, 16))
    bound = (6.0 / (1433 + 16)) ** 0.5
    assert np.abs(weights[0]).max() <= bound and abs(float(weights[0].std()) - bound / 3**0.5) < 0.01 * bound  # Glorot-uniform
    same = [plan.initial_weight(plan.user_draws(ClientContext(0, 0, reproducible_noise=True)), 1433) for _ in range(2)]
    np.testing.assert_array_equal(same[0], same[1])


def test_bad_options_are_refused_with_their_name():
    with pytest.raises(ConfigError, match="dataset must be one of"):
        NFedGNNConfig(dataset="Pubmed")
    with pytest.raises(ConfigError, match="users must be at most 2708"):
        NFedGNNConfig(users=5000)
    with pytest.raises(ConfigError, match="user_weights"):
        NFedGNNConfig(user_weights="shared")
    with pytest.raises(ConfigError, match="user_lr"):
        NFedGNNConfig(user_lr=0)
    with pytest.raises(ConfigError, match="user_randomness"):
        NFedGNNConfig(user_randomness="seeded")


def test_user_lr_steps_the_users_and_leaves_the_servers_rate():
    """``user_lr`` is the users' Adam rate alone: with dropout off, round 0's loss (the users'
    W^(0), the server's initial model) is the same, and round 1's differs by the users' step."""
    losses = {}
    for user_lr in (None, 0.01):
        config = NFedGNNConfig(users=40, rounds=2, dropout=0.0, user_randomness="run_seed", user_lr=user_lr)
        losses[user_lr] = [row["train_loss"] for row in simulate(NFedGNN(config), PLAIN, data_dir=PLANETOID_DIR).metrics["rounds"]]
    assert losses[None][0] == losses[0.01][0] and losses[None][1] != losses[0.01][1]
    assert NFedGNNConfig(user_lr=0.01).users_lr == 0.01 and NFedGNNConfig().users_lr == NFedGNNConfig().model_lr == 0.1


def test_pubmed_names_its_missing_file():
    from secure_fedgraph.errors import DataNotFoundError

    with pytest.raises(DataNotFoundError, match="ind.pubmed.allx"):
        NFedGNN(NFedGNNConfig(dataset="PubMed", users=10)).load_server_data(PLANETOID_DIR)


def test_a_round_without_a_key_set_up_refuses_a_secure_sum():
    from secure_fedgraph.protocol.engine.contexts import ServerContext
    from secure_fedgraph.protocol.sum_backends.factory import make_server
    from secure_fedgraph.protocol.core.session import Sequencer
    from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec

    seq = Sequencer(b"s" * 16)
    ctx = ServerContext(sequencer=seq, role=make_server(PLAIN, session=b"s" * 16, directory={0: b"k" * 32, 1: b"l" * 32}, clients=[0, 1],
                                                              sequencer=seq), clients=[0, 1])
    list(ctx.start_round(0, keys=False))
    with pytest.raises(ProtocolError, match="without a key set-up"):
        next(ctx.secure_sum(SumSpec("w", (TensorSpec("w", (2,)),))))


def test_a_target_epsilon_calibrates_dp_sigma_on_the_planned_releases():
    plan = NFedGNN(NFedGNNConfig(users=160, rounds=3, eval_every=2))
    assert plan.planned_releases() == 3 + 2 + 1  # a latent per round, one more in rounds 0 and 2, one at the end
    calibrated = plan.calibrated(4.0)
    sigma = calibrated.config.dp_sigma
    assert rdp_epsilon([(sigma / 2, 1.0, 6)], 1e-5) <= 4.0 < rdp_epsilon([(sigma / 2 * 0.97, 1.0, 6)], 1e-5)
    with pytest.raises(ConfigError, match="calibrates dp_sigma"):
        plan.calibrated(4.0, option="dpsgd_sigma")
    with pytest.raises(ConfigError, match="leave it out"):
        calibrated.calibrated(4.0)


def test_fedsgd_users_drawing_their_own_w0_start_from_one_shared_glorot_scaled_sum(monkeypatch):
    """user_weights=fedsgd needs one W: with the users' own randomness (the default) it is the
    sum of their Glorot draws over sqrt(N), the same for every user and of Glorot's spread."""
    from secure_fedgraph.training.node_user import NodeUser

    loaded = []
    original = NodeUser.load_weight
    monkeypatch.setattr(NodeUser, "load_weight", lambda self, weight: (loaded.append(np.array(weight)), original(self, weight))[1])
    result = _run(users=120, rounds=2, user_weights="fedsgd")
    assert len(loaded) == 120 and all(np.array_equal(w, loaded[0]) for w in loaded)
    glorot_sd = (6.0 / (1433 + 16)) ** 0.5 / 3**0.5
    assert 0.9 * glorot_sd < float(loaded[0].std()) < 1.1 * glorot_sd
    assert [row["summed"] for row in result.metrics["rounds"]] == [120, 120]
    assert result.metrics["rounds"][1]["train_loss"] < result.metrics["rounds"][0]["train_loss"]
