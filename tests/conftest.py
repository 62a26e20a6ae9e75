"""Fixtures shared by the whole suite (helpers live in tests/helpers.py)."""

from __future__ import annotations

import pytest

from secure_fedgraph.protocol.secure_sum import Backend


@pytest.fixture(params=list(Backend), ids=lambda b: b.value)
def backend(request) -> Backend:
    return request.param
