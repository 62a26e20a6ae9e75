"""nFedGNN's split model is the centralised PyG model (issue 15, item 1): users computing
h_i = x_i W_i with copies of W_1 and the server running the rest give the same logits, the
same server-side gradients, and per-user gradients that add up to the centralised dL/dW_1."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from secure_fedgraph.models import GAT, GCN
from tests.helpers import PLANETOID_DIR, needs_planetoid


def _tiny_graph():
    """6 nodes, 8 features, an undirected path with a triangle, 3 classes."""
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(6, 8, generator=g) > 0.6).float()
    pairs = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (3, 5)]
    edge_index = torch.tensor([[a for a, b in pairs] + [b for a, b in pairs], [b for a, b in pairs] + [a for a, b in pairs]])
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    return x, edge_index, y, torch.tensor([True, True, False, True, False, False])


def _cora():
    from secure_fedgraph.data.planetoid import CitationGraph

    graph = CitationGraph.load("Cora", PLANETOID_DIR)
    return graph.x, graph.edge_index, graph.y, graph.train_mask


def _pair(kind: str, features: int, classes: int):
    """A centralised model and the server half of the split one with the same weights."""
    torch.manual_seed(1)
    if kind == "gcn":
        whole, split = GCN(features, 16, classes), GCN(features, 16, classes, split=True)
    else:
        whole, split = GAT(features, 16, classes, heads=8), GAT(features, 16, classes, heads=8, split=True)
    state = {k: v for k, v in whole.state_dict().items() if not k.startswith("conv1.lin.")}
    split.load_state_dict(state)  # every server parameter; conv1.lin's weight becomes the users' W_i
    return whole.eval(), split.eval()


def _check_equal(kind, x, edge_index, y, train_mask):
    whole, split = _pair(kind, x.shape[1], int(y.max()) + 1)
    loss_whole = F.cross_entropy(whole(x, edge_index)[train_mask], y[train_mask])
    loss_whole.backward()

    w = whole.user_weight()
    users = [w.clone().requires_grad_() for _ in range(x.shape[0])]  # W_i: each user's own copy
    latents = [x[i] @ users[i] for i in range(x.shape[0])]  # h_i = x_i W_i, on user i
    h = torch.stack(latents).detach().requires_grad_()  # what the server receives
    logits = split(h, edge_index)
    torch.testing.assert_close(logits, whole(x, edge_index), rtol=1e-5, atol=1e-6)
    F.cross_entropy(logits[train_mask], y[train_mask]).backward()
    for name, p in split.named_parameters():
        torch.testing.assert_close(p.grad, dict(whole.named_parameters())[name].grad, rtol=1e-5, atol=1e-7, msg=name)
    for i, latent in enumerate(latents):
        latent.backward(h.grad[i])  # the user steps with the server's dL/dh_i only
        torch.testing.assert_close(users[i].grad, torch.outer(x[i], h.grad[i]))
    total = torch.stack([u.grad for u in users]).sum(0)
    torch.testing.assert_close(total, whole.conv1.lin.weight.grad.T, rtol=1e-4, atol=1e-7)
    assert total.abs().sum() > 0


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_split_model_equals_centralised_pyg_on_a_tiny_graph(kind):
    _check_equal(kind, *_tiny_graph())


@needs_planetoid
@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_split_model_equals_centralised_pyg_on_cora(kind):
    x, edge_index, y, train_mask = _cora()
    whole, split = _pair(kind, x.shape[1], int(y.max()) + 1)
    loss_whole = F.cross_entropy(whole(x, edge_index)[train_mask], y[train_mask])
    loss_whole.backward()
    w = whole.user_weight().requires_grad_()
    h_users = x @ w  # all 2,708 users' x_i W_i at once (row i is user i's), checked per user on the tiny graph
    h = h_users.detach().requires_grad_()
    logits = split(h, edge_index)
    torch.testing.assert_close(logits, whole(x, edge_index), rtol=1e-4, atol=1e-5)
    F.cross_entropy(logits[train_mask], y[train_mask]).backward()
    for name, p in split.named_parameters():
        torch.testing.assert_close(p.grad, dict(whole.named_parameters())[name].grad, rtol=1e-4, atol=1e-6, msg=name)
    h_users.backward(h.grad)  # the sum over users of x_i^T dL/dh_i
    torch.testing.assert_close(w.grad, whole.conv1.lin.weight.grad.T, rtol=1e-4, atol=1e-6)


def test_the_split_model_holds_no_first_layer_weight():
    model = GCN(1433, 16, 7, split=True)
    assert repr(model) == "GCN(1433, 16, 7, dropout=0.5, split=True)"
    assert not any(name.startswith("conv1.lin") for name, _ in model.named_parameters())
    with pytest.raises(ValueError, match="its users do"):
        model.user_weight()
    assert repr(GAT(1433, 16, 7)) == "GAT(1433, 16, 7, heads=8, dropout=0.6, split=False)"
