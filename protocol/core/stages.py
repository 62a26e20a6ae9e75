"""Every step a server can ask of a client: the secure-sum stages and the other collectives.

Values are the names used on the wire. The secure-sum backends' transition tables live in
:mod:`secure_fedgraph.protocol.sum_backends.transitions`; plans order the other collectives.
"""

from __future__ import annotations

import enum


class Stage(enum.Enum):
    # secure sum
    ADVERTISE = "advertise"  # clients publish signed round keys
    GRAPH = "graph"  # mask, sparse graph: clients reveal the nonces that seed the graph
    SHARE_KEYS = "share_keys"  # mask: clients seal Shamir shares to neighbours
    KEY_DEAL = "key_deal"  # ckks: the dealer makes the context, seals it to peers
    KEY_INSTALL = "key_install"  # ckks: peers open and install the secret context
    INPUT = "input"  # clients upload their (masked / encrypted / plain) input
    CONSISTENCY = "consistency"  # mask: survivors sign the survivor set
    PAIR_SEEDS = "pair_seeds"  # mask: survivors reveal this sum's pair seeds with neighbours that dropped after contributing earlier
    UNMASK = "unmask"  # mask: survivors reveal self-mask keys and dropped peers' key shares
    RECOVER = "recover"  # mask: survivors give self-mask seed shares of silent survivors
    DELIVER = "deliver"  # the aggregate (plain / ring sum / ciphertexts) goes to clients
    VERIFY = "verify"  # ckks: after an aggregate failed its check, each contributor's ciphertext is checked by another
    # the other collectives
    BROADCAST = "broadcast"  # the same tensors to every client
    SCATTER = "scatter"  # each client its own tensors
    UPLOAD = "upload"  # each client's own tensors to the server (privacy hook applied first)
    # session control
    WELCOME = "welcome"  # the run configuration and the participants' certificates; each client answers with a fresh nonce
    SESSION = "session"  # every client's nonce: the session id that the run's keys, labels and signatures are bound to
    END = "end"  # the run is over


SECURE_SUM_STAGES = frozenset(
    {
        Stage.ADVERTISE,
        Stage.GRAPH,
        Stage.SHARE_KEYS,
        Stage.KEY_DEAL,
        Stage.KEY_INSTALL,
        Stage.INPUT,
        Stage.CONSISTENCY,
        Stage.PAIR_SEEDS,
        Stage.UNMASK,
        Stage.RECOVER,
        Stage.DELIVER,
        Stage.VERIFY,
    }
)
