#!/usr/bin/env bash
# Numbers docs/papers/{cnfgnn,fedrel,fedstgd}.md derive from result files already in results/ (no
# training; a few seconds). Usage: results/paper-diffs-checks/run.sh   from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
nice -n 19 .venv/bin/python results/paper-diffs-checks/check.py | tee results/paper-diffs-checks/output.txt
