"""Fixtures shared by the whole suite (helpers live in tests/helpers/)."""

from __future__ import annotations

import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.sum_backends import Backend


@pytest.fixture(params=list(Backend), ids=lambda b: b.value)
def backend(request) -> Backend:
    return request.param


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A CA with certificates for three clients (the root folder), once per test module."""
    return init_keys(tmp_path_factory.mktemp("keys"), clients=3).root
