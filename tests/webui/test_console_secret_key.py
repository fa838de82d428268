"""The console's secret key (webui/config.py): the published default is used on loopback only;
beyond it, and when no key is set, a random key kept in the instance folder (0600) is used and
reused on every start."""

from __future__ import annotations

import logging

import pytest

from webui.config import PUBLISHED_SECRET_KEYS, Settings, is_loopback

DEFAULT = "change-me-local-dev-only"


def _settings(tmp_path, **env: str) -> Settings:
    return Settings.from_env({"CONSOLE_INSTANCE_DIR": str(tmp_path / "instance"), **env})


@pytest.mark.parametrize("bind, loopback", [
    ("", True), ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("console.example.org", False),
])
def test_is_loopback(bind, loopback):
    assert is_loopback(bind) is loopback


def test_published_default_is_used_on_loopback_only(tmp_path, caplog):
    assert DEFAULT in PUBLISHED_SECRET_KEYS
    local = _settings(tmp_path, CONSOLE_SECRET_KEY=DEFAULT, CONSOLE_BIND="127.0.0.1")
    assert (local.secret_key, local.secret_key_generated) == (DEFAULT, False)
    assert not (tmp_path / "instance").exists()
    with caplog.at_level(logging.WARNING, logger="webui.config"):
        wide = _settings(tmp_path, CONSOLE_SECRET_KEY=DEFAULT, CONSOLE_BIND="0.0.0.0")
    kept = tmp_path / "instance" / "secret_key"
    assert wide.secret_key_generated and wide.secret_key != DEFAULT and wide.secret_key == kept.read_text()
    assert kept.stat().st_mode & 0o777 == 0o600
    assert [r.getMessage() for r in caplog.records] == [
        f"CONSOLE_SECRET_KEY is the published default and the console is published on 0.0.0.0 (not loopback): "
        f"using a random key kept in {kept} instead. Set CONSOLE_SECRET_KEY to a long random value."]
    again = _settings(tmp_path, CONSOLE_SECRET_KEY=DEFAULT, CONSOLE_BIND="0.0.0.0")
    assert again.secret_key == wide.secret_key
    assert wide.flask_config()["SECRET_KEY"] == wide.secret_key


def test_an_operators_key_is_used_on_any_bind(tmp_path):
    s = _settings(tmp_path, CONSOLE_SECRET_KEY="x" * 40, CONSOLE_BIND="0.0.0.0")
    assert (s.secret_key, s.secret_key_generated) == ("x" * 40, False)


def test_missing_key_is_generated_and_an_empty_kept_file_is_replaced(tmp_path):
    folder = tmp_path / "instance"
    folder.mkdir()
    (folder / "secret_key").write_text("")  # a process died between creating and filling it
    s = _settings(tmp_path)
    assert s.secret_key_generated and len(s.secret_key) >= 64
    assert (folder / "secret_key").read_text() == s.secret_key
    assert _settings(tmp_path).secret_key == s.secret_key


def test_processes_racing_to_create_the_key_all_read_the_one_that_won(tmp_path):
    """Issue 33.6: the key file was created empty and filled after, so a process losing the race
    could read it empty. Now it appears complete (a linked temp file) or not at all."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys\nfrom webui.config import _instance_secret\n"
            f"print(_instance_secret({str(tmp_path / 'instance')!r}))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    kept = (tmp_path / "instance" / "secret_key").read_text()
    assert keys == {kept} and len(kept) >= 64
    assert sorted(p.name for p in (tmp_path / "instance").iterdir()) == ["secret_key"]  # no temp file left
