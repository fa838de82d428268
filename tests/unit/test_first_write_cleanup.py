"""A failed first write through `format("hudi")` removes the table it created only when nobody
else can be using it (issue 33.2): under the table lock, with no instant on its timeline, no
heartbeat and no other write's staged rows; never while another process holds the lock. And a
writer that opened the table before it was removed finds it gone once it holds the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.config.write_config import WriteConfig
from engine.errors import TableNotFoundError
from engine.services.transaction import Transaction
from engine.spark.datasource.service import _drop_new_table
from engine.spark.datasource.writer import remove_stage
from engine.storage import storage_for
from engine.table.create import new_table_config
from engine.table.meta_client import MetaClient
from tests.support.tables import tree_bytes

ROOT = Path(__file__).resolve().parents[2]
STAGE = ".hoodie/.temp/datasource-mine"


@dataclass
class _Created:
    meta: MetaClient


def _new_table(path: Path, version: int = 6) -> _Created:
    storage = storage_for(str(path))
    meta = MetaClient.create(storage, new_table_config(name="trips", record_key="id", partition_fields="city", precombine_field="ts", table_version=version))
    storage.write_bytes(f"{STAGE}/part-0.parquet", b"staged rows")
    return _Created(meta)


@pytest.mark.parametrize("version", [6, 9])
def test_a_failed_first_write_leaves_the_path_as_it_was(tmp_path, version):
    created = _new_table(tmp_path / "t", version)
    _drop_new_table(created, STAGE)
    remove_stage(str(tmp_path / "t"), {}, STAGE)  # the writer's commit() removes its stage after
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*"))


def test_the_table_is_kept_while_another_write_has_an_instant_or_staged_rows(tmp_path):
    created = _new_table(tmp_path / "a")
    created.meta.storage.write_bytes(".hoodie/20260101000000000.commit.requested", b"")
    before = tree_bytes(str(tmp_path / "a"))
    _drop_new_table(created, STAGE)
    assert tree_bytes(str(tmp_path / "a")) == before

    created = _new_table(tmp_path / "b")
    created.meta.storage.write_bytes(".hoodie/.temp/datasource-theirs/part-0.parquet", b"their rows")
    _drop_new_table(created, STAGE)
    remove_stage(str(tmp_path / "b"), {}, STAGE)
    assert (tmp_path / "b" / ".hoodie" / "hoodie.properties").is_file()
    assert (tmp_path / "b" / ".hoodie" / ".temp" / "datasource-theirs" / "part-0.parquet").read_bytes() == b"their rows"


def test_the_table_is_kept_while_another_process_holds_its_lock(tmp_path):
    created = _new_table(tmp_path / "t")
    code = ("import time\nfrom engine.storage import storage_for\nfrom engine.transaction.lock import TableLock\n"
            f"TableLock(storage_for({str(tmp_path / 't')!r}), 'upsert').acquire()\n"
            "print('held', flush=True)\ntime.sleep(600)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        _drop_new_table(created, STAGE)
        assert (tmp_path / "t" / ".hoodie" / "hoodie.properties").is_file()
    finally:
        child.kill()
        child.wait()


def test_a_writer_that_opened_the_table_before_it_was_removed_finds_it_gone(tmp_path):
    created = _new_table(tmp_path / "t")
    other = MetaClient.open(storage_for(str(tmp_path / "t")))  # opened before the clean-up
    _drop_new_table(created, STAGE)
    with pytest.raises(TableNotFoundError, match="removed while this write waited for its lock"):
        with Transaction(other, WriteConfig.from_options({}), None, "upsert"):
            pass
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()


def test_what_the_failed_write_left_in_its_new_table_goes_too(tmp_path):
    created = _new_table(tmp_path / "t")
    created.meta.storage.write_bytes(".hoodie/.failed_writes/20260101000000000.commit", b"{}")
    _drop_new_table(created, STAGE)
    remove_stage(str(tmp_path / "t"), {}, STAGE)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*"))
