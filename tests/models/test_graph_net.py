"""The server Graph Network's split computation equals the plain concatenate-then-MLP Graph
Network (PyG MetaLayer semantics) on the same parameters: outputs and gradients."""

from __future__ import annotations

import pytest
import torch

from secure_fedgraph.models import GraphNet
from secure_fedgraph.models.graph_net import reference_forward as reference


def _graph(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random directed graph with self-loops in which node n - 1 has no incoming edge (but sends some)."""
    g = torch.Generator().manual_seed(seed)
    adjacency = torch.rand(n, n, generator=g) < 0.4
    adjacency |= torch.eye(n, dtype=torch.bool)
    adjacency[:, n - 1] = False
    adjacency[n - 1, 0] = True
    edge_index = adjacency.nonzero().t().contiguous()
    return edge_index, torch.rand(edge_index.shape[1], generator=g) + 0.1


def _outputs_and_gradients(gn: GraphNet, forward, x, edge_index, edge_weight, grad):
    x, edge_weight = x.clone().requires_grad_(), edge_weight.clone().requires_grad_()
    gn.zero_grad(set_to_none=True)
    y = forward(gn, x, edge_index, edge_weight)
    y.backward(grad)
    return y.detach(), {"x": x.grad, "edge_weight": edge_weight.grad, **{k: p.grad for k, p in gn.named_parameters()}}


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    scale = expected.abs().max().item()
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5 * max(scale, 1e-6), msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize(("sizes", "layers", "nodes", "windows"), [
    ((8, 1, 16, 8, 5), 1, 6, 4),
    ((8, 1, 16, 8, 5), 2, 6, 4),
    ((8, 1, 16, 8, 5), 3, 6, 1),
    ((64, 1, 256, 128, 64), 2, 9, 3),
])
def test_split_computation_equals_concatenate_then_mlp(sizes, layers, nodes, windows):
    torch.manual_seed(layers)
    gn = GraphNet(*sizes, layers=layers)
    for p in gn.parameters():  # biases too: the split moves each bias to one place (receivers, in-degree)
        torch.nn.init.normal_(p, std=0.3)
    edge_index, edge_weight = _graph(nodes, seed=layers)
    x = torch.randn(nodes, windows, sizes[0])
    grad = torch.randn(nodes, windows, sizes[-1])
    y, grads = _outputs_and_gradients(gn, GraphNet.forward, x, edge_index, edge_weight, grad)
    y_ref, grads_ref = _outputs_and_gradients(gn, reference, x, edge_index, edge_weight, grad)
    assert y.abs().max() > 0.1
    _close(y, y_ref, "output")
    assert grads.keys() == grads_ref.keys()
    for name, expected in grads_ref.items():
        if expected is None:  # the last layer's global update reaches nothing, in either form
            assert grads[name] is None, name
        else:
            assert grads[name] is not None and expected.abs().max() > 0, name
            _close(grads[name], expected, f"gradient of {name}")


def test_no_edges_and_no_gradient():
    torch.manual_seed(0)
    gn = GraphNet(8, 1, 16, 8, 5, layers=2)
    x = torch.randn(3, 2, 8)
    edge_index, edge_weight = torch.zeros(2, 0, dtype=torch.long), torch.zeros(0)
    _close(gn(x, edge_index, edge_weight), reference(gn, x, edge_index, edge_weight), "output without edges")
    edge_index, edge_weight = _graph(5, seed=0)
    x = torch.randn(5, 4, 8)
    with torch.no_grad():
        _close(gn(x, edge_index, edge_weight), reference(gn, x, edge_index, edge_weight), "output under no_grad")


def test_parameters_keep_metalayer_names():
    """Checkpoints of the MetaLayer version load: same names and shapes."""
    state = GraphNet().state_dict()
    expected = [f"blocks.{i}.{m}_model.mlp.{j}.{t}" for i in range(2) for m in ("edge", "node", "global") for j in (0, 2, 4) for t in ("weight", "bias")]
    assert list(state) == expected + ["out.weight", "out.bias"]
    assert state["blocks.1.edge_model.mlp.0.weight"].shape == (256, 2 * 192 + 129 + 192)
