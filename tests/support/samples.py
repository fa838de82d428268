"""The Apache Hudi sample tables in ``../shared/hudi-samples`` (zips written by Spark + Hudi).

Each zip holds one table folder; several zips use the same inner folder name, so each
is unpacked into its own folder. ``__MACOSX/`` entries are skipped. When the samples
folder is missing the calling test is skipped, unless ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = (REPO_ROOT / ".." / "shared" / "hudi-samples").resolve()

_COMPLETED_WRITE = re.compile(r"^(\d{17})\.(commit|deltacommit|replacecommit)$")


def require_samples_dir() -> Path:
    """The samples folder; skips the test if absent (fails instead when ``CI=true``)."""
    if not SAMPLES_DIR.is_dir():
        message = f"../shared/hudi-samples not found: {SAMPLES_DIR}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return SAMPLES_DIR


def list_samples() -> list[str]:
    """Names (zip stems) of the sample tables, sorted; empty if the folder is absent."""
    if not SAMPLES_DIR.is_dir():
        return []
    return sorted(p.stem for p in SAMPLES_DIR.glob("*.zip"))


def sample_table(name: str, tmp_dir: Path | str) -> Path:
    """Unzip sample ``name`` (zip stem) under ``tmp_dir/name`` and return its table folder."""
    archive = require_samples_dir() / f"{name}.zip"
    if not archive.is_file():
        raise FileNotFoundError(f"no sample {name!r} in {SAMPLES_DIR}")
    target = Path(tmp_dir) / name
    if not target.exists():
        target.mkdir(parents=True)
        with zipfile.ZipFile(archive) as zf:
            for member in zf.infolist():
                parts = Path(member.filename).parts
                if (
                    not parts
                    or parts[0] == "__MACOSX"
                    or ".." in parts
                    or Path(member.filename).is_absolute()
                ):
                    continue
                zf.extract(member, target)
    tops = [p for p in target.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise AssertionError(f"sample {name!r} should hold exactly one table folder, found {tops}")
    return tops[0]


def read_properties(path: Path) -> dict[str, str]:
    """A Java ``.properties`` file of one-line entries (as ``hoodie.properties`` is written)."""
    result: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.lstrip()
        if not stripped or stripped[0] in "#!":
            continue
        key, _, value = stripped.partition("=")
        result[_unescape(key.rstrip())] = _unescape(value)
    return result


def _unescape(text: str) -> str:
    specials = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u":
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(specials.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def table_properties(table: Path) -> dict[str, str]:
    """The parsed ``.hoodie/hoodie.properties`` of a table folder."""
    return read_properties(table / ".hoodie" / "hoodie.properties")


def latest_commit_metadata(table: Path) -> dict[str, Any]:
    """The JSON of the latest completed commit / deltacommit / replacecommit instant."""
    completed = sorted(
        (m.group(1), p) for p in (table / ".hoodie").iterdir() if (m := _COMPLETED_WRITE.match(p.name))
    )
    if not completed:
        raise AssertionError(f"no completed write instant in {table}")
    return json.loads(completed[-1][1].read_text(encoding="utf-8"))


def base_files(table: Path) -> list[Path]:
    """Every parquet base file of the table (log files and ``.hoodie/`` excluded), sorted."""
    return sorted(
        p
        for p in table.rglob("*.parquet")
        if ".hoodie" not in p.relative_to(table).parts and not p.name.startswith(".")
    )
