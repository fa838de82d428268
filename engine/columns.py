"""Internal column names the pipelines add to records (never written to files).

Incoming data may not use the `__hoodie_` prefix (checked by `engine.schema.evolution`).
"""

from __future__ import annotations

INTERNAL_PREFIX = "__hoodie_"
KEY_COL = "__hoodie_key"  # the record key
PART_COL = "__hoodie_partition"  # the partition path
OP_COL = "__hoodie_op"  # OP_UPSERT or OP_DELETE
OP_UPSERT = "U"
OP_DELETE = "D"
FILE_ID_COL = "__hoodie_file_id"  # what `Index.tag_location` adds: file id holding the key, null for new keys
EXISTING_PART_COL = "__hoodie_existing_partition"  # global indexes: where the key lives now
PREV_FILE_ID_COL = "__hoodie_prev_file_id"  # in `update_location`'s input: the file tagging found

__all__ = [
    "EXISTING_PART_COL",
    "FILE_ID_COL",
    "INTERNAL_PREFIX",
    "KEY_COL",
    "OP_COL",
    "OP_DELETE",
    "OP_UPSERT",
    "PART_COL",
    "PREV_FILE_ID_COL",
]
