"""Test helpers, each in one place; ``from tests.helpers import X`` gives any of the names below.

- ``inputs``: seeded inputs, plaintext reference sums and errors, secure-sum configs.
- ``data``: where the real data sets are, the marks that skip tests without them.
- ``vectors``: known-answer vector files in tests/vectors.
- ``attacks``: ``defence_stops`` and the deviating servers attack tests run.
- ``sessions``: in-process sessions and the transcripts a run writes.
- ``processes``: child processes (the import probe, an open-file limit).
- ``grpc``: mTLS channels and the server launchers over real sockets (import it as
  ``tests.helpers.grpc``; it is not re-exported here, as it loads both runtimes).

Fixtures shared by several folders are in tests/conftest.py.
"""

from tests.helpers.attacks import ServerThatNeverRekeys, SplicingCkksServer, WeakServer, defence_stops, moved_record, splicing_ckks_server
from tests.helpers.data import (
    HZMETRO_DIR,
    ISRUC_DIR,
    PLANETOID_DIR,
    SHARED_DATA,
    UEA_DIR,
    assert_no_readings,
    needs_hzmetro,
    needs_isruc,
    needs_planetoid,
    needs_uea,
    pooled_normalisation,
)
from tests.helpers.inputs import NO_COLLUDERS, SHAPES, close, config_for, make_inputs, max_error, plain_sum, sparse_config
from tests.helpers.processes import TORCH_PROBE, under_open_file_limit
from tests.helpers.sessions import client_transcripts, default_policy_session
from tests.helpers.vectors import VECTORS, read_vectors

__all__ = [
    "HZMETRO_DIR", "ISRUC_DIR", "NO_COLLUDERS", "PLANETOID_DIR", "SHAPES", "SHARED_DATA", "TORCH_PROBE", "UEA_DIR", "VECTORS",
    "ServerThatNeverRekeys", "SplicingCkksServer", "WeakServer", "assert_no_readings", "client_transcripts", "close", "config_for",
    "default_policy_session", "defence_stops", "make_inputs", "max_error", "moved_record", "needs_hzmetro", "needs_isruc", "needs_planetoid",
    "needs_uea", "plain_sum", "pooled_normalisation", "read_vectors", "sparse_config", "splicing_ckks_server", "under_open_file_limit",
]
