"""The key check of optimistic concurrency control for indexes that store locations (RECORD, HBASE).

Two writers that insert the same new key at once each put it in a file group of their own (new
groups never collide), so the file-group check (`engine.transaction.occ`) lets both commit and the
key would live twice, with the index naming only one copy. Right before a write that inserted
keys updates the index, under the table lock and only when other writes completed since it started,
its inserted keys are looked up again: a key the index now holds was inserted by one of those
writes, and this write fails with `WriteConflictError`.

Only upserts are checked: an insert or bulk_insert does not look keys up and may duplicate a key
(as in Apache Hudi). Spark (the index's lookup); run by the executor.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.columns import FILE_ID_COL, KEY_COL, OP_COL, OP_DELETE, PART_COL, PREV_FILE_ID_COL
from engine.data.keys import KEYS_SCHEMA
from engine.errors import WriteConflictError
from engine.index.base import Index, TagContext
from engine.keygen.spark_keys import keys_by_partition

_SAMPLE = 5


def inserted_keys(located: DataFrame | pa.Table) -> DataFrame | pa.Table:
    """The rows of `located` that put a key tagging did not find (its previous file id is null),
    except keys the write also deletes (a global index moving a record to another partition
    deletes it where it was: that key was in the table)."""
    if isinstance(located, pa.Table):
        deleted = located.filter(pc.equal(located[OP_COL], OP_DELETE))[KEY_COL]
        mask = pc.and_(
            pc.and_(pc.is_null(located[PREV_FILE_ID_COL]), pc.not_equal(located[OP_COL], OP_DELETE)),
            pc.invert(pc.is_in(located[KEY_COL], value_set=deleted.combine_chunks())),
        )
        return located.filter(mask).select([KEY_COL, PART_COL])
    puts = located.filter(F.col(PREV_FILE_ID_COL).isNull() & (F.col(OP_COL) != OP_DELETE)).select(KEY_COL, PART_COL)
    deletes = located.filter(F.col(OP_COL) == OP_DELETE).select(KEY_COL)
    return puts.join(deletes, on=KEY_COL, how="left_anti")


def check_new_keys(index: Index, ctx: TagContext, located: DataFrame | pa.Table, instant: str, concurrent: tuple[str, ...]) -> None:
    """Raise WriteConflictError if a key this write inserted is now in the index (see the module
    docstring). `concurrent`: the writes that completed since this one started."""
    if not concurrent or not index.wants_locations:
        return
    if PREV_FILE_ID_COL not in (located.column_names if isinstance(located, pa.Table) else located.columns):
        return
    inserts = inserted_keys(located)
    if isinstance(inserts, pa.Table):
        if inserts.num_rows == 0:
            return
        if ctx.spark is None:  # a local write: the index's driver lookup, no Spark job
            keys = _found_on_driver(index, ctx, inserts)
        else:
            keys = _found(index, ctx, ctx.spark.createDataFrame(inserts))
    else:
        keys = _found(index, ctx, inserts)
    if keys:
        raise WriteConflictError(
            f"write {instant} inserted record key(s) {', '.join(keys)} that a write completed since it started "
            f"({', '.join(concurrent)}) also inserted: committing both would keep two copies. This write was "
            "rolled back. Retry it (as an upsert it updates the other write's records)",
            instant=instant,
            other=concurrent[0] if len(concurrent) == 1 else "",
            keys=tuple(keys),
        )


def _found(index: Index, ctx: TagContext, inserts: DataFrame) -> list[str]:
    found = index.tag_location(ctx, inserts).filter(F.col(FILE_ID_COL).isNotNull())
    return sorted(r[KEY_COL] for r in found.select(KEY_COL).limit(_SAMPLE).collect())


def _found_on_driver(index: Index, ctx: TagContext, inserts: pa.Table) -> list[str]:
    """The first inserted keys the index now holds, looked up on the driver (`locate_batch`)."""
    located = index.locate_batch(replace(ctx, incoming_keys=keys_by_partition(inserts)))
    if located is None or located.num_rows == 0:
        return []
    key, _part, file_id = KEYS_SCHEMA.names
    held = located.filter(pc.is_valid(located.column(file_id))).column(key)
    return sorted(pc.unique(held).to_pylist())[:_SAMPLE]


__all__ = ["check_new_keys", "inserted_keys"]
