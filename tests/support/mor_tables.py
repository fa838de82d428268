"""Merge-on-read tables built by hand for the slice-reader tests, and reads of them by us and by
hudi-rs (the oracle).

`MorTable` writes `hoodie.properties`, base files, log files of chosen blocks (with
`engine.data.log_block`'s encoders) and timeline files, all with pyarrow: no Spark, no clock.
Rows are `(id, ts, val)` tuples of the default schema (`id` string key, `ts` long ordering field,
`val` string) unless the table is built with another data schema, then dicts. A partitioned table
(`partition="part=x"`) needs its partition column (`part`) in its data schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.config.table_config import TableConfig, TableType
from engine.constants import META_COLUMNS, PARTITION_METADATA_FILE
from engine.data import log_block as lb
from engine.data.file_names import base_file_name, join_path, log_file_name
from engine.data.slice_reader import SliceFiles, merge_mode_for, read_slice
from engine.schema.avro import arrow_to_avro, avro_to_json, avro_with_meta_fields, with_meta_fields
from engine.table.meta_client import MetaClient
from engine.timeline.commit_metadata import CommitMetadata, WriteStat

DATA_SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("ts", pa.int64()), pa.field("val", pa.string())])
FID = "11111111-1111-4111-8111-111111111111-0"
FID2 = "22222222-2222-4222-8222-222222222222-0"
OWL = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
I = [f"202401010000000{i:02d}" for i in range(100)]  # noqa: E741 -- instants I[1] < I[2] < ...


class MorTable:
    """A MERGE_ON_READ table under `root`, written file by file."""

    def __init__(
        self,
        root: Path,
        *,
        precombine: str | None = "ts",
        props: dict[str, str] | None = None,
        data_schema: pa.Schema = DATA_SCHEMA,
        partition: str = "",
        name: str = "t",
    ) -> None:
        self.root = root
        self.partition = partition
        self.data_schema = data_schema
        self.schema = with_meta_fields(data_schema)
        commit_form = arrow_to_avro(data_schema, name)
        self.commit_schema = avro_to_json(commit_form)
        self.writer_schema = avro_to_json(avro_with_meta_fields(commit_form))
        config = TableConfig(
            name=name,
            record_key_fields=("id",),
            table_type=TableType.MERGE_ON_READ,
            partition_fields=(partition.split("=")[0],) if partition else (),
            hive_style="=" in partition,
            precombine_field=precombine,
            create_schema=self.commit_schema,
            extra=tuple(sorted((props or {}).items())),
        )
        (root / ".hoodie" / "archived").mkdir(parents=True)
        (root / ".hoodie" / "hoodie.properties").write_text(config.to_text("built by tests"), encoding="utf-8")
        folder = root / partition
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PARTITION_METADATA_FILE).write_text(
            f"#partition metadata\ncommitTime={I[0]}\npartitionDepth={len(partition.split('/')) if partition else 0}\n"
        )

    # ---- records ------------------------------------------------------------------------
    def records(self, instant: str, rows: Sequence[Any], file_name: str) -> pa.Table:
        """Rows with the meta columns as Hudi writes them (`file_name`: the base file name, or the
        bare file id in log blocks)."""
        dicts = [r if isinstance(r, dict) else dict(zip(self.data_schema.names, r, strict=True)) for r in rows]
        meta = {
            META_COLUMNS[0]: [instant] * len(dicts),
            META_COLUMNS[1]: [f"{instant}_0_{i}" for i in range(len(dicts))],
            META_COLUMNS[2]: [d["id"] for d in dicts],
            META_COLUMNS[3]: [self.partition] * len(dicts),
            META_COLUMNS[4]: [file_name] * len(dicts),
        }
        data = pa.Table.from_pylist(dicts, schema=self.data_schema)
        columns = [pa.array(v, pa.string()) for v in meta.values()] + list(data.columns)
        return pa.Table.from_arrays(columns, schema=self.schema)

    # ---- blocks -------------------------------------------------------------------------
    def parquet_block(self, instant: str, rows: Sequence[Any], file_id: str = FID) -> bytes:
        return lb.encode_parquet_block(instant, self.records(instant, rows, file_id), self.writer_schema)

    def avro_block(self, instant: str, rows: Sequence[Any], file_id: str = FID) -> bytes:
        return lb.encode_avro_data_block(instant, self.records(instant, rows, file_id), self.writer_schema)

    def partial_block(self, instant: str, rows: Sequence[dict[str, Any]], columns: Sequence[str], *,
                      parquet: bool = False, file_id: str = FID) -> bytes:
        """A data block with IS_PARTIAL "true", as Apache Hudi 1.x writes partial updates: its SCHEMA
        header and records hold the meta fields and only the data `columns` (`rows` are dicts with
        `id`, the record key, and those columns)."""
        full = self.records(instant, [{n: r.get(n) for n in self.data_schema.names} for r in rows], file_id)
        table = full.select([*META_COLUMNS, *columns])
        schema = json.loads(self.writer_schema)
        schema["fields"] = [f for f in schema["fields"] if f["name"] in set(table.column_names)]
        encode = lb.encode_parquet_block if parquet else lb.encode_avro_data_block
        [block] = lb.decode_log_blocks(encode(instant, table, json.dumps(schema)))
        header = {**block.header, lb.HeaderKey.IS_PARTIAL: "true"}
        return lb.encode_log_block(block.block_type, header, block.content)

    def delete_block(self, instant: str, keys: Sequence[str], ordering: pa.Array | None = None,
                     with_schema: bool = True, partition: str | None = None) -> bytes:
        part = self.partition if partition is None else partition
        schema = self.writer_schema if with_schema else None
        return lb.encode_delete_block(instant, keys, [part] * len(keys), schema, ordering)

    # ---- files --------------------------------------------------------------------------
    def base_file(self, instant: str, rows: Sequence[Any], file_id: str = FID, token: str = "0-1-0") -> str:
        name = base_file_name(file_id, token, instant)
        path = join_path(self.partition, name)
        pq.write_table(self.records(instant, rows, name), self.root / path, store_schema=False)
        return path

    def log_file(self, blocks: Iterable[bytes], *, base_instant: str, version: int, file_id: str = FID,
                 token: str = "0-1-0") -> str:
        path = join_path(self.partition, log_file_name(file_id, base_instant, version, token))
        (self.root / path).write_bytes(b"".join(blocks))
        return path

    def commit(self, instant: str, paths: Sequence[str] = (), state: str = "completed",
               stats: dict[str, dict[str, Any]] | None = None) -> None:
        """Timeline files of deltacommit `instant` up to `state` (requested, inflight, completed),
        the completed one naming `paths` in its write stats (`stats`: more WriteStat fields per
        path, e.g. {"numWrites": 3, "logVersion": 1})."""
        hoodie = self.root / ".hoodie"
        (hoodie / f"{instant}.deltacommit.requested").write_bytes(b"")
        if state == "requested":
            return
        (hoodie / f"{instant}.deltacommit.inflight").write_bytes(b"")
        if state == "inflight":
            return
        written = [
            WriteStat(fileId=Path(p).name.lstrip(".").split("_")[0], path=p, partitionPath=self.partition,
                      **(stats or {}).get(p, {}))
            for p in paths
        ]
        meta = CommitMetadata({self.partition: written} if written else {}, "UPSERT", {"schema": self.commit_schema})
        (hoodie / f"{instant}.deltacommit").write_bytes(meta.to_bytes())


# ---- reading a whole table ------------------------------------------------------------------


def read_ours(path: Path | str, as_of: str | None = None, read_optimized: bool = False) -> pa.Table:
    """Every latest slice of the table read with `read_slice`, as a table reader would."""
    meta = MetaClient.open(str(path))
    timeline = meta.timeline()
    data_schema = meta.latest_schema(timeline)
    schema = with_meta_fields(data_schema if data_schema is not None else pa.schema([]))
    mode = merge_mode_for(meta.config)
    parts = []
    for file_slice in meta.file_system_view(timeline, as_of=as_of).latest_slices():
        files = SliceFiles.from_slice(file_slice)
        if read_optimized:
            files = files.base_only()
        parts.append(
            read_slice(meta.storage, files, schema, ordering_field=meta.config.precombine_field, mode=mode,
                       is_committed=timeline.is_valid_write, as_of=as_of)
        )
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_rs(path: Path | str, as_of: str | None = None, read_optimized: bool = False) -> pa.Table | None:
    """hudi-rs's snapshot (read-optimized when asked) as one table; None when it returns no batches."""
    from tests.support import hudi_rs  # the oracle is only needed by the tests that compare with it
    options = hudi_rs.HudiReadOptions(
        hudi_options={"hoodie.read.use.read_optimized.mode": "true"} if read_optimized else None
    )
    if as_of is not None:
        options = options.with_as_of_timestamp(as_of)
    batches = hudi_rs.HudiTableBuilder.from_base_uri(str(Path(path).resolve())).build().read(options)
    return pa.Table.from_batches(batches) if batches else None


def rows_of(table: pa.Table | None) -> list[dict[str, Any]]:
    """A table's rows as a sorted list: equal lists mean equal multisets of rows."""
    return [] if table is None else sorted(table.to_pylist(), key=repr)


def assert_reads_like_hudi_rs(path: Path | str, as_of: str | None = None, read_optimized: bool = False) -> list[dict[str, Any]]:
    """Our read equals hudi-rs's (all columns, as a multiset of rows, same column types); returns the rows."""
    ours = read_ours(path, as_of, read_optimized)
    theirs = read_rs(path, as_of, read_optimized)
    if theirs is not None:
        assert [(f.name, f.type) for f in ours.schema] == [(f.name, f.type) for f in theirs.schema]
    assert rows_of(ours) == rows_of(theirs)
    return rows_of(ours)


def values(rows: list[dict[str, Any]], *names: str) -> list[tuple[Any, ...]]:
    """Sorted tuples of some columns of `rows`, for short expectations."""
    return sorted(tuple(r[n] for n in names) for r in rows)
