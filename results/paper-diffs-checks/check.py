"""Numbers docs/papers/{cnfgnn,fedrel,fedstgd}.md derive from result files already in results/
(no training): each printed line names the files it reads.
Usage: .venv/bin/python results/paper-diffs-checks/check.py   from the repository root."""

import glob
import json
import statistics

import numpy as np


def load(path):
    with open(path) as f:
        return json.load(f)


print("== CNFGNN (results/compare-cnfgnn-e3/comparison.json, results/compare-cnfgnn-sl-e3/comparison.json)")
rows = {r["method"]: r for r in load("results/compare-cnfgnn-e3/comparison.json")["rows"]}
sl = load("results/compare-cnfgnn-sl-e3/comparison.json")["rows"][0]
gru = rows["gru-centralised"]["details"]["history"]
print("centralised GRU per epoch: steps", [h["steps"] for h in gru], "val RMSE", [round(h["val_rmse"], 3) for h in gru])
at = rows["cnfgnn"]["details"]
for name, d in (("AT + FedAvg", at), ("SL", sl["details"])):
    print(f"{name}: bytes up by phase (MB)", {k: round(v / 1e6, 1) for k, v in d["bytes_up_by_phase"].items()},
          "down", {k: round(v / 1e6, 1) for k, v in d["bytes_down_by_phase"].items()})
print("AT + FedAvg's FedAvg phase per round (MB up / down): %.1f / %.1f" % (at["bytes_up_by_phase"]["fedavg"] / 3e6, at["bytes_down_by_phase"]["fedavg"] / 3e6))
total_at = at["bytes_up_total"] + at["bytes_down_total"]
total_sl = sl["details"]["bytes_up_total"] + sl["details"]["bytes_down_total"]
print("SL against AT + FedAvg, bytes up and down together: %.1f%% fewer" % (100 * (1 - total_sl / total_at)))

from secure_fedgraph.data.metr_la import MetrLA  # noqa: E402

speed = MetrLA.load(None).speed  # the packaged week, which compare reads without --data-dir
test = speed[-round(0.2 * len(speed)):]
print(f"packaged METR-LA week: {speed.shape[0]} steps x {speed.shape[1]} sensors; test split {len(test)} steps "
      f"({len(test) / 288:.2f} days); zero readings: {int((test == 0).sum())} in the test split, {int((speed == 0).sum())} in the week")

print("\n== FedRel (results/fedrel/<dataset>/<run>/metrics.json)")
for m in ("centralised", "fedrel-k2", "fedavg-k2", "fedrel-k3", "fedavg-k3", "fedrel-k5", "fedavg-k5"):
    for s in range(3):
        r = load(glob.glob(f"results/fedrel/japanesevowels/{m}*-s{s}/metrics.json")[0])["rounds"]
        mean = lambda a, b: statistics.mean(x["acc"] for x in r if a <= x["round"] < b)  # noqa: E731
        print(f"japanesevowels {m}-s{s}: mean test accuracy rounds 50-99 {mean(50, 100):.3f}, rounds 100-149 {mean(100, 150):.3f}"
              + ("" if mean(100, 150) > mean(50, 100) else "  (not higher)"))
for m in ("fedrel-k5", "fedavg-k5"):
    tails = []
    for s in range(3):
        r = load(f"results/fedrel/basicmotions/{m}-s{s}/metrics.json")["rounds"]
        last = [x for x in r if x["round"] >= 100]
        tails.append((statistics.mean(x["acc"] for x in last), statistics.mean(x["f1"] for x in last), sum(x["acc"] < 1 for x in last)))
        print(f"basicmotions {m}-s{s}: rounds 100-149: mean accuracy {tails[-1][0]:.3f}, mean macro-F1 {tails[-1][1]:.3f}, "
              f"rounds below accuracy 1.000: {tails[-1][2]} of {len(last)}")
    print(f"basicmotions {m}: mean over seeds of the rounds-100-149 mean macro-F1 {statistics.mean(t[1] for t in tails):.3f} "
          f"(sd {statistics.stdev(t[1] for t in tails):.3f})")
for ds in ("japanesevowels", "basicmotions"):
    for s in range(3):
        a = load(f"results/fedrel/{ds}/fedrel-k2-s{s}/metrics.json")["rounds"]
        b = load(f"results/fedrel/{ds}/fedavg-k2-s{s}/metrics.json")["rounds"]
        first = next((x["round"] for x, y in zip(a, b) if (x["acc"], x["f1"]) != (y["acc"], y["f1"])), None)
        print(f"{ds} K=2 seed {s}: FedRel and FedAvg first differ in test accuracy or macro-F1 at round {first} (evaluated rounds: {len(a)})")

print("\n== FedSTGD (results/fedstgd-r25/*.json, results/fedstgd-r100/*.json)")
for f in sorted(glob.glob("results/fedstgd-r25/*.json")):
    v = [x["rmse"] for x in load(f)["rounds"]]
    print(f"{f}: val RMSE rounds 23, 24: {v[-2]:.2f} -> {v[-1]:.2f} ({100 * (v[-1] / v[-2] - 1):+.1f}%)")
for f in sorted(glob.glob("results/fedstgd-r100/*.json")):
    v = [x["rmse"] for x in load(f)["rounds"]]
    print(f"{f}: best val RMSE rounds 0-89 {min(v[:90]):.2f}, rounds 90-99 {min(v[90:]):.2f} ({100 * (min(v[90:]) / min(v[:90]) - 1):+.1f}%)")
r25 = {f.split("/")[-1][:-5]: load(f) for f in glob.glob("results/fedstgd-r25/*.json")}
for k in ("fedstgd", "detached", "wo-gnea", "wo-inter", "wo-all", "sync-batch"):
    d = r25[k]
    print(f"r25 {k}: test RMSE {d['test_rmse']:.2f} MAE {d['test_mae']:.2f} MAPE {d['test_mape']:.2f}; "
          f"elements up per client and batch {d['cost']['elements_up_per_client_per_batch']}; gradient_clip {d['config']['config']['gradient_clip']}")
c25, c100 = r25["centralised"]["test_rmse"], load("results/fedstgd-r100/centralised.json")["test_rmse"]
f100 = load("results/fedstgd-r100/fedstgd.json")["test_rmse"]
print(f"FedSTGD against centralised eq. 5: 25 rounds {100 * (r25['fedstgd']['test_rmse'] / c25 - 1):+.1f}%, 100 rounds {100 * (f100 / c100 - 1):+.1f}%")
print(f"paper, Table 3: w/o All,All against FedSTGD {100 * (1 - 39.61 / 62.57):.1f}% (RMSE), here {100 * (1 - r25['fedstgd']['test_rmse'] / r25['wo-all']['test_rmse']):.1f}% "
      f"(25 rounds), {100 * (1 - f100 / load('results/fedstgd-r100/wo-all.json')['test_rmse']):.1f}% (100 rounds)")
print("training batches per epoch: ours", r25["fedstgd"]["cost"]["training_batches"] // 25, "batches of 16;",
      "PVCGN's training split (../shared/data/hzmetro/SOURCE.md: 1,188 windows) would be", int(np.ceil(1188 / 16)))
