"""The fuzzer, bounded (`make fuzz` runs at least 10,000 messages): a real server process and a
real honest client process, and a fuzzer speaking for eight more certificates of the run
(tests/fuzzing/campaign.py)."""

from __future__ import annotations

from tests.fuzzing.campaign import CampaignConfig, run_campaign

KINDS = ("wrong_session", "replay", "stage_skip", "oversized", "truncated", "generated", "duplicate", "early")


def test_a_fuzzed_run_crashes_nothing_accepts_nothing_invalid_and_ends_as_without_the_fuzzer(tmp_path):
    """A few hundred junk first messages (generated Envelopes of every type, mutated Hellos, raw
    bytes), certificates of another CA and of a client outside the run, second streams, and in
    the run one attack per fuzz identity: a wrong session, a replay, a stage skip, an oversized
    frame, a truncated answer, a generated Envelope, a duplicate and an early answer. Every probe
    is refused or gets its sender dropped at the step it attacked (the next one for an extra
    message); the server finishes, and the honest clients end with the same model, clients per
    round and dropped set as the same run in which the fuzz identities just leave at those steps."""
    config = CampaignConfig(honest=20, fuzzers=len(KINDS), hello_probes=250, tls_probes=10, kinds=KINDS, seed=1)
    result = run_campaign(config, tmp_path, say=lambda line: None)
    assert result.failures == []
    assert result.fuzzed and result.baseline and result.same_result()
    counts = result.counts
    assert sum(n for outcome, n in counts.items() if outcome.startswith("refused before joining: INVALID_ARGUMENT")) >= 200
    assert counts["refused at connection (another CA): UNAVAILABLE"] == 5
    assert counts["refused at connection (outside the run): PERMISSION_DENIED"] == 5
    attacked = {kind for outcome in counts for kind in KINDS if outcome.endswith(f": {kind}")}
    assert attacked == set(KINDS), f"attacks that never ran: {set(KINDS) - attacked}"
    assert set(result.dropped_at) == set(range(20, 20 + len(KINDS)))  # every fuzz identity was dropped ...
    assert set(result.fuzzed["dropped"]) == {str(c) for c in result.dropped_at}  # ... and the server says so
    assert result.fuzzed["clients_finished"] == 20
