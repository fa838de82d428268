"""Reading an uploaded batch file (CSV, JSON lines, Parquet; CSV and JSON lines also gzipped)
into Arrow within bounds, so a small file that decompresses to something huge is refused
before the web worker holds it.

`UploadLimits` bounds the rows and the decoded size (Arrow's in-memory bytes, what the worker
would hold). Files are read batch by batch and reading stops at the first batch past a bound:
Parquet by record batches after a look at its footer (row count, uncompressed sizes), with
string and binary columns kept dictionary-encoded while reading (a repeated value costs its
size once) and their decoded size computed from the dictionary; CSV and JSON lines through
pyarrow's streaming readers. Every problem is an `UploadError` naming it (400 unless said).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json", ".parquet": "parquet"}
KINDS = {"csv": "CSV with a header row", "json": "JSON lines", "parquet": "Parquet"}
GZIP_MAGIC = b"\x1f\x8b"
BATCH_ROWS = 64 * 1024  # Parquet rows decoded at a time (strings stay dictionary-encoded)
BLOCK_BYTES = 1 << 20  # CSV / JSON text parsed at a time


class UploadError(ValueError):
    """The batch is unusable; the message says why. Nothing was stored or queued."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class UploadLimits:
    """The most rows and decoded bytes one upload may hold (CONSOLE_MAX_UPLOAD_ROWS,
    CONSOLE_MAX_UPLOAD_DECODED_MB)."""

    max_rows: int
    max_bytes: int

    def rows_error(self, filename: str, rows: int | None = None) -> UploadError:
        has = f" ({rows:,} rows)" if rows is not None else ""
        return UploadError(f"{filename} holds more than {self.max_rows:,} rows{has}, the limit of one upload "
                           "(CONSOLE_MAX_UPLOAD_ROWS): split the batch")

    def bytes_error(self, filename: str) -> UploadError:
        return UploadError(f"{filename} decompresses to more than {_mb(self.max_bytes)}, the limit of one upload "
                           "once decoded (CONSOLE_MAX_UPLOAD_DECODED_MB): split the batch")


def _mb(n: int) -> str:
    return f"{n / (1 << 20):g} MB"


def split_name(filename: str) -> tuple[str, bool]:
    """(format, gzipped) of an upload's name: `x.csv`, `x.csv.gz`, `x.jsonl.gz`, `x.parquet`."""
    name = (filename or "").lower()
    gz = name.endswith(".gz")
    ext = os.path.splitext(name[:-3] if gz else name)[1]
    if ext not in FORMATS or (gz and FORMATS[ext] == "parquet"):
        shown = ext + (".gz" if gz else "") if ext else ("(none)" if not gz else ".gz")
        raise UploadError(
            f"unsupported file type {shown!r}: upload a .csv (with a header row), .json/.jsonl "
            "(one JSON object per line), either of them gzipped (.gz), or a .parquet file", 415)
    return FORMATS[ext], gz


def read_batch(filename: str, source: bytes | IO[bytes], limits: UploadLimits) -> pa.Table:
    """The file as one Arrow table (columns as the file has them), or UploadError."""
    fmt, gz = split_name(filename)
    stream: IO[bytes] = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    head = stream.read(4)
    stream.seek(0)
    if not head:
        raise UploadError("the file is empty")
    if gz and head[:2] != GZIP_MAGIC:
        raise UploadError(f"{filename} is not gzip-compressed (its name ends in .gz)")
    try:
        if fmt == "parquet":
            if head != b"PAR1":
                raise UploadError(f"{filename} is not a Parquet file (no PAR1 magic bytes)")
            table = _read_parquet(filename, stream, limits)
        else:
            raw = pa.input_stream(stream, compression="gzip" if gz else None)
            table = _read_text(filename, fmt, raw, limits)
    except UploadError:
        raise
    except UnicodeDecodeError as exc:
        bad = exc.object[max(0, exc.start - 8):exc.end + 8] if isinstance(exc.object, bytes) else b""
        raise UploadError(f"cannot read {filename}: its header row is not UTF-8 text ({exc.reason} in a column "
                          f"name, near {bad!r}): save it as UTF-8") from exc
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError, EOFError, ValueError) as exc:
        raise UploadError(f"cannot read {filename} as {KINDS[fmt]}{' (gzip)' if gz else ''}: "
                          f"{_first_line(str(exc))}") from exc
    _check_names(table.schema.names)
    if fmt != "parquet":
        _check_text(table)
    return table


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), text)


# ---- Parquet ------------------------------------------------------------------------------------
def _read_parquet(filename: str, stream: IO[bytes], limits: UploadLimits) -> pa.Table:
    plain = pq.ParquetFile(stream)
    md = plain.metadata
    if md.num_rows > limits.max_rows:
        raise limits.rows_error(filename, md.num_rows)
    uncompressed = sum(md.row_group(g).column(c).total_uncompressed_size
                       for g in range(md.num_row_groups) for c in range(md.num_columns))
    if uncompressed > limits.max_bytes:
        raise limits.bytes_error(filename)
    schema = plain.schema_arrow
    text_cols = [f.name for f in schema if _is_text(f.type)]
    stream.seek(0)
    pf = pq.ParquetFile(stream, read_dictionary=text_cols) if text_cols else plain
    batches = _bounded(filename, pf.iter_batches(batch_size=BATCH_ROWS), limits)
    table = pa.Table.from_batches(list(batches), schema=_dictionary_schema(schema, text_cols))
    return table.cast(schema)  # decode the dictionaries: within the bound, checked above


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _dictionary_schema(schema: pa.Schema, text_cols: list[str]) -> pa.Schema:
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type), f.nullable) if f.name in text_cols else f
                      for f in schema])


def _decoded_bytes(column: pa.Array) -> int:
    """What `column` takes once plain: a dictionary's values counted once per row that uses them."""
    if pa.types.is_dictionary(column.type):
        lengths = pc.binary_length(column.dictionary)
        used = pc.take(lengths, column.indices)
        return int(pc.sum(used).as_py() or 0) + 4 * (len(column) + 1) + (len(column) + 7) // 8
    return column.nbytes


def _bounded(filename: str, batches: Iterator[pa.RecordBatch], limits: UploadLimits) -> Iterator[pa.RecordBatch]:
    rows = decoded = 0
    for batch in batches:
        rows += batch.num_rows
        if rows > limits.max_rows:
            raise limits.rows_error(filename)
        decoded += sum(_decoded_bytes(col) for col in batch.columns)
        if decoded > limits.max_bytes:
            raise limits.bytes_error(filename)
        yield batch


# ---- CSV and JSON lines ---------------------------------------------------------------------------
def _read_text(filename: str, fmt: str, raw: pa.NativeFile, limits: UploadLimits) -> pa.Table:
    if fmt == "csv":
        reader = pacsv.open_csv(raw, read_options=pacsv.ReadOptions(block_size=BLOCK_BYTES))
        _check_names(reader.schema.names)  # before any row is read
    else:
        reader = pajson.open_json(raw, read_options=pajson.ReadOptions(block_size=BLOCK_BYTES))
    batches = list(_bounded(filename, _batches(reader), limits))
    return pa.Table.from_batches(batches, schema=reader.schema)


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


def _check_names(names: list[str]) -> None:
    seen: set[str] = set()
    dupes = sorted({n for n in names if n in seen or seen.add(n)})  # type: ignore[func-returns-value]
    if dupes:
        raise UploadError(f"duplicate column name(s) {', '.join(repr(d) for d in dupes)}: every column needs its "
                          "own name")
    if any(not n.strip() for n in names):
        raise UploadError("a column has an empty name: every column needs a name (check the header row)")


def _check_text(table: pa.Table) -> None:
    """CSV and JSON readers turn text that is not UTF-8 into binary columns: name them instead."""
    bad = [f.name for f in table.schema if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    if bad:
        raise UploadError(f"column(s) {', '.join(repr(b) for b in bad)} hold text that is not UTF-8: save the file "
                          "as UTF-8")
