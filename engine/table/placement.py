"""Where a table may be created: never inside another table, never around one.

A table inside another's folder is listed, cleaned and archived as the outer table's files by
any Hudi writer that does not know better; a table created around existing tables would count
all of them as its own. `check_placement` refuses both before anything is written, naming the
other table (`NestedTableError`). It looks at storage: every folder above the location (up to
the filesystem root or the bucket) for a `.hoodie/`, and everything below it for one.
"""

from __future__ import annotations

from engine.constants import METAFOLDER
from engine.errors import NestedTableError
from engine.storage import Storage, storage_for
from engine.storage.uri import ancestors
from engine.table.ownership import nested_table_roots


def enclosing_table(storage: Storage) -> str | None:
    """The location of a table whose folder contains `storage`'s base, nearest first; else None."""
    for parent in ancestors(storage.base_uri):
        if storage_for(parent, storage.options or None).exists(METAFOLDER):
            return parent
    return None


def contained_tables(storage: Storage) -> list[str]:
    """Locations of the tables below `storage`'s base (outermost only), sorted."""
    infos = storage.list_files_recursive("")
    return sorted(storage.uri(root) for root in nested_table_roots(i.path for i in infos))


def check_placement(storage: Storage) -> None:
    """Refuse (NestedTableError) a new table at `storage`'s base inside or around another table."""
    outer = enclosing_table(storage)
    if outer is not None:
        raise NestedTableError(
            f"cannot create a table at {storage.base_uri}: it lies inside the table at {outer}; "
            f"put it beside that table, not in its folder",
            outer,
        )
    inner = contained_tables(storage)
    if inner:
        more = f" and {len(inner) - 1} more" if len(inner) > 1 else ""
        raise NestedTableError(
            f"cannot create a table at {storage.base_uri}: the table at {inner[0]}{more} lies inside it; "
            f"choose a folder that holds no table",
            inner[0],
        )
