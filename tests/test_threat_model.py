"""threat_model.md is checked by code: every claim names its adversary and tests that exist, and
every claim against an adversary who deviates from the protocol cites an attack test that runs
the attack with its defence on (it must fail) and switched off (it must succeed)."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
ADVERSARIES = {"honest-but-curious server", "deviating server", "server plus c clients", "malicious client", "network attacker"}
DEVIATING = {"deviating server", "server plus c clients", "malicious client"}
STATED = {"C-COLLUDE"}  # limitations stated as claims, not protections


def _claims() -> dict[str, tuple[set[str], str]]:
    """claim id -> (adversaries, the "checked by" cell)."""
    claims = {}
    for line in (ROOT / "threat_model.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"[A-Z]+-[A-Z-]+", cells[0]):
            claim_id, adversary, _, evidence = cells
            claims[claim_id] = ({a.strip() for a in adversary.split(",")}, evidence)
    return claims


def _tests(evidence: str):
    """(file, test name or None) for every test reference in a "checked by" cell."""
    current = None
    for ref in re.findall(r"`([^`]+)`", evidence):
        path, _, name = ref.partition("::")
        if not path.startswith("..."):
            current = ROOT / "tests" / path
        yield current, name or None


def _body(path: pathlib.Path, name: str) -> str:
    text = path.read_text()
    start = re.search(rf"^def {re.escape(name)}\(", text, flags=re.M)
    assert start is not None, f"no test {name} in {path.name}"
    end = re.search(r"^(def |class |# ---)", text[start.end():], flags=re.M)
    return text[start.start(): start.end() + (end.start() if end else len(text))]


def test_every_claim_names_its_adversary():
    claims = _claims()
    assert len(claims) >= 30
    for claim_id, (adversaries, _) in claims.items():
        assert adversaries and adversaries <= ADVERSARIES, f"{claim_id} names {adversaries - ADVERSARIES or 'no adversary'}"


def test_every_claim_cites_existing_tests():
    for claim_id, (_, evidence) in _claims().items():
        refs = list(_tests(evidence))
        if claim_id in STATED:
            continue
        assert refs, f"{claim_id} cites no test"
        for path, name in refs:
            assert path is not None and path.exists(), f"{claim_id}: {path} is missing"
            if name:
                _body(path, name)


def test_claims_against_a_deviating_adversary_cite_a_test_that_can_fail():
    """The test must go through tests/helpers/attacks.py::defence_stops, which runs the attack against the
    real code and against the same code with one defence switched off."""
    for claim_id, (adversaries, evidence) in _claims().items():
        if not adversaries & DEVIATING or claim_id in STATED:
            continue
        attacks = [name for path, name in _tests(evidence) if name and "defence_stops(" in _body(path, name)]
        assert attacks, f"{claim_id} ({', '.join(sorted(adversaries & DEVIATING))}) cites no attack test run through defence_stops"


def test_claim_ids_are_unique():
    ids = [c[0] for c in (line.strip().strip("|").split("|") for line in (ROOT / "threat_model.md").read_text().splitlines())
           if len(c) == 4 and re.fullmatch(r"[A-Z]+-[A-Z-]+", c[0].strip())]
    assert len(ids) == len(set(ids))
