"""The checked-in generated protobuf code is exactly what proto/ generates (as Flower's
check-protos.sh does): regenerate into a temporary folder and compare byte for byte."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_generated_code_matches_the_proto_files(tmp_path):
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    assert protos, "no .proto files found"
    subprocess.run(
        [
            sys.executable, "-m", "grpc_tools.protoc", "-Iproto",
            f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", *protos,
        ],
        cwd=ROOT,
        check=True,
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*.py*"))
    assert generated
    for relative in generated:
        checked_in = ROOT / relative
        assert checked_in.exists(), f"{relative} is generated but not checked in: run `make protos`"
        assert checked_in.read_bytes() == (tmp_path / relative).read_bytes(), f"{relative} is stale: run `make protos`"
    # the streams carry Envelope bytes through a generic handler (protocol/transports/grpc_server.py),
    # so no *_pb2_grpc.py stubs are generated or kept
    assert not list((ROOT / "secure_fedgraph" / "wire").glob("*_pb2_grpc.py"))
