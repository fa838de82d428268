"""After the index lookup, before planning: event-time ordering decided before writing, where a
global index puts each record, and the workload profile the planner needs (Spark)."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from engine.columns import (
    EXISTING_PART_COL,
    FILE_ID_COL,
    KEY_COL,
    OP_COL,
    OP_DELETE,
    OP_UPSERT,
    PART_COL,
)
from engine.data.keys import (
    ORDERING_FILE_ID,
    ORDERING_KEY,
    ORDERING_PART,
    ORDERING_VALUE,
    ScanFile,
    SliceMerge,
)
from engine.data.scan import scan_ordering
from engine.table.meta_client import MetaClient
from engine.write.planner import PartitionWorkload
from engine.write.prepare import BROADCAST_KEYS_LIMIT, IS_DELETED_COL

MOVED_COL = "__hoodie_moved"  # global index, partition changed: the delete row in the old partition
STALE_COL = "__hoodie_stale"  # the stored record wins (event-time ordering), decided before writing
SP_COL = "__hoodie_task"  # the Spark partition of a row (insert numbering per task)


def relocate(tagged: DataFrame, is_delete: bool, update_partition_path: bool) -> DataFrame:
    """Apply a global index's answer: where does each found key go?

    A key found in another partition than the incoming record's (Apache Hudi's
    `hoodie.index.update.partition.path`): true -> delete it there and insert the record into its
    new partition; false -> update it in place in the old partition. Deletes always act where the
    key lives.
    """
    found = F.col(FILE_ID_COL).isNotNull()
    where_it_lives = F.when(found, F.col(EXISTING_PART_COL)).otherwise(F.col(PART_COL))
    if is_delete or not update_partition_path:
        out = tagged.withColumn(PART_COL, where_it_lives)
    else:
        # upserts whose stored record lost to them (STALE_COL: the stored one won and nothing
        # moves); delete rows (`_hoodie_is_deleted`) delete the key where it lives
        moved = found & (F.col(EXISTING_PART_COL) != F.col(PART_COL)) & (F.col(OP_COL) == OP_UPSERT)
        if STALE_COL in tagged.columns:
            moved = moved & ~F.col(STALE_COL)
        moved = F.coalesce(moved, F.lit(False))
        stay = tagged.filter(~moved).withColumn(PART_COL, where_it_lives)
        old = tagged.filter(moved).withColumn(PART_COL, F.col(EXISTING_PART_COL)).withColumn(OP_COL, F.lit(OP_DELETE))
        new = tagged.filter(moved).withColumn(FILE_ID_COL, F.lit(None).cast("string"))
        # the delete in the old partition is an extra row, not an input record: marked so that the
        # profile does not count it as one
        flag = F.lit(False)
        out = (
            stay.withColumn(MOVED_COL, flag)
            .unionByName(old.withColumn(MOVED_COL, F.lit(True)))
            .unionByName(new.withColumn(MOVED_COL, flag))
        )
    return out.drop(EXISTING_PART_COL)


def order_check(
    columns: list[str], pc_field: str | None, is_delete: bool, is_global: bool, update_partition_path: bool
) -> Column | None:
    """Rows whose ordering against the stored record must be decided before writing, or None when
    no row needs it.

    A record that moves to another partition (global index, `update_partition_path`) is deleted in
    one file group and inserted in another, by different tasks: whether the incoming record wins
    must be known first (Apache Hudi's `HoodieIndexUtils.mergeForPartitionUpdatesIfNeeded`).
    Delete rows (`_hoodie_is_deleted`) too: a losing one must neither delete the record nor its
    index entry. The delete operation deletes whatever the ordering, and without a precombine
    field the incoming record always wins. Other rows are ordered where they are merged
    (`write_bucket`)."""
    if pc_field is None or is_delete:
        return None
    found = F.col(FILE_ID_COL).isNotNull()
    conditions = []
    if IS_DELETED_COL in columns:
        conditions.append(F.col(OP_COL) == OP_DELETE)
    if is_global and update_partition_path:
        conditions.append(F.col(EXISTING_PART_COL) != F.col(PART_COL))
    if not conditions:
        return None
    wanted = conditions[0]
    for c in conditions[1:]:
        wanted = wanted | c
    return F.coalesce(found & wanted, F.lit(False))


def mark_stale(
    tagged: DataFrame,
    check: Column,
    meta: MetaClient,
    view,
    field: pa.Field,
    is_global: bool,
    merge: SliceMerge | None = None,
) -> DataFrame:
    """`tagged` + STALE_COL: the rows of `check` whose stored record wins by the precombine field
    (`field`), with the merge rule of `write_bucket` (a null stored value never wins; a null incoming
    value loses against a non-null stored one).

    The stored values are read from the latest base files holding the checked keys (key and
    ordering columns only); batches whose checked keys fit on the driver ship them to the scan tasks."""
    where = EXISTING_PART_COL if is_global else PART_COL
    checked = tagged.filter(check).select(KEY_COL, F.col(where).alias(PART_COL), FILE_ID_COL)
    probe = checked.limit(BROADCAST_KEYS_LIMIT + 1).toArrow()
    if probe.num_rows == 0:
        return tagged.withColumn(STALE_COL, F.lit(False))
    small = probe.num_rows <= BROADCAST_KEYS_LIMIT
    if small:
        groups = set(zip(probe.column(PART_COL).to_pylist(), probe.column(FILE_ID_COL).to_pylist(), strict=True))
        keys = pc.unique(probe.column(KEY_COL).combine_chunks())
    else:
        groups = {(r[PART_COL], r[FILE_ID_COL]) for r in checked.select(PART_COL, FILE_ID_COL).distinct().collect()}
        keys = None
    files = [
        ScanFile.of_slice(s)
        for s in view.latest_slices(sorted({p for p, _f in groups}))
        if (s.partition, s.file_id) in groups
    ]
    stored = scan_ordering(tagged.sparkSession, meta.storage, files, field, keys, merge)
    if small:
        stored = F.broadcast(stored)
    on = (
        (tagged[KEY_COL] == stored[ORDERING_KEY])
        & (tagged[where] == stored[ORDERING_PART])
        & (tagged[FILE_ID_COL] == stored[ORDERING_FILE_ID])
    )
    incoming, value = F.col(f"`{field.name}`"), F.col(ORDERING_VALUE)
    accept = value.isNull() | F.coalesce(incoming >= value, F.lit(False))
    return (
        tagged.join(stored, on, "left")
        .withColumn(STALE_COL, check & ~accept)
        .drop(ORDERING_KEY, ORDERING_PART, ORDERING_FILE_ID, ORDERING_VALUE)
    )


def profile_columns(tagged: DataFrame) -> list[Column]:
    """What the profile counts by: the Spark partition (insert numbering per task), partition path,
    file group, operation, and the moved/stale marks where tagging set them."""
    marks = [c for c in (MOVED_COL, STALE_COL) if c in tagged.columns]
    return [F.spark_partition_id().alias(SP_COL), F.col(PART_COL), F.col(FILE_ID_COL), F.col(OP_COL)] + [F.col(c) for c in marks]


def profile(rows) -> tuple[dict[str, PartitionWorkload], dict, int, int, int]:
    """Workloads per partition, insert-number offsets per (spark partition, partition), absent
    deletes, input records kept by the dedupe, and records the stored ones won against (stale)."""
    inserts: dict[str, int] = defaultdict(int)
    updates: dict[str, dict[str, int]] = defaultdict(dict)
    deletes: dict[str, dict[str, int]] = defaultdict(dict)
    per_task: dict[tuple[int, str], int] = {}
    absent = kept = stale = 0
    for r in rows:
        part, fid, op, n = r[PART_COL], r[FILE_ID_COL], r[OP_COL], r["count"]
        flags = r.asDict()
        if not flags.get(MOVED_COL, False):
            kept += n
        if flags.get(STALE_COL, False):
            stale += n
            continue
        if op == OP_DELETE:
            if fid is None:
                absent += n
            else:
                deletes[part][fid] = deletes[part].get(fid, 0) + n
        elif fid is None:
            inserts[part] += n
            per_task[(r[SP_COL], part)] = per_task.get((r[SP_COL], part), 0) + n
        else:
            updates[part][fid] = updates[part].get(fid, 0) + n
    offsets: dict[tuple[int, str], int] = {}
    running: dict[str, int] = defaultdict(int)
    for sp, part in sorted(per_task):
        offsets[(sp, part)] = running[part]
        running[part] += per_task[(sp, part)]
    parts = set(inserts) | set(updates) | set(deletes)
    workloads = {
        p: PartitionWorkload(p, inserts.get(p, 0), dict(updates.get(p, {})), dict(deletes.get(p, {})))
        for p in parts
    }
    return workloads, offsets, absent, kept, stale


def check_pending_clustering(
    meta: MetaClient, timeline, workloads: dict[str, PartitionWorkload], let_in: bool = False
) -> dict[tuple[str, str], str]:
    """The file groups of pending clusterings (-> their instant). A batch that updates or deletes
    records in one of them is refused (PendingClusteringError) before anything is written, as
    Apache Hudi's SparkRejectUpdateStrategy does: the clustering would drop those changes.
    `let_in` (SparkAllowUpdateStrategy): the batch goes on, and the clustering, its plan stale,
    refuses to run (`engine.services.clustering`)."""
    from engine.table.clustering import pending_clustering

    frozen = {g: c.instant.time for c in pending_clustering(meta, timeline) for g in c.groups}
    hit = sorted(
        (p, fid) for p, wl in workloads.items() for fid in (*wl.updates, *wl.deletes) if (p, fid) in frozen
    )
    if let_in:
        return frozen
    _refuse_clustered("the batch updates or deletes records in", hit, frozen)
    return frozen


def _refuse_clustered(what: str, hit: list[tuple[str, str]], frozen: dict[tuple[str, str], str]) -> None:
    """PendingClusteringError for the file groups `hit` that a pending clustering rewrites (none: nothing)."""
    from engine.errors import PendingClusteringError

    if not hit:
        return
    instant = frozen[hit[0]]
    shown = ", ".join(f"{p}/{f}" if p else f for p, f in hit[:3]) + (" ..." if len(hit) > 3 else "")
    raise PendingClusteringError(
        f"{what} {len(hit)} file group(s) ({shown}) that the pending clustering {instant} is going to "
        f"rewrite; let Apache Hudi finish it, or remove it with `hoodie rollback PATH {instant}`, then write again",
        instant,
        tuple(hit),
    )


def check_replace_clustering(replaced: dict[str, list[str]], frozen: dict[tuple[str, str], str]) -> None:
    """Refuse (PendingClusteringError) an insert_overwrite replacing file groups that a pending
    clustering rewrites: completing the clustering would bring the replaced records back."""
    hit = sorted((p, f) for p, ids in replaced.items() for f in ids if (p, f) in frozen)
    _refuse_clustered("the overwrite replaces", hit, frozen)


__all__ = ["MOVED_COL", "SP_COL", "STALE_COL", "check_pending_clustering", "check_replace_clustering", "mark_stale", "order_check", "profile", "profile_columns", "relocate"]
