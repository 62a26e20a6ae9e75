"""What one logical client keeps of its run across sessions, so that it goes on when the server
restarts (``server --resume``): the run it joined, the clients that run started with, its plan's
state at the latest round boundaries, and the contributor sets it signed (threat_model.md
R-RESUME).

A resumed server starts a new session at a checkpointed round: a new Welcome, new secure-sum
keys. The client checks that Welcome against its whole policy again, and also that it announces
the same run among clients the run started with, under the same identity keys; its floors and
colluder counts stay those of the run's first participants, so a restart cannot shrink the run to
lower them. Its plan then starts again from the state it kept for that round. Kept in memory
only: nothing secret (the secure-sum keys belong to one session and go with it), and a client
process that restarts holds none of it, so it cannot rejoin a resumed run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from secure_fedgraph.crypto.keys import SecretMaterial
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.privacy.accountant import PrivacyAccountant
from secure_fedgraph.protocol.engine.contexts import ClientContext, Resumed
from secure_fedgraph.protocol.sum_backends.policy import KeyEpochCount
from secure_fedgraph.protocol.sum_backends.roles import check_directory
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions


class RunMemory(SecretMaterial):
    """One logical client's memory of its run (its plan state is private: no repr, no pickle).

    Args:
        client_id: the logical client.
        run: the run's configuration as the first Welcome announced it (plan, secure sum, version).
        directory: client id -> identity key of every client the run started with.
        data: the client's own data, read once.
        resumable: whether the run's plan can resume; only then are signed contributions
            recorded (``signed`` is None otherwise: a plan that cannot resume is never asked again).
        reproducible_noise: the client's opt-in to DP noise derived from the run seed
            (:class:`~secure_fedgraph.protocol.engine.contexts.ClientContext`); off: fresh OS randomness.

    ``accountant`` is the client's own record of its DP releases, kept across sessions;
    ``key_epochs`` the mask key epochs it took part in (ClientPolicy.max_key_epochs caps them over
    the run, so a restart does not reset the count).
    """

    def __init__(self, *, client_id: int, run: Mapping[str, Any], directory: Mapping[int, bytes], data: Any, resumable: bool = True,
                 reproducible_noise: bool = False) -> None:
        self.client_id = client_id
        self.run = dict(run)
        self.directory = check_directory(directory)  # read-only: one shared by the clients of a process
        self.data = data
        self.signed = SignedContributions() if resumable else None
        self._boundaries: dict[int, Any] = {}
        self.reproducible_noise = reproducible_noise
        self.accountant = PrivacyAccountant()
        self.key_epochs = KeyEpochCount()

    @property
    def rounds(self) -> list[int]:
        """The round boundaries whose plan state this client holds."""
        return sorted(self._boundaries)

    def keep(self, round_index: int, state: Any) -> None:
        """The plan reached round ``round_index`` (its ``ctx.checkpoint``): keep a copy of its state."""
        self._boundaries[round_index] = copy.deepcopy(state)
        if self.signed is not None:
            self.signed.plan_round = round_index

    def server_at(self, round_index: int) -> None:
        """A request of round ``round_index`` was answered. The server saves its checkpoint of a
        round before the round's first request, so it can resume at no earlier boundary than the
        latest one at or below ``round_index``: older states (and signatures) are let go."""
        oldest = max((r for r in self._boundaries if r <= round_index), default=None)
        if oldest is None:
            return
        for r in [r for r in self._boundaries if r < oldest]:
            del self._boundaries[r]
        if self.signed is not None:
            self.signed.forget_before(oldest)

    def context(self, *, seed: int, resume_round: int | None) -> ClientContext:
        """The plan's context for a session: a new run, or a resumed one at ``resume_round``.

        Raises:
            ProtocolError: this client holds no plan state for ``resume_round``.
        """
        resumed = None
        if resume_round is not None:
            if resume_round not in self._boundaries:
                held = ", ".join(map(str, self.rounds)) or "none"
                raise ProtocolError(f"client {self.client_id}: the server resumes the run at round {resume_round}, but this client holds "
                                    f"its plan's state at rounds {held} only")
            resumed = Resumed(resume_round, copy.deepcopy(self._boundaries[resume_round]))
        return ClientContext(self.client_id, seed, self.data, resumed=resumed, on_checkpoint=self.keep, reproducible_noise=self.reproducible_noise,
                             accountant=self.accountant)

    def resumed_directory(self, run: Mapping[str, Any], announced: Mapping[int, bytes]) -> Mapping[int, bytes]:
        """Check a resumed Welcome (the run it announces, its participants' identity keys) and
        return the identity directory of the resumed session's secure-sum role.

        Raises:
            ProtocolError: another run, a participant the run did not start with, or another
                identity key for one of them.
        """
        if dict(run) != self.run:
            raise ProtocolError(f"client {self.client_id}: the resumed run is not the run this client took part in (its plan, plan "
                                "options, secure-sum configuration or version differ)")
        strangers = sorted(set(announced) - set(self.directory))
        if strangers:
            raise ProtocolError(f"client {self.client_id}: the resumed run lists clients {strangers[:8]} that the run did not start with")
        swapped = sorted(c for c, key in announced.items() if self.directory[c] != key)
        if swapped:
            raise ProtocolError(f"client {self.client_id}: the resumed run gives clients {swapped[:8]} other identity keys than the run "
                                "started with")
        return self.run_directory(announced)

    def run_directory(self, announced: Mapping[int, bytes]) -> Mapping[int, bytes]:
        """The directory a resumed session uses: every client the run started with, not only those
        the resumed server announces, so each floor and colluder count (a fraction of the run)
        stays what it was (threat_model.md R-RESUME)."""
        return self.directory
