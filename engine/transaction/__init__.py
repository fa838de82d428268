"""The transaction of a table mutation, below the writes and the table services that use it.

- `lock`, `lock_info`: the table lock (a lease file per epoch under `.hoodie/.lock/`);
- `heartbeat`, `liveness`: a writer's heartbeat, and whether the writer of a pending instant is gone;
- `guard`: `BaseTransaction` (the lock in either concurrency mode) and the `WriteGuard` a write calls;
- `occ`, `conflicts`: optimistic concurrency control's commit check and its rules, schema resolution;
- `undo`: making one instant vanish (its files, index entries, partitions, timeline files), which
  rollback, restore and a failed write undoing itself share.

The repair and the automatic services that run under the lock are the table services'
(`engine.services.transaction.Transaction`).
"""
