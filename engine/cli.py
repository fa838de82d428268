"""The `hoodie` command: create, write, read and inspect tables from a shell.

Metadata commands (`init`, `show`, `commits`, `fsview`) run on `MetaClient` alone and never
import pyspark; only `upsert`, `insert`, `bulk-insert`, `delete`, `read` and `lookup` start Spark, and
only after their arguments, the table and the input file have been checked.

Every command takes `--json` (one JSON document on stdout). Errors print one line,
`hoodie: error: <message>`, on stderr: exit 2 for user errors (bad arguments, missing files,
`EngineError`), exit 1 for anything unexpected (traceback only with HOODIE_DEBUG=1).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from engine.config.table_config import TableType
from engine.errors import EngineError, InstantNotFoundError, InvalidInputError
from engine.services.serial import to_doc
from engine.storage import storage_for
from engine.table.create import AVAILABLE_INDEXES, DEFAULT_INDEX, new_table_config
from engine.table.meta_client import MetaClient
from engine.timeline.instant import is_valid_instant_time

PROG = "hoodie"
EXIT_OK, EXIT_UNEXPECTED, EXIT_USER = 0, 1, 2

# file extension -> input format
_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
# CLI sub-command -> `Table` method
_WRITE_METHODS = {"upsert": "upsert", "insert": "insert", "bulk-insert": "bulk_insert", "delete": "delete"}


class UsageError(Exception):
    """Bad command-line usage, or a local file problem found before any work starts (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


# ---- output helpers ----------------------------------------------------------------------
def _emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max((len(k) for k, _v in pairs), default=0)
    for key, value in pairs:
        print(f"{key.ljust(width)}  {_cell(value)}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _error_text(exc: BaseException) -> str:
    """The first line of an exception's message; for a Py4J-wrapped Java exception, the Java message's."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return _first_line(java.getMessage() or java.toString())
        except Exception:  # the JVM may be gone; fall back to the Python text
            pass
    return _first_line(str(exc))


def _check_instant(value: str | None, what: str) -> str | None:
    if value is not None and not is_valid_instant_time(value):
        raise InvalidInputError(f"{what} must be an instant time yyyyMMddHHmmssSSS, got {value!r}")
    return value


# ---- metadata commands (no Spark) --------------------------------------------------------
def _config_doc(meta: MetaClient) -> dict[str, Any]:
    cfg = meta.config
    return {
        "path": meta.storage.base_uri,
        "name": cfg.name,
        "table_type": cfg.table_type.value,
        "record_key_fields": list(cfg.record_key_fields),
        "partition_fields": list(cfg.partition_fields),
        "precombine_field": cfg.precombine_field,
        "hive_style": cfg.hive_style,
        "index_type": cfg.index_type.value if cfg.index_type else None,
        "keygen_class": cfg.keygen_class,
        "version": cfg.version,
        "properties": cfg.to_properties(),
    }


def _print_config(doc: dict[str, Any]) -> None:
    _print_pairs([(k, v) for k, v in doc.items() if k not in ("properties", "schema", "timeline")])
    print()
    print("hoodie.properties:")
    for key, value in doc["properties"].items():
        print(f"  {key}={value}")


def cmd_init(args: argparse.Namespace) -> int:
    config = new_table_config(
        name=args.name,
        record_key=args.record_key,
        partition_fields=args.partition_field,
        precombine_field=args.precombine,
        table_type=args.type,
        index=args.index,
        hive_style=args.hive_style,
        record_index_buckets=args.record_index_buckets,
        record_index_hash=args.record_index_hash,
    )
    meta = MetaClient.create(storage_for(args.path), config)
    doc = _config_doc(meta)
    if args.json:
        _emit_json(doc)
    else:
        print(f"created table {config.name!r} at {doc['path']}")
        _print_config(doc)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    meta = MetaClient.open(args.path)
    timeline = meta.timeline()
    schema = meta.latest_schema(timeline)
    last_write = timeline.completed_writes.last
    doc = _config_doc(meta)
    doc["schema"] = [{"name": f.name, "type": str(f.type)} for f in schema] if schema is not None else None
    doc["timeline"] = {
        "instants": len(timeline),
        "completed_writes": len(timeline.completed_writes),
        "pending": [i.time for i in timeline.pending],
        "latest_completed_write": last_write.time if last_write else None,
    }
    if args.json:
        _emit_json(doc)
        return EXIT_OK
    _print_config(doc)
    print()
    print("timeline:")
    _print_pairs([(f"  {k}", v) for k, v in doc["timeline"].items()])
    print()
    if schema is None:
        print("schema: (table never written)")
    else:
        print("schema:")
        _print_table(["  COLUMN", "TYPE"], [(f"  {f.name}", str(f.type)) for f in schema])
    return EXIT_OK


_TOTALS = ("files", "partitions", "writes", "inserts", "updates", "deletes", "bytes")


def cmd_commits(args: argparse.Namespace) -> int:
    meta = MetaClient.open(args.path)
    timeline = meta.timeline()
    rows = []
    if args.archived:
        from engine.services.archive import read_archived_entries

        for e in read_archived_entries(meta):
            old: dict[str, Any] = {"time": e.get("commitTime"), "action": e.get("actionType"), "state": "archived"}
            old["operation"] = None
            old.update(dict.fromkeys(_TOTALS))
            rows.append(old)
    for inst in timeline:
        row: dict[str, Any] = {"time": inst.time, "action": inst.action.value, "state": inst.state.value}
        row["operation"] = None
        row.update(dict.fromkeys(_TOTALS))
        if inst.is_completed and inst.action.is_write:
            cm = meta.commit_metadata(inst)
            row["operation"] = cm.operation_type
            row.update(cm.totals())
        rows.append(row)
    if args.json:
        _emit_json({"path": meta.storage.base_uri, "instants": rows})
        return EXIT_OK
    if not rows:
        print(f"no instants on the timeline of {meta.storage.base_uri}")
        return EXIT_OK
    keys = ["time", "action", "state", "operation", "files", "inserts", "updates", "deletes", "bytes"]
    _print_table([k.upper() for k in keys], [[r[k] for k in keys] for r in rows])
    return EXIT_OK


def cmd_fsview(args: argparse.Namespace) -> int:
    as_of = _check_instant(args.as_of, "--as-of")
    meta = MetaClient.open(args.path)
    timeline = meta.timeline()
    if as_of is not None and (timeline.first_time is None or as_of < timeline.first_time):
        raise InstantNotFoundError(
            f"--as-of {as_of} is before the first instant of the table ({timeline.first_time or 'none'})"
        )
    view = meta.file_system_view(timeline, as_of=as_of)
    partitions: list[dict[str, Any]] = []
    for partition in view.partitions:
        groups: list[dict[str, Any]] = []
        for group in view.groups_in(partition):
            slices = [
                {
                    "base_instant": s.base_instant,
                    "base_file": s.base_file.file_name if s.base_file else None,
                    "size": s.base_file.size if s.base_file else None,
                    "log_files": [lf.file_name for lf in s.log_files],
                }
                for s in group.slices
            ]
            groups.append({"file_id": group.file_id, "slices": slices})
        partitions.append({"partition": partition, "file_groups": groups})
    if args.json:
        _emit_json({"path": meta.storage.base_uri, "as_of": as_of, "partitions": partitions})
        return EXIT_OK
    if not partitions:
        print(f"no file groups in {meta.storage.base_uri}" + (f" as of {as_of}" if as_of else ""))
        return EXIT_OK
    for p in partitions:
        print(f"partition {p['partition'] or '(non-partitioned)'}")
        for g in p["file_groups"]:
            print(f"  file group {g['file_id']}")
            for s in g["slices"]:
                logs = f" + {len(s['log_files'])} log file(s)" if s["log_files"] else ""
                print(f"    {s['base_instant']}  {_cell(s['base_file'])}  {_cell(s['size'])} bytes{logs}")
    return EXIT_OK


# ---- Spark commands ----------------------------------------------------------------------
def _progress(args: argparse.Namespace) -> Callable[[str], None]:
    show = args.verbose or sys.stderr.isatty()
    started = time.monotonic()

    def report(message: str) -> None:
        if show:
            print(f"{PROG}: [{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return report


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _input_format(path: str, given: str | None) -> str:
    if given:
        return given
    ext = os.path.splitext(path.rstrip("/"))[1].lower()
    if ext not in _FORMATS:
        raise UsageError(f"cannot tell the format of {path!r} from its extension; pass --format parquet|csv|json")
    return _FORMATS[ext]


def _check_input(path: str) -> None:
    if not _is_local(path):
        return
    local = _local_path(path)
    if not os.path.exists(local):
        raise UsageError(f"input file not found: {path}")
    if not os.access(local, os.R_OK):
        raise UsageError(f"input file is not readable: {path}")


def _options(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


def _start_spark(args: argparse.Namespace, progress: Callable[[str], None]):
    from pyspark.sql import SparkSession

    from engine.spark.session import build_session

    owned = SparkSession.getActiveSession() is None
    if owned:
        progress("starting Spark")
    spark = build_session(args.master)
    if owned and not args.verbose and "HOODIE_SPARK_LOG_LEVEL" not in os.environ:
        # failures reach the user as one `hoodie: error:` line; Spark's own log would repeat them
        spark.sparkContext.setLogLevel("OFF")
    return spark, owned


def _read_input(spark, path: str, fmt: str):
    """The input as a DataFrame; Spark's read errors become one-line InvalidInputErrors."""
    reader = spark.read
    try:
        if fmt == "parquet":
            return reader.parquet(path)
        if fmt == "csv":
            return reader.option("header", True).option("inferSchema", True).option("mode", "FAILFAST").csv(path)
        return reader.option("mode", "FAILFAST").json(path)
    except _spark_errors() as exc:
        raise InvalidInputError(f"cannot read {path} as {fmt}: {_error_text(exc)}") from exc


def cmd_write(args: argparse.Namespace) -> int:
    options = _options(args.option)
    fmt = _input_format(args.input, args.format)
    _check_input(args.input)
    meta = MetaClient.open(args.path)  # a missing table fails before Spark starts
    progress = _progress(args)
    spark, owned = _start_spark(args, progress)
    try:
        from engine.api import Table

        progress(f"reading {args.input} ({fmt})")
        df = _read_input(spark, args.input, fmt)
        method = getattr(Table(spark, meta), _WRITE_METHODS[args.command])
        result = method(df, options=options, progress=progress)
    finally:
        if owned:
            spark.stop()
    doc = result.to_dict()
    if args.json:
        _emit_json(doc)
    elif result.instant is None:
        print("the input is empty: nothing was committed")
    else:
        stats = doc.pop("index_stats", {})
        _print_pairs(list(doc.items()) + [(f"index.{k}", v) for k, v in stats.items()])
    return EXIT_OK


def _maintenance(args: argparse.Namespace):
    from engine.services.maintenance import Maintenance

    return Maintenance(MetaClient.open(args.path), _options(getattr(args, "option", None)))


def _report(args: argparse.Namespace, title: str, value: Any) -> int:
    doc = to_doc(value)
    dry = bool(getattr(args, "dry_run", False))
    if args.json:
        _emit_json({"dry_run": dry, title: doc})
        return EXIT_OK
    print(("plan (dry run, nothing changed): " if dry else "") + title)
    if isinstance(doc, dict):
        _print_pairs([(k, json.dumps(v) if isinstance(v, dict | list) else v) for k, v in doc.items()])
    elif doc is None:
        print("nothing to do")
    else:
        print(json.dumps(doc, indent=2))
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace) -> int:
    instant = _check_instant(args.instant, "INSTANT")
    return _report(args, "rollback", _maintenance(args).rollback(instant, dry_run=args.dry_run))


def cmd_restore(args: argparse.Namespace) -> int:
    instant = _check_instant(args.instant, "INSTANT")
    return _report(args, "restore", _maintenance(args).restore(instant, dry_run=args.dry_run))


def cmd_savepoint(args: argparse.Namespace) -> int:
    instant = _check_instant(args.instant, "INSTANT")
    m = _maintenance(args)
    if args.action == "create":
        return _report(args, "savepoint", m.create_savepoint(instant, comment=args.comment or "", dry_run=args.dry_run))
    return _report(args, "savepoint deleted", m.delete_savepoint(instant, dry_run=args.dry_run))


def cmd_savepoints(args: argparse.Namespace) -> int:
    sps = _maintenance(args).savepoints()
    if args.json:
        _emit_json({"savepoints": to_doc(sps)})
        return EXIT_OK
    if not sps:
        print("no savepoints")
        return EXIT_OK
    _print_table(["TIME", "FILES", "BY", "COMMENT"], [[sp.time, len(sp.files), sp.user, sp.comment] for sp in sps])
    return EXIT_OK


def cmd_clean(args: argparse.Namespace) -> int:
    return _report(args, "clean", _maintenance(args).clean(dry_run=args.dry_run))


def cmd_archive(args: argparse.Namespace) -> int:
    return _report(args, "archive", _maintenance(args).archive(dry_run=args.dry_run))


def cmd_repair(args: argparse.Namespace) -> int:
    return _report(args, "repair", _maintenance(args).repair(dry_run=args.dry_run))


def cmd_read(args: argparse.Namespace) -> int:
    if args.until is not None and args.since is None:
        raise UsageError("--until needs --since")
    _check_instant(args.as_of, "--as-of")
    _check_instant(args.since, "--since")
    _check_instant(args.until, "--until")
    output = os.path.abspath(args.output)
    if os.path.isdir(output):
        raise UsageError(f"--output is a directory: {args.output}")
    if not os.path.isdir(os.path.dirname(output)):
        raise UsageError(f"the folder of --output does not exist: {os.path.dirname(output)}")
    meta = MetaClient.open(args.path)
    progress = _progress(args)
    spark, owned = _start_spark(args, progress)
    try:
        import pyarrow.parquet as pq

        from engine.api import Table

        table = Table(spark, meta)
        if args.since is not None:
            mode = "incremental"
            df = table.read_incremental(args.since, args.until)
        else:
            mode = "snapshot" if args.as_of is None else "time_travel"
            df = table.read(as_of=args.as_of)
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
        _emit_json(doc)
    else:
        print(f"wrote {data.num_rows} row(s) to {output}")
    return EXIT_OK


def cmd_lookup(args: argparse.Namespace) -> int:
    """Print the records with the keys listed in --keys-file (one record key per line) as JSON lines."""
    try:
        with open(args.keys_file, encoding="utf-8") as f:
            keys = [line.strip() for line in f if line.strip()]
    except OSError as exc:
        raise UsageError(f"cannot read --keys-file {args.keys_file}: {exc.strerror or exc}") from exc
    meta = MetaClient.open(args.path)
    progress = _progress(args)
    spark, owned = _start_spark(args, progress)
    try:
        from engine.api import Table

        progress(f"looking up {len(keys)} key(s)")
        records = Table(spark, meta).read_keys(keys).toArrow().to_pylist()
    finally:
        if owned:
            spark.stop()
    records.sort(key=lambda r: (r["_hoodie_partition_path"] or "", r["_hoodie_record_key"]))
    if args.json:
        _emit_json({"path": meta.storage.base_uri, "keys": len(keys), "records": records})
    else:
        for record in records:
            print(json.dumps(record, default=str, sort_keys=False))
    return EXIT_OK


def cmd_index_build(args: argparse.Namespace) -> int:
    """Build the RECORD index of a table from its data files and make it the table's index."""
    from engine.services.maintenance import Maintenance

    if args.type.upper() != "RECORD":
        raise UsageError(f"only the RECORD index can be built, not {args.type}")
    meta = MetaClient.open(args.path)
    started = time.monotonic()
    updated, stats = Maintenance(meta).build_record_index(args.buckets, args.hash)
    doc = {
        "path": meta.storage.base_uri,
        "index_type": "RECORD",
        "buckets": int(dict(updated.config.extra)["hoodie.record.index.buckets"]),
        "entries": stats.get("compacted_entries", 0),
        "bytes": stats.get("compacted_bytes", 0),
        "seconds": round(time.monotonic() - started, 3),
    }
    if args.json:
        _emit_json(doc)
    else:
        print(f"built the RECORD index of {doc['path']}: {doc['entries']} entries in {doc['buckets']} buckets")
    return EXIT_OK


# ---- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The `hoodie` argument parser (one sub-command per action)."""
    parser = _Parser(prog=PROG, description="Apache Hudi (table version 6) tables on PySpark.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, handler: Callable[[argparse.Namespace], int], spark: bool = False):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
        p.add_argument("--json", action="store_true", help="print one JSON document")
        if spark:
            p.add_argument("--master", default=None, help="Spark master (default: $SPARK_MASTER or local[*])")
            p.add_argument("--verbose", "-v", action="store_true", help="always print progress on stderr")
        p.set_defaults(handler=handler)
        return p

    p = command("init", "create an empty table", cmd_init)
    p.add_argument("--name", required=True, help="table name")
    p.add_argument("--record-key", required=True, metavar="F[,G]", help="record key field(s)")
    p.add_argument("--partition-field", metavar="F[,G]", help="partition field(s)")
    p.add_argument("--precombine", metavar="F", help="precombine (ordering) field")
    p.add_argument("--type", default=TableType.COPY_ON_WRITE.value, help="table type (COPY_ON_WRITE)")
    p.add_argument(
        "--index",
        default=DEFAULT_INDEX.value,
        help=f"index type: {', '.join(sorted(i.value for i in AVAILABLE_INDEXES))} (default {DEFAULT_INDEX.value})",
    )
    p.add_argument("--hive-style", action="store_true", help="hive-style partition paths (field=value)")
    p.add_argument("--record-index-buckets", type=int, metavar="N",
                   help="index RECORD: number of buckets, fixed at creation (default 16)")
    p.add_argument("--record-index-hash", metavar="NAME",
                   help="index RECORD: hash function (JAVA_STRING_HASH default, MURMUR3_32, or module:function)")

    command("show", "show the table config, schema and timeline summary", cmd_show)
    p = command("commits", "list the instants of the timeline", cmd_commits)
    p.add_argument("--archived", action="store_true", help="also list the archived instants")
    p = command("fsview", "list partitions, file groups and file slices", cmd_fsview)
    p.add_argument("--as-of", metavar="INSTANT", help="the view as of a completed instant")

    for name, help_text in (
        ("upsert", "insert new records and update existing ones"),
        ("insert", "insert records without looking them up"),
        ("bulk-insert", "insert records into new file groups"),
        ("delete", "delete the records whose keys are in the input"),
    ):
        p = command(name, help_text, cmd_write, spark=True)
        p.add_argument("--input", required=True, metavar="FILE", help="input file (.parquet, .csv, .json[l])")
        p.add_argument("--format", choices=sorted(set(_FORMATS.values())), help="input format")
        p.add_argument("--option", action="append", metavar="KEY=VALUE", help="write option (repeatable)")

    p = command("read", "read the table into one parquet file", cmd_read, spark=True)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--as-of", metavar="INSTANT", help="time travel to a completed instant")
    when.add_argument("--since", metavar="INSTANT", help="incremental read of commits after INSTANT")
    p.add_argument("--until", metavar="INSTANT", help="end (inclusive) of the incremental read")
    p.add_argument("--output", required=True, metavar="FILE.parquet", help="the parquet file to write")

    p = command("lookup", "print the records with the given keys (JSON lines)", cmd_lookup, spark=True)
    p.add_argument("--keys-file", required=True, metavar="FILE", help="one record key per line")

    def service(name: str, help_text: str, handler: Callable[[argparse.Namespace], int], instant: bool = False):
        p = command(name, help_text, handler)
        if instant:
            p.add_argument("instant", metavar="INSTANT", help="instant time (yyyyMMddHHmmssSSS)")
        p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        p.add_argument("--option", action="append", metavar="KEY=VALUE", help="option, e.g. hoodie.cleaner.policy")
        return p

    service("rollback", "roll back one instant (completed or pending)", cmd_rollback, instant=True)
    service("restore", "roll back every instant after INSTANT (a savepoint or completed commit)", cmd_restore, instant=True)
    p = sub.add_parser("savepoint", help="create or delete a savepoint", description="create or delete a savepoint")
    p.add_argument("action", choices=["create", "delete"])
    p.add_argument("path", metavar="PATH", help="table base path")
    p.add_argument("instant", metavar="INSTANT", help="a completed commit time")
    p.add_argument("--comment", help="a note stored with the savepoint")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(handler=cmd_savepoint)
    command("savepoints", "list the savepoints", cmd_savepoints)
    service("clean", "delete file versions no longer needed (hoodie.cleaner.policy)", cmd_clean)
    service("archive", "move old instants to the archived timeline", cmd_archive)
    service("repair", "finish interrupted services and roll back failed writes", cmd_repair)
    p = sub.add_parser("index", help="index maintenance", description="index maintenance")
    isub = p.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    help_text = "build the RECORD index from the data files and make it the table's index (no writer may run)"
    p = isub.add_parser("build", help=help_text, description=help_text)
    p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--type", required=True, metavar="TYPE", help="index type (RECORD)")
    p.add_argument("--buckets", type=int, metavar="N", help="number of buckets (default 16; fixed afterwards)")
    p.add_argument("--hash", metavar="NAME", help="hash function (default JAVA_STRING_HASH)")
    p.set_defaults(handler=cmd_index_build)
    return parser


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `hoodie` command; returns the exit code."""
    debug = os.environ.get("HOODIE_DEBUG") == "1"
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except (UsageError, EngineError) as exc:
        if debug:
            traceback.print_exc()
        return _fail(str(exc), EXIT_USER)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return EXIT_UNEXPECTED
    except Exception as exc:
        if debug:
            traceback.print_exc()
        detail = _error_text(exc)
        return _fail(f"unexpected {type(exc).__name__}" + (f": {detail}" if detail else ""), EXIT_UNEXPECTED)


if __name__ == "__main__":
    sys.exit(main())
