"""``audit``: check a run's transcripts against every threat_model.md claim, and measure leakage
with attacks."""

from __future__ import annotations

import argparse
from pathlib import Path

from secure_fedgraph.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    audit = commands.add_parser("audit", help="check a run's transcripts against every threat_model.md claim, and measure leakage with attacks",
                                description="Replay the server's transcript (RUN_DIR/transcript.bin) and, where given, the clients' "
                                "transcripts; check every threat_model.md claim a transcript can show (PASS / FAIL / NOT APPLICABLE "
                                "with its evidence); list every secure sum the server started (delivered, redone after a re-key, or "
                                "abandoned), every dropout and re-key, and who saw what; run the attacks that measure what the uploads "
                                "give away (CNFGNN: reconstruction of raw inputs from h_c,i, label leakage from dL/dh_G; nFedGNN: x_i and its "
                                "words decoded from h_i, link inference from the latents), each beside the claim it tests. Writes audit.md, audit.json and PNGs. Exit status 1 if a claim fails.")
    audit.add_argument("run_dir", metavar="RUN_DIR", help="the run folder: transcript.bin (server --transcript, or run --transcript) and metrics.json")
    audit.add_argument("client_transcripts", nargs="*", metavar="CLIENT_TRANSCRIPTS",
                       help="client transcripts (files, or folders of client-*.bin): ground truth for the sums, the plaintext probe and the "
                            "DP residuals (without them: what the server alone could compute)")
    audit.add_argument("--out", default=None, metavar="DIR", help="where to write audit.md, audit.json and the PNGs (default RUN_DIR/audit)")
    audit.add_argument("--data-dir", default=None,
                       help="the data folder the run read: the attacks take their public slice and the ground truth from it "
                            "(default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    audit.add_argument("--no-attacks", action="store_true", help="check the claims only (the attacks fit small models: seconds to minutes)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the attacks' learners and samples (default 0)")
    audit.set_defaults(handler=_audit, check=_check)


def _check(args: argparse.Namespace) -> None:
    from secure_fedgraph.runs import preflight

    preflight.check_files("RUN_DIR", [Path(args.run_dir) / "transcript.bin"],
                          "run the server with --transcript (or `secure-fedgraph run ... --transcript`) to record one")
    for item in args.client_transcripts:
        if not Path(item).exists():
            raise ConfigError(f"CLIENT_TRANSCRIPTS: no such file or folder {item}")
    preflight.check_writable_folder("--out", args.out or str(Path(args.run_dir) / "audit"))


def _client_transcripts(given: list[str]) -> list[Path]:
    """Client transcripts: files, or folders of ``client-*.bin`` (``client --transcript DIR``)."""
    paths: list[Path] = []
    for item in given:
        path = Path(item)
        paths.extend(sorted(path.glob("client-*.bin")) if path.is_dir() else [path])
    return paths


def _audit(args: argparse.Namespace) -> int:
    from secure_fedgraph.audit import audit, lines, write_report

    out = Path(args.out) if args.out else Path(args.run_dir) / "audit"
    report = audit(args.run_dir, _client_transcripts(args.client_transcripts), data_dir=args.data_dir, attacks=not args.no_attacks,
                   seed=args.seed, say=print)
    for line in lines(report):
        print(line)
    paths = write_report(report, out)
    verdict = "passed" if report.passed else f"FAILED ({', '.join(report.failed)})"
    print(f"audit: {verdict}; {report.run['mode']}; report in {paths['md']} and {paths['json']}, figures beside them")
    return 0 if report.passed else 1
