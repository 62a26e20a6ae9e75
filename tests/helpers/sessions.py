"""In-process sessions and runs: the session tests open, and the transcripts a run writes."""

from __future__ import annotations

from pathlib import Path


def default_policy_session(*args, policy=None, **kwargs):
    """``local_session`` with every client on its default policy (``ClientPolicy()``, the one a
    user gets) unless the test passes another: attack tests run against the defaults, and a test
    about a weaker option says so (``policy=ClientPolicy.accepting(config)``)."""
    from secure_fedgraph.protocol.engine.local import local_session
    from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy

    return local_session(*args, policy=ClientPolicy() if policy is None else policy, **kwargs)


def client_transcripts(run: Path) -> list[Path]:
    """The clients' transcripts a run wrote to ``run``/clients, in client order."""
    return sorted((run / "clients").glob("client-*.bin"))
