"""``make fuzz``: fuzzing campaigns against a real server with honest clients running, printing
counts by outcome (see tests/fuzzing/campaign.py). Exit status 1 on any failure.

    python -m tests.fuzzing [--messages 10000] [--campaigns 10] [--honest 30] [--fuzzers 12] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzzing.campaign import CampaignConfig, run_campaigns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzzing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="junk first messages to send in all, spread over the campaigns (default 10000)")
    parser.add_argument("--campaigns", type=int, default=10, help="runs with the fuzzer (each also run without it; default 10)")
    parser.add_argument("--honest", type=int, default=30, help="honest clients per run, in one client process (default 30)")
    parser.add_argument("--fuzzers", type=int, default=12, help="fuzz identities per run, each attacking once in the run (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first campaign (default 0)")
    parser.add_argument("--keep", default=None, help="keep the runs' folders here (default: a temporary folder, deleted)")
    args = parser.parse_args(argv)
    if args.campaigns < 1 or args.messages < 0 or args.fuzzers < 1 or args.honest < 2:
        parser.error("--campaigns and --fuzzers must be at least 1, --honest at least 2, --messages at least 0")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="secure-fedgraph-fuzz-"))
    configs = [CampaignConfig(honest=args.honest, fuzzers=args.fuzzers, hello_probes=args.messages // args.campaigns, tls_probes=20,
                              seed=args.seed + i) for i in range(args.campaigns)]
    print(f"fuzz: {args.campaigns} campaigns of {args.honest} honest clients and {args.fuzzers} fuzz identities "
          f"(fedavg-vector, mask, secure defaults), {args.messages} junk first messages in all")
    started = time.monotonic()
    try:
        total = run_campaigns(configs, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'messages':>9}  outcome")
    for outcome, count in sorted(total.counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"{count:>9}  {outcome}")
    print(f"{sum(total.counts.values()):>9}  in all, {time.monotonic() - started:.0f} s")
    if total.failures:
        print(f"\n{len(total.failures)} FAILURES:", *total.failures, sep="\n  ")
        return 1
    print("\nno server crash, nothing invalid accepted, and every run's honest result equals the same run without the fuzzer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
