"""Backpropagation through cross-client sums, one client at a time.

A model split across clients computes S = sum_j c_j (its contributions) and uses S again.
Since dS/dc_j is the identity for every j, the exact gradient of the total loss sum_i L_i with
respect to client j's contribution is G = sum_i dL_i/dS: one more sum, of each client's
gradient with respect to S (../shared/DESIGN.md, "FedSTGD through secure sums, both ways").

:func:`forward` runs a model written as segments between sums (``segment(index, state,
summed) -> (state, contribution)``), cutting the autograd graph at every sum: the carried
state and the sum enter each segment as fresh leaves. :func:`backward` then walks the
segments in reverse. For each it backpropagates the gradients of that segment's outputs (the
next segment's leaf gradients, and G for its contribution), which leaves dL_i/dS on the sum's
leaf; that is sent to a second sum, whose result is G for the segment before.

Both are generators: what is to be summed goes to ``summed_by`` (a plan passes
``lambda tensors: ctx.secure_sum(name, tensors)``), whose return value is yielded, and the
answer sent back carries the sum in ``.values``. With ``summed_by=None`` a contribution is its
own sum and nothing is yielded (one party, or no inter-client dependency). ``exact=False`` is
the detached variant of FedGTP's socket deployment: G is taken as zero, and gradients reach a
client's contributions only through its own use of S. This module imports nothing of the
protocol: the plan decides what a sum is.

A segment may also use tensors computed once per batch from parameters and public inputs
(the ``constants``); every segment's backward keeps the graph, so their gradients add up.

Per-sample gradients (DP-SGD): after ``backward(..., keep=True)`` every cut's outputs have the
gradients the next segment gave their leaves, and every contribution has its G. The gradient of
``loss_b + sum over cuts of <outputs_b, leaf grad_b> + <contribution_b, G_b>`` is then sample b's
share of the parameters' gradient, when rows never mix (every tensor's first dimension is the
sample, as in FedSTGD's windows): :meth:`SumTape.per_sample_gradients`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

Segment = Callable[[int, dict[str, Tensor], dict[str, Tensor] | None], tuple[dict[str, Tensor], dict[str, Tensor] | None]]
SummedBy = Callable[[dict[str, np.ndarray]], Any] | None  # tensors -> the request to yield; its answer has .values
Sums = Generator[Any, Any, Tensor | None]


def _summed(summed_by: SummedBy, tensors: dict[str, np.ndarray]) -> Generator[Any, Any, Mapping[str, np.ndarray]]:
    """The sum of ``tensors`` over the clients: asked for through ``summed_by``, or the value
    itself when there is no one else to sum with."""
    if summed_by is None:
        return tensors
    return (yield summed_by(tensors)).values


@dataclass(eq=False)
class _Cut:
    inputs: dict[str, Tensor]  # the carried state, as leaves
    summed: dict[str, Tensor] | None  # the previous sum, as leaves
    outputs: dict[str, Tensor]
    contribution: dict[str, Tensor] | None


class SumTape:
    """One client's segments of one forward pass, kept for :meth:`backward`."""

    def __init__(self) -> None:
        self.cuts: list[_Cut] = []
        self.received: dict[int, dict[str, Tensor]] = {}  # backward(keep=True): G of each cut's contribution

    def forward(self, segment: Segment, n_sums: int, *, summed_by: SummedBy, grad: bool = True) -> Sums:
        """Run segments 0 .. n_sums, summing each contribution (float64 numpy) through
        ``summed_by``. Returns the last segment's ``prediction`` (attached to the graph with ``grad``).

        ``grad=False`` (evaluation) runs each segment under ``torch.no_grad`` and keeps no
        tape. The grad mode is set per segment, never held across a yield: the generator is
        suspended while other clients' code runs in the same thread."""
        self.cuts = []
        state: dict[str, Tensor] = {}
        summed: dict[str, Tensor] | None = None
        for index in range(n_sums + 1):
            inputs = {k: v.detach().requires_grad_(v.requires_grad) for k, v in state.items()}
            with torch.set_grad_enabled(grad):
                state, contribution = segment(index, inputs, summed)
            if grad:
                self.cuts.append(_Cut(inputs, summed, state, contribution))
            if index == n_sums:
                break
            total = yield from _summed(summed_by, {k: v.detach().double().numpy() for k, v in contribution.items()})
            summed = {k: torch.as_tensor(np.asarray(total[k]), dtype=v.dtype).requires_grad_(grad) for k, v in contribution.items()}
        return state["prediction"]

    def backward(self, loss: Tensor, *, summed_by: SummedBy, exact: bool = True, keep: bool = False) -> Sums:
        """Accumulate every parameter's gradient of this client's ``loss`` plus, with
        ``exact``, the other clients' losses through this client's contributions: dL/dS of
        each sum, last first, goes to ``summed_by``, whose G (the sum over clients) flows on.
        ``keep``: keep the tape for :meth:`per_sample_gradients`."""
        tensors, grads = [loss], [torch.ones_like(loss)]
        self.received = {}
        received: dict[str, Tensor] | None = None
        for index in reversed(range(len(self.cuts))):
            cut = self.cuts[index]
            if index < len(self.cuts) - 1:
                tensors, grads = [], []
                for name, leaf in self.cuts[index + 1].inputs.items():
                    if leaf.grad is not None:
                        tensors.append(cut.outputs[name])
                        grads.append(leaf.grad)
                if received is not None:
                    self.received[index] = received
                    for name, value in cut.contribution.items():
                        tensors.append(value)
                        grads.append(received[name])
            if tensors:
                torch.autograd.backward(tensors, grads, retain_graph=True)
            if cut.summed is None:
                continue
            gradient = {k: (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in cut.summed.items()}
            if exact:
                total = yield from _summed(summed_by, {k: v.double().numpy() for k, v in gradient.items()})
                received = {k: torch.as_tensor(np.asarray(total[k]), dtype=v.dtype) for k, v in gradient.items()}
            else:
                received = None
        if not keep:
            self.cuts = []
        return None

    def per_sample_gradients(self, losses: Tensor, parameters: list[Tensor]) -> list[Tensor]:
        """Each sample's share of the gradient :meth:`backward` (``keep=True``) accumulated, per
        parameter (samples, *shape); ``losses`` (samples,) add up to the loss it was given.

        One batched backward pass (``is_grads_batched``) of the surrogate in the module
        docstring; the rows of each term are the samples."""
        if not self.cuts:
            raise RuntimeError("per_sample_gradients needs backward(..., keep=True) first")
        terms = [losses]
        for index, cut in enumerate(self.cuts):
            if index + 1 < len(self.cuts):
                for name, leaf in self.cuts[index + 1].inputs.items():
                    if leaf.grad is not None:
                        terms.append((cut.outputs[name] * leaf.grad).flatten(1).sum(1))
            for name, value in (cut.contribution.items() if index in self.received else ()):
                terms.append((value * self.received[index][name]).flatten(1).sum(1))
        surrogate = torch.stack(terms).sum(0)
        eye = torch.eye(len(surrogate), dtype=surrogate.dtype)
        grads = torch.autograd.grad(surrogate, parameters, grad_outputs=eye, is_grads_batched=True, allow_unused=True)
        self.cuts, self.received = [], {}
        return [torch.zeros((len(surrogate), *p.shape), dtype=p.dtype) if g is None else g for p, g in zip(parameters, grads, strict=True)]

