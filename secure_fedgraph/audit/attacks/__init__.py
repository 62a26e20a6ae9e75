"""Attacks that measure what a run's uploads give away, each reported beside the claim it tests.

An attack is an honest-but-curious server's computation on its own transcript, plus a public
slice: clients whose raw data the attacker knows (a quarter of them, every fourth id: the
"held-out" sensors or nodes). It fits its model on the public slice and is scored on the other
clients, whose raw data the auditor reads from the data folder as ground truth (never for
fitting). References, fitted the same way (attacks/learner.py): a random guess (the public
slice's mean) and, with the clients' transcripts, the same attack on the clean activations
before the DP hook (the no-DP reference).

nFedGNN's latents h_i (attacks/nfedgnn.py): reconstruction of x_i and of its words, and link
inference. To add an attack (another plan's uploads): subclass :class:`Attack`, set
``name``, ``claim`` and ``plans``, implement ``run``, and list it in :data:`ATTACKS`.
"""

from __future__ import annotations

from secure_fedgraph.audit.attacks.base import Attack, AttackContext, public_clients
from secure_fedgraph.audit.attacks.cnfgnn import GradientLabelLeakage, HiddenStateReconstruction
from secure_fedgraph.audit.attacks.nfedgnn import LatentFeatureReconstruction, LatentLinkInference, LatentWordRecovery

ATTACKS: tuple[Attack, ...] = (HiddenStateReconstruction(), GradientLabelLeakage(), LatentFeatureReconstruction(), LatentWordRecovery(),
                               LatentLinkInference())

__all__ = ["ATTACKS", "Attack", "AttackContext", "public_clients"]
