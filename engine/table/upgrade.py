"""Upgrading tables of versions 4 and 5 (Apache Hudi 0.11 to 0.13) to version 6 before a write, as
Apache Hudi's writers do (`UpgradeDowngrade.run` with `FourToFiveUpgradeHandler` and
`FiveToSixUpgradeHandler`; `hoodie.write.auto.upgrade`, default true).

Run under the table lock, after failed writes were rolled back (Hudi's `tryUpgrade`):

1. the metadata table first (`.hoodie/metadata`, a table of its own with its own properties), by
   the same steps; Apache Hudi 0.14 logs and ignores a failure there, and so do we;
2. 4 -> 5: a partitioned table may not hold a partition named `default` (Apache Hudi 0.11 wrote
   null partition values as `default`, 0.12 on as `__HIVE_DEFAULT_PARTITION__`): refused unless
   `hoodie.skip.default.partition.validation=true`; the first partition field's folder is checked
   (`field=default` when hive-style), as Hudi checks it;
3. 5 -> 6: the copies of pending compaction plans in `.hoodie/.aux/<instant>.compaction.requested`
   are deleted (version 6 keeps plans on the timeline only);
4. `hoodie.properties` says `hoodie.table.version=6`: one atomic write of the file with every other
   line kept (the checksum, CRC32 of `<database>.<table>`, is added where it is missing).

Steps 1-3 change nothing a reader of the old version needs, and each is idempotent; step 4 flips
the version at once. So a crash anywhere leaves a table of the old version that the next write
upgrades again, or one of version 6: never a half-upgraded one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import javaproperties

from engine.config.table_config import CHECKSUM, VERSION, TableConfig, table_checksum
from engine.constants import METAFOLDER, PROPERTIES_FILE
from engine.errors import InvalidConfigError, UnsupportedTableVersionError
from engine.storage import Storage
from engine.timeline.instant import Action, State

_log = logging.getLogger(__name__)

TARGET = 6
UPGRADABLE = (4, 5)
AUTO_UPGRADE = "hoodie.write.auto.upgrade"
SKIP_DEFAULT_PARTITION = "hoodie.skip.default.partition.validation"
DEPRECATED_DEFAULT_PARTITION = "default"
AUX_FOLDER = f"{METAFOLDER}/.aux"
METADATA_TABLE_PROPERTIES = f"{METAFOLDER}/metadata/{METAFOLDER}/{PROPERTIES_FILE}"


@dataclass(frozen=True)
class UpgradeReport:
    """What an upgrade did: the versions, and the plan copies it removed."""

    from_version: int
    to_version: int
    aux_plans_removed: tuple[str, ...] = ()
    metadata_table: str | None = None  # "4 -> 6", or why it was left

    def __str__(self) -> str:
        return f"table version {self.from_version} -> {self.to_version}"


def needs_upgrade(config: TableConfig) -> bool:
    return config.version in UPGRADABLE


def check_allowed(config: TableConfig, auto_upgrade: bool, where: str) -> None:
    """Before anything changes: a version 4 or 5 table with `hoodie.write.auto.upgrade=false` is
    refused (Apache Hudi 1.x refuses too: "Please upgrade table from version ...")."""
    if needs_upgrade(config) and not auto_upgrade:
        raise UnsupportedTableVersionError(
            f"{where}: table version {config.version} is read but written only after an upgrade to version "
            f"{TARGET}, which {AUTO_UPGRADE}=false forbids: drop that option (the first write upgrades the "
            "table, as Apache Hudi's writers do) or upgrade it with Apache Hudi's CLI",
            config.version,
        )


def upgrade(storage: Storage, config: TableConfig, pending_compactions: list[str],
            skip_default_partition_validation: bool = False) -> UpgradeReport:
    """Upgrade the table at `storage` (of `config`, version 4 or 5) to version 6; the caller holds
    the table lock. `pending_compactions`: the instants of compactions still requested."""
    if not needs_upgrade(config):
        raise ValueError(f"table version {config.version} is not upgraded here")
    mdt = _upgrade_metadata_table(storage)
    if config.version == 4 and not skip_default_partition_validation:
        folder = _default_partition_folder(config)
        if folder is not None and _is_folder(storage, folder):
            raise InvalidConfigError(
                f"{storage.uri(folder)}: this table (version 4, Apache Hudi 0.11) has a partition named "
                f"{DEPRECATED_DEFAULT_PARTITION!r}, where Apache Hudi 0.11 put records whose partition value was "
                "null; versions 5 and later write them to __HIVE_DEFAULT_PARTITION__, so the upgrade a write needs "
                "is refused, as Apache Hudi refuses it. Move that partition's records first, or set "
                f"{SKIP_DEFAULT_PARTITION}=true to upgrade anyway"
            )
    removed = tuple(_remove_aux_plans(storage, pending_compactions))
    _set_version(storage, f"{METAFOLDER}/{PROPERTIES_FILE}", TARGET)
    _log.warning("%s: upgraded from table version %s to %s before writing (as Apache Hudi's writers do)",
                 storage.base_uri, config.version, TARGET)
    return UpgradeReport(config.version, TARGET, removed, mdt)


def _default_partition_folder(config: TableConfig) -> str | None:
    """Where Apache Hudi's check looks for the deprecated `default` partition (None: not partitioned)."""
    if not config.partition_fields:
        return None
    first = config.partition_fields[0]
    return f"{first}={DEPRECATED_DEFAULT_PARTITION}" if config.hive_style else DEPRECATED_DEFAULT_PARTITION


def _is_folder(storage: Storage, rel: str) -> bool:
    try:
        return bool(storage.list_dir(rel))
    except (FileNotFoundError, NotADirectoryError):
        return False


def _remove_aux_plans(storage: Storage, pending_compactions: list[str]) -> list[str]:
    """5 -> 6 (`FiveToSixUpgradeHandler`): the `.aux` copies of requested compaction plans."""
    removed = []
    for instant in pending_compactions:
        rel = f"{AUX_FOLDER}/{instant}.{Action.COMPACTION.value}.{State.REQUESTED.value}"
        if storage.exists(rel):
            storage.delete(rel)
            removed.append(rel)
    return removed


def _upgrade_metadata_table(storage: Storage) -> str | None:
    """The metadata table's properties first, as Hudi upgrades it before the data table; a failure
    is logged and the data table's upgrade goes on (Apache Hudi 0.14 does the same)."""
    try:
        text = storage.read_bytes(METADATA_TABLE_PROPERTIES).decode("utf-8")
    except FileNotFoundError:
        return None
    try:
        props = javaproperties.loads(text)
        version = int(props.get(VERSION, "0"))
        if version not in UPGRADABLE:
            return f"left at version {version}"
        _set_version(storage, METADATA_TABLE_PROPERTIES, TARGET)
        return f"{version} -> {TARGET}"
    except Exception as exc:  # noqa: BLE001 - as Hudi: the data table's upgrade does not depend on it
        _log.warning("%s: could not upgrade the metadata table (%s); going on with the data table",
                     storage.base_uri, exc)
        return f"not upgraded: {exc}"


def _set_version(storage: Storage, rel: str, version: int) -> None:
    """Rewrite the properties file at `rel` with `hoodie.table.version=<version>`, every other
    entry kept in its order, the checksum added if missing; one atomic write."""
    props = javaproperties.loads(storage.read_bytes(rel).decode("utf-8"))
    props[VERSION] = str(version)
    if not props.get(CHECKSUM):
        props[CHECKSUM] = str(table_checksum(props.get("hoodie.database.name", ""), props.get("hoodie.table.name", "")))
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body = f"#Updated at {stamp}\n" + javaproperties.dumps(props, timestamp=False, sort_keys=False)
    storage.write_bytes(rel, body.encode("utf-8"))


__all__ = ["AUTO_UPGRADE", "SKIP_DEFAULT_PARTITION", "UpgradeReport", "check_allowed", "needs_upgrade", "upgrade"]
