"""The `hoodie` command: create, write, read and inspect tables from a shell.

Metadata commands (`init`, `show`, `commits`, `fsview`) run on `MetaClient` alone and never
import pyspark; only the writes (`upsert`, `insert`, `bulk-insert`, `delete`, `insert-overwrite`,
`insert-overwrite-table`), `read` and `lookup` start Spark, and
only after their arguments, the table and the input file have been checked.

Every command takes `--json` (one JSON document on stdout). Errors print one line,
`hoodie: error: <message>`, on stderr: exit 2 for user errors (bad arguments, missing files,
`EngineError`), exit 75 (EX_TEMPFAIL) when another writer won a conflict or holds the table lock
(`WriteConflictError`, `ConcurrentWriteError`: nothing changed, a retry may succeed), exit 1 for
anything unexpected (traceback only with HOODIE_DEBUG=1).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from engine.cli.common import (
    EXIT_OK,
    EXIT_RETRY,
    EXIT_UNEXPECTED,
    EXIT_USER,
    FORMATS,
    PROG,
    Parser,
    UsageError,
    error_text,
    one_line,
)
from engine.cli.data_cmds import (
    cmd_changes,
    cmd_lookup,
    cmd_read,
    cmd_write,
)
from engine.cli.service_cmds import (
    OrderedChanges,
    cmd_alter,
    cmd_archive,
    cmd_clean,
    cmd_clustering,
    cmd_compaction,
    cmd_repair,
    cmd_restore,
    cmd_rollback,
    cmd_savepoint,
    cmd_savepoints,
)
from engine.cli.table_cmds import (
    cmd_commits,
    cmd_fsview,
    cmd_index_build,
    cmd_index_drop,
    cmd_init,
    cmd_show,
)
from engine.config.table_config import CREATE_VERSIONS, TableType
from engine.constants import TABLE_VERSION
from engine.errors import ConcurrentWriteError, EngineError, WriteConflictError
from engine.table.create import AVAILABLE_INDEXES, DEFAULT_INDEX


# ---- parser ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The `hoodie` argument parser (one sub-command per action)."""
    parser = Parser(prog=PROG, description="Apache Hudi tables (table versions 4 to 9: reads all, writes 6, 8 and 9, upgrading 4 and 5) on PySpark.")
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
    p.add_argument("--type", default=TableType.COPY_ON_WRITE.value,
                   help="table type: COPY_ON_WRITE (default) or MERGE_ON_READ")
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
    p.add_argument("--table-version", type=int, default=TABLE_VERSION, choices=CREATE_VERSIONS, metavar="N",
                   help="Hudi table version: 6 (default; Apache Hudi 0.14/0.15), 8 (Hudi 1.0) or 9 (Hudi 1.1)")
    p.add_argument("--no-metadata", dest="metadata", action="store_false", default=None,
                   help="versions 8 and 9: create no metadata table (by default they get one, as Apache Hudi 1.x "
                        "creates them; RECORD then looks keys up in its record_index)")

    p.add_argument("--cdc", action="store_true",
                   help="log changes as Apache Hudi's CDC does (hoodie.table.cdc.enabled): see `changes`")
    p.add_argument("--cdc-mode", metavar="MODE",
                   help="with --cdc: OP_KEY_ONLY, DATA_BEFORE or DATA_BEFORE_AFTER (default)")

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
        ("insert-overwrite", "replace the partitions the input has records for with its records"),
        ("insert-overwrite-table", "replace the whole table with the input's records"),
    ):
        p = command(name, help_text, cmd_write, spark=True)
        p.add_argument("--input", required=True, metavar="FILE", help="input file (.parquet, .csv, .json[l])")
        p.add_argument("--format", choices=sorted(set(FORMATS.values())), help="input format")
        p.add_argument("--option", action="append", metavar="KEY=VALUE", help="write option (repeatable)")

    p = command("read", "read the table into one parquet file", cmd_read, spark=True)
    when = p.add_mutually_exclusive_group()
    when.add_argument("--as-of", metavar="INSTANT", help="time travel to a completed instant")
    when.add_argument("--since", metavar="INSTANT", help="incremental read of commits after INSTANT")
    p.add_argument("--until", metavar="INSTANT", help="end (inclusive) of the incremental read")
    p.add_argument("--read-optimized", action="store_true",
                   help="base files only (merge-on-read: log files are not merged)")
    p.add_argument("--output", required=True, metavar="FILE.parquet", help="the parquet file to write")

    p = command("changes", "print the records inserted, updated and deleted in a window (CDC, JSON lines)",
                cmd_changes)
    p.add_argument("--since", required=True, metavar="INSTANT", help="start of the window (exclusive; 000: all)")
    p.add_argument("--until", metavar="INSTANT", help="end of the window (inclusive; default: now)")
    p.add_argument("--limit", type=int, metavar="N", help="print at most N changes (the count stays exact)")
    p.add_argument("--verbose", "-v", action="store_true", help="always print progress on stderr")

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
    p = service("alter", "rename, drop, move or widen columns (schema on read; one alter_schema commit)", cmd_alter)
    for flag, meta_var, text in (
        ("rename", "OLD=NEW", "rename a column"), ("drop", "NAME", "drop a column"),
        ("type", "NAME=TYPE", "widen a column: int, long, float, double, decimal(p,s)"),
        ("first", "NAME", "move a column first"), ("after", "NAME=OTHER", "move NAME right after OTHER"),
        ("before", "NAME=OTHER", "move NAME right before OTHER"),
    ):
        p.add_argument(f"--{flag}", dest=flag, action=OrderedChanges, metavar=meta_var, help=f"{text} (repeatable, applied in order)")
    help_text = "merge-on-read compaction: schedule a plan, run pending plans (or schedule and run one), show plans"
    p = sub.add_parser("compaction", help=help_text, description=help_text)
    p.add_argument("action", choices=["schedule", "run", "show"])
    p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
    p.add_argument("instant", nargs="?", metavar="INSTANT", help="a pending compaction (run, show)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="write option (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(handler=cmd_compaction)
    help_text = ("clustering: rewrite small file slices into larger file groups, sorted by columns (linear, z-order, "
                 "hilbert); schedule a plan, run pending plans (or schedule and run one), show plans")
    p = sub.add_parser("clustering", help=help_text, description=help_text)
    p.add_argument("action", choices=["schedule", "run", "show"])
    p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
    p.add_argument("instant", nargs="?", metavar="INSTANT", help="a pending clustering (run, show)")
    p.add_argument("--sort-columns", metavar="A,B", help="hoodie.clustering.plan.strategy.sort.columns")
    p.add_argument("--layout", choices=["linear", "z-order", "hilbert"], help="hoodie.layout.optimize.strategy")
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="write or clustering option (repeatable)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--verbose", "-v", action="store_true", help="always print progress on stderr")
    p.set_defaults(handler=cmd_clustering)
    p = sub.add_parser("index", help="index maintenance", description="index maintenance")
    isub = p.add_subparsers(dest="index_command", required=True, metavar="ACTION")
    help_text = "build the RECORD index from the data files and make it the table's index (no writer may run)"
    p = isub.add_parser("build", help=help_text, description=help_text)
    p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--type", metavar="TYPE", help="index type (RECORD)")
    p.add_argument("--buckets", type=int, metavar="N", help="number of buckets (default 16; fixed afterwards)")
    p.add_argument("--hash", metavar="NAME", help="hash function (default JAVA_STRING_HASH)")
    p.add_argument("--partition", metavar="P",
                   help="build a metadata-table partition instead (files, record_index, column_stats, partition_stats, "
                        "secondary_index_<name> with --columns C)")
    p.add_argument("--columns", metavar="C1,C2",
                   help="--partition column_stats: the columns to index (default: the first 32 it covers); "
                        "--partition secondary_index_<name>: its one column")
    p.set_defaults(handler=cmd_index_build)
    help_text = "drop a partition of Apache Hudi's metadata table (files: the whole metadata table)"
    p = isub.add_parser("drop", help=help_text, description=help_text)
    p.add_argument("path", metavar="PATH", help="table base path (local path, file:// or s3://)")
    p.add_argument("--partition", required=True, metavar="P", help="the metadata partition, e.g. column_stats")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(handler=cmd_index_drop)
    return parser


def _fail(message: str, code: int) -> int:
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `hoodie` command; returns the exit code."""
    debug = os.environ.get("HOODIE_DEBUG") == "1"
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except SystemExit as exc:  # --help / --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except (WriteConflictError, ConcurrentWriteError) as exc:  # nothing changed: retrying may succeed
        if debug:
            traceback.print_exc()
        return _fail(f"{type(exc).__name__}: {exc}", EXIT_RETRY)
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
        detail = error_text(exc)
        return _fail(f"unexpected {type(exc).__name__}" + (f": {detail}" if detail else ""), EXIT_UNEXPECTED)




if __name__ == "__main__":
    sys.exit(main())
