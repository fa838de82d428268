"""The oracle for Apache Hudi's column_stats partition: its records recomputed from the data
files the files partition lists (every file not yet cleaned), compared with what the metadata
table holds."""

from __future__ import annotations

from typing import Any

from engine.metadata import column_stats as cs
from engine.metadata import column_stats_updates as csu
from engine.metadata.reader import MetadataTableReader
from engine.table.meta_client import MetaClient


def held(meta: MetaClient, partition: str = "column_stats") -> dict[str, dict[str, Any]]:
    """The statistics `partition` (column_stats or partition_stats) holds, comparable."""
    reader = MetadataTableReader(meta, meta.timeline())
    return {k: cs.comparable(v) for k, v in reader.records(partition).items()}


def recomputed(meta: MetaClient) -> dict[str, dict[str, Any]]:
    reader = MetadataTableReader(meta, meta.timeline())
    columns, why = csu.indexed_columns(meta)
    assert columns is not None, why
    out = {}
    for partition, files in reader.file_listing().items():
        for rec in csu.written_records(meta, columns, {partition: files}):
            out[rec["key"]] = cs.comparable(rec)
    return out


def assert_same(have: dict[str, dict[str, Any]], want: dict[str, dict[str, Any]]) -> None:
    """Assert two key -> statistics maps are equal, naming the first keys that differ."""
    wrong = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
    assert not wrong, [(have.get(k), want.get(k)) for k in wrong[:3]] + [f"{len(wrong)} keys differ"]


def check(meta: MetaClient) -> dict[str, dict[str, Any]]:
    """Assert the column_stats partition equals its recomputation; return it."""
    meta.reload_config()
    have = held(meta)
    assert_same(have, recomputed(meta))
    return have
