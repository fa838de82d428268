"""Tables Apache Hudi 1.x wrote (versions 8 and 9), from hudi-rs's fixtures (tests/support/hudi1x.py).

Until issue 18 lands, this engine reads version 6 only: every version 8 and 9 fixture must be
refused with `UnsupportedTableVersionError` naming the file and the version, by the API and the
CLI, leaving the table exactly as it was. The fixtures and their Spark snapshots (`gold_data/`)
are what issue 18's readers will be checked against; hudi-rs must agree with the snapshots here
already, or the oracle is wrong.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import javaproperties
import pyarrow.parquet as pq
import pytest

from engine.cli import main as cli_main
from engine.errors import UnsupportedTableVersionError
from engine.table.meta_client import MetaClient
from tests.support import hudi1x, hudi_rs
from tests.support.tables import tree_bytes


def _version(archive: Path) -> int | None:
    """`hoodie.table.version` of the table in a fixture zip (its top folder's properties)."""
    stem = archive.stem
    with zipfile.ZipFile(archive) as zf:
        try:
            text = zf.read(f"{stem}/.hoodie/hoodie.properties").decode("utf-8")
        except KeyError:
            return None
    return int(javaproperties.loads(text).get("hoodie.table.version", "0"))


@pytest.fixture(scope="module")
def versioned() -> dict[str, int]:
    """fixture name -> table version, for every version 8 or 9 table hudi-rs ships."""
    data = hudi1x.data_dir()
    out = {}
    for archive in sorted(data.rglob("*.zip")):
        version = _version(archive)
        if version in (8, 9):
            out[archive.relative_to(data).as_posix()[:-4]] = version
    return out


def test_the_fixtures_cover_both_versions_and_both_table_types(versioned):
    assert sum(1 for v in versioned.values() if v == 8) == 7
    assert sum(1 for v in versioned.values() if v == 9) >= 40
    assert "sample_table/cow/v8_nonpartitioned" in versioned
    assert "quickstart_trips_table/mor/avro/v8_trips_8i3u1d" in versioned
    assert "sample_table/mor/avro/v9_txns_simple_meta" in versioned


def test_every_version_8_and_9_table_is_refused_naming_file_and_version(versioned, tmp_path, capsys):
    for name, version in versioned.items():
        fx = hudi1x.fixture(name, tmp_path / name.replace("/", "__"))
        before = tree_bytes(fx.table)
        with pytest.raises(UnsupportedTableVersionError) as refused:
            MetaClient.open(str(fx.table))
        assert refused.value.version == version, name
        assert str(refused.value) == (
            f"{fx.table / '.hoodie' / 'hoodie.properties'}: table version {version} "
            f"(written by Apache Hudi {'1.0' if version == 8 else '1.1'}) is not supported "
            f"(this engine reads and writes version 6)"), name
        code = cli_main(["show", str(fx.table)])
        err = capsys.readouterr().err
        assert code == 2 and f"table version {version}" in err, (name, code, err)
        assert tree_bytes(fx.table) == before, name


@pytest.mark.parametrize("name", ["sample_table/cow/v8_nonpartitioned", "sample_table/cow/v9_txns_simple_meta",
                                  "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"])
def test_hudi_rs_reads_what_spark_wrote(name, tmp_path):
    """The oracle issue 18's readers will be held to agrees with Spark's snapshot of the table."""
    fx = hudi1x.fixture(name, tmp_path)
    assert fx.gold is not None
    gold = pq.read_table(sorted(fx.gold.glob("*.parquet"))[0]).to_pylist()
    ours = hudi_rs.snapshot(str(fx.table))
    key = "_hoodie_record_key"
    assert len(ours) == len(gold) > 0
    assert sorted(json.dumps(r[key]) for r in ours) == sorted(json.dumps(r[key]) for r in gold)
