"""Archival never passes a replacecommit whose replaced file groups still have files, in version 6
as in 8 and 9 (test_lsm_archival.py): only an active replacecommit hides the groups it replaced,
and archiving it while they have files would bring their rows back. (In
version 6 archival used to reach such a replacecommit and fail on it, "Hudi 0.14 does not archive
replacecommit instants", every time; now it archives what lies before it.)"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine import Table
from engine.services.maintenance import Maintenance
from engine.timeline.commit_metadata import CommitMetadata
from engine.timeline.instant import next_instant_time
from tests.integration.test_pending_clustering import MANUAL, SCHEMA, data, oracle

pytestmark = pytest.mark.spark


def test_a_version_6_replacecommit_whose_replaced_files_remain_stays_active(spark, tmp_path):
    t = Table.create(spark, str(tmp_path / "t"), name="trips", record_key="id", partition_fields="city",
                     precombine_field="ts")
    t.upsert(spark.createDataFrame([(1, "a", "oslo", 1), (2, "b", "rome", 1)], SCHEMA), options=MANUAL)
    oslo = next(iter(t.file_system_view().latest_base_files(["oslo"])))
    # what Apache Hudi's delete_partition leaves: a replacecommit replacing the partition's group
    schema = t.commit_metadata(t.timeline().last_time).schema or ""
    instant = next_instant_time(datetime.now(UTC), t.timeline().last_time)
    hoodie = Path(t.path, ".hoodie")
    (hoodie / f"{instant}.replacecommit.requested").write_bytes(b"")
    (hoodie / f"{instant}.replacecommit.inflight").write_bytes(b"")
    (hoodie / f"{instant}.replacecommit").write_bytes(t.meta.encode_commit_metadata(CommitMetadata(
        operation_type="DELETE_PARTITION", partition_to_replace_file_ids={"oslo": [oslo.file_id]},
        extra_metadata={"schema": schema})))
    assert data(t) == [(2, "b", "rome", 1)]  # (hudi-rs wants write stats in the latest commit: read below)
    for n in range(2, 7):
        t.upsert(spark.createDataFrame([(2, f"b{n}", "rome", n)], SCHEMA), options=MANUAL)
    expected = [(2, "b6", "rome", 6)]
    assert data(t) == oracle(t) == expected
    assert Path(t.path, oslo.path).exists()  # the replaced group's file is still there

    first = t.timeline().completed_writes.instants[0].time
    archived = Maintenance(t.meta, {**MANUAL, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3",
                                    "hoodie.cleaner.commits.retained": "1"}).archive()
    assert archived == [first]  # the commit before the replacecommit only: the replacecommit stays
    assert any(i.time == instant for i in t.timeline().instants)
    assert data(t) == oracle(t) == expected  # oslo's replaced rows stay hidden
