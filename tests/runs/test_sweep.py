"""``secure-fedgraph sweep`` on a tiny budget: every point is a real `run` (or `compare`)
process, and the three files hold what the points' metrics say."""

from __future__ import annotations

import csv
import json
import math

from secure_fedgraph.cli import main
from secure_fedgraph.privacy import USER_FEATURES
from secure_fedgraph.privacy.analysis.skellam import SkellamRelease, sensitivities, skellam_epsilon
from tests.helpers import HZMETRO_DIR, PLANETOID_DIR, needs_hzmetro, needs_planetoid

TINY = ("--rounds", "1", "--set", "sensors=3", "--set", "max_windows=24", "--set", "hidden_size=4", "--set", "max_local_steps=1",
        "--set", "batch_size=8")


def test_a_sweep_writes_its_csv_table_and_plot_from_the_runs_metrics(tmp_path):
    out = tmp_path / "sweep"
    assert main(["sweep", "fedavg-gru", "--sigmas", "0.5,4", "--jobs", "4", "--out", str(out), *TINY]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(r["kind"], r["sigma"]) for r in rows] == [("non-private", ""), ("centralised", ""), ("private", "0.5"), ("private", "4.0")]
    for row in rows:  # each row is its run's own metrics
        if row["kind"] == "centralised":
            assert float(row["value"]) == json.loads((out / "points" / "centralised-seed0" / "comparison.json").read_text())["rows"][0]["test_rmse"]
            continue
        metrics = json.loads((out / "points" / row["run"].rsplit("/", 1)[1] / "metrics.json").read_text())
        assert float(row["value"]) == metrics["test_rmse"]
        if row["kind"] == "private":
            assert float(row["epsilon"]) == metrics["privacy"]["epsilon_max"] and metrics["config"]["config"]["ddp_noise"] == float(row["sigma"])
            assert float(row["epsilon_prv"]) == metrics["privacy"]["accountants"]["prv"]["epsilon_max"]  # both accountants
        else:
            assert "privacy" not in metrics and metrics["config"]["config"]["ddp_noise"] == 0
    # the epsilon is the Skellam bound of one FedAvg sum over the 3 clients (ceil(3 x 0.9) = 3 expected)
    size = json.loads((out / "points" / "sigma-4-seed0" / "metrics.json").read_text())["elements_by_phase"]["fedavg"]["up"] // 3
    l1, l2 = sensitivities(l2_clip=1.0, precision_bits=20, dimension=size)
    assert math.isclose(float(rows[3]["epsilon"]), skellam_epsilon([SkellamRelease(l1, l2, (4 * 2**20) ** 2)], 1e-5))
    assert float(rows[2]["epsilon"]) > float(rows[3]["epsilon"])  # less noise, more epsilon
    table = (out / "sweep.md").read_text()
    assert "| 4 | " in table and "| 0.5 | " in table and "no noise (non-private)" in table and "centralised (gru-centralised)" in table
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_epsilon_sweep_calibrates_each_point_and_reports_the_multiplier_it_chose(tmp_path):
    """`sweep cnfgnn --epsilons E`: the run calibrates dp_sigma (run --target-epsilon) and the
    sweep's row carries that multiplier and an epsilon at most the target, close below it."""
    out = tmp_path / "sweep"
    tiny = ("--rounds", "1", "--set", "sensors=3", "--set", "max_windows=24", "--set", "hidden_size=4", "--set", "gn_hidden=8",
            "--set", "gn_update=4", "--set", "max_local_steps=1", "--set", "batch_size=8")
    assert main(["sweep", "cnfgnn", "--epsilons", "3", "--no-centralised", "--jobs", "2", "--out", str(out), *tiny]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(r["kind"], r["target_epsilon"]) for r in rows] == [("non-private", ""), ("private", "3.0")]
    metrics = json.loads((out / "points" / "epsilon-3-seed0" / "metrics.json").read_text())
    chosen = metrics["config"]["config"]["dp_sigma"]
    assert chosen > 0 and float(rows[1]["sigma"]) == chosen  # the multiplier the run's calibration chose
    assert 2.9 <= float(rows[1]["epsilon"]) <= 3.0 and float(rows[1]["epsilon"]) == metrics["privacy"]["epsilon_max"]
    table = (out / "sweep.md").read_text()
    assert "| target epsilon | noise multiplier (dp_sigma, calibrated) |" in table and f"| 3 | {chosen:.3f} | " in table


def test_a_sweep_with_attacks_audits_every_run_and_draws_the_attacks_against_epsilon(tmp_path):
    """`sweep cnfgnn --attacks`: the private and non-private runs write their transcripts, each is
    audited into its folder's audit/ (the leakage attacks beside their claims, at the run's own
    epsilon; the non-private run at none), and the figure draws them."""
    out = tmp_path / "sweep"
    tiny = ("--rounds", "1", "--set", "sensors=8", "--set", "max_windows=24", "--set", "hidden_size=4", "--set", "gn_hidden=8",
            "--set", "gn_update=4", "--set", "max_local_steps=1", "--set", "batch_size=8", "--set", "max_server_batches=1")
    assert main(["sweep", "cnfgnn", "--sigmas", "2", "--no-centralised", "--attacks", "--jobs", "2", "--out", str(out), *tiny]) == 0
    private, plain = out / "points" / "sigma-2-seed0", out / "points" / "non-private-seed0"
    for folder in (private, plain):
        assert (folder / "transcript.bin").exists() and sorted((folder / "clients").glob("client-*.bin"))
    report = json.loads((private / "audit" / "audit.json").read_text())
    attacks = {a["name"]: a for c in report["claims"] for a in c["attacks"]}
    assert {a["claim"] for a in attacks.values()} == {"DP-CLIENT", "DP-UNIT"}
    epsilon = json.loads((private / "metrics.json").read_text())["privacy"]["epsilon_max"]
    assert math.isclose(attacks["reconstruction of raw inputs from h_c,i"]["details"]["epsilon"], epsilon)
    plain_attacks = [a for c in json.loads((plain / "audit" / "audit.json").read_text())["claims"] for a in c["attacks"]]
    assert plain_attacks and all(math.isinf(float(a["details"].get("epsilon", "inf"))) for a in plain_attacks)  # no DP: drawn at "no DP"
    assert (out / "leakage-against-epsilon.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_planetoid
def test_an_nfedgnn_sweep_reads_test_accuracy_the_users_epsilon_and_draws_the_whole_graph_model(tmp_path):
    """`sweep nfedgnn --sigmas S`: the latents' noise (its registered privacy_option), test accuracy as the
    metric, epsilon per user's feature vector; its centralised reference is the PyG model on the
    whole graph (runs/node_centralised.py) for as many epochs as the sweep has rounds."""
    out = tmp_path / "sweep"
    assert main(["sweep", "nfedgnn", "--sigmas", "2", "--rounds", "1", "--set", "eval_every=2", "--set", "dp_clip=0.05", "--jobs", "2",
                 "--data-dir", str(PLANETOID_DIR), "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(r["kind"], r["metric"]) for r in rows] == [("non-private", "test_acc"), ("centralised", "test_acc"), ("private", "test_acc")]
    metrics = json.loads((out / "points" / "sigma-2-seed0" / "metrics.json").read_text())
    assert float(rows[2]["value"]) == metrics["test_acc"] and metrics["config"]["config"]["dp_sigma"] == 2
    assert metrics["privacy"]["unit"] == USER_FEATURES.description
    assert set(metrics["privacy"]["releases_per_client"].values()) == {3}  # round 0's h and h_eval, the final h_eval
    assert float(rows[2]["epsilon"]) == metrics["privacy"]["epsilon_max"] > 0
    centralised = json.loads((out / "points" / "centralised-seed0" / "metrics.json").read_text())
    assert float(rows[1]["value"]) == centralised["test_acc"] and centralised["dataset"] == "Cora"
    assert centralised["config"]["model"] == "gcn" and centralised["config"]["epochs"] == 1 and len(centralised["rounds"]) == 1
    assert "centralised (pyg-centralised)" in (out / "sweep.md").read_text()


def test_the_table_says_which_neighbouring_points_the_seeds_cannot_tell_apart():
    from pathlib import Path

    from secure_fedgraph.runs.sweep import SweepOptions, overlaps

    def row(kind, sigma, value):
        return {"kind": kind, "sigma": sigma, "target_epsilon": "", "value": value}

    rows = [row("private", 4.0, 0.20), row("private", 4.0, 0.30),  # 0.25 ± 0.071
            row("private", 2.0, 0.30), row("private", 2.0, 0.36),  # 0.33 ± 0.042: overlaps sigma 4
            row("private", 1.0, 0.60), row("private", 1.0, 0.62),  # 0.61 ± 0.014: apart from sigma 2
            row("non-private", "", 0.62), row("non-private", "", 0.64)]
    lines = overlaps(rows, SweepOptions(plan="nfedgnn", out=Path("unused"), sigmas=(4.0, 2.0, 1.0)))
    assert lines[0].startswith("- σ=4 and σ=2: overlap within their spread")
    assert lines[1].startswith("- σ=2 and σ=1: apart")
    assert lines[2].startswith("- σ=1 and no noise: overlap within their spread")
    assert lines[3] == "- the noisiest point and no noise: apart"
    flat = [row("private", 4.0, 0.5), row("private", 4.0, 0.7), row("non-private", "", 0.6), row("non-private", "", 0.62)]
    assert overlaps(flat, SweepOptions(plan="nfedgnn", out=Path("unused"), sigmas=(4.0,)))[-1].endswith("no trade-off shown at this budget")


@needs_hzmetro
def test_a_fedstgd_sweep_sets_the_sums_noise_and_dpsgd_to_each_sigma_and_reads_the_one_epsilon(tmp_path):
    """`sweep fedstgd --sigmas S`: every private point runs with ddp_noise = dpsgd_sigma = S (the
    plan's one guarantee: distributed DP in every sum of its windows and DP-SGD), the
    non-private reference with both 0; the row's epsilons are the run's (RDP and PRV)."""
    out = tmp_path / "sweep"
    tiny = ("--rounds", "1", "--set", "clients=3", "--set", "max_windows=8", "--set", "batch_size=8", "--set", "eval_batch_size=8",
            *(item for k in ("hidden", "node_dim", "time_dim") for item in ("--set", f"{k}=8")), "--set", "embed_rank=2")
    assert main(["sweep", "fedstgd", "--sigmas", "4", "--jobs", "2", "--data-dir", str(HZMETRO_DIR), "--out", str(out), *tiny]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [(r["kind"], r["sigma"], r["metric"]) for r in rows] == [("non-private", "", "test_rmse"), ("private", "4.0", "test_rmse")]
    private = json.loads((out / "points" / "sigma-4-seed0" / "metrics.json").read_text())
    plain = json.loads((out / "points" / "non-private-seed0" / "metrics.json").read_text())
    assert {k: private["config"]["config"][k] for k in ("ddp_noise", "dpsgd_sigma")} == {"ddp_noise": 4.0, "dpsgd_sigma": 4.0}
    assert {k: plain["config"]["config"][k] for k in ("ddp_noise", "dpsgd_sigma")} == {"ddp_noise": 0, "dpsgd_sigma": 0} and "privacy" not in plain
    assert float(rows[1]["epsilon"]) == private["privacy"]["epsilon_max"] and set(private["privacy"]["sums"]) == {
        "normalisation", "pq", "pq-grad", "validation", "test"}
    assert float(rows[1]["epsilon_prv"]) == private["privacy"]["accountants"]["prv"]["epsilon_max"]
    assert "| noise multiplier (ddp_noise = dpsgd_sigma) |" in (out / "sweep.md").read_text()
