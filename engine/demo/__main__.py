"""`make demo` / `python -m engine.demo [--name N] [--no-console]`: the guided walkthrough.

The table goes under the first of CONSOLE_WAREHOUSE_ROOTS (default ./lakehouse, the console's
default too); Spark is local unless SPARK_MASTER names a cluster; the console's database is
DATABASE_URL (default SQLite in ./lakehouse/.console/, where `make run` keeps it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from engine.demo.links import ConsoleLinks, console_base_url
from engine.demo.tour import TourReport, run_tour

DEFAULT_NAME = "tour_trips"
DEFAULT_ROOT = "./lakehouse"


def table_uri(name: str, env: Mapping[str, str] | None = None) -> str:
    """`name` under the first warehouse root (as the console places a new table)."""
    env = os.environ if env is None else env
    root = (env.get("CONSOLE_WAREHOUSE_ROOTS") or DEFAULT_ROOT).split(",")[0].strip()
    if "://" in root:
        return f"{root.rstrip('/')}/{name}"
    return os.path.join(os.path.realpath(root), name)


def run(spark=None, name: str = DEFAULT_NAME, console: bool = True, out=print) -> TourReport:  # type: ignore[no-untyped-def]
    """Run the walkthrough; builds (and stops) a SparkSession unless one is given."""
    from engine.demo.console import register_table
    from engine.spark import build_session

    own = spark is None
    if own:
        spark = build_session(app_name="hoodie-demo")
    try:
        return run_tour(spark, table_uri(name), name, ConsoleLinks(console_base_url(), name), out=out,
                        register=(lambda path: register_table(path, name)) if console else None)
    finally:
        if own:
            spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=DEFAULT_NAME, help=f"the table's name (default {DEFAULT_NAME})")
    parser.add_argument("--no-console", action="store_true", help="do not register the table in the console")
    args = parser.parse_args(argv)
    refusal = check_table_path(args.name)  # before Spark starts
    if refusal is not None:
        print(f"python -m engine.demo: {refusal}", file=sys.stderr)
        return 2
    run(name=args.name, console=not args.no_console, out=lambda line: print(line, flush=True))
    return 0


def check_table_path(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the demo must not replace what is at its table's path (None: it may)."""
    from engine.demo.folder import DemoFolderError, check_replaceable
    from engine.storage import storage_for

    try:
        check_replaceable(storage_for(table_uri(name, env)), name)
    except DemoFolderError as exc:
        return str(exc)
    return None


if __name__ == "__main__":
    sys.exit(main())
