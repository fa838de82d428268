"""Fixtures of the console tests (helpers live in tests/support/console.py)."""

from __future__ import annotations

import pytest

from tests.support.console import Console, MorFixture, make_console, mor_table


@pytest.fixture
def console(tmp_path, monkeypatch) -> Console:
    return make_console(tmp_path, monkeypatch)


@pytest.fixture
def mor(console) -> MorFixture:
    """`console` plus a hand-made merge-on-read table registered as `rides` (`mor_table`)."""
    fx = mor_table(console.root / "rides")
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(fx.path), "rides", None)
    return fx
