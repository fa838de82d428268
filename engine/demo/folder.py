"""The demo's claim on its table's folder: `python -m engine.demo --name X` replaces what a
previous run left at X, and nothing else.

After creating its table the demo leaves a marker, `.hoodie/.demo/table.json` (a sub-folder of
`.hoodie/`, which Hudi readers ignore) naming the table. A folder may be wiped only when it is
missing or empty, holds that marker with the same name, or holds a table made by a demo from
before the marker (its `hoodie.properties` says this name, record key trip_id, partitioned by
city, precombine ts). Anything else is refused with `DemoFolderError` and nothing is deleted.
"""

from __future__ import annotations

import json

from engine.constants import METAFOLDER
from engine.errors import CorruptTableError, TableExistsError, TableNotFoundError
from engine.storage import Storage

MARKER = f"{METAFOLDER}/.demo/table.json"
_DEMO_SHAPE = (("trip_id",), ("city",), "ts")


class DemoFolderError(TableExistsError):
    """The demo's table path holds something that is not a table this demo made."""


def check_replaceable(storage: Storage, name: str) -> None:
    """Return if the demo may delete everything at `storage` (see the module docstring), else
    raise DemoFolderError saying what is there."""
    entries = storage.list_dir("")
    if not entries:
        return
    where = storage.base_uri
    refuse = (f"; nothing was deleted. Choose another --name, or move or delete {where} yourself if it is "
              "a demo's leftover")
    if storage.exists(MARKER):
        try:
            marked = json.loads(storage.read_bytes(MARKER)).get("name")
        except (ValueError, AttributeError):
            marked = None
        if marked == name:
            return
        raise DemoFolderError(f"{where} is the demo table {marked!r}, not {name!r}" + refuse)
    from engine.table.meta_client import MetaClient

    try:
        cfg = MetaClient.open(storage).config
    except (TableNotFoundError, CorruptTableError):
        shown = ", ".join(sorted(e.name for e in entries)[:5])
        raise DemoFolderError(f"{where} exists and is not a demo table (it holds {shown}"
                              f"{' …' if len(entries) > 5 else ''})" + refuse) from None
    if cfg.name == name and (cfg.record_key_fields, cfg.partition_fields, cfg.precombine_field) == _DEMO_SHAPE:
        return
    raise DemoFolderError(f"{where} holds the Hudi table {cfg.name!r} (record key {','.join(cfg.record_key_fields)}), "
                          "which this demo did not make" + refuse)


def mark(storage: Storage, name: str) -> None:
    """Record that the table at `storage` is the demo's table `name`."""
    storage.write_bytes(MARKER, json.dumps({"name": name, "made_by": "engine.demo"}, sort_keys=True).encode())
