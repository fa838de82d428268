"""The health panel: what is wrong with a table, each finding with a plain explanation.

Checks (Spark-free, from the cached snapshot): small files, partition skew, stuck
requested/inflight instants, clean lag, archive lag, pending clustering or compaction.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine.timeline.instant import Action, State, parse_instant_time
from webui.services.browse import overview, table_limits
from webui.services.snapshot import TableSnapshot

STUCK_AFTER_S = 15 * 60  # a pending write older than this (and no live heartbeat) is stuck
SKEW_FACTOR = 4.0  # a partition this many times the median size is skewed
SMALL_FILE_EXCESS = 10  # warn from this many small files beyond one per partition...
SMALL_FILE_SHARE = 0.25  # ...when they are more than this share of the latest base files


@dataclass(frozen=True)
class Finding:
    level: str  # "ok" | "warn" | "bad"
    title: str
    detail: str


def check(snap: TableSnapshot, now: float | None = None) -> list[dict[str, Any]]:
    now = time.time() if now is None else now
    ov = overview(snap)
    limits = table_limits(snap.meta)
    findings: list[Finding] = []

    # small files: more small files than a partition needs
    view = snap.view()
    small_by_part: dict[str, int] = {}
    total_files = 0
    for b in view.latest_base_files():
        total_files += 1
        if b.size < limits.small_file_limit:
            small_by_part[b.partition] = small_by_part.get(b.partition, 0) + 1
    excess = sum(n - 1 for n in small_by_part.values() if n > 1)
    if total_files and excess >= SMALL_FILE_EXCESS and excess / total_files > SMALL_FILE_SHARE:
        findings.append(Finding(
            "warn", f"{excess} more small files than needed",  # partitions need at most one
            f"{sum(small_by_part.values())} of {total_files} latest base files are under the small-file limit "
            f"({limits.small_file_limit // (1024 * 1024)} MB). Upserts pack new records into small files; "
            "many small files per partition slow reads. Bigger batches (or bulk_insert for initial loads) help.",
        ))

    # partition skew
    sizes = [p["bytes"] for p in ov["per_partition"].values()]
    if len(sizes) >= 3:
        med = statistics.median(sizes)
        big = [(k, v["bytes"]) for k, v in ov["per_partition"].items() if med and v["bytes"] > SKEW_FACTOR * med]
        if big:
            names = ", ".join(k or "(root)" for k, _ in sorted(big, key=lambda x: -x[1])[:3])
            findings.append(Finding(
                "warn", f"partition skew: {len(big)} partition(s) over {SKEW_FACTOR:g}x the median size",
                f"{names} hold far more data than the median partition ({int(med)} bytes); "
                "tasks writing them run longest. Consider a finer partition field.",
            ))

    # stuck pending instants; pending clustering (a replacecommit with a clustering plan) is not stuck
    from engine.table.clustering import pending_clustering

    clustering = {c.instant.time for c in pending_clustering(snap.meta, snap.timeline)}
    for inst in snap.timeline.instants:
        if inst.state is State.COMPLETED:
            continue
        age = now - parse_instant_time(inst.time).timestamp()
        if inst.action in (Action.COMPACTION, Action.CLUSTERING, Action.LOG_COMPACTION) or inst.time in clustering:
            findings.append(Finding(
                "warn", f"pending {inst.action.value} {inst.time}",
                "A table service Apache Hudi scheduled is waiting to run. Writes that update its file groups are "
                "refused until Hudi executes it, or roll it back from the timeline.",
            ))
        elif age > STUCK_AFTER_S:
            findings.append(Finding(
                "bad", f"{inst.action.value} {inst.time} stuck {inst.state.value} for {int(age // 60)} min",
                "A write or service started and never finished (its writer probably died). The next write, or "
                "repair, rolls it back once its heartbeat has expired.",
            ))

    # clean lag: commits since the last completed clean
    writes = snap.timeline.completed_writes.instants
    cleans = [i for i in snap.timeline.instants if i.action is Action.CLEAN and i.is_completed]
    since_clean = len([w for w in writes if not cleans or w.time > cleans[-1].time])
    if since_clean > 2 * limits.commits_retained:
        findings.append(Finding(
            "warn", f"clean lag: {since_clean} commits since the last clean",
            f"Old file versions beyond the {limits.commits_retained} retained commits take space. "
            "Run a clean (automatic cleaning may be off).",
        ))
    # archive lag
    if len(writes) > limits.keep_max_commits + 10:
        findings.append(Finding(
            "warn", f"archive lag: {len(writes)} active commits",
            f"Archival keeps the active timeline under {limits.keep_max_commits} commits; a long active timeline "
            "slows every reader and writer. Run archive (a savepoint or pending instant can also hold it back).",
        ))
    if not findings:
        findings.append(Finding("ok", "healthy", "No small-file, skew, stuck-instant, clean or archive problems found."))
    return [asdict(f) for f in findings]

