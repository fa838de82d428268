"""Apache Hudi's metadata table (`.hoodie/metadata/`): which partitions the properties name, and
removing it where this engine cannot keep it up to date, so it never leaves one stale.

Tables written by Apache Hudi 0.11+ usually carry a metadata table: an internal merge-on-read
table whose `files` partition lists every data file, named in `hoodie.properties` by
`hoodie.table.metadata.partitions` (and `...partitions.inflight` while one is being built).
Readers that list files through it (Apache Hudi on Spark by default, hudi-rs where the
property names `files`) would miss every file a writer that does not update it writes.

On tables of version 8 and 9 this engine keeps its `files` partition up to date
(`engine.metadata.writer`). Elsewhere (version 6, a metadata table behind the data table or
unreadable, `hoodie.metadata.enable=false`), before a write or a table service changes
anything, under the table lock, `remove` does what Apache Hudi does when a writer runs with
`hoodie.metadata.enable=false`: the properties stop naming it first (readers then list
storage), then its folder is deleted (a crash in between leaves a folder no reader looks at,
removed by the next write). An Apache Hudi writer with the metadata table enabled builds it
again from the files.

`hoodie.metadata.enable=true` creates one on a table of version 8 or 9 that has none
(`engine.metadata.create`), and is refused with `InvalidConfigError` before anything is touched
where this engine cannot keep the promise (version 6, or one it cannot keep).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from engine.config.table_config import TableConfig
from engine.constants import METAFOLDER
from engine.errors import InvalidConfigError
from engine.storage import Storage

if TYPE_CHECKING:
    from engine.table.meta_client import MetaClient

_log = logging.getLogger(__name__)

FOLDER = f"{METAFOLDER}/metadata"
PARTITIONS = "hoodie.table.metadata.partitions"
PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
ENABLE_OPTION = "hoodie.metadata.enable"


def partitions_in(config: TableConfig, key: str = PARTITIONS) -> list[str]:
    """The metadata-table partitions property `key` names (by default: those built)."""
    return [p.strip() for p in (dict(config.extra).get(key) or "").split(",") if p.strip()]


def named_partitions(config: TableConfig) -> list[str]:
    """The metadata-table partitions hoodie.properties names (built or being built)."""
    return partitions_in(config, PARTITIONS) + partitions_in(config, PARTITIONS_INFLIGHT)


def is_present(storage: Storage, config: TableConfig) -> bool:
    """Whether the table has (or names) a metadata table."""
    return bool(named_partitions(config)) or storage.exists(FOLDER)


def check_enable_option(enable: bool | None, storage: Storage, present: bool, keep_reason: str | None = None) -> None:
    """Refuse `hoodie.metadata.enable=true` where this engine cannot honour it: a table of version 6
    without a metadata table (this engine creates them from version 8), or one whose metadata
    table it cannot keep (`keep_reason` says why)."""
    if not enable:
        return
    if not present:
        raise InvalidConfigError(
            f"{ENABLE_OPTION}=true: {storage.base_uri} has no metadata table and this engine creates one for "
            f"tables of version 8 and 9 only; leave the option unset"
        )
    if keep_reason is not None:
        raise InvalidConfigError(
            f"{ENABLE_OPTION}=true: this engine cannot keep the metadata table of {storage.base_uri} up to date "
            f"({keep_reason}); leave the option unset (or false) and it is removed before the write, as Apache "
            f"Hudi does with {ENABLE_OPTION}=false"
        )


def removal_notice(storage: Storage, partitions: list[str]) -> str:
    named = f" (partitions: {', '.join(partitions)})" if partitions else ""
    return (
        f"removed Apache Hudi's metadata table{named} from {storage.base_uri}: this engine cannot keep it "
        f"up to date, and readers listing files through it would miss this write; an Apache Hudi writer with "
        f"{ENABLE_OPTION}=true rebuilds it"
    )


def remove(meta: MetaClient, reason: str | None = None) -> None:
    """Remove Apache Hudi's metadata table as a writer with `hoodie.metadata.enable=false` does:
    hoodie.properties stops naming it (readers list storage from then on), then its folder goes."""
    partitions = named_partitions(meta.config)
    if partitions:
        meta.remove_properties((PARTITIONS, PARTITIONS_INFLIGHT), "Metadata table removed")
    meta.storage.delete_dir(FOLDER)
    _log.warning("%s", removal_notice(meta.storage, partitions) + (f" ({reason})" if reason else ""))
