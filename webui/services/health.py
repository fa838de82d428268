"""The health panel: what is wrong with a table, each finding with a plain explanation.

Checks (Spark-free, from the cached snapshot): small files, partition skew, stuck
requested/inflight instants, clean lag, archive lag, pending clustering or compaction (with
its age and what it merges), and on merge-on-read tables slices to compact soon.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine.facade import Action, State, parse_instant_time
from webui.services import compactions
from webui.services.browse import overview, table_limits
from webui.services.snapshot import TableSnapshot
from webui.services.text import age_text, human_bytes

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
    from engine.facade import pending_clustering

    clustering = {c.instant.time for c in pending_clustering(snap.meta, snap.timeline)}
    plans = {p["instant"]: p for p in compactions.pending_plans(snap)}
    for inst in snap.timeline.instants:
        if inst.state is State.COMPLETED:
            continue
        age = now - parse_instant_time(inst.time).timestamp()
        if inst.action is Action.COMPACTION:
            findings.append(_pending_compaction(inst.time, inst.state, age, plans.get(inst.time)))
        elif inst.action in (Action.CLUSTERING, Action.LOG_COMPACTION) or inst.time in clustering:
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

    # merge-on-read: many log files to merge on every snapshot read
    if compactions.is_mor(snap):
        soon = _compact_soon(compactions.log_status(snap))
        if soon is not None:
            findings.append(soon)

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


def _pending_compaction(instant: str, state: State, age: float, plan: dict[str, Any] | None) -> Finding:
    age = max(0.0, age)
    what = (f"{plan['slices']} file slice(s), {plan['log_files']} log file(s) ({human_bytes(plan['log_bytes'])})"
            if plan else "its plan cannot be read")
    if state is State.INFLIGHT and age > STUCK_AFTER_S:
        return Finding(
            "bad", f"compaction {instant} stuck inflight for {age_text(int(age))}",
            f"It merges {what}. Its runner probably died: running it again (Compact) deletes the base files the "
            "interrupted attempt left and starts over; until then readers keep merging the old slices.",
        )
    return Finding(
        "warn", f"compaction {instant} {state.value} {age_text(int(age))} ago",
        f"Planned on {what}. Writers keep appending to new slices and snapshot reads merge both until it runs: "
        "run it from the Compact page (or roll it back from the timeline).",
    )


def _compact_soon(logs: dict[str, Any]) -> Finding | None:
    if not logs["compact_soon"]:
        return None
    n, limit = logs["deltacommits_since_compaction"], logs["compact_after"]
    reasons = []
    if n >= limit:
        reasons.append(f"{n} deltacommits since the last compaction")
    if logs["many_logs"]:
        reasons.append(f"{logs['many_logs']} slice(s) with {limit} or more log files")
    if logs["big_logs"]:
        reasons.append(f"{logs['big_logs']} slice(s) with more log than base bytes")
    most = logs["most_logs"]
    worst = (f"; the most in one slice: {most['log_files']} ({human_bytes(most['log_bytes'])} of logs on a "
             f"{human_bytes(most['base_bytes'])} base file)") if most else ""
    pending = (f" {logs['in_pending_compaction']} of these slices are in a pending compaction: run it first."
               if logs["in_pending_compaction"] else "")
    return Finding(
        "warn", "compact soon: " + ", ".join(reasons),
        f"Snapshot reads merge {logs['log_files']} log file(s) ({human_bytes(logs['log_bytes'])}, "
        f"{logs['log_records']:,} records written) into {logs['slices_with_logs']} slice(s){worst}. "
        f"Apache Hudi compacts inline after hoodie.compact.inline.max.delta.commits = {limit} deltacommits; "
        f"the console's writes do not compact inline, so run Compact.{pending}",
    )

