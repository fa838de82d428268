"""Shared pieces of the `hoodie` command: errors, output formatting, options, Spark start-up."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import InvalidInputError
from engine.serial import to_doc
from engine.table.meta_client import MetaClient
from engine.timeline.instant import is_valid_instant_time

PROG = "hoodie"


EXIT_OK, EXIT_UNEXPECTED, EXIT_USER = 0, 1, 2
EXIT_RETRY = 75  # sysexits' EX_TEMPFAIL: another writer won (WriteConflictError) or holds the lock


# file extension -> input format
FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


# CLI sub-command -> `Table` method
WRITE_METHODS = {
    "upsert": "upsert", "insert": "insert", "bulk-insert": "bulk_insert", "delete": "delete",
    "insert-overwrite": "insert_overwrite", "insert-overwrite-table": "insert_overwrite_table",
}


class UsageError(Exception):
    """Bad command-line usage, or a local file problem found before any work starts (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


# ---- output helpers ----------------------------------------------------------------------
def emit_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    width = max((len(k) for k, _v in pairs), default=0)
    for key, value in pairs:
        print(f"{key.ljust(width)}  {cell(value)}")


def one_line(text: str) -> str:
    return " ".join(text.split())


def first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def error_text(exc: BaseException) -> str:
    """The first line of an exception's message; for a Py4J-wrapped Java exception, the Java message's."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return first_line(java.getMessage() or java.toString())
        except Exception:  # the JVM may be gone; fall back to the Python text
            pass
    return first_line(str(exc))


def check_instant(value: str | None, what: str) -> str | None:
    if value is not None and not is_valid_instant_time(value):
        raise InvalidInputError(f"{what} must be an instant time yyyyMMddHHmmssSSS, got {value!r}")
    return value


# ---- Spark commands ----------------------------------------------------------------------
def progress_printer(args: argparse.Namespace) -> Callable[[str], None]:
    show = args.verbose or sys.stderr.isatty()
    started = time.monotonic()

    def report(message: str) -> None:
        if show:
            print(f"{PROG}: [{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    return report


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def local_path(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def input_format(path: str, given: str | None) -> str:
    if given:
        return given
    ext = os.path.splitext(path.rstrip("/"))[1].lower()
    if ext not in FORMATS:
        raise UsageError(f"cannot tell the format of {path!r} from its extension; pass --format parquet|csv|json")
    return FORMATS[ext]


def check_input(path: str) -> None:
    if not is_local(path):
        return
    local = local_path(path)
    if not os.path.exists(local):
        raise UsageError(f"input file not found: {path}")
    if not os.access(local, os.R_OK):
        raise UsageError(f"input file is not readable: {path}")


def parse_options(pairs: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


def start_spark(args: argparse.Namespace, progress: Callable[[str], None]):
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


def maintenance(args: argparse.Namespace):
    from engine.services.maintenance import Maintenance

    return Maintenance(MetaClient.open(args.path), parse_options(getattr(args, "option", None)))


def report(args: argparse.Namespace, title: str, value: Any) -> int:
    doc = to_doc(value)
    dry = bool(getattr(args, "dry_run", False))
    if args.json:
        emit_json({"dry_run": dry, title: doc})
        return EXIT_OK
    print(("plan (dry run, nothing changed): " if dry else "") + title)
    if isinstance(doc, dict):
        print_pairs([(k, json.dumps(v) if isinstance(v, dict | list) else v) for k, v in doc.items()])
    elif doc is None:
        print("nothing to do")
    else:
        print(json.dumps(doc, indent=2))
    return EXIT_OK
