"""`hoodie rollback | restore | savepoint(s) | clean | archive | repair | compaction | clustering`: table services (no Spark)."""

from __future__ import annotations

import argparse

from engine.cli.common import (
    EXIT_OK,
    UsageError,
    check_instant,
    emit_json,
    maintenance,
    parse_options,
    print_table,
    progress_printer,
    report,
)
from engine.serial import to_doc


def cmd_rollback(args: argparse.Namespace) -> int:
    instant = check_instant(args.instant, "INSTANT")
    return report(args, "rollback", maintenance(args).rollback(instant, dry_run=args.dry_run))


def cmd_restore(args: argparse.Namespace) -> int:
    instant = check_instant(args.instant, "INSTANT")
    return report(args, "restore", maintenance(args).restore(instant, dry_run=args.dry_run))


def cmd_savepoint(args: argparse.Namespace) -> int:
    instant = check_instant(args.instant, "INSTANT")
    m = maintenance(args)
    if args.action == "create":
        return report(args, "savepoint", m.create_savepoint(instant, comment=args.comment or "", dry_run=args.dry_run))
    return report(args, "savepoint deleted", m.delete_savepoint(instant, dry_run=args.dry_run))


def cmd_savepoints(args: argparse.Namespace) -> int:
    sps = maintenance(args).savepoints()
    if args.json:
        emit_json({"savepoints": to_doc(sps)})
        return EXIT_OK
    if not sps:
        print("no savepoints")
        return EXIT_OK
    print_table(["TIME", "FILES", "BY", "COMMENT"], [[sp.time, len(sp.files), sp.user, sp.comment] for sp in sps])
    return EXIT_OK


def cmd_clean(args: argparse.Namespace) -> int:
    return report(args, "clean", maintenance(args).clean(dry_run=args.dry_run))


def cmd_archive(args: argparse.Namespace) -> int:
    return report(args, "archive", maintenance(args).archive(dry_run=args.dry_run))


def cmd_repair(args: argparse.Namespace) -> int:
    return report(args, "repair", maintenance(args).repair(dry_run=args.dry_run))


class OrderedChanges(argparse.Action):
    """Collects `--rename/--drop/--type/--first/--after/--before` in the order given."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        changes = list(getattr(namespace, "changes", None) or [])
        changes.append((self.dest, values))
        namespace.changes = changes


def _change(kind: str, value: str):
    from engine.schema.changes import ChangeType, Drop, Move, Rename, parse_type

    if kind == "drop":
        return Drop(value)
    if kind == "first":
        return Move(value, first=True)
    name, sep, other = value.partition("=")
    if not sep or not name or not other:
        raise UsageError(f"--{kind} takes NAME=VALUE, got {value!r}")
    if kind == "rename":
        return Rename(name, other)
    if kind == "type":
        return ChangeType(name, parse_type(other))
    return Move(name, after=other) if kind == "after" else Move(name, before=other)


def cmd_alter(args: argparse.Namespace) -> int:
    """`hoodie alter PATH --rename A=B --drop C --type D=long --after E=F ...` (schema on read)."""
    changes = [_change(kind, value) for kind, value in (getattr(args, "changes", None) or [])]
    if not changes:
        raise UsageError("give at least one change: --rename, --drop, --type, --first, --after, --before")
    return report(args, "alter", maintenance(args).alter(changes, dry_run=args.dry_run))


def cmd_compaction(args: argparse.Namespace) -> int:
    """`hoodie compaction schedule|run|show PATH [INSTANT]` (merge-on-read tables)."""
    m = maintenance(args)
    instant = check_instant(getattr(args, "instant", None), "INSTANT")
    if args.action == "schedule":
        return report(args, "compaction plan", m.schedule_compaction(dry_run=args.dry_run))
    if args.action == "run":
        if args.dry_run:
            plans = [p for p in m.compaction_plans() if instant is None or p.instant == instant]
            return report(args, "compaction", plans[0] if plans else m.schedule_compaction(dry_run=True))
        return report(args, "compaction", m.run_compaction(instant))
    plans = [p for p in m.compaction_plans() if instant is None or p.instant == instant]
    if args.json:
        emit_json({"pending": [p.to_dict() for p in plans]})
        return EXIT_OK
    if not plans:
        print("no pending compaction")
        return EXIT_OK
    rows = [
        [p.instant, op.partition or "-", op.file_id, op.base_instant, op.base_file or "-", len(op.log_files)]
        for p in plans
        for op in p.operations
    ]
    print_table(["INSTANT", "PARTITION", "FILE ID", "BASE INSTANT", "BASE FILE", "LOG FILES"], rows)
    return EXIT_OK


def cmd_clustering(args: argparse.Namespace) -> int:
    """`hoodie clustering schedule|run|show PATH [INSTANT]`."""
    from engine.services.maintenance import Maintenance
    from engine.table.meta_client import MetaClient

    options = dict(parse_options(args.option))
    if args.sort_columns:
        options["hoodie.clustering.plan.strategy.sort.columns"] = args.sort_columns
    if args.layout:
        options["hoodie.layout.optimize.strategy"] = args.layout
    m = Maintenance(MetaClient.open(args.path), options)
    instant = check_instant(getattr(args, "instant", None), "INSTANT")
    if args.action == "schedule":
        return report(args, "clustering plan", m.schedule_clustering(dry_run=args.dry_run))
    if args.action == "run":
        if args.dry_run:
            plans = [p for p in m.clustering_plans() if instant is None or p.instant == instant]
            return report(args, "clustering", plans[0] if plans else m.schedule_clustering(dry_run=True))
        return report(args, "clustering", m.run_clustering(instant, progress=progress_printer(args)))
    plans = [p for p in m.clustering_plans() if instant is None or p.instant == instant]
    if args.json:
        emit_json({"pending": [p.to_dict() for p in plans]})
        return EXIT_OK
    if not plans:
        print("no pending clustering")
        return EXIT_OK
    rows = [
        [p.instant, g.partition or "-", len(g.slices), g.output_groups, ",".join(p.sort_columns) or "-"]
        for p in plans
        for g in p.groups
    ]
    print_table(["INSTANT", "PARTITION", "SLICES", "OUTPUT GROUPS", "SORT COLUMNS"], rows)
    return EXIT_OK
