"""The server's checkpoint file (server/checkpoint.py): round trip, atomic writes, refusing a
checkpoint of another run, and ``server --resume`` usage errors before torch is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from secure_fedgraph import __version__
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.server import checkpoint
from secure_fedgraph.server.checkpoint import Checkpoint
from tests.helpers import TORCH_PROBE

RUN = {"plan": {"plan": "fedavg-vector", "config": {"clients": 3, "length": 4, "rounds": 3, "seed": 0, "fresh_keys_every": 1}},
       "secure_sum": {"backend": "mask", "min_survivors": None}, "version": __version__}


def _checkpoint(round_index: int = 1, **state) -> Checkpoint:
    state = state or {"history": [{"round": 0, "clients": 3, "loss": 0.25}],
                      "model": np.arange(4, dtype=np.float32) / 3, "nested": {"counts": np.array([[1, 2], [3, 4]]), "scale": np.float64(0.5)}}
    return Checkpoint(run=RUN, round=round_index, state=state, context={"live": [0, 1, 2], "dropped": {}, "abandoned": {}, "elements": {},
                                                                          "seconds": {}},
                      run_clients=[0, 1, 2], plan_clients=3, round_log=[{"round": 0, "bytes_up": 10}])


def test_a_checkpoint_round_trips_json_values_and_arrays_exactly(tmp_path):
    saved = _checkpoint()
    checkpoint.save(tmp_path, saved)
    loaded = checkpoint.load(tmp_path, run=json.loads(json.dumps(RUN)))
    assert (loaded.round, loaded.run_clients, loaded.plan_clients, loaded.context, loaded.round_log) == (1, [0, 1, 2], 3, saved.context,
                                                                                                        saved.round_log)
    assert loaded.state["history"] == saved.state["history"]
    assert loaded.state["model"].dtype == np.float32 and loaded.state["model"].tobytes() == saved.state["model"].tobytes()
    assert np.array_equal(loaded.state["nested"]["counts"], saved.state["nested"]["counts"]) and loaded.state["nested"]["scale"] == 0.5
    document = json.loads((tmp_path / "checkpoint.json").read_text())  # readable: what a user looks at
    assert document["round"] == 1 and document["state"]["model"] == {"__array__": "a0"}
    assert [p.name for p in tmp_path.glob("checkpoint-*.npz")] == [document["tensors"]["file"]]


def test_a_newer_checkpoint_replaces_the_older_and_its_arrays(tmp_path):
    checkpoint.save(tmp_path, _checkpoint(1))
    checkpoint.save(tmp_path, _checkpoint(2, history=[], model=np.ones(4, dtype=np.float32)))
    assert checkpoint.load(tmp_path, run=RUN).round == 2
    assert len(list(tmp_path.glob("checkpoint-*.npz"))) == 1 and not list(tmp_path.glob(".*.tmp"))  # no temporary file left
    checkpoint.save(tmp_path, _checkpoint(3, history=[]))  # a state without arrays leaves no array file
    assert not list(tmp_path.glob("checkpoint-*.npz"))
    checkpoint.save(tmp_path, _checkpoint(4))
    checkpoint.clear(tmp_path)  # a new run in the folder: nothing of the earlier one to resume
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("failing", ["arrays", "json"])
def test_a_crash_while_writing_leaves_the_previous_checkpoint_whole(tmp_path, monkeypatch, failing):
    """The arrays go under a new name and the JSON through a temporary file and a rename: a
    crash before either rename leaves the last checkpoint as it was, readable."""
    checkpoint.save(tmp_path, _checkpoint(1))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_replace = os.replace

    def crash(src, dst):
        if str(dst).endswith(".npz" if failing == "arrays" else ".json"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save(tmp_path, _checkpoint(2, history=[], model=np.full(4, 7, dtype=np.float32)))
    monkeypatch.undo()
    loaded = checkpoint.load(tmp_path, run=RUN)
    assert loaded.round == 1 and loaded.state["model"].tobytes() == _checkpoint().state["model"].tobytes()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda run: run["plan"].update(plan="local-gru"), "plan.plan is 'fedavg-vector' there, 'local-gru' here"),
        (lambda run: run["plan"]["config"].update(seed=1), "plan.config.seed is 0 there, 1 here"),
        (lambda run: run["secure_sum"].update(backend="ckks"), "secure_sum.backend is 'mask' there, 'ckks' here"),
        (lambda run: run.update(version="9.9"), f"version is {__version__!r} there, '9.9' here"),
    ],
    ids=["plan", "seed", "backend", "version"],
)
def test_a_checkpoint_of_another_run_is_refused_saying_what_differs(tmp_path, change, message):
    checkpoint.save(tmp_path, _checkpoint())
    other = json.loads(json.dumps(RUN))
    change(other)
    with pytest.raises(ConfigError, match="the checkpoint is of another run") as refused:
        checkpoint.load(tmp_path, run=other)
    assert message in str(refused.value)


def test_missing_altered_foreign_format_and_finished_checkpoints_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint.json there"):
        checkpoint.read(tmp_path)
    checkpoint.save(tmp_path, _checkpoint())
    arrays = next(tmp_path.glob("checkpoint-*.npz"))
    blob = bytearray(arrays.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # one flipped byte
    arrays.write_bytes(bytes(blob))
    with pytest.raises(ConfigError, match="does not match the SHA-256"):
        checkpoint.load(tmp_path, run=RUN)
    document = json.loads((tmp_path / "checkpoint.json").read_text())
    (tmp_path / "checkpoint.json").write_text(json.dumps({**document, "format": 99}))
    with pytest.raises(ConfigError, match="format 99; this secure-fedgraph reads format 1"):
        checkpoint.read(tmp_path)
    (tmp_path / "checkpoint.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable checkpoint"):
        checkpoint.read(tmp_path)
    (tmp_path / "checkpoint.json").write_text(json.dumps({**document, "run_clients": "all", "round": -1}))
    with pytest.raises(ConfigError, match=r"not a checkpoint this secure-fedgraph can read \(round, run_clients missing or malformed\)"):
        checkpoint.read(tmp_path)
    checkpoint.save(tmp_path, _checkpoint(2, history=[]))
    checkpoint.finish(tmp_path)
    with pytest.raises(ConfigError, match="that run finished; nothing to resume"):
        checkpoint.read(tmp_path)


def test_a_checkpoint_holds_json_and_arrays_only():
    with pytest.raises(TypeError, match="JSON values and numpy arrays, not object"):
        checkpoint.save("/nonexistent", _checkpoint(history=[object()]))


# --- server --resume on the command line: one line, exit 2, before torch --------------------


@pytest.fixture
def run_folder(tmp_path):
    """A checkpoint of a fedavg-gru run of 3 clients with rounds=4."""
    run = {"plan": {"plan": "fedavg-gru", "config": {"rounds": 4, "sensors": 3, "hidden_size": 8, "local_epochs": 1, "max_local_steps": None,
                                                     "batch_size": 128, "lr": 0.001, "max_windows": None, "seed": 0}},
           "secure_sum": {"backend": "mask"}, "version": __version__}
    checkpoint.save(tmp_path / "run", Checkpoint(run=run, round=2, state={"history": []}, context={"live": [0, 1, 2]}, run_clients=[0, 1, 2],
                                                 plan_clients=3))
    return tmp_path / "run"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--resume", "{tmp}/none"], "--resume {tmp}/none: no checkpoint.json there"),
        (["--plan", "cnfgnn", "--resume", "{run}"], "plan cnfgnn cannot be resumed: its server's Graph Network"),
        (["--plan", "fedstgd", "--resume", "{run}"], "plan fedstgd cannot be resumed: each client's model, node embeddings"),
        (["--plan", "local-gru", "--resume", "{run}"], "the checkpoint is of plan fedavg-gru, not --plan local-gru"),
        (["--resume", "{run}", "--set", "rounds=5"], "--set rounds is 4 in the run, 5 here"),
        (["--resume", "{run}", "--clients", "5"], "--clients is 3 in the run, 5 here"),
        (["--resume", "{run}", "--out", "{tmp}/elsewhere"], "name different folders"),
        (["--resume", "{old}"], "the checkpoint was written by secure-fedgraph 0.0.1, this is"),
        (["--plan", "fedavg-gru", "--out", "{tmp}/o", "--crash-at", "nap@1"], "--crash-at must be STAGE[@ROUND][:N]"),
        (["--out", "{tmp}/o"], "server: --plan is required (unless --resume RUN continues a run)"),
    ],
)
def test_resume_usage_errors_are_one_line_before_torch(argv, message, keys, tmp_path, run_folder):
    old = json.loads((run_folder / "checkpoint.json").read_text())
    old["run"]["version"] = "0.0.1"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "checkpoint.json").write_text(json.dumps(old))
    values = {"tmp": tmp_path, "run": run_folder, "old": tmp_path / "old"}
    args = ["server", "--bind", "127.0.0.1:0", "--certs", str(keys), *(a.format(**values) for a in argv)]
    done = subprocess.run([sys.executable, "-P", "-c", TORCH_PROBE, *args], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert message.format(**values) in done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr


def test_resume_refuses_secure_sum_options_that_are_not_the_runs(keys, run_folder, capsys):
    """The checkpoint names the run's secure-sum configuration; options given again must be it."""
    from secure_fedgraph.cli import main
    from secure_fedgraph.protocol.sum_backends import SecureSumConfig
    from secure_fedgraph.protocol.sum_backends.config import config_to_dict

    document = json.loads((run_folder / "checkpoint.json").read_text())
    document["run"]["secure_sum"] = config_to_dict(SecureSumConfig())
    (run_folder / "checkpoint.json").write_text(json.dumps(document))
    status = main(["server", "--bind", "127.0.0.1:0", "--certs", str(keys), "--resume", str(run_folder), "--backend", "ckks"])
    assert status == 2
    assert "the secure-sum options differ from the run's (backend is 'mask' there, 'ckks' here" in capsys.readouterr().err
