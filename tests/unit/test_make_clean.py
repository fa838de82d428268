"""`make clean` keeps ./lakehouse (the console's database, secret key and admin password live in
lakehouse/.console); `make clean-lakehouse` deletes it only when told yes. Run on a copy of the
Makefile in a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KEPT = ["lakehouse/.console/console.db", "lakehouse/.console/secret_key", "lakehouse/.console/dev-admin-password",
        "lakehouse/demo_trips/.hoodie/hoodie.properties"]


@pytest.fixture
def checkout(tmp_path) -> Path:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    for rel in [*KEPT, "artifacts/screenshots/a.png", ".pytest_cache/x", "spark-warehouse/y", "site/index.html"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    return tmp_path


def _make(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=60)


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "Makefile")


def test_make_clean_keeps_the_lakehouse_and_says_so(checkout):
    done = _make(checkout, "clean")
    assert done.returncode == 0, done.stderr
    assert _files(checkout) == sorted(KEPT)
    assert done.stdout.splitlines() == [
        "rm -rf spark-warehouse .pytest_cache artifacts site",
        "make clean: kept ./lakehouse (its tables, and lakehouse/.console: the console's database, secret key and "
        "admin password); 'make clean-lakehouse' deletes it"]


@pytest.mark.parametrize("stdin", ["", "no\n", "y\n"])
def test_clean_lakehouse_deletes_nothing_without_yes(checkout, stdin):
    done = _make(checkout, "clean-lakehouse", stdin=stdin)
    assert done.returncode != 0
    assert done.stdout.endswith("make clean-lakehouse: kept ./lakehouse (nothing deleted)\n")
    assert [f for f in _files(checkout) if f.startswith("lakehouse/")] == sorted(KEPT)


@pytest.mark.parametrize("args, stdin", [((), "yes\n"), (("CONFIRM=yes",), "")])
def test_clean_lakehouse_deletes_it_when_told_yes(checkout, args, stdin):
    done = _make(checkout, "clean-lakehouse", *args, stdin=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("make clean-lakehouse: deleted ./lakehouse\n")
    assert not (checkout / "lakehouse").exists()
