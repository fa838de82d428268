"""hudi-rs (the reference reader, `pip install hudi`) as the test oracle.

Paths are local folders or URIs (`s3://bucket/prefix`, with `storage_options` in hudi-rs's
names, e.g. `s3_storage_options()` for the AWS_* environment variables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder


def _table(path: str | Path, storage_options: Mapping[str, str] | None = None):
    uri = str(path) if "://" in str(path) else str(Path(path).resolve())
    builder = HudiTableBuilder.from_base_uri(uri)
    if storage_options:
        builder = builder.with_storage_options(dict(storage_options))
    return builder.build()


def s3_storage_options(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """hudi-rs storage options for the S3 endpoint and keys in the AWS_* variables of `env`."""
    env = os.environ if env is None else env
    options = {
        "aws_endpoint_url": env.get("AWS_ENDPOINT_URL", ""),
        "aws_access_key_id": env.get("AWS_ACCESS_KEY_ID", ""),
        "aws_secret_access_key": env.get("AWS_SECRET_ACCESS_KEY", ""),
        "aws_region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
    }
    if options["aws_endpoint_url"].startswith("http://"):
        options["aws_allow_http"] = "true"
    return {k: v for k, v in options.items() if v}


def _rows(batches) -> list[dict]:
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def snapshot(path: str | Path, as_of: str | None = None,
             storage_options: Mapping[str, str] | None = None) -> list[dict]:
    opts = HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    return _rows(_table(path, storage_options).read(opts))


def incremental(path: str | Path, start: str, end: str | None = None) -> list[dict]:
    opts = HudiReadOptions().with_query_type(HudiQueryType.Incremental).with_start_timestamp(start)
    if end is not None:
        opts = opts.with_end_timestamp(end)
    return _rows(_table(path).read(opts))


def arrow_snapshot(path: str | Path, as_of: str | None = None) -> pa.Table | None:
    """hudi-rs's snapshot as one Arrow table (None when it returns no batches)."""
    opts = HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    batches = _table(path).read(opts)
    return pa.Table.from_batches(batches) if batches else None


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["_hoodie_partition_path"] or "", r["_hoodie_record_key"], r["_hoodie_commit_seqno"]))
