"""What a table's `hoodie.properties` asks of a writer that this engine does not do (pure).

Apache Hudi keeps a closed set of table properties (`HoodieTableConfig`: a writer drops keys it
does not define for the table's version, `dropInvalidConfigs`), plus the timestamp key
generator's persisted settings. A key outside that set comes from a newer Apache Hudi (or another
tool) and may change how files must be written, so a write refuses it rather than guess; so do
known properties whose values ask for what this engine does not write (a bootstrap
source, another table format, a custom merger...). Reads are not refused for these: reading
changes nothing, and `engine.read.reader` refuses what it cannot read (non-Parquet base files)
on its own.
"""

from __future__ import annotations

from collections.abc import Mapping

# HoodieTableConfig's keys (Apache Hudi 0.14 to 1.1), with the alternatives it accepts
HUDI_TABLE_KEYS = frozenset({
    "hoodie.database.name", "hoodie.table.name", "hoodie.table.type", "hoodie.table.version",
    "hoodie.table.initial.version", "hoodie.table.precombine.field", "hoodie.table.ordering.fields",
    "hoodie.table.partition.fields", "hoodie.table.recordkey.fields", "hoodie.table.cdc.enabled",
    "hoodie.table.cdc.supplemental.logging.mode", "hoodie.table.create.schema",
    "hoodie.table.base.file.format", "hoodie.table.ro.file.format", "hoodie.table.log.file.format",
    "hoodie.table.rt.file.format", "hoodie.timeline.layout.version", "hoodie.table.format",
    "hoodie.record.merge.mode", "hoodie.compaction.payload.class", "hoodie.table.legacy.payload.class",
    "hoodie.record.merge.strategy.id", "hoodie.compaction.record.merger.strategy", "hoodie.archivelog.folder",
    "hoodie.timeline.history.path", "hoodie.timeline.path", "hoodie.bootstrap.index.enable",
    "hoodie.bootstrap.index.class", "hoodie.bootstrap.index.type", "hoodie.bootstrap.base.path",
    "hoodie.populate.meta.fields", "hoodie.table.keygenerator.class", "hoodie.table.keygenerator.type",
    "hoodie.table.timeline.timezone", "hoodie.partition.metafile.use.base.format",
    "hoodie.datasource.write.drop.partition.columns", "hoodie.table.multiple.base.file.formats.enable",
    "hoodie.table.partial.update.mode", "hoodie.table.merge.properties",
    "hoodie.datasource.write.partitionpath.urlencode", "hoodie.datasource.write.hive_style_partitioning",
    "hoodie.table.checksum", "hoodie.table.metadata.partitions.inflight", "hoodie.table.metadata.partitions",
    "hoodie.table.secondary.indexes.metadata", "hoodie.table.index.defs.path",
})
# the timestamp key generator's settings, which Apache Hudi persists in the table's properties
HUDI_TABLE_KEY_PREFIXES = ("hoodie.keygen.timebased.", "hoodie.deltastreamer.keygen.timebased.")
# what this engine adds: the index it writes with, the RECORD index's fixed layout, and a version 6
# CustomKeyGenerator table's typed partition fields (Apache Hudi 0.x keeps the names only; its
# writers give the types with every write, under this write option's name)
OWN_KEYS = frozenset({"hoodie.index.type", "hoodie.record.index.buckets", "hoodie.record.index.hash.function",
                      "hoodie.datasource.write.partitionpath.field"})


_CDC_MODES = frozenset({"OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER",
                        "CDC_OP_KEY", "CDC_DATA_BEFORE", "CDC_DATA_BEFORE_AFTER"})


def unknown_properties(props: Mapping[str, str]) -> list[str]:
    """The keys of `props` neither Apache Hudi's table config nor this engine defines, sorted."""
    return sorted(k for k in props if k not in HUDI_TABLE_KEYS and k not in OWN_KEYS
                  and not k.startswith(HUDI_TABLE_KEY_PREFIXES))


def _is_true(props: Mapping[str, str], key: str) -> bool:
    return props.get(key, "").strip().lower() == "true"


def write_problems(props: Mapping[str, str]) -> list[str]:
    """Why a write (or a service that writes data files) would not leave the table as Apache Hudi
    expects it; empty when nothing stands in the way. Each names the property and its value."""
    problems = []
    table_format = props.get("hoodie.table.format", "native").strip()
    if table_format.lower() != "native":
        problems.append(f"table format {table_format} (hoodie.table.format): Apache Hudi keeps that format's "
                        "metadata through a plugin this engine does not have")
    mode = props.get("hoodie.table.cdc.supplemental.logging.mode", "").strip()
    if mode and mode.upper() not in _CDC_MODES:
        problems.append(f"CDC logging mode {mode} (hoodie.table.cdc.supplemental.logging.mode)")
    if props.get("hoodie.bootstrap.base.path", "").strip():
        problems.append(f"bootstrapped tables (hoodie.bootstrap.base.path={props['hoodie.bootstrap.base.path']})")
    if _is_true(props, "hoodie.table.multiple.base.file.formats.enable"):
        problems.append("multiple base file formats (hoodie.table.multiple.base.file.formats.enable=true)")
    if _is_true(props, "hoodie.partition.metafile.use.base.format"):
        problems.append("partition metafiles in the base file format (hoodie.partition.metafile.use.base.format=true)")
    base = (props.get("hoodie.table.base.file.format") or props.get("hoodie.table.ro.file.format") or "PARQUET").upper()
    if base != "PARQUET":
        problems.append(f"base file format {base} (hoodie.table.base.file.format)")
    log = (props.get("hoodie.table.log.file.format") or props.get("hoodie.table.rt.file.format") or "HOODIE_LOG").upper()
    if log != "HOODIE_LOG":
        problems.append(f"log file format {log} (hoodie.table.log.file.format)")
    partial = props.get("hoodie.table.partial.update.mode", "NONE").strip().upper()
    if partial not in ("", "NONE"):
        problems.append(f"partial update mode {partial} (hoodie.table.partial.update.mode): merges keep older "
                        "values this engine's merge would overwrite")
    unknown = unknown_properties(props)
    if unknown:
        problems.append("properties this engine does not know (from a newer Apache Hudi?): "
                        + ", ".join(f"{k}={props[k]}" for k in unknown))
    return problems
