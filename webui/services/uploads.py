"""Uploaded batches: parse (CSV, JSON lines, Parquet) with pyarrow, check them against the
table before any job exists, keep them as Parquet for the job runner.

The checks are the engine's own (`engine.schema.evolution.resolve_write_schema`, the key
rules of `engine.keygen.keys`), run here on the Arrow schema so that a bad batch is refused
with a clear message at upload time and never becomes a job or a commit.
"""

from __future__ import annotations

import io
import os
import random
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.facade import (
    InvalidInputError,
    KeySpec,
    MetaClient,
    SchemaMismatchError,
    canonical_type,
    internal_schema,
    resolve_write_schema,
    without_meta_fields,
)
from webui.extensions import db
from webui.models import TableEntry, Upload, User
from webui.services.batch_files import UploadError, UploadLimits, read_batch, split_name

OPERATIONS = ("upsert", "insert", "delete")
PREVIEW_ROWS = 20
_UPLOAD_ID = re.compile(r"^[a-f0-9]{32}$")


def format_of(filename: str) -> str:
    return split_name(filename)[0]


def limits() -> UploadLimits:
    """The app's bounds on one upload (webui/config.py; its defaults outside an app)."""
    from flask import current_app, has_app_context

    from webui.config import DEFAULT_MAX_UPLOAD_DECODED_MB, DEFAULT_MAX_UPLOAD_ROWS

    config = current_app.config if has_app_context() else {}
    return UploadLimits(int(config.get("CONSOLE_MAX_UPLOAD_ROWS", DEFAULT_MAX_UPLOAD_ROWS)),
                        int(config.get("CONSOLE_MAX_UPLOAD_DECODED_MB", DEFAULT_MAX_UPLOAD_DECODED_MB)) << 20)


def parse(filename: str, data: bytes | IO[bytes], bounds: UploadLimits | None = None) -> pa.Table:
    """An uploaded file (its bytes, or a seekable binary stream) as a normalized table, read
    within `bounds` (the app's, by default): see `batch_files`."""
    return normalize(read_batch(filename, data, bounds or limits()))


def from_records(records: Any) -> pa.Table:
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise UploadError("records must be a non-empty list of JSON objects")
    bounds = limits()
    if len(records) > bounds.max_rows:
        raise bounds.rows_error("the records", len(records))
    try:
        return normalize(pa.Table.from_pylist(records))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UploadError(f"the records do not form a table: {_first_line(str(exc))}") from exc


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), text)


def _normal_type(t: pa.DataType) -> pa.DataType:
    """The type Spark hands the engine for `t` (microsecond UTC timestamps, plain strings)."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_large_string(t) or pa.types.is_null(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return _normal_type(t.value_type)
    return t


def normalize(table: pa.Table) -> pa.Table:
    if table.num_columns == 0:
        raise UploadError("the batch has no columns")
    fields = [pa.field(f.name, _normal_type(f.type), nullable=True) for f in table.schema]
    try:
        return table.cast(pa.schema(fields))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise UploadError(f"unsupported column types: {_first_line(str(exc))}") from exc


@dataclass
class CheckedBatch:
    table: pa.Table
    operation: str
    schema_rows: list[dict[str, Any]]


def check(meta: MetaClient, table: pa.Table, operation: str) -> CheckedBatch:
    """Refuse a batch the engine would refuse (InvalidInputError/SchemaMismatchError become
    UploadError with the engine's message), and compare its schema with the table's."""
    if operation not in OPERATIONS:
        raise UploadError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    if table.num_rows == 0:
        raise UploadError("the batch has no rows: nothing to write")
    cfg = meta.config
    spec = KeySpec.from_config(cfg)
    table_schema = meta.latest_schema()
    _check_nested(table.schema, table_schema, cfg.name)
    if table_schema is not None:
        table = align_text_times(table, table_schema)
    try:
        resolved = resolve_write_schema(table.schema, table_schema, spec, cfg.precombine_field,
                                        deleting=operation == "delete")
        # schema on read: the checks the commit makes (a dropped name back with another type)
        internal_schema.for_write(without_meta_fields(resolved), meta.schema_versions(), 0)
    except SchemaMismatchError as exc:
        raise UploadError(f"schema mismatch: {exc}", 422) from exc
    except InvalidInputError as exc:
        raise UploadError(str(exc), 422) from exc
    bad = _null_keys(table, spec)
    if bad:
        raise UploadError(
            f"{bad} row(s) have a null or empty record key ({', '.join(spec.record_key_fields)}); "
            "every row needs a key", 422)
    return CheckedBatch(table, operation, compare_schemas(table.schema, table_schema, spec, cfg.precombine_field))


def _check_nested(incoming: pa.Schema, table: pa.Schema | None, name: str) -> None:
    """Nested columns (struct, list, map) only where the table has the same column: the console
    neither shows nor evolves nested types."""
    for f in incoming:
        if not pa.types.is_nested(f.type):
            continue
        if table is not None and f.name in table.names and canonical_type(table.field(f.name).type) == canonical_type(f.type):
            continue
        has = (f"has {table.field(f.name).type}" if table is not None and f.name in table.names
               else "has no such column")
        raise UploadError(f"column {f.name!r} has the nested type {f.type}, which table {name!r} {has}: "
                          "upload flat columns (or write nested data with the engine's API)")


def align_text_times(table: pa.Table, target: pa.Schema) -> pa.Table:
    """JSON and CSV have no timestamp type: text columns the table stores as timestamps or dates
    are parsed (ISO 8601) when every value parses; otherwise they stay text (and the schema check
    says so)."""
    for i, f in enumerate(table.schema):
        if f.name not in target.names or not pa.types.is_string(f.type):
            continue
        want = target.field(f.name).type
        if not (pa.types.is_timestamp(want) or pa.types.is_date(want)):
            continue
        try:
            if pa.types.is_timestamp(want):  # UTC only: "...Z", "+00:00" or no zone
                text = pc.replace_substring_regex(table.column(i), r"(Z|\+00:?00)$", "")
                parsed = pc.cast(text, pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
            else:
                parsed = pc.cast(table.column(i), want)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        table = table.set_column(i, pa.field(f.name, parsed.type, nullable=True), parsed)
    return table


def _null_keys(table: pa.Table, spec: KeySpec) -> int:
    masks = []
    for f in spec.record_key_fields:
        col = table.column(f)
        text = pc.cast(col, pa.string()) if not pa.types.is_string(col.type) else col
        masks.append(pc.or_kleene(pc.is_null(text), pc.equal(pc.fill_null(text, ""), "")))
    if not masks:
        return 0
    combined = masks[0]
    for m in masks[1:]:
        # complex keys fail only when every part is null or empty (as the engine's keygen)
        combined = pc.and_kleene(combined, m) if spec.complex_keys else pc.or_kleene(combined, m)
    return int(pc.sum(pc.cast(combined, pa.int64())).as_py() or 0)


def compare_schemas(incoming: pa.Schema, table: pa.Schema | None, spec: KeySpec, precombine: str | None) -> list[dict[str, Any]]:
    rows = []
    roles = {f: "record key" for f in spec.record_key_fields}
    roles.update({f: "partition" for f in spec.partition_fields if f not in roles})
    if precombine:
        roles.setdefault(precombine, "precombine")
    for f in incoming:
        want = table.field(f.name).type if table is not None and f.name in table.names else None
        if table is None:
            status = "new table"
        elif want is None:
            status = "added"
        elif canonical_type(f.type) == canonical_type(want):
            status = "same"
        else:
            status = "widened"
        rows.append({"name": f.name, "incoming": str(f.type), "table": str(want) if want is not None else None,
                     "status": status, "role": roles.get(f.name, "")})
    if table is not None:
        for f in table:
            if f.name not in incoming.names:
                rows.append({"name": f.name, "incoming": None, "table": str(f.type), "status": "missing",
                             "role": roles.get(f.name, "")})
    return rows


# ---- storage of checked batches ----------------------------------------------------------------
UPLOAD_RETENTION = timedelta(days=7)  # previewed but never confirmed batches go after this


def store(table: pa.Table, entry: TableEntry, filename: str, actor: User | None) -> Upload:
    """Keep a checked batch (as Parquet, in the database) until its job runs (the job runner
    deletes it then); batches never confirmed are deleted after UPLOAD_RETENTION."""
    import sqlalchemy as sa

    from webui.models import utcnow

    db.session.execute(sa.delete(Upload).where(Upload.created_at < utcnow() - UPLOAD_RETENTION))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    data = sink.getvalue()
    upload = Upload(id=secrets.token_hex(16), table_id=entry.id, filename=os.path.basename(filename or "batch")[:255],
                    rows=table.num_rows, size=len(data), data=data, created_by=actor.id if actor else None)
    db.session.add(upload)
    db.session.commit()
    return upload


def get_upload(upload_id: str, entry: TableEntry) -> Upload:
    if not _UPLOAD_ID.match(upload_id or ""):
        raise UploadError("unknown upload", 404)
    upload = db.session.get(Upload, upload_id)
    if upload is None or upload.table_id != entry.id:
        raise UploadError("this upload is gone (already written, or never made): upload the file again", 404)
    return upload


def load(upload: Upload) -> pa.Table:
    return pq.read_table(io.BytesIO(upload.data))


def preview_rows(table: pa.Table, n: int = PREVIEW_ROWS) -> tuple[list[str], list[list[str]]]:
    head = table.slice(0, n).to_pylist()
    cols = table.schema.names
    return cols, [[_cell(r.get(c)) for c in cols] for r in head]


def _cell(v: Any) -> str:
    if v is None:
        return "∅"
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


# ---- demo batches --------------------------------------------------------------------------------
CITIES = ("amsterdam", "berlin", "lisbon", "paris", "san_francisco")


def demo_batch(meta: MetaClient, rows: int = 200, seed: int | None = None, start_key: int | None = None) -> pa.Table:
    """A trips-like batch that fits the table: its schema's columns when it has one, else
    trips columns named after the table's key, partition and precombine fields."""
    rng = random.Random(seed)
    cfg = meta.config
    schema = meta.latest_schema()
    now = datetime.now(UTC).replace(microsecond=0)
    first = rng.randrange(0, 400) if start_key is None else start_key
    keys = [f"trip-{first + i:05d}" for i in range(rows)]
    if schema is None:
        cols: dict[str, Any] = {}
        for f in cfg.record_key_fields:
            cols[f] = keys
        for f in cfg.partition_fields:
            cols.setdefault(f, [rng.choice(CITIES) for _ in range(rows)])
        if cfg.precombine_field:
            cols.setdefault(cfg.precombine_field, [now - timedelta(seconds=rng.randrange(0, 86400)) for _ in range(rows)])
        cols.setdefault("rider", [f"rider-{rng.randrange(100):03d}" for _ in range(rows)])
        cols.setdefault("driver", [f"driver-{rng.randrange(50):03d}" for _ in range(rows)])
        cols.setdefault("fare", [round(rng.uniform(4, 80), 2) for _ in range(rows)])
        cols.setdefault("distance_km", [round(rng.uniform(0.5, 30), 1) for _ in range(rows)])
        return normalize(pa.table(cols))
    data = {}
    for f in schema:
        data[f.name] = pa.array([_value(f, i, keys, cfg, rng, now) for i in range(rows)], type=f.type)
    return normalize(pa.table(data))


def _value(f: pa.Field, i: int, keys: list[str], cfg: Any, rng: random.Random, now: datetime) -> Any:
    t = f.type
    if f.name in cfg.record_key_fields:
        return keys[i] if pa.types.is_string(t) else i
    if f.name in cfg.partition_fields and pa.types.is_string(t):
        return rng.choice(CITIES)
    if pa.types.is_string(t):
        return f"{f.name}-{rng.randrange(1000)}"
    if pa.types.is_integer(t):
        return rng.randrange(0, 1000)
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return round(rng.uniform(0, 100), 2)
    if pa.types.is_boolean(t):
        return f.name != "_hoodie_is_deleted" and rng.random() < 0.5
    if pa.types.is_timestamp(t):
        return now - timedelta(seconds=rng.randrange(0, 86400))
    if pa.types.is_date(t):
        return (now - timedelta(days=rng.randrange(0, 30))).date()
    return None
