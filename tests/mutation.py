"""`make mutate`: mutation testing of the security checks with mutmut (a recipe, not part of `make test`).

A check that no test fails without is a check nobody knows works. mutmut
changes one thing at a time in the check modules (a comparison flipped, a condition negated, a
constant moved, a call's argument dropped) and runs the tests that reach the changed function;
a mutant no test fails on "survived". docs/mutation.md lists every survivor and why it
changes nothing a test could see.

mutmut mutates files under their own paths and imports them from ``mutants/``, while this
repository installs protocol/, server/ and clients/ under ``secure_fedgraph`` (pyproject's
package-dir). So the package is staged as installed, in ``build/mutate/secure_fedgraph`` with
``protocol/`` inside, next to a copy of the tests, and mutmut runs there. The tests it runs are
the in-process security tests (no gRPC: mutmut forks a process per mutant, and gRPC does not
survive a fork).

    python -m tests.mutation                      # every module in MODULES
    python -m tests.mutation --modules session    # a part of them (by MODULES key)
    python -m tests.mutation --report             # the kill rates of the last run, no new run
    python -m tests.mutation --retest --modules ckks   # the last run's survivors only, against today's tests
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "mutate"

# the check code: what a client or server verifies before it reveals, accepts or releases anything
MODULES = {
    "session": "secure_fedgraph/protocol/core/session.py",
    "policy": "secure_fedgraph/protocol/sum_backends/policy.py",
    "keyring": "secure_fedgraph/protocol/sum_backends/keyring.py",
    "signed": "secure_fedgraph/protocol/sum_backends/signed.py",
    "mask_client": "secure_fedgraph/protocol/sum_backends/mask_client.py",
    "mask_server": "secure_fedgraph/protocol/sum_backends/mask_server.py",
    "ckks": "secure_fedgraph/protocol/sum_backends/ckks.py",
}

# the tests mutmut may run: in-process, covering the modules above
TESTS = ["tests/protocol", "tests/crypto/test_labels.py",
         "tests/clients/test_client_runtime.py::test_attack_a_welcome_relaying_a_certificate_of_another_ca"]  # in-process, no gRPC

# installed layout: repository folder -> where it sits under the staged package
LAYOUT = {"secure_fedgraph": "secure_fedgraph", "protocol": "secure_fedgraph/protocol", "server": "secure_fedgraph/server",
          "clients": "secure_fedgraph/clients"}

# Lines mutmut leaves alone (the line only: a multi-line statement's other lines are mutated):
# the first line of a refusal (what it says; its condition is mutated) and of a log line. Neither
# decides what is accepted, revealed or released. Code that only reports (MaskServer.describe,
# the plan as metrics.json shows it) carries `# pragma: no mutate block` instead.
NOT_CHECKS = [r"^\s*raise ", r"^\s*self\.log\.append\("]

KILLED = {1, 3, 37}  # mutmut's exit codes for a mutant a test (or the type check) caught
SURVIVED = {0}
NOT_REACHED = {5, 33}  # no test calls the function


def stage(module: str) -> Path:
    """Lay the package out as installed in STAGE/<module>, with the tests and mutmut's
    configuration; every run from scratch, so a mutant is judged against today's tests."""
    where = STAGE / module
    shutil.rmtree(where, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder, target in LAYOUT.items():
        shutil.copytree(ROOT / folder, where / target, ignore=ignore, dirs_exist_ok=True)
    shutil.copytree(ROOT / "tests", where / "tests", ignore=ignore)
    toml = [
        "[tool.mutmut]",
        f"source_paths = {json.dumps([MODULES[module]])}",
        f"do_not_mutate_patterns = {json.dumps(NOT_CHECKS)}",
        'also_copy = ["secure_fedgraph"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(TESTS)}",
        'pytest_add_cli_args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q"]',
        "",
        "[tool.pytest.ini_options]",
        'addopts = "-ra --strict-markers"',
        'markers = ["slow: larger parameter sets"]',
    ]
    (where / "pyproject.toml").write_text("\n".join(toml) + "\n")
    return where


def retest(module: str) -> tuple[list[str], dict[str, int | None]]:
    """Prepare to run the last run's survivors of ``module`` again against today's tests (the
    module itself must be unchanged since that run: mutants are numbered per source). Returns
    their names and every mutant's last result (see :func:`keep_earlier_results`)."""
    where = STAGE / module
    meta = where / "mutants" / (MODULES[module] + ".meta")
    if not meta.exists():
        raise SystemExit(f"{MODULES[module]} has no earlier run to retest: run it in full first")
    repo_path = ROOT / _repository_path(MODULES[module])
    if repo_path.read_bytes() != (where / MODULES[module]).read_bytes():
        raise SystemExit(f"{repo_path.relative_to(ROOT)} changed since its last run: run it in full (--modules {module})")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    names = sorted(name for name, code in codes.items() if code in SURVIVED | NOT_REACHED)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    mutated = where / "mutants" / MODULES[module]
    kept = mutated.read_bytes()  # the mutants themselves; everything around them is today's
    for root in (where, where / "mutants"):
        for folder, target in [("tests", "tests"), *LAYOUT.items()]:
            shutil.rmtree(root / target, ignore_errors=True)  # nothing of the last run's layout may linger
        for folder, target in [("tests", "tests"), *LAYOUT.items()]:
            shutil.copytree(ROOT / folder, root / target, ignore=ignore, dirs_exist_ok=True)
    mutated.write_bytes(kept)
    (where / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)  # which tests reach which function: collected again
    return names, codes


def keep_earlier_results(module: str, earlier: dict[str, int | None]) -> None:
    """After a retest: mutmut may have forgotten the results of the mutants it did not run (it
    resets them when the staged files change); those stand as the last run left them."""
    meta = STAGE / module / "mutants" / (MODULES[module] + ".meta")
    data = json.loads(meta.read_text())
    codes = data["exit_code_by_key"]
    for name, code in earlier.items():
        if codes.get(name) is None:
            codes[name] = code
    meta.write_text(json.dumps(data, indent=4))


def _repository_path(staged: str) -> str:
    """Where a staged (installed-layout) path lives in this repository."""
    for folder, target in sorted(LAYOUT.items(), key=lambda item: -len(item[1])):
        if staged.startswith(target + "/"):
            return folder + staged[len(target):]
    raise ValueError(staged)


def mutmut(where: Path, *args: str) -> int:
    """Run mutmut in ``where`` with this interpreter."""
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.call([sys.executable, "-m", "mutmut", *args], cwd=where, env=env)


def report(modules: list[str]) -> dict[str, Counter]:
    """Per module: mutants killed, survived, not reached by any test, other (timeouts); printed
    as a table, with the survivors' names (`mutmut show NAME` in build/mutate/<module> shows each)."""
    counts: dict[str, Counter] = {}
    survivors: list[str] = []
    for module in modules:
        meta = STAGE / module / "mutants" / (MODULES[module] + ".meta")
        if not meta.exists():
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        count = Counter()
        for name, code in codes.items():
            kind = "killed" if code in KILLED else "survived" if code in SURVIVED else "not reached" if code in NOT_REACHED else \
                "not run" if code is None else "other"
            count[kind] += 1
            if kind in ("survived", "not reached"):
                survivors.append(f"{kind}: {name}")
        counts[module] = count
    print("| module | mutants | killed | survived | not reached | other | kill rate |")
    print("|---|---|---|---|---|---|---|")
    total = Counter()
    for module, count in counts.items():
        total += count
        n = sum(count.values())
        print(f"| {MODULES[module]} | {n} | {count['killed']} | {count['survived']} | {count['not reached']} | {count['other'] + count['not run']} | "
              f"{100 * count['killed'] / max(1, n):.1f}% |")
    n = sum(total.values())
    print(f"| all | {n} | {total['killed']} | {total['survived']} | {total['not reached']} | {total['other'] + total['not run']} | "
          f"{100 * total['killed'] / max(1, n):.1f}% |")
    for line in survivors:
        print(line)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", nargs="+", choices=sorted(MODULES), default=list(MODULES), help="which check modules to mutate (default: all)")
    parser.add_argument("--report", action="store_true", help="print the kill rates of the last run without running")
    parser.add_argument("--retest", action="store_true", help="run only the last run's survivors again, against today's tests "
                        "(for a module unchanged since that run)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="mutants tested at once (default: one per core)")
    args = parser.parse_args(argv)
    if not args.report:
        try:
            import mutmut as _  # noqa: F401
        except ImportError:
            parser.error("mutmut is not installed: pip install -e '.[mutate]'")
        for module in args.modules:
            if args.retest:
                names, earlier = retest(module)
                print(f"retesting the {len(names)} survivors of {MODULES[module]} ...", flush=True)
                if not names:
                    continue
                code = mutmut(STAGE / module, "run", "--max-children", str(args.max_children), *names)
                keep_earlier_results(module, earlier)
            else:
                print(f"mutating {MODULES[module]} ...", flush=True)
                code = mutmut(stage(module), "run", "--max-children", str(args.max_children))
            if code:
                return code
    report(args.modules)
    return 0


if __name__ == "__main__":
    sys.exit(main())
