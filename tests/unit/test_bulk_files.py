"""A streamed bulk_insert task's files (`engine.write.bulk_files`): grouping by partition path,
rolling over by rows, Hudi's `<prefix>-<n>` file ids, partition metadata, the null-key refusal,
and the failed-write record that names the task prefixes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.columns import KEY_COL, PART_COL
from engine.config.write_config import WriteConfig
from engine.constants import FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY, RECORD_KEY_COL
from engine.data.file_names import has_file_id_stem, parse_base_file_name, task_file_id_prefix
from engine.errors import InvalidConfigError
from engine.schema.avro import with_meta_fields
from engine.storage import storage_for
from engine.table import failed_writes
from engine.write.bulk_files import split_files, write_task_files
from engine.write.file_writer import WriteContext

T = "20261126120000000"
STEM = "0b7c3f2e-1111-4222-8333-"
PREFIX = task_file_id_prefix(STEM, 4)
DATA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _rows(items: list[tuple[str | None, str, int]]) -> pa.Table:
    ids = [i for i, _d, _v in items]
    days = [d for _i, d, _v in items]
    return pa.table(
        {"id": ids, "day": days, "v": [v for *_x, v in items], KEY_COL: ids, PART_COL: [f"day={d}" for d in days]},
    )


def test_split_files_groups_by_partition_and_rolls_over() -> None:
    rows = _rows([("k5", "b", 5), ("k1", "c", 1), ("k2", "b", 2), ("k3", "a", 3), ("k0", "b", 4), ("k6", "b", 6)])
    got = [(p, t.column("id").to_pylist()) for p, t in split_files(rows, rows_per_file=3)]
    # partitions in path order, arrival order kept inside each, at most 3 rows a file
    assert got == [("day=a", ["k3"]), ("day=b", ["k5", "k2", "k0"]), ("day=b", ["k6"]), ("day=c", ["k1"])]
    by_key = [(p, t.column("id").to_pylist()) for p, t in split_files(rows, rows_per_file=3, by_key=True)]
    assert by_key == [("day=a", ["k3"]), ("day=b", ["k0", "k2", "k5"]), ("day=b", ["k6"]), ("day=c", ["k1"])]
    one = rows.filter(pa.compute.equal(rows.column(PART_COL), "day=b"))
    assert [(p, t.column("id").to_pylist()) for p, t in split_files(one, 10)] == [("day=b", ["k5", "k2", "k0", "k6"])]
    assert list(split_files(rows.slice(0, 0), 3)) == []


@pytest.mark.parametrize("sort_by_key", [True, False])
def test_write_task_files_names_files_by_prefix_and_writes_partition_metadata(tmp_path: Path, sort_by_key: bool) -> None:
    storage = storage_for(str(tmp_path))
    ctx = WriteContext(storage=storage, instant=T, schema=with_meta_fields(DATA), precombine_field=None, sort_by_key=sort_by_key)
    rows = _rows([("k3", "a", 3), ("k1", "a", 1), ("k2", "b", 2)])
    out = write_task_files(ctx, PREFIX, "4-7-9", 4, rows, rows_per_file=10)

    assert [(o["partition"], o["file_id"], o["num_inserts"], o["num_writes"], o["num_bad_keys"]) for o in out] == [
        ("day=a", f"{PREFIX}-0", 2, 2, 0),
        ("day=b", f"{PREFIX}-1", 1, 1, 0),
    ]
    assert [o["path"] for o in out] == [f"day=a/{PREFIX}-0_4-7-9_{T}.parquet", f"day=b/{PREFIX}-1_4-7-9_{T}.parquet"]
    first = pq.read_table(tmp_path / out[0]["path"])
    # sorted by key (PARTITION_SORT) or in arrival order (NONE); the footer's key range either way
    assert first.column(RECORD_KEY_COL).to_pylist() == (["k1", "k3"] if sort_by_key else ["k3", "k1"])
    # sequence numbers count a file's rows in the order they are written, as Hudi's handles do
    assert first.column("_hoodie_commit_seqno").to_pylist() == [f"{T}_4_0", f"{T}_4_1"]
    assert first.column("_hoodie_file_name").to_pylist() == [f"{PREFIX}-0_4-7-9_{T}.parquet"] * 2
    footer = pq.read_metadata(tmp_path / out[0]["path"]).metadata
    assert footer[FOOTER_MIN_RECORD_KEY.encode()] == b"k1" and footer[FOOTER_MAX_RECORD_KEY.encode()] == b"k3"
    for part in ("day=a", "day=b"):
        assert (tmp_path / part / ".hoodie_partition_metadata").read_text() == (
            f"#partition metadata\ncommitTime={T}\npartitionDepth=1\n"
        )


def test_write_task_files_with_a_null_key_writes_nothing(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    ctx = WriteContext(storage=storage, instant=T, schema=with_meta_fields(DATA), precombine_field=None)
    out = write_task_files(ctx, PREFIX, "0-1-2", 0, _rows([("k1", "a", 1), (None, "a", 2), (None, "b", 3)]), 10)
    assert out == [{"path": None, "file_id": None, "partition": None, "num_bad_keys": 2, "num_absent": 0}]
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_write_task_files_leaves_out_delete_markers(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    schema = with_meta_fields(DATA.append(pa.field("_hoodie_is_deleted", pa.bool_())))
    ctx = WriteContext(storage=storage, instant=T, schema=schema, precombine_field=None)
    rows = _rows([("k1", "a", 1), ("k2", "a", 2), ("k3", "b", 3)]).append_column(
        "_hoodie_is_deleted", pa.array([False, True, True])
    )
    out = write_task_files(ctx, PREFIX, "0-1-2", 0, rows, 10)
    # b's only row is a delete marker: no file for b; one row without a path counts both markers
    assert [(o["partition"], o.get("num_writes"), o["num_absent"]) for o in out] == [("day=a", 1, 0), (None, None, 2)]
    assert pq.read_table(tmp_path / out[0]["path"]).column("id").to_pylist() == ["k1"]
    assert not (tmp_path / "day=b").exists()


def test_file_id_stems_and_the_failed_write_record(tmp_path: Path) -> None:
    assert PREFIX == "0b7c3f2e-1111-4222-8333-000000000004"
    stems = frozenset({STEM})
    assert has_file_id_stem(f"{PREFIX}-0", stems) and has_file_id_stem(f"{task_file_id_prefix(STEM, 300)}-12", stems)
    assert not has_file_id_stem(f"{PREFIX}-x", stems) and not has_file_id_stem("other-0", stems)
    assert not has_file_id_stem(PREFIX, stems) and not has_file_id_stem(f"{STEM}1-0", stems)
    storage = storage_for(str(tmp_path))
    failed_writes.record(storage, T, "commit", [], [STEM])
    known = failed_writes.load(storage)[T]
    assert known.file_id_stems == stems and known.groups == frozenset()
    assert known.may_have_written("any/partition", f"{PREFIX}-3")
    assert not known.may_have_written("day=a", "5d1c0000-0000-4000-8000-000000000000-0")
    # a record without stems (written before they existed) still loads
    failed_writes.record(storage, "20261126120000001", "commit", [("day=a", "f-0")])
    older = failed_writes.load(storage)["20261126120000001"]
    assert older.file_id_stems == frozenset() and older.may_have_written("day=a", "f-0")
    assert parse_base_file_name(f"{PREFIX}-0_0-1-2_{T}.parquet").file_id == f"{PREFIX}-0"  # type: ignore[union-attr]


def test_sort_mode_option() -> None:
    assert WriteConfig().bulk_insert_sort_mode == "PARTITION_PATH_REPARTITION_AND_SORT"
    assert WriteConfig.from_options({"hoodie.bulkinsert.sort.mode": "none"}).bulk_insert_sort_mode == "NONE"
    with pytest.raises(InvalidConfigError, match="GLOBAL_SORT and PARTITION_PATH_REPARTITION are not implemented"):
        WriteConfig.from_options({"hoodie.bulkinsert.sort.mode": "GLOBAL_SORT"})
