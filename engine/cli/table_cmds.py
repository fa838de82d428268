"""`hoodie init | show | commits | fsview | index build`: metadata commands (no Spark)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from engine.cli.common import (
    EXIT_OK,
    UsageError,
    cell,
    check_instant,
    emit_json,
    print_pairs,
    print_table,
)
from engine.errors import InstantNotFoundError, InvalidInputError
from engine.metadata import create as metadata_create
from engine.metadata.summary import summarize as summarize_metadata
from engine.storage import storage_for
from engine.table.create import new_table_config
from engine.table.meta_client import MetaClient


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
        "cdc_mode": cfg.cdc_mode.value if cfg.cdc_mode is not None else None,
        "properties": cfg.to_properties(),
    }


def _print_config(doc: dict[str, Any]) -> None:
    print_pairs([(k, v) for k, v in doc.items() if k not in ("properties", "schema", "timeline")])
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
        table_version=args.table_version,
        cdc=args.cdc,
        cdc_mode=args.cdc_mode,
    )
    with_metadata = metadata_create.wanted(config.version, args.metadata)
    metadata_create.refuse_own_index_shape(
        with_metadata, args.record_index_buckets is not None or args.record_index_hash is not None,
        "--record-index-buckets and --record-index-hash", "add --no-metadata")
    meta = metadata_create.create_table(storage_for(args.path), config, with_metadata)
    doc = _config_doc(meta)
    if args.json:
        emit_json(doc)
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
    summary = summarize_metadata(meta, timeline)
    doc["metadata_table"] = summary.to_dict() if summary.present else None
    if args.json:
        emit_json(doc)
        return EXIT_OK
    doc.pop("metadata_table")
    _print_config(doc)
    print()
    print("timeline:")
    print_pairs([(f"  {k}", v) for k, v in doc["timeline"].items()])
    print()
    if summary.present:
        print(f"metadata table: reads list files through {summary.listing}"
              + (f" ({summary.reason})" if summary.reason else "") + f"; {summary.instants} completed instants")
        print_table(
            ["  PARTITION", "BUILT", "KEPT BY THIS ENGINE", "FILE GROUPS", "FILES", "BYTES", "LATEST BASE"],
            [(f"  {p.name}", "yes" if p.named else "no", "yes" if p.kept else "no (dropped at the next write)",
              p.file_groups, p.files, p.bytes, p.latest_base or "-") for p in summary.partitions],
        )
        print()
    if schema is None:
        print("schema: (table never written)")
    else:
        print("schema:")
        print_table(["  COLUMN", "TYPE"], [(f"  {f.name}", str(f.type)) for f in schema])
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
        emit_json({"path": meta.storage.base_uri, "instants": rows})
        return EXIT_OK
    if not rows:
        print(f"no instants on the timeline of {meta.storage.base_uri}")
        return EXIT_OK
    keys = ["time", "action", "state", "operation", "files", "inserts", "updates", "deletes", "bytes"]
    print_table([k.upper() for k in keys], [[r[k] for k in keys] for r in rows])
    return EXIT_OK


def cmd_fsview(args: argparse.Namespace) -> int:
    as_of = check_instant(args.as_of, "--as-of")
    meta = MetaClient.open(args.path)
    timeline = meta.timeline()
    if as_of is not None and (timeline.first_time is None or as_of < timeline.first_time):
        raise InstantNotFoundError(
            f"--as-of {as_of} is before the first instant of the table ({timeline.first_time or 'none'})"
        )
    from engine.table.fs_report import file_group_report

    report = file_group_report(meta, timeline, as_of=as_of)
    partitions: list[dict[str, Any]] = [
        {"partition": part, "file_groups": [g.to_dict() for g in groups]} for part, groups in report.items()
    ]
    if args.json:
        emit_json({"path": meta.storage.base_uri, "as_of": as_of, "partitions": partitions})
        return EXIT_OK
    if not partitions:
        print(f"no file groups in {meta.storage.base_uri}" + (f" as of {as_of}" if as_of else ""))
        return EXIT_OK
    for p in partitions:
        print(f"partition {p['partition'] or '(non-partitioned)'}")
        for g in p["file_groups"]:
            pending = f"  (compaction {g['pending_compaction']} pending)" if g["pending_compaction"] else ""
            print(f"  file group {g['file_id']}{pending}")
            for s in g["slices"]:
                base = s["base_file"]
                if base is not None:
                    print(f"    {s['base_instant']}  {base['name']}  {base['size']} bytes  {cell(base['records'])} records")
                else:
                    print(f"    {s['base_instant']}  (no base file)")
                for lf in s["log_files"]:
                    deletes = f", {lf['deletes']} deletes" if lf["deletes"] else ""
                    print(f"      {lf['name']}  {lf['size']} bytes  {cell(lf['records'])} records{deletes}"
                          f"  (commit {cell(lf['commit'])})")
    return EXIT_OK


def _metadata_build(args: argparse.Namespace) -> int:
    from engine.services.maintenance import Maintenance

    meta = MetaClient.open(args.path)
    if args.partition == "record_index":
        built = Maintenance(meta).build_metadata_record_index()
        doc = {"path": meta.storage.base_uri, "partition": args.partition, "instant": built.instant,
               "file_groups": built.file_groups, "keys": built.keys, "bytes": built.bytes}
        if args.json:
            emit_json(doc)
        else:
            print(f"built the metadata table's record index of {doc['path']}: {built.keys:,} keys in "
                  f"{built.file_groups} file groups ({built.bytes:,} bytes) at {built.instant}")
        return EXIT_OK
    if args.partition == "column_stats":
        columns = [c.strip() for c in (getattr(args, "columns", None) or "").split(",") if c.strip()]
        stats = Maintenance(meta).build_metadata_column_stats(columns)
        doc = {"path": meta.storage.base_uri, "partition": args.partition, "instant": stats.instant,
               "file_groups": stats.file_groups, "files": stats.files, "columns": list(stats.columns),
               "bytes": stats.bytes}
        if args.json:
            emit_json(doc)
        else:
            print(f"built the metadata table's column statistics of {doc['path']}: {len(stats.columns)} columns of "
                  f"{stats.files:,} files in {stats.file_groups} file groups ({stats.bytes:,} bytes) at {stats.instant}")
        return EXIT_OK
    if args.partition == "partition_stats":
        ranges = Maintenance(meta).build_metadata_partition_stats()
        doc = {"path": meta.storage.base_uri, "partition": args.partition, "instant": ranges.instant,
               "file_groups": ranges.file_groups, "partitions": ranges.partitions, "columns": list(ranges.columns),
               "records": ranges.records, "bytes": ranges.bytes}
        if args.json:
            emit_json(doc)
        else:
            print(f"built the metadata table's partition statistics of {doc['path']}: {len(ranges.columns)} columns of "
                  f"{ranges.partitions:,} partitions in {ranges.file_groups} file group(s) ({ranges.bytes:,} bytes) "
                  f"at {ranges.instant}")
        return EXIT_OK
    if args.partition.startswith("secondary_index_"):
        columns = [c.strip() for c in (getattr(args, "columns", None) or "").split(",") if c.strip()]
        if len(columns) != 1:
            raise InvalidInputError(f"--partition {args.partition}: name its one column with --columns C")
        index = Maintenance(meta).build_metadata_secondary_index(args.partition, columns[0])
        doc = {"path": meta.storage.base_uri, "partition": args.partition, "instant": index.instant,
               "column": index.column, "file_groups": index.file_groups, "keys": index.keys, "bytes": index.bytes}
        if args.json:
            emit_json(doc)
        else:
            print(f"built the secondary index {args.partition} on {index.column} of {doc['path']}: {index.keys:,} "
                  f"keys in {index.file_groups} file groups ({index.bytes:,} bytes) at {index.instant}")
        return EXIT_OK
    report = Maintenance(meta).build_metadata_partition(args.partition)
    summary = summarize_metadata(MetaClient.open(args.path))
    doc = {"path": meta.storage.base_uri, "partition": args.partition, "created": report.metadata_table_created,
           "listing": summary.listing}
    if args.json:
        emit_json(doc)
    else:
        verb = "built" if report.metadata_table_created else "already had"
        print(f"{verb} the metadata table's {args.partition} partition of {doc['path']}; reads list files "
              f"through the {summary.listing}")
    return EXIT_OK


def cmd_index_drop(args: argparse.Namespace) -> int:
    """Drop one partition of the metadata table (files: all of it)."""
    from engine.services.maintenance import Maintenance

    meta = MetaClient.open(args.path)
    dropped = Maintenance(meta).drop_metadata_partition(args.partition)
    doc = {"path": meta.storage.base_uri, "dropped": dropped}
    if args.json:
        emit_json(doc)
    else:
        print(f"dropped the metadata partition(s) {', '.join(dropped)} of {doc['path']}")
    return EXIT_OK


def cmd_index_build(args: argparse.Namespace) -> int:
    """Build the RECORD index of a table from its data files and make it the table's index."""
    from engine.services.maintenance import Maintenance

    if args.partition is not None:
        return _metadata_build(args)
    if args.type is None or args.type.upper() != "RECORD":
        raise UsageError(f"only the RECORD index can be built, not {args.type}" if args.type
                         else "say what to build: --type RECORD, or --partition files (the metadata table)")
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
        emit_json(doc)
    else:
        print(f"built the RECORD index of {doc['path']}: {doc['entries']} entries in {doc['buckets']} buckets")
    return EXIT_OK
