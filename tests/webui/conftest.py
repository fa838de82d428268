"""Fixtures of the console tests (helpers live in tests/support/console.py)."""

from __future__ import annotations

import pytest

from tests.support.console import Console, make_console


@pytest.fixture
def console(tmp_path, monkeypatch) -> Console:
    return make_console(tmp_path, monkeypatch)
