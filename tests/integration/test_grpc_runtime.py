"""The gRPC runtime with real processes over real sockets: the same numbers as in one process,
mutual TLS, bad input, and a client process killed mid-run."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import threading
import time

import grpc
import pytest

from secure_fedgraph import __version__
from secure_fedgraph.audit import audit as audit_transcripts
from secure_fedgraph.crypto.pki import KeyDirectory, init_keys
from secure_fedgraph.papers import FedAvgGRU
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.session import ClientOpening
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.transports.batch import Frame
from secure_fedgraph.protocol.transports.grpc_client import ClientStream
from secure_fedgraph.protocol.transports.grpc_service import channel_options, server_options
from secure_fedgraph.protocol.transports.tls_mistakes import refuses_certificate
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import HZMETRO_DIR, PLANETOID_DIR, UEA_DIR, assert_no_readings, needs_hzmetro, needs_planetoid, needs_uea
from tests.helpers.grpc import mtls_channel

GRPC_LOG_LINE = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")  # gRPC C-core's own log lines (absl format)
TINY = ("hidden_size=8", "max_windows=40", "max_local_steps=2", "batch_size=16")


def _channel(run, client: int, keys: KeyDirectory | None = None, send_limit: int = 2**20) -> grpc.Channel:
    """Client ``client``'s channel to ``run`` (its certificate from ``keys``, default the run's)."""
    ca = KeyDirectory(run.keys)
    return mtls_channel(f"127.0.0.1:{run.port}", keys or ca, client, ca=ca, options=channel_options(2**20) + [("grpc.max_send_message_length", send_limit)])


@pytest.mark.parametrize("backend", ["mask", "plain", "ckks"])
def test_grpc_run_equals_the_in_process_run(start_server, backend):
    """Two client processes over gRPC give the same numbers as one process: bit for bit with
    mask and plain (exact integer sums), within the stated error with ckks."""
    run = start_server(clients=5, plan_options=("rounds=2", *TINY), backend=backend)
    clients = [run.client("0-2", "--backend", backend), run.client("3-4", "--backend", backend)]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    config = FedAvgGRUConfig(rounds=2, sensors=5, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16)
    local = simulate(FedAvgGRU(config), SecureSumConfig(backend=Backend(backend))).metrics
    assert metrics["clients_finished"] == 5 and metrics["dropped"] == {}
    over_grpc = [v for r in metrics["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [metrics["test_rmse"], metrics["test_mae"]]
    in_process = [v for r in local["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [local["test_rmse"], local["test_mae"]]
    if backend == "ckks":
        assert over_grpc == pytest.approx(in_process, rel=1e-5)
    else:
        assert over_grpc == in_process


def test_a_dpsgd_run_over_grpc_equals_the_in_process_run_when_the_clients_opt_into_reproducible_noise(start_server):
    """DP-SGD's samples and noise are each client's own: with --reproducible-dp-noise (derived
    from the run seed and the client's id, the same in every process) two client processes give
    the in-process numbers and budget bit for bit. (Without it the noise is fresh OS randomness:
    privacy/test_dpsgd.py::test_dpsgd_noise_is_the_clients_own_and_reproducible_only_on_request.)"""
    run = start_server(clients=4, plan_options=("rounds=2", *TINY, "dpsgd_sigma=1.1", "dpsgd_clip=0.5"))
    clients = [run.client(ids, "--reproducible-dp-noise") for ids in ("0-1", "2-3")]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    config = FedAvgGRUConfig(rounds=2, sensors=4, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16, dpsgd_sigma=1.1, dpsgd_clip=0.5)
    local = simulate(FedAvgGRU(config), SecureSumConfig(backend=Backend.MASK), reproducible_noise=True).metrics
    numbers = lambda m: [v for r in m["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [m["test_rmse"], m["test_mae"]]  # noqa: E731
    assert numbers(metrics) == numbers(local)
    assert metrics["privacy"]["dpsgd_steps_per_client"] == local["privacy"]["dpsgd_steps_per_client"] == {str(c): 4 for c in range(4)}
    assert metrics["privacy"]["epsilon_max"] == local["privacy"]["epsilon_max"] > 0


def _assert_transcript_has_no_readings_or_weights(path, plan) -> None:
    """What the server process recorded receiving: no tensor holds a sensor's speed readings, and
    every input to a sum as large as the client model is masked ring elements (no weights)."""
    from secure_fedgraph.models import GRUSeq2Seq
    from secure_fedgraph.protocol.core.messages import UploadResponse, tensors_of
    from secure_fedgraph.protocol.sum_backends import messages as sm
    from secure_fedgraph.protocol.transports.transcript import RECEIVED, read_transcript

    theta = sum(p.numel() for p in GRUSeq2Seq(hidden_size=plan.config.hidden_size, graph_size=plan.config.hidden_size).parameters())
    speeds = [plan.load_client_data(i, None).x[split][..., 0] for i in plan.client_ids() for split in ("train", "val", "test")]
    uploads = weights = 0
    for record in read_transcript(path):
        if record.direction != RECEIVED:
            continue
        message = record.message()
        if isinstance(message, UploadResponse):
            uploads += 1
            assert_no_readings(message.name, tensors_of(message.tensors), speeds)
        elif isinstance(message, sm.InputResponse) and message.payload is not None and message.payload.size >= theta:
            weights += 1
            assert message.payload.dtype.kind == "u", "a FedAvg input reached the server unmasked"
    assert uploads and weights == 2 * 4  # every round's FedAvg input of every client was seen, masked


def test_cnfgnn_over_grpc_equals_the_in_process_run(start_server):
    """CNFGNN's whole round structure (secure FedAvg, h_c uploads, per-batch h_G scatters and
    gradient uploads, secure error sums) across processes gives the in-process numbers bit for
    bit, and the server counts its wire bytes per phase."""
    from secure_fedgraph.papers import CNFGNN
    from secure_fedgraph.papers.cnfgnn import CNFGNNConfig

    options = dict(rounds=2, hidden_size=8, gn_hidden=16, gn_update=8, max_windows=30, batch_size=16, server_batch_size=12)
    run = start_server(clients=4, plan="cnfgnn", plan_options=tuple(f"{k}={v}" for k, v in options.items()), extra=("--transcript",))
    no_dp = ("--min-dp-sigma", "0")  # the paper's split learning without noise: an explicit opt-in on every client
    recorded = ("--transcript", str(run.out / "clients"), "--audit")
    clients = [run.client("0-1", *no_dp, *recorded), run.client("2-3", *no_dp, *recorded)]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    plan = CNFGNN(CNFGNNConfig(sensors=4, **options))
    _assert_transcript_has_no_readings_or_weights(run.out / "transcript.bin", plan)
    # every party's transcript, audited: the server's and the four clients' (their inputs and clean uploads as ground truth)
    report = audit_transcripts(run.out, sorted((run.out / "clients").glob("client-*.bin")), attacks=False)
    assert report.passed and report.run["client_transcripts"] == 4, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert {c: report.finding(c).verdict.value for c in ("SL-NORAW", "M-SUM", "M-NOPLAIN")} == dict.fromkeys(("SL-NORAW", "M-SUM", "M-NOPLAIN"), "PASS")
    local = simulate(plan, SecureSumConfig(backend=Backend.MASK)).metrics
    numbers = lambda m: [v for r in m["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [m["test_rmse"], m["test_mae"]]  # noqa: E731
    assert numbers(metrics) == numbers(local)
    assert metrics["elements_by_phase"] == local["elements_by_phase"]
    assert set(metrics["bytes_up_by_phase"]) >= {"set-up", "fedavg", "split learning", "evaluation"}  # "other": the welcome and the end
    assert metrics["bytes_up_by_phase"]["split learning"] >= 4 * metrics["elements_by_phase"]["split learning"]["up"]
    assert all("split learning" in row["bytes_down_by_phase"] for row in metrics["round_log"])


@needs_hzmetro
def test_fedstgd_over_grpc_equals_the_in_process_run(start_server):
    """FedSTGD's 32 secure sums per training batch (P/Q forward, their gradients backward), the
    secure FedAvg and the error sums, across three client processes, give the in-process numbers
    bit for bit (the mask backend's sums are exact in the ring)."""
    from secure_fedgraph.papers import FedSTGD
    from secure_fedgraph.papers.fedstgd import FedSTGDConfig

    options = dict(rounds=1, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16)
    run = start_server(clients=3, plan="fedstgd", plan_options=tuple(f"{k}={v}" for k, v in options.items()))
    clients = [run.client(ids, "--data-dir", str(HZMETRO_DIR)) for ids in ("0", "1", "2")]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    local = simulate(FedSTGD(FedSTGDConfig(clients=3, **options)), SecureSumConfig(backend=Backend.MASK), data_dir=HZMETRO_DIR).metrics
    numbers = lambda m: [v for r in m["rounds"] for v in (r["rmse"], r["mae"], r["mape"])] + [m["test_rmse"], m["test_mae"], m["test_mape"]]  # noqa: E731
    assert numbers(metrics) == numbers(local)
    assert metrics["cost"] == local["cost"] and metrics["cost"]["secure_sums_per_batch"] == 32
    assert metrics["elements_by_phase"] == local["elements_by_phase"]
    assert metrics["bytes_up_by_phase"]["training"] >= 8 * metrics["elements_by_phase"]["training"]["up"]


@needs_uea
def test_fedrel_over_grpc_equals_the_in_process_run(start_server):
    """FedRel's rounds (normalisation, the VAE's FedAvg, the distribution and relevance sums,
    the released confusion matrices) across two client processes give the in-process numbers
    bit for bit, and every input the server process recorded is masked ring elements."""
    from secure_fedgraph.papers import FedRel
    from secure_fedgraph.papers.fedrel import FedRelConfig
    from secure_fedgraph.protocol.sum_backends import messages as sm
    from secure_fedgraph.protocol.transports.transcript import RECEIVED, read_transcript

    options = dict(rounds=2, local_steps=2, vae_rounds=1, vae_local_steps=1, features=8, hidden=8)
    run = start_server(clients=3, plan="fedrel", plan_options=tuple(f"{k}={v}" for k, v in options.items()), extra=("--transcript",))
    clients = [run.client(ids, "--data-dir", str(UEA_DIR)) for ids in ("0", "1-2")]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    local = simulate(FedRel(FedRelConfig(clients=3, **options)), SecureSumConfig(backend=Backend.MASK), data_dir=UEA_DIR).metrics
    assert metrics["clients_finished"] == 3 and metrics["dropped"] == {}
    assert metrics["rounds"] == local["rounds"] and metrics["cost"] == local["cost"]
    assert metrics["elements_by_phase"] == local["elements_by_phase"]
    inputs = [m for m in (r.message() for r in read_transcript(run.out / "transcript.bin") if r.direction == RECEIVED)
              if isinstance(m, sm.InputResponse) and m.payload is not None]
    assert len(inputs) >= 3 * (1 + 1 + 2 * 2)  # normalisation, VAE, and per round the distribution and relevance sums
    assert all(m.payload.dtype.kind == "u" for m in inputs)


def test_mtls_refuses_strangers_and_impostors_and_keeps_serving(start_server, tmp_path):
    run = start_server(clients=4, plan_options=("rounds=1", *TINY), keys_for=5)
    # 1. a certificate from another CA: the TLS handshake fails
    stranger = init_keys(tmp_path / "stranger", clients=1)
    with _channel(run, 0, keys=stranger) as channel:
        stream = ClientStream(channel, timeout_s=10)
        stream.hello([0], __version__)
        with pytest.raises(grpc.RpcError) as refused:
            next(iter(stream))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # 2. a valid certificate whose Hello claims another client's id
    with _channel(run, 0) as channel:
        stream = ClientStream(channel, timeout_s=10)
        stream.hello([1], __version__)
        with pytest.raises(grpc.RpcError) as impostor:
            next(iter(stream))
        assert impostor.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "this certificate is for client 0, but the Hello claims 1" in impostor.value.details()
    # 3. a valid certificate of a client that is not part of this run
    with _channel(run, 4) as channel:
        stream = ClientStream(channel, timeout_s=10)
        stream.hello([4], __version__)
        with pytest.raises(grpc.RpcError) as outsider:
            next(iter(stream))
        assert "client 4 is not part of this run" in outsider.value.details()
    # ... and the server still runs the plan with its real clients
    honest = run.client("0-3")
    output, metrics = run.finish()
    assert honest.wait(timeout=60) == 0
    assert metrics["clients_finished"] == 4
    assert "refused a connection: certificate of client 0, Hello claims 1" in " ".join(metrics["events"])


def test_a_client_expecting_another_server_name_stops_at_once_naming_the_option(start_server):
    """``client --server-name`` that the server's certificate does not carry: gRPC's handshake
    fails ("Hostname Verification Check failed"), which no retry mends, so the process stops at
    once, long before its --connect-timeout, with one line naming the option and the names the
    certificate carries (the test keys': localhost and 127.0.0.1), exit 2. The server, which saw
    only handshakes, runs on with the clients that name it rightly."""
    run = start_server(clients=3, plan="fedavg-vector", plan_options=("length=50", "rounds=1"))
    began = time.monotonic()
    wrong = run.client("0-2", "--server-name", "fl.example.org", "--connect-timeout", "300")
    output = wrong.communicate(timeout=60)[0]
    said = [line for line in output.splitlines() if line.strip() and not GRPC_LOG_LINE.match(line)]  # gRPC's own C-core log aside
    assert wrong.returncode == 2 and time.monotonic() - began < 60, output
    assert said == [f"secure-fedgraph: error: --server-name fl.example.org: the certificate of the server at 127.0.0.1:{run.port} names "
                    "localhost, 127.0.0.1, not fl.example.org; pass one of those as --server-name (or issue the server a certificate "
                    "naming fl.example.org: keys init --server-name / --server-ip)"], output
    right = run.client("0-2")
    _, metrics = run.finish()
    assert right.wait(timeout=60) == 0 and metrics["clients_finished"] == 3


def test_a_client_with_another_runs_keys_stops_at_once_saying_which_file_to_fix(start_server, tmp_path):
    """Keys from another ``keys init``: a client certificate the run's CA did not issue, which the
    server refuses after the handshake (gRPC says only "Socket closed", as of a server going
    away), or a ca.pem that did not sign the server's certificate. Neither mends by waiting, so
    the process stops at once, long before its --connect-timeout, with one line naming what to
    fix, exit 2 (tls_mistakes.py). The look behind the first tells a refusal from a server that
    accepts the certificate (it speaks first); the server runs on with the right clients."""
    run = start_server(clients=3, plan="fedavg-vector", plan_options=("length=50", "rounds=1"))
    other = init_keys(tmp_path / "other", clients=3).root
    mixed = tmp_path / "mixed"  # the run's ca.pem, the other run's client certificates (no CA key: no host certificate)
    (mixed / "clients").mkdir(parents=True)
    shutil.copy(run.keys / "ca.pem", mixed / "ca.pem")
    for file in (other / "clients").iterdir():
        shutil.copy(file, mixed / "clients" / file.name)
    address, ca = f"127.0.0.1:{run.port}", (run.keys / "ca.pem").read_bytes()
    began = time.monotonic()
    wrong = {certs: run.local.client("0-2", "--connect-timeout", "300", certs=certs) for certs in (mixed, other)}  # both at once
    for certs, expected in [
        (mixed, rf"the server at {address} ends connections under this client's certificate \({mixed}/clients/client-[0-2]\.pem\) "
                r"right after the TLS handshake: it does not accept it \(not issued by the run's CA, or expired\); take the certificate "
                r"from the run's keys folder \(keys init, or keys host for a host certificate\)"),
        (other, rf"the certificate of the server at {address} fails the check against the CA this client trusts \({other}/ca\.pem: "
                r"certificate signature failure\): the keys "
                r"folder \(--certs\) must hold the run's ca\.pem, from the folder `keys init` wrote for the server, or --server names "
                r"another server"),
    ]:
        output = wrong[certs].communicate(timeout=60)[0]
        said = [line for line in output.splitlines() if line.strip() and not GRPC_LOG_LINE.match(line)]  # gRPC's own C-core log aside
        assert wrong[certs].returncode == 2 and time.monotonic() - began < 60, output
        assert len(said) == 1 and re.fullmatch("secure-fedgraph: error: " + expected, said[0]), output
    assert refuses_certificate(address, ca=ca, cert=mixed / "clients" / "client-0.pem", key=mixed / "clients" / "client-0.key")
    assert not refuses_certificate(address, ca=ca, cert=run.keys / "clients" / "client-0.pem", key=run.keys / "clients" / "client-0.key")
    right = run.client("0-2")
    _, metrics = run.finish()
    assert right.wait(timeout=60) == 0 and metrics["clients_finished"] == 3


def _rogue(run, client: int, answer):
    """A client that joins properly, then answers its first real request with ``answer(data)``."""
    errors = []

    def go():
        with _channel(run, client, send_limit=64 * 2**20) as channel:  # the server, not this client, must enforce the limit
            stream = ClientStream(channel, timeout_s=60)
            stream.hello([client], __version__)
            try:
                for i, frames in enumerate(stream.batches()):
                    data = frames[0].body
                    request = codec.decode(data)
                    if i == 0:  # the Welcome: a fresh nonce, as an honest client answers it
                        opening = ClientOpening(client, request)
                        stream.send_frames([Frame(client, codec.encode(opening.joined(request)))])
                    elif i == 1:  # the session request
                        opening.agree(request)
                        stream.send_frames([Frame(client, codec.encode(opening.ack(request)))])
                    elif i == 2:
                        stream.send_frames([Frame(client, answer(data))])  # then keep reading: the server's verdict ends the stream
            except grpc.RpcError as exc:
                errors.append(exc)
            finally:
                stream.close()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize(
    "answer,server_says,client_hears",
    [
        (lambda data: b"\x0a\xff\xffnot a protobuf envelope", "rejected client 4 at advertise: malformed message", None),
        (lambda data: b"\x00" * (2 * 2**20), "1048576 byte limit", grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
    ids=["malformed", "oversized"],
)
def test_malformed_and_oversized_messages_are_rejected_and_the_run_goes_on(start_server, answer, server_says, client_hears):
    run = start_server(clients=5, plan_options=("rounds=1", *TINY), extra=("--max-message-mb", "1"))
    rogue, errors = _rogue(run, 4, answer)
    honest = run.client("0-3")
    _, metrics = run.finish()
    assert honest.wait(timeout=60) == 0
    assert metrics["clients_finished"] == 4
    assert set(metrics["dropped"]) == {"4"}
    assert server_says in " ".join(metrics["events"])
    if client_hears is not None:
        rogue.join(timeout=30)
        assert errors and errors[0].code() == client_hears and "larger than max" in errors[0].details(), errors


def test_a_client_refusing_streaming_leaves_a_run_that_allows_it(start_server):
    """Client policy (threat_model.md M-STREAM): ``client --no-streaming`` refuses a mask run that
    allows the streaming variant, saying how to fix it, and the others go on."""
    run = start_server(clients=4, plan_options=("rounds=1", *TINY))
    others, careful = run.client("0-2"), run.client("3", "--no-streaming")
    output, metrics = run.finish()
    assert others.wait(timeout=60) == 0
    careful_output = careful.communicate(timeout=60)[0]
    assert careful.returncode != 0
    assert ("the server's mask backend allows the streaming variant (start it with --no-streaming); this client's policy refuses it "
            "(--no-streaming)") in careful_output
    assert metrics["clients_finished"] == 3 and set(metrics["dropped"]) == {"3"}


def test_a_client_refusing_streaming_joins_a_server_started_without_it(start_server):
    run = start_server(clients=3, plan_options=("rounds=1", *TINY), extra=("--no-streaming",))
    joined = run.client("0-2", "--no-streaming")
    _, metrics = run.finish()
    assert joined.wait(timeout=60) == 0 and metrics["clients_finished"] == 3
    assert metrics["secure_sum"]["mask"]["streaming"] is False


def test_a_killed_client_process_does_not_stop_the_run(start_server):
    """Kill the process hosting clients 4-5 in the middle of the run (mask backend: its clients
    drop mid-round and their masks are recovered or the round is re-keyed)."""
    run = start_server(clients=6, plan_options=("rounds=4", "hidden_size=8", "max_windows=200", "max_local_steps=20", "batch_size=8"))
    survivors = run.client("0-3")
    victim = run.client("4-5")
    lines = []
    for line in run.server.stdout:
        lines.append(line)
        if line.startswith("round 0:"):
            victim.send_signal(signal.SIGKILL)
            break
    output, metrics = run.finish()
    assert survivors.wait(timeout=60) == 0, survivors.stdout.read()
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert metrics["clients_finished"] == 4
    assert set(metrics["dropped"]) == {"4", "5"}
    assert len(metrics["rounds"]) == 4 and metrics["rounds"][-1]["clients"] == 4
    assert metrics["test_rmse"] > 0


def test_a_contributor_killed_later_in_its_key_epoch_costs_no_rekey_over_grpc(start_server):
    """fedavg-gru over processes, the process of client 5 killed at the second sum of round 0,
    after it contributed to the first: its neighbours reveal their pair seeds of that sum with it
    and the key epoch goes on (no re-key), with the numbers of the same crash in one process."""
    from secure_fedgraph.protocol.core.crash_point import CrashPoint
    from secure_fedgraph.protocol.core.stages import Stage

    run = start_server(clients=6, plan_options=("rounds=1", *TINY))
    survivors = run.client("0-4")
    victim = run.client("5", "--crash-at", "input@0:2")
    _, metrics = run.finish()
    assert survivors.wait(timeout=60) == 0, survivors.stdout.read()
    assert victim.wait(timeout=60) == -signal.SIGKILL
    config = FedAvgGRUConfig(rounds=1, sensors=6, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16)
    replay = simulate(FedAvgGRU(config), SecureSumConfig(backend=Backend.MASK), drop={CrashPoint(Stage.INPUT, 0, 2): {5}})
    local = replay.metrics
    for events in (metrics["events"], replay.server_log):
        assert any("pair_seeds: 5 answered" in e for e in events) and not any("re-keying" in e for e in events), events
    assert set(metrics["dropped"]) == {"5"} and metrics["elements_by_phase"] == local["elements_by_phase"]
    numbers = lambda m: [v for r in m["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [m["test_rmse"], m["test_mae"]]  # noqa: E731
    assert numbers(metrics) == numbers(local)


def test_a_killed_sensor_process_does_not_stop_a_cnfgnn_run(start_server):
    """CNFGNN over processes: the process hosting sensors 4-5 is killed after the first round
    (mid-run: its sensors are waited for in FedAvg, uploads and gradient rounds after it);
    the GN keeps training on the other sensors (their nodes get zero h_c) and the run ends with
    test metrics from the survivors."""
    options = ("rounds=4", "hidden_size=8", "gn_hidden=16", "gn_update=8", "max_windows=60", "batch_size=16", "server_batch_size=12")
    run = start_server(clients=6, plan="cnfgnn", plan_options=options)
    survivors = run.client("0-3", "--min-dp-sigma", "0")
    victim = run.client("4-5", "--min-dp-sigma", "0")
    for line in run.server.stdout:
        if line.startswith("round 0:"):
            victim.send_signal(signal.SIGKILL)
            break
    else:
        pytest.fail("the server never reported its first round")
    _, metrics = run.finish()
    assert survivors.wait(timeout=60) == 0, survivors.stdout.read()
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert set(metrics["dropped"]) == {"4", "5"} and metrics["clients_finished"] == 4
    assert len(metrics["rounds"]) == 4 and metrics["rounds"][-1]["clients"] == 4 and metrics["test_rmse"] > 0


def test_keys_init_output_loads(tmp_path):
    from secure_fedgraph.cli import main
    from secure_fedgraph.crypto.pki import client_of, load_identity

    assert main(["keys", "init", str(tmp_path / "k"), "--clients", "3", "--server-name", "fl.example.org"]) == 0
    keys = KeyDirectory(tmp_path / "k")
    ca = keys.ca.read_bytes()
    for client in range(3):
        cert_client, identity = client_of(keys.client_cert(client).read_bytes(), ca)
        assert cert_client == client and load_identity(keys.identity_key(client)).public_bytes == identity
        assert os.stat(keys.client_key(client)).st_mode & 0o777 == 0o600
        assert os.stat(keys.identity_key(client)).st_mode & 0o777 == 0o600
    context = ssl.create_default_context(cafile=str(keys.ca))  # the server certificate validates against the CA
    context.load_verify_locations(cafile=str(keys.ca))
    from cryptography import x509

    server = x509.load_pem_x509_certificate(keys.server_cert.read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fl.example.org" in names.get_values_for_type(x509.DNSName)
    assert socket.inet_aton("127.0.0.1") and str(names.get_values_for_type(x509.IPAddress)[0]) == "127.0.0.1"


def test_a_client_keeps_its_own_dp_minimum_whatever_the_server_announces(start_server):
    """Client policy (threat_model.md M-POLICY): CNFGNN uploads hidden states; a server announcing
    no DP noise is refused by a client with the default --min-dp-sigma, which says which option
    governs it, while clients that opted out (--min-dp-sigma 0) run on."""
    options = ("rounds=1", "hidden_size=8", "gn_hidden=16", "gn_update=8", "max_windows=30", "batch_size=16", "server_batch_size=12")
    run = start_server(clients=5, plan="cnfgnn", plan_options=options)
    others, careful = run.client("0-3", "--min-dp-sigma", "0"), run.client("4")
    _, metrics = run.finish()
    assert others.wait(timeout=60) == 0
    careful_output = careful.communicate(timeout=60)[0]
    assert careful.returncode != 0
    assert "uploads activations with dp_sigma=0, below 1" in careful_output and "(--min-dp-sigma)" in careful_output
    assert metrics["clients_finished"] == 4 and set(metrics["dropped"]) == {"4"}


@needs_planetoid
@pytest.mark.parametrize("user_weights,backend", [("own", "mask"), ("fedavg", "mask")])
def test_nfedgnn_over_grpc_equals_the_in_process_run(start_server, user_weights, backend):
    """nFedGNN's users (one per node) hosted by two client processes: their latents up, their
    gradients down, and (FedAvg'ed variant) the secure average of their W_i give the in-process
    numbers bit for bit; the per-user variant runs no key set-up at all. The users' private W^(0)
    and dropout masks come from the run seed here only because every client opted in."""
    from secure_fedgraph.papers import NFedGNN
    from secure_fedgraph.papers.nfedgnn import NFedGNNConfig

    options = dict(rounds=2, laplacian=0.01, user_weights=user_weights)
    data = ("--data-dir", str(PLANETOID_DIR))
    run = start_server(clients=12, plan="nfedgnn", backend=backend, plan_options=tuple(f"{k}={v}" for k, v in options.items()), extra=data)
    # no DP: an explicit opt-in on every client; the users' own W^(0) and masks from the run seed: the test-only opt-in
    clients = [run.client(ids, "--min-dp-sigma", "0", "--reproducible-randomness", *data) for ids in ("0-5", "6-11")]
    _, metrics = run.finish()
    for process in clients:
        assert process.wait(timeout=60) == 0, process.stdout.read()
    local = simulate(NFedGNN(NFedGNNConfig(users=12, **options)), SecureSumConfig(backend=Backend(backend)), data_dir=PLANETOID_DIR,
                     reproducible_noise=True).metrics
    numbers = lambda m: [(r["train_loss"], r["val_acc"]) for r in m["rounds"]] + [m["val_acc"]]  # noqa: E731
    assert numbers(metrics) == numbers(local)
    assert metrics["elements_by_phase"] == local["elements_by_phase"]
    assert ("fedavg" in metrics["elements_by_phase"]) == (user_weights == "fedavg")
    # one stream per process (a host certificate each), and a body shared by a host's users (the Welcome) sent once per stream
    assert metrics["streams"] == 2 and metrics["wire_bytes_down_total"] < metrics["bytes_down_total"]
    assert (metrics["key_setup"] in ({}, None)) == (user_weights == "own")

@needs_planetoid
def test_a_user_refuses_a_run_that_seeds_its_initial_weights_unless_it_opted_in(start_server):
    """threat_model.md NF-INIT over real processes: the server announces user_randomness=run_seed;
    users started without --allow-seeded-randomness refuse the Welcome naming the option, the
    ones that opted in run."""
    data = ("--data-dir", str(PLANETOID_DIR))
    run = start_server(clients=6, plan="nfedgnn", backend="mask", plan_options=("rounds=1", "user_randomness=run_seed"), extra=data)
    willing = run.client("0-3", "--min-dp-sigma", "0", "--allow-seeded-randomness", *data)
    careful = run.client("4-5", "--min-dp-sigma", "0", *data)
    _, metrics = run.finish()
    assert willing.wait(timeout=60) == 0
    careful_output = careful.communicate(timeout=60)[0]
    assert careful.returncode != 0
    assert "user_randomness=run_seed" in careful_output and "(--allow-seeded-randomness)" in careful_output
    assert metrics["clients_finished"] == 4 and set(metrics["dropped"]) == {"4", "5"}


def test_a_client_keeps_its_own_distributed_dp_floor_and_the_run_reports_epsilon(start_server):
    """threat_model.md DDP-FLOOR over real processes: fedavg-vector with distributed DP of
    multiplier 0.5; a client requiring 1 (--min-ddp-noise 1) refuses the Welcome naming the
    option, the others run on, and the server's metrics carry the run's epsilon."""
    run = start_server(clients=5, plan="fedavg-vector", plan_options=("length=200", "rounds=1", "ddp_noise=0.5"),
                       extra=("--join-timeout", "20"))  # the refusing client never joins: wait less for it
    others, careful = run.client("0-3"), run.client("4", "--min-ddp-noise", "1")
    _, metrics = run.finish()
    assert others.wait(timeout=60) == 0
    careful_output = careful.communicate(timeout=60)[0]
    assert careful.returncode != 0
    assert "sums its model with ddp_noise=0.5, which leaves 0.387 in a sum of the 3 of 5 clients" in careful_output
    assert "this client requires a noise multiplier of at least 1 in any sum of its model" in careful_output
    assert "(--min-ddp-noise)" in careful_output
    assert metrics["clients_finished"] == 4 and metrics["privacy"]["sums"][0]["contributors"] == 4
    assert metrics["privacy"]["epsilon_max"] > 0


def test_the_server_accepts_the_pings_of_its_clients_keepalive():
    """Clients ping a waiting connection every keepalive interval; a server that accepts pings
    without data less often (gRPC's default: every 5 minutes) answers with GOAWAY too_many_pings
    and cuts clients that joined and wait (seen with 1,000 nFedGNN users joining)."""
    client, server = dict(channel_options(2**20)), dict(server_options(2**20))
    assert server["grpc.http2.min_ping_interval_without_data_ms"] < client["grpc.keepalive_time_ms"]
    assert server["grpc.keepalive_time_ms"] == client["grpc.keepalive_time_ms"]
