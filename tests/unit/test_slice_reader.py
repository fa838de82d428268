"""engine.data.slice_reader without the oracle: merge modes, slice files, key and column selection,
ordering and key scans, what a slice without logs reads, and corrupt log files in a slice."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.config.table_config import TableConfig
from engine.constants import RECORD_KEY_COL
from engine.data import log_block as lb
from engine.data.slice_reader import (
    MergeMode,
    SliceFiles,
    merge_mode_for,
    read_slice,
    slice_keys,
    slice_ordering,
)
from engine.errors import CorruptTableError, InvalidConfigError, InvalidInputError
from engine.storage.local import LocalStorage
from engine.table.fs_view import DataFile, FileSystemView
from engine.timeline.timeline import Timeline
from tests.support.mor_tables import FID, OWL, I, MorTable, values

EVENT = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
DEFAULT = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


@pytest.mark.parametrize(
    ("precombine", "props", "mode"),
    [
        ("ts", {}, MergeMode.EVENT_TIME),
        (None, {}, MergeMode.COMMIT_TIME),
        ("ts", {"hoodie.compaction.payload.class": OWL, "hoodie.compaction.record.merger.strategy": EVENT},
         MergeMode.COMMIT_TIME),  # the samples' properties: the payload class decides on v6
        ("ts", {"hoodie.compaction.payload.class": DEFAULT}, MergeMode.EVENT_TIME),
        (None, {"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.EventTimeAvroPayload"},
         MergeMode.EVENT_TIME),
        ("ts", {"hoodie.table.legacy.payload.class": OWL}, MergeMode.COMMIT_TIME),
        ("ts", {"hoodie.compaction.payload.class": OWL, "hoodie.datasource.write.payload.class": DEFAULT},
         MergeMode.COMMIT_TIME),
        (None, {"hoodie.compaction.record.merger.strategy": EVENT}, MergeMode.EVENT_TIME),
        ("ts", {"hoodie.record.merge.strategy.id": COMMIT}, MergeMode.COMMIT_TIME),
        ("ts", {"hoodie.record.merge.mode": "commit_time_ordering", "hoodie.compaction.payload.class": DEFAULT},
         MergeMode.COMMIT_TIME),
        ("ts", {"hoodie.compaction.payload.class": ""}, MergeMode.EVENT_TIME),
    ],
)
def test_merge_mode_inferred_as_hudi_rs_does(precombine: str | None, props: dict[str, str], mode: MergeMode) -> None:
    config = TableConfig(name="t", record_key_fields=("id",), precombine_field=precombine, extra=tuple(props.items()))
    assert merge_mode_for(config) is mode


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"hoodie.compaction.payload.class": "com.acme.MyPayload"}, "payload class com.acme.MyPayload is a custom merger"),
        ({"hoodie.compaction.record.merger.strategy": "0000"}, "merge strategy 0000 is a custom merger"),
        ({"hoodie.record.merge.mode": "CUSTOM"}, "hoodie.record.merge.mode=CUSTOM"),
    ],
)
def test_custom_mergers_are_refused(props: dict[str, str], message: str) -> None:
    config = TableConfig(name="t", record_key_fields=("id",), precombine_field="ts", extra=tuple(props.items()))
    with pytest.raises(InvalidConfigError, match=message):
        merge_mode_for(config)


def test_merge_mode_values_are_hudis_names() -> None:
    assert [m.value for m in MergeMode] == ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"]


def test_slice_files_order_logs_as_hudi_rs() -> None:
    def log(version: int, token: str) -> DataFile:
        return DataFile(f"p/.{FID}_{I[1]}.log.{version}_{token}", 10)

    files = [DataFile(f"p/{FID}_0-1-0_{I[1]}.parquet", 100), log(10, "0-1-0"), log(2, "1-0-1"), log(2, "0-9-9"), log(1, "0-5-5")]
    timeline = Timeline.from_file_names([f"{I[1]}.deltacommit.requested", f"{I[1]}.deltacommit.inflight", f"{I[1]}.deltacommit"])
    [file_slice] = FileSystemView.build(files, timeline).latest_slices()
    sf = SliceFiles.from_slice(file_slice)
    assert sf == SliceFiles(
        "p", FID, I[1], f"p/{FID}_0-1-0_{I[1]}.parquet",
        (f"p/.{FID}_{I[1]}.log.1_0-5-5", f"p/.{FID}_{I[1]}.log.2_0-9-9", f"p/.{FID}_{I[1]}.log.2_1-0-1",
         f"p/.{FID}_{I[1]}.log.10_0-1-0"),
    )
    assert sf.base_only() == SliceFiles("p", FID, I[1], f"p/{FID}_0-1-0_{I[1]}.parquet", ())


# ---- a table to read ----------------------------------------------------------------------


@pytest.fixture
def table(tmp_path: Path) -> MorTable:
    t = MorTable(tmp_path)
    base = t.base_file(I[1], [(k, 10, "base") for k in "abcdef"])
    t.commit(I[1], [base])
    log = t.log_file(
        [
            t.avro_block(I[2], [("a", 20, "T2"), ("b", 5, "T2"), ("g", 1, "T2")]),
            t.delete_block(I[2], ["c"], pa.array([5], pa.int64())),  # loses to the base under event time
            t.delete_block(I[2], ["d"]),
        ],
        base_instant=I[1], version=1,
    )
    t.commit(I[2], [log])
    return t


def _files(t: MorTable, logs: bool = True) -> SliceFiles:
    log = (f".{FID}_{I[1]}.log.1_0-1-0",) if logs else ()
    return SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", log)


def _committed(instant: str) -> bool:
    return instant in (I[1], I[2])


def _read(t: MorTable, mode: MergeMode = MergeMode.EVENT_TIME, **kw) -> pa.Table:  # type: ignore[no-untyped-def]
    storage = kw.pop("storage", LocalStorage(str(t.root)))
    return read_slice(storage, kw.pop("files", _files(t)), t.schema, ordering_field="ts", mode=mode,
                      is_committed=_committed, **kw)


def test_read_slice_event_and_commit_time(table: MorTable) -> None:
    assert values(_read(table).to_pylist(), "id", "ts", "val") == [
        ("a", 20, "T2"), ("b", 10, "base"), ("c", 10, "base"), ("e", 10, "base"), ("f", 10, "base"), ("g", 1, "T2")
    ]
    assert values(_read(table, MergeMode.COMMIT_TIME).to_pylist(), "id", "ts", "val") == [
        ("a", 20, "T2"), ("b", 5, "T2"), ("e", 10, "base"), ("f", 10, "base"), ("g", 1, "T2")
    ]
    # base records first, in file order, then the log's
    assert _read(table).column("id").to_pylist() == ["b", "c", "e", "f", "a", "g"]
    assert _read(table).schema == table.schema


def test_keys_and_columns(table: MorTable) -> None:
    keys = pa.array(["a", "c", "d", "g", "zz"])
    assert values(_read(table, keys=keys).to_pylist(), "id", "val") == [("a", "T2"), ("c", "base"), ("g", "T2")]
    narrow = _read(table, columns=["val", "_hoodie_commit_time"])
    assert narrow.column_names == ["_hoodie_commit_time", "val"]  # in the schema's order
    assert sorted(narrow.to_pylist(), key=repr) == sorted(_read(table).select(["_hoodie_commit_time", "val"]).to_pylist(), key=repr)
    both = _read(table, keys=pa.chunked_array([["b"], ["a"]]), columns=["val"])
    assert sorted(both.column("val").to_pylist()) == ["T2", "base"]
    assert _read(table, keys=pa.array([], pa.string())).num_rows == 0
    with pytest.raises(InvalidInputError, match=r"columns \['nope'\] are not in the table schema"):
        _read(table, columns=["nope"])


def test_ordering_field_must_be_in_the_schema(table: MorTable) -> None:
    with pytest.raises(InvalidInputError, match="ordering field 'when'"):
        read_slice(LocalStorage(str(table.root)), _files(table), table.schema, ordering_field="when",
                   mode=MergeMode.EVENT_TIME, is_committed=_committed)
    # commit time never looks at it
    rows = read_slice(LocalStorage(str(table.root)), _files(table), table.schema, ordering_field="when",
                      mode=MergeMode.COMMIT_TIME, is_committed=_committed)
    assert rows.num_rows == 5


def test_uncommitted_and_as_of(table: MorTable) -> None:
    assert values(_read(table, as_of=I[1]).to_pylist(), "id", "val") == [(k, "base") for k in "abcdef"]
    storage = LocalStorage(str(table.root))
    only_base = read_slice(storage, _files(table), table.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                           is_committed=lambda i: i == I[1])
    assert only_base.num_rows == 6


def test_slice_ordering_and_keys(table: MorTable) -> None:
    storage = LocalStorage(str(table.root))
    ts = pa.field("ts", pa.int64())
    ordering = slice_ordering(storage, _files(table), ts, mode=MergeMode.EVENT_TIME, is_committed=_committed)
    assert ordering.schema == pa.schema([("key", pa.string()), ("value", pa.int64())])
    assert sorted(ordering.to_pylist(), key=repr) == sorted(
        [{"key": k, "value": v} for k, v in [("a", 20), ("b", 10), ("c", 10), ("e", 10), ("f", 10), ("g", 1)]], key=repr
    )
    some = slice_ordering(storage, _files(table), ts, mode=MergeMode.COMMIT_TIME, is_committed=_committed,
                          keys=pa.array(["b", "c"]))
    assert some.to_pylist() == [{"key": "b", "value": 5}]
    live = slice_keys(storage, _files(table), mode=MergeMode.EVENT_TIME, is_committed=_committed, ordering=ts)
    assert sorted(live.to_pylist()) == ["a", "b", "c", "e", "f", "g"]
    # without the ordering field, every later delete wins
    assert sorted(slice_keys(storage, _files(table), mode=MergeMode.EVENT_TIME, is_committed=_committed).to_pylist()) == [
        "a", "b", "e", "f", "g"
    ]
    assert slice_keys(storage, _files(table), mode=MergeMode.COMMIT_TIME, is_committed=_committed,
                      keys=pa.array(["d", "g"])).to_pylist() == ["g"]


def test_slice_ordering_of_a_key_stored_twice(tmp_path: Path) -> None:
    t = MorTable(tmp_path)
    t.base_file(I[1], [("a", 3, "x"), ("a", 7, "y"), ("b", 1, "z")])
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", ())
    got = slice_ordering(LocalStorage(str(tmp_path)), files, pa.field("ts", pa.int64()), mode=MergeMode.EVENT_TIME,
                         is_committed=_committed)
    assert sorted(got.to_pylist(), key=repr) == [{"key": "a", "value": 7}, {"key": "b", "value": 1}]


class CountingStorage(LocalStorage):
    """Local storage that records what is opened."""

    def __init__(self, base_uri: str) -> None:
        super().__init__(base_uri)
        self.opened: list[str] = []

    def read_bytes(self, rel: str) -> bytes:
        self.opened.append(rel)
        return super().read_bytes(rel)

    def open_input_file(self, rel: str) -> pa.NativeFile:
        self.opened.append(rel)
        return super().open_input_file(rel)


def test_a_slice_without_logs_reads_its_base_file_once(table: MorTable) -> None:
    storage = CountingStorage(str(table.root))
    rows = _read(table, files=_files(table, logs=False), storage=storage, columns=["id"], keys=pa.array(["a", "b"]))
    assert rows.to_pylist() == [{"id": "a"}, {"id": "b"}]
    assert storage.opened == [f"{FID}_0-1-0_{I[1]}.parquet"]
    storage.opened.clear()
    _read(table, storage=storage)
    assert storage.opened == [f"{FID}_0-1-0_{I[1]}.parquet", f".{FID}_{I[1]}.log.1_0-1-0"]


def test_log_only_slice_and_empty_results(tmp_path: Path) -> None:
    t = MorTable(tmp_path)
    t.log_file([t.parquet_block(I[1], [("x", 1, "T1")]), t.delete_block(I[2], ["x"])], base_instant=I[1], version=1)
    files = SliceFiles("", FID, I[1], None, (f".{FID}_{I[1]}.log.1_0-1-0",))
    storage = LocalStorage(str(tmp_path))
    kw = {"ordering_field": "ts", "mode": MergeMode.EVENT_TIME, "is_committed": _committed}
    assert read_slice(storage, files, t.schema, **kw).num_rows == 0  # type: ignore[arg-type]
    assert read_slice(storage, files, t.schema, as_of=I[1], **kw).column("val").to_pylist() == ["T1"]  # type: ignore[arg-type]
    empty = read_slice(storage, files.base_only(), t.schema, **kw)  # type: ignore[arg-type]
    assert empty.num_rows == 0 and empty.schema == t.schema


# ---- corrupt log files in a slice ---------------------------------------------------------


def _slice_with_log(t: MorTable, blocks: list[bytes]) -> tuple[LocalStorage, SliceFiles]:
    t.base_file(I[1], [("a", 1, "base")])
    path = t.log_file(blocks, base_instant=I[1], version=1)
    return LocalStorage(str(t.root)), SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", (path,))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]), lb.encode_log_block(9, {0: I[2]}, b"")],
         "log block at offset {second}: unknown block type 9"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]), lb.encode_log_block(4, {0: I[2]}, b"")],
         "log block at offset {second}: HFILE block without a SCHEMA header"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]), lb.encode_log_block(6, {0: I[2]}, b"")],
         "log block at offset {second}: CDC blocks are unsupported"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]),
                    lb.encode_log_block(1, {0: I[2]}, struct.pack(">ii", 2, 3) + b"\xac\xed\x00")],
         r"log block at offset {second}: delete block version 2 holds Java \(Kryo\)"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]), lb.encode_log_block(0, {0: I[3], 3: "7", 1: I[2]}, b"")],
         "log block at offset {second}: unknown command block"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]), lb.encode_log_block(3, {2: t.writer_schema}, b"")],
         "log block at offset {second} has no INSTANT_TIME"),
        (lambda t: [b"#HUDX#" + t.avro_block(I[2], [("a", 2, "x")])[6:]],
         "log block at offset 0: missing b'#HUDI#' magic"),
        (lambda t: [t.avro_block(I[2], [("a", 2, "x")]),
                    lb.encode_parquet_block(I[2], t.records(I[2], [("b", 1, "y")], FID).set_column(
                        2, "_hoodie_record_key", pa.array([None], pa.string())), t.writer_schema)],
         "log block at offset {second} has records without a key"),
    ],
    ids=["unknown-type", "hfile", "cdc", "kryo-delete", "unknown-command", "no-instant", "bad-magic", "null-key"],
)
def test_corrupt_log_files_name_the_file_and_offset(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    t = MorTable(tmp_path)
    blocks = make(t)
    storage, files = _slice_with_log(t, blocks)
    expected = message.format(second=len(blocks[0]))
    with pytest.raises(CorruptTableError, match=f"^{storage.uri(files.log_paths[0])}: {expected}"):
        read_slice(storage, files, t.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                   is_committed=lambda i: True)


def test_many_events_per_key_against_a_plain_model(tmp_path: Path) -> None:
    """The vectorised fold equals a row-at-a-time model of the event-time rules on 3,000 keys, one of
    them with 300 events."""
    import random

    rng = random.Random(7)
    t = MorTable(tmp_path)
    keys = [f"k{i:05d}" for i in range(3000)]
    base_rows = [(k, rng.randint(0, 9), "base") for k in keys[:2000]]
    t.base_file(I[1], base_rows)
    blocks, events = [], []
    for n in range(2, 12):
        chosen = rng.sample(keys, 400) + ["k00000"] * 30  # one hot key: 300 events
        if n % 3 == 0:
            ordering = [None if rng.random() < 0.2 else rng.randint(0, 9) for _ in chosen]
            blocks.append(t.delete_block(I[n], chosen, pa.array(ordering, pa.int64())))
            events += [(k, "D", o) for k, o in zip(chosen, ordering, strict=True)]
        else:
            rows = [(k, rng.randint(0, 9), f"T{n}") for k in chosen]
            blocks.append(t.parquet_block(I[n], rows))
            events += [(k, "U", r) for k, r in zip(chosen, rows, strict=True)]
    path = t.log_file(blocks, base_instant=I[1], version=1)
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", (path,))
    got = read_slice(LocalStorage(str(tmp_path)), files, t.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                     is_committed=lambda i: True)
    state: dict[str, tuple[str, object]] = {}
    for key, kind, payload in events:
        cur = state.get(key)
        if kind == "U":
            ts = payload[1]  # type: ignore[index]
            if cur is None or cur[0] == "N" or cur[1] is None or ts >= cur[1]:
                state[key] = ("U", ts, payload)  # type: ignore[assignment]
        else:
            natural = payload is None
            if cur is not None and cur[0] == "N":
                continue
            if natural:
                state[key] = ("N", None)
            elif cur is None or cur[1] is None or not cur[1] > payload:  # type: ignore[operator]
                state[key] = ("D", payload)
    expected = []
    base = {k: (k, ts, v) for k, ts, v in base_rows}
    for key in keys:
        cur, row = state.get(key), base.get(key)
        if cur is None:
            if row:
                expected.append(row)
        elif row and cur[0] != "N" and cur[1] is not None and row[1] > cur[1]:  # type: ignore[operator]
            expected.append(row)
        elif cur[0] == "U":
            expected.append(cur[2])  # type: ignore[misc]
    assert sorted(zip(*[got.column(c).to_pylist() for c in ("id", "ts", "val")], strict=True)) == sorted(expected)
    assert len(expected) > 1500
    assert pc.count_distinct(got.column(RECORD_KEY_COL)).as_py() == got.num_rows


def test_binary_ordering_field(tmp_path: Path) -> None:
    # hudi-rs refuses deletes on a binary ordering field; we compare the bytes
    schema = pa.schema([("id", pa.string()), ("ts", pa.binary()), ("val", pa.string())])
    t = MorTable(tmp_path, data_schema=schema)
    t.base_file(I[1], [{"id": k, "ts": b"m", "val": "base"} for k in "abcd"])
    log = t.log_file(
        [
            t.parquet_block(I[2], [{"id": "a", "ts": b"a", "val": "lower"}, {"id": "b", "ts": b"m", "val": "tie"}]),
            t.delete_block(I[2], ["c", "d"], pa.array([b"\xff", b"\x00"], pa.binary())),
        ],
        base_instant=I[1], version=1,
    )
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", (log,))
    rows = read_slice(LocalStorage(str(tmp_path)), files, t.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                      is_committed=_committed)
    assert values(rows.to_pylist(), "id", "val") == [("a", "base"), ("b", "tie"), ("d", "base")]


def test_key_and_ordering_scans_see_hoodie_is_deleted_records(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("val", pa.string()), ("_hoodie_is_deleted", pa.bool_())])
    t = MorTable(tmp_path, data_schema=schema)
    t.base_file(I[1], [{"id": k, "ts": 10, "val": "base", "_hoodie_is_deleted": False} for k in "abc"])
    log = t.log_file([t.avro_block(I[2], [{"id": "a", "ts": 20, "val": "T2", "_hoodie_is_deleted": True},
                                          {"id": "b", "ts": 5, "val": "T2", "_hoodie_is_deleted": True}])],
                     base_instant=I[1], version=1)
    files = SliceFiles("", FID, I[1], f"{FID}_0-1-0_{I[1]}.parquet", (log,))
    storage = LocalStorage(str(tmp_path))
    ts = pa.field("ts", pa.int64())
    assert sorted(slice_keys(storage, files, mode=MergeMode.EVENT_TIME, is_committed=_committed, ordering=ts).to_pylist()) == [
        "b", "c"
    ]
    assert sorted(slice_keys(storage, files, mode=MergeMode.COMMIT_TIME, is_committed=_committed).to_pylist()) == ["c"]
    ordering = slice_ordering(storage, files, ts, mode=MergeMode.EVENT_TIME, is_committed=_committed)
    assert sorted(ordering.to_pylist(), key=repr) == [{"key": "b", "value": 10}, {"key": "c", "value": 10}]
    narrow = read_slice(storage, files, t.schema, ordering_field="ts", mode=MergeMode.EVENT_TIME,
                        is_committed=_committed, columns=["id"])
    assert sorted(narrow.column("id").to_pylist()) == ["b", "c"]
