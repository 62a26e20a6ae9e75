"""Crash points (protocol/core/crash_point.py): what ``client --crash-at`` accepts, and the in-process
runner losing a client at the same request a real client process would die on."""

from __future__ import annotations

import re

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.core.messages import SERVER, Header
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.core.stages import Stage
from tests.helpers import make_inputs


@pytest.mark.parametrize(
    "text,point",
    [("consistency@1", CrashPoint(Stage.CONSISTENCY, 1)), ("share_keys", CrashPoint(Stage.SHARE_KEYS)), (" deliver@0 ", CrashPoint(Stage.DELIVER, 0)),
     ("input@0:2", CrashPoint(Stage.INPUT, 0, 2)), ("input:3", CrashPoint(Stage.INPUT, None, 3))],
)
def test_parse(text, point):
    assert CrashPoint.parse(text) == point
    assert CrashPoint.parse(str(point)) == point


@pytest.mark.parametrize(
    "text,message",
    [
        ("unmasked", "--crash-at must be STAGE[@ROUND][:N] with STAGE one of advertise, graph, share_keys"),
        ("Input@1", "got 'Input@1'"),
        ("input@", "--crash-at 'input@': ROUND must be a round number from 0 (e.g. input@1)"),
        ("input@-1", "ROUND must be a round number from 0"),
        ("input@1.5", "ROUND must be a round number from 0"),
        ("input@1:0", "N must be a count from 1"),
        ("input@1:x", "N must be a count from 1"),
    ],
)
def test_parse_refuses_with_one_line(text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        CrashPoint.parse(text)


def test_a_crash_point_is_checked_when_made():
    with pytest.raises(ConfigError, match="round must be a non-negative int"):
        CrashPoint(Stage.INPUT, -1)
    with pytest.raises(ConfigError, match="stage must be a Stage"):
        CrashPoint("input")  # type: ignore[arg-type]


def test_hits_its_stage_in_its_round_only():
    def header(stage: Stage, round_index: int) -> Header:
        return Header(b"\0" * 16, round_index, 7, stage, SERVER)

    point = CrashPoint(Stage.UNMASK, 1)
    assert point.hits(header(Stage.UNMASK, 1))
    assert not point.hits(header(Stage.UNMASK, 0)) and not point.hits(header(Stage.UNMASK, 2))
    assert not point.hits(header(Stage.CONSISTENCY, 1))
    assert CrashPoint(Stage.UNMASK).hits(header(Stage.UNMASK, 0))  # no round: the first round that has the stage


def test_the_in_process_runner_drops_a_client_at_its_crash_point_and_not_before():
    """Client 3 takes part in round 0's sum and is gone from round 1's input on (mask: its pairwise
    masks removed with its rebuilt mask key); client 5, scripted with a bare stage, is gone from
    the first input of the run."""
    config = SecureSumConfig(backend=Backend.MASK)
    session = local_session(config, range(7), drop={CrashPoint(Stage.INPUT, 1): {3}, Stage.INPUT: {5}})
    contributors = []
    for round_index in range(2):
        session.start_round()
        contributors.append(session.secure_sum("x", make_inputs(range(7), seed=round_index)).contributors)
    assert contributors == [frozenset({0, 1, 2, 3, 4, 6}), frozenset({0, 1, 2, 4, 6})]
    assert session.runner.dead == {3, 5}
