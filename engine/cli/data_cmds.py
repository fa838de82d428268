"""`hoodie upsert | insert | bulk-insert | delete | insert-overwrite[-table] | read | lookup`: the commands
that start Spark (a write of a parquet file small enough for the local write starts it only if it
must); and `hoodie changes`, which reads without it."""

from __future__ import annotations

import argparse
import json
import os
import sys

from engine.cli.common import (
    EXIT_OK,
    WRITE_METHODS,
    UsageError,
    check_input,
    check_instant,
    emit_json,
    error_text,
    input_format,
    is_local,
    local_path,
    parse_options,
    print_pairs,
    progress_printer,
    spark_errors,
    start_spark,
)
from engine.errors import InvalidInputError
from engine.table.meta_client import MetaClient


def _read_input(spark, path: str, fmt: str):
    """The input as a DataFrame; Spark's read errors become one-line InvalidInputErrors."""
    reader = spark.read
    try:
        if fmt == "parquet":
            return reader.parquet(path)
        if fmt == "csv":
            return reader.option("header", True).option("inferSchema", True).option("mode", "FAILFAST").csv(path)
        return reader.option("mode", "FAILFAST").json(path)
    except spark_errors() as exc:
        raise InvalidInputError(f"cannot read {path} as {fmt}: {error_text(exc)}") from exc


def _local_input(path: str, fmt: str, options: dict[str, str]):
    """A parquet input small enough for the local write (`engine.write.local`), read with pyarrow
    so that the write starts no JVM; None otherwise (CSV and JSON keep Spark's type inference)."""
    from engine.config.write_config import WriteConfig

    config = WriteConfig.from_options(options)
    if fmt != "parquet" or not is_local(path) or config.local_mode == "never" or config.driver_plan == "never":
        return None
    local = local_path(path)
    files = [local] if os.path.isfile(local) else [
        os.path.join(d, f) for d, _dirs, names in os.walk(local) for f in names if f.endswith(".parquet")]
    if config.local_mode != "always" and sum(os.path.getsize(f) for f in files) * 4 > config.local_max_bytes:
        return None  # decoded, a parquet file is a few times its size: leave big inputs to Spark
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(local)
    except (pa.ArrowException, OSError) as exc:
        raise InvalidInputError(f"cannot read {path} as parquet: {exc}") from exc


def cmd_write(args: argparse.Namespace) -> int:
    options = parse_options(args.option)
    fmt = input_format(args.input, args.format)
    check_input(args.input)
    meta = MetaClient.open(args.path)  # a missing table fails before Spark starts
    progress = progress_printer(args)
    sessions: list = []

    def session():
        spark, owned = start_spark(args, progress)
        sessions.append((spark, owned))
        return spark

    try:
        from engine.api import Table

        data = _local_input(args.input, fmt, options)
        if data is not None:
            progress(f"read {args.input} ({fmt}, {data.num_rows} rows) with pyarrow: Spark starts only if the write needs it")
        else:
            progress(f"reading {args.input} ({fmt})")
            data = _read_input(session(), args.input, fmt)
        method = getattr(Table(session, meta), WRITE_METHODS[args.command])
        result = method(data, options=options, progress=progress)
    finally:
        for spark, owned in sessions:
            if owned:
                spark.stop()
    doc = result.to_dict()
    if args.json:
        emit_json(doc)
    elif result.instant is None:
        print("the input is empty: nothing was committed")
    else:
        stats = doc.pop("index_stats", {})
        print_pairs(list(doc.items()) + [(f"index.{k}", v) for k, v in stats.items()])
    return EXIT_OK


def cmd_read(args: argparse.Namespace) -> int:
    if args.until is not None and args.since is None:
        raise UsageError("--until needs --since")
    check_instant(args.as_of, "--as-of")
    check_instant(args.since, "--since")
    check_instant(args.until, "--until")
    output = os.path.abspath(args.output)
    if os.path.isdir(output):
        raise UsageError(f"--output is a directory: {args.output}")
    if not os.path.isdir(os.path.dirname(output)):
        raise UsageError(f"the folder of --output does not exist: {os.path.dirname(output)}")
    meta = MetaClient.open(args.path)
    progress = progress_printer(args)
    spark, owned = start_spark(args, progress)
    try:
        import pyarrow.parquet as pq

        from engine.api import Table

        table = Table(spark, meta)
        if args.since is not None:
            mode = "incremental"
            df = table.read_incremental(args.since, args.until)
        else:
            if args.read_optimized:
                mode = "read_optimized"
            else:
                mode = "snapshot" if args.as_of is None else "time_travel"
            df = table.read(as_of=args.as_of, read_optimized=args.read_optimized)
        progress(f"collecting the {mode} read")
        data = df.toArrow()
        tmp = f"{output}.tmp-{os.getpid()}"
        try:
            pq.write_table(data, tmp)
            os.replace(tmp, output)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    finally:
        if owned:
            spark.stop()
    doc = {
        "path": meta.storage.base_uri,
        "mode": mode,
        "as_of": args.as_of,
        "since": args.since,
        "until": args.until,
        "output": output,
        "rows": data.num_rows,
    }
    if args.json:
        emit_json(doc)
    else:
        print(f"wrote {data.num_rows} row(s) to {output}")
    return EXIT_OK


def cmd_changes(args: argparse.Namespace) -> int:
    """Print the changes of the writes in (--since, --until] as JSON lines (op, ts_ms, before,
    after), oldest first; no Spark."""
    from engine.read.changes import read_changes

    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    meta = MetaClient.open(args.path)
    progress = progress_printer(args)
    changes = read_changes(meta, args.since, args.until, progress=progress)
    rows = changes.slice(0, args.limit).to_pylist() if args.limit is not None else changes.to_pylist()
    counts = {op: sum(1 for o in changes.column("op").to_pylist() if o == op) for op in ("i", "u", "d")}
    if args.json:
        emit_json({"path": meta.storage.base_uri, "since": args.since, "until": args.until,
                   "count": changes.num_rows, "inserts": counts["i"], "updates": counts["u"],
                   "deletes": counts["d"], "changes": rows})
    else:
        for row in rows:
            print(json.dumps(row, default=str))
        print(f"{changes.num_rows} change(s): {counts['i']} insert(s), {counts['u']} update(s), "
              f"{counts['d']} delete(s)", file=sys.stderr)
    return EXIT_OK


def cmd_lookup(args: argparse.Namespace) -> int:
    """Print the records with the keys listed in --keys-file (one record key per line) as JSON lines."""
    try:
        with open(args.keys_file, encoding="utf-8") as f:
            keys = [line.strip() for line in f if line.strip()]
    except OSError as exc:
        raise UsageError(f"cannot read --keys-file {args.keys_file}: {exc.strerror or exc}") from exc
    meta = MetaClient.open(args.path)
    progress = progress_printer(args)
    spark, owned = start_spark(args, progress)
    try:
        from engine.api import Table

        progress(f"looking up {len(keys)} key(s)")
        records = Table(spark, meta).read_keys(keys).toArrow().to_pylist()
    finally:
        if owned:
            spark.stop()
    records.sort(key=lambda r: (r["_hoodie_partition_path"] or "", r["_hoodie_record_key"]))
    if args.json:
        emit_json({"path": meta.storage.base_uri, "keys": len(keys), "records": records})
    else:
        for record in records:
            print(json.dumps(record, default=str, sort_keys=False))
    return EXIT_OK
