"""The per-process cache of parsed base-file footers (engine.data.base_file): what a read takes
from it, when it does not, and the footer length read from a file's tail."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.data import base_file
from engine.errors import CorruptTableError
from engine.storage import storage_for


def _write(path: Path, rows: int, value: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, pa.schema([("k", pa.string())]), store_schema=False) as w:
        w.write_table(pa.table({"k": [f"k{i}" for i in range(rows)]}))
        w.add_key_value_metadata({"org.apache.hudi.bloomfilter": value})


def test_remembered_footer_serves_reads_of_the_same_file_only(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    _write(tmp_path / "p" / "a.parquet", 3, b"A" * 1000)
    assert base_file.remembered_footer(storage, "p/a.parquet") is None  # nothing read yet
    footer = base_file.read_footer(storage, "p/a.parquet", remember=True)
    assert footer[b"org.apache.hudi.bloomfilter"] == b"A" * 1000
    assert base_file.remembered_footer(storage, "p/a.parquet") is footer
    assert base_file.read_base_file(storage, "p/a.parquet").column("k").to_pylist() == ["k0", "k1", "k2"]
    # the same name, other bytes (never done by the engine: names carry the instant): the read
    # does not use the remembered footer of a file of another size
    _write(tmp_path / "p" / "a.parquet", 5, b"B" * 10)
    assert base_file.read_base_file(storage, "p/a.parquet").column("k").to_pylist() == [f"k{i}" for i in range(5)]
    # another table's file of the same relative path is another entry
    other = storage_for(str(tmp_path / "other"))
    _write(tmp_path / "other" / "p" / "a.parquet", 2, b"C")
    assert base_file.read_footer(other, "p/a.parquet", remember=True)[b"org.apache.hudi.bloomfilter"] == b"C"


def test_the_cache_is_bounded_by_bytes() -> None:
    cache = base_file._FooterCache(max_bytes=10_000)
    md = pq.read_metadata(pa.BufferReader(_buffer(3, b"x" * 2_000)))
    for i in range(10):
        cache.put("u", f"f{i}", base_file._Footer(100, md))
    kept = [i for i in range(10) if cache.get("u", f"f{i}") is not None]
    assert kept == [8, 9]  # each counts twice its serialized size (metadata and its dict): ~4.3 KB
    cache.clear()
    assert cache.get("u", "f9") is None


def _buffer(rows: int, value: bytes) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, pa.schema([("k", pa.string())]), store_schema=False) as w:
        w.write_table(pa.table({"k": [f"k{i}" for i in range(rows)]}))
        w.add_key_value_metadata({"v": value})
    return sink.getvalue()


def test_footer_length_is_the_serialized_metadata(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path))
    _write(tmp_path / "a.parquet", 100, b"Z" * 5000)
    assert base_file.footer_length(storage, "a.parquet") == pq.read_metadata(tmp_path / "a.parquet").serialized_size
    (tmp_path / "b.parquet").write_bytes(b"not a parquet file at all")
    with pytest.raises(CorruptTableError, match="b.parquet"):
        base_file.footer_length(storage, "b.parquet")
    (tmp_path / "c.parquet").write_bytes(b"PAR1")
    with pytest.raises(CorruptTableError, match="too small"):
        base_file.footer_length(storage, "c.parquet")
    with pytest.raises(FileNotFoundError):
        base_file.footer_length(storage, "missing.parquet")
