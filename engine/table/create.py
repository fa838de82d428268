"""Building the configuration of a new table (pure): the one place creation rules live.

Both `engine.Table.create` and `hoodie init` call `new_table_config`, so the console, the CLI
and the API refuse the same things with the same messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from engine.config.cdc import cdc_properties
from engine.config.table_config import (
    COMPLEX_KEYGEN,
    CREATE_VERSIONS,
    CUSTOM_KEYGEN,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    TIMESTAMP_KEYGEN,
    IndexType,
    TableConfig,
    TableType,
)
from engine.config.table_features import write_problems
from engine.constants import TABLE_VERSION
from engine.errors import InvalidConfigError, InvalidInputError
from engine.schema.avro import arrow_to_create_schema, avro_to_json, normalize_for_write

PAYLOAD_CLASS = "hoodie.compaction.payload.class"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"  # event-time ordering
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
# Apache Hudi 1.x (HoodieRecordMerger): the merge strategy ids a version 8 table records
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"

# the table types and indexes this version can write with
WRITABLE_TABLE_TYPES = frozenset({TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ})
# Apache Hudi's default, also used for tables whose hoodie.properties names no index
DEFAULT_INDEX = IndexType.BLOOM
AVAILABLE_INDEXES = frozenset(
    {
        IndexType.SIMPLE,
        IndexType.GLOBAL_SIMPLE,
        IndexType.BLOOM,
        IndexType.GLOBAL_BLOOM,
        IndexType.HBASE,
        IndexType.RECORD,
    }
)


# Apache Hudi's virtual keys: no bloom filter or key range in the files, no stored locations
VIRTUAL_KEY_INDEXES = frozenset({IndexType.SIMPLE, IndexType.GLOBAL_SIMPLE})


PARTITION_PATH_OPTION = "hoodie.datasource.write.partitionpath.field"


def split_fields(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """"a,b" or ["a", "b"] -> ("a", "b")."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(value)


def require_index_available(index: str | IndexType) -> IndexType:
    itype = IndexType.parse(index)
    if itype not in AVAILABLE_INDEXES:
        names = ", ".join(sorted(i.value for i in AVAILABLE_INDEXES))
        raise InvalidConfigError(f"index {itype.value} is not available in this version; use {names}")
    return itype


def new_table_config(
    *,
    name: str,
    record_key: str | Sequence[str] | None,
    partition_fields: str | Sequence[str] | None = None,
    precombine_field: str | None = None,
    table_type: str | TableType = TableType.COPY_ON_WRITE,
    index: str | IndexType = DEFAULT_INDEX,
    hive_style: bool = False,
    schema: pa.Schema | None = None,
    record_index_buckets: int | None = None,
    record_index_hash: str | None = None,
    table_version: int = TABLE_VERSION,
    key_generator: str | None = None,
    key_generator_options: Mapping[str, str] | None = None,
    populate_meta_fields: bool = True,
    url_encode: bool = False,
    cdc: bool = False,
    cdc_mode: str | None = None,
) -> TableConfig:
    """Validate the creation arguments and return the table's config (typed errors otherwise).

    `table_version` 6 (the default), 8 (Apache Hudi 1.0) or 9 (Apache Hudi 1.1): see
    `version_properties` for what a version 8 or 9 table states beyond a version 6 one.

    RECORD tables also record the index's bucket count and hash function in hoodie.properties
    (`hoodie.record.index.buckets`, `hoodie.record.index.hash.function`): fixed at creation.
    `key_generator="TIMESTAMP"` (Apache Hudi's `TimestampBasedKeyGenerator`) partitions by time:
    `key_generator_options` holds its `hoodie.keygen.timebased.*` settings, kept in hoodie.properties.
    Without it the key generator follows from the fields (simple, complex or non-partitioned).
    `populate_meta_fields=False` (Apache Hudi's virtual keys): copy-on-write only, with index SIMPLE
    or GLOBAL_SIMPLE; the files' `_hoodie_*` columns stay null (the file name aside).
    `cdc` / `cdc_mode`: Apache Hudi's change data capture logging (`hoodie.table.cdc.enabled`,
    `hoodie.table.cdc.supplemental.logging.mode`, default DATA_BEFORE_AFTER), fixed at creation.
    """
    if table_version not in CREATE_VERSIONS:
        raise InvalidConfigError(
            f"table version {table_version!r} cannot be created: use {', '.join(map(str, CREATE_VERSIONS))}")
    ttype = TableType.parse(table_type)
    if ttype not in WRITABLE_TABLE_TYPES:
        raise InvalidConfigError(f"this version writes {', '.join(t.value for t in WRITABLE_TABLE_TYPES)} tables only")
    itype = require_index_available(index)
    if not populate_meta_fields:
        if ttype is not TableType.COPY_ON_WRITE:
            raise InvalidConfigError("tables without meta fields are written as COPY_ON_WRITE only")
        if itype not in VIRTUAL_KEY_INDEXES:
            raise InvalidConfigError(
                f"a table without meta fields needs index SIMPLE or GLOBAL_SIMPLE (its files carry no bloom filter), not {itype.value}"
            )
    cdc_props = cdc_properties(cdc, cdc_mode)
    if cdc_props and not populate_meta_fields:
        raise InvalidConfigError("change data capture needs the meta fields (populate_meta_fields=True)")
    index_props: tuple[tuple[str, str], ...] = ()
    if itype is IndexType.RECORD:
        from engine.keygen.record_hash import record_index_properties

        index_props = record_index_properties(record_index_buckets, record_index_hash)
    elif record_index_buckets is not None or record_index_hash is not None:
        raise InvalidConfigError("record index buckets and hash function apply to index RECORD only")
    keys = split_fields(record_key)
    if not keys and not populate_meta_fields:
        raise InvalidConfigError("a table without meta fields needs record key fields (its keys are computed from them)")
    specs = split_fields(partition_fields)
    parts = tuple(p.partition(":")[0].strip() for p in specs)
    types = tuple(p.partition(":")[2].strip().upper() for p in specs)
    if not name or not name.replace("_", "a").isalnum():
        raise InvalidConfigError(f"table name {name!r} must be letters, digits and underscores")
    create_schema = None
    if schema is not None:
        needed = keys + parts + ((precombine_field,) if precombine_field else ())
        missing = [f for f in needed if f not in schema.names]
        if missing:
            raise InvalidInputError(f"schema lacks field(s) {', '.join(missing)}")
        create_schema = avro_to_json(arrow_to_create_schema(normalize_for_write(schema), name))
    keygen_class, keygen_props = _key_generator(key_generator, key_generator_options, keys, parts, types)
    custom = keygen_class == CUSTOM_KEYGEN
    if custom and table_version < 8:
        # Apache Hudi 0.x keeps a custom generator's partition fields without their types; its
        # writers name them, as this option (kept beside them here: Hudi ignores it)
        keygen_props = (*keygen_props, (PARTITION_PATH_OPTION, ",".join(f"{p}:{t}" for p, t in zip(parts, types, strict=True))))
    return TableConfig(
        extra=(*version_properties(table_version, bool(precombine_field)), *index_props, *keygen_props, *cdc_props),
        keygen_class=keygen_class,
        name=name,
        record_key_fields=keys,
        partition_fields=parts,
        partition_types=types if custom else (),
        precombine_field=precombine_field or None,
        url_encode=url_encode,
        table_type=ttype,
        hive_style=hive_style,
        index_type=itype,
        create_schema=create_schema,
        version=table_version,
        timeline_layout_version=2 if table_version >= 8 else 1,
        populate_meta_fields=populate_meta_fields,
    )


def _key_generator(
    kind: str | None, options: Mapping[str, str] | None, keys: tuple[str, ...], parts: tuple[str, ...],
    types: tuple[str, ...] = (),
) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The key generator class a new table names (None: the default for its fields) and the
    options it keeps in hoodie.properties."""
    chosen = kind.strip().upper() if kind else None
    if chosen in (CUSTOM_KEYGEN.upper(), "CUSTOM"):
        chosen = "CUSTOM"
    elif chosen in (TIMESTAMP_KEYGEN.upper(), "TIMESTAMP"):
        chosen = "TIMESTAMP"
    if any(types) and chosen != "CUSTOM":
        raise InvalidConfigError("partition fields with types (`field:SIMPLE`, `field:TIMESTAMP`) need key_generator='CUSTOM'")
    if chosen is None:
        if options:
            raise InvalidConfigError("key generator options need key_generator='TIMESTAMP' or 'CUSTOM'")
        return None, ()
    if chosen not in ("TIMESTAMP", "CUSTOM"):
        raise InvalidConfigError(
            f"key generator {kind!r} cannot be chosen at creation: use 'TIMESTAMP' or 'CUSTOM' (the others follow from the fields)"
        )
    from engine.keygen.timestamp import TimestampKeySpec

    props = dict(options or {})
    other = sorted(k for k in props if not k.startswith("hoodie.keygen.timebased."))
    if other:
        raise InvalidConfigError(f"key generator options take only hoodie.keygen.timebased.* keys, not {other}")
    if chosen == "CUSTOM":
        if parts and not all(types):
            raise InvalidConfigError(
                "the custom key generator takes each partition field with its type: "
                + ",".join(f"{p}:SIMPLE|TIMESTAMP" for p in parts))
        bad = sorted({t for t in types if t not in ("SIMPLE", "TIMESTAMP")})
        if bad:
            raise InvalidConfigError(f"custom key generator part type(s) {', '.join(bad)}: use SIMPLE or TIMESTAMP")
        if "TIMESTAMP" in types:
            TimestampKeySpec.from_properties(props)  # refuse what a write could not use, before the table exists
        elif props:
            raise InvalidConfigError("hoodie.keygen.timebased.* options need a TIMESTAMP partition field")
        return CUSTOM_KEYGEN, tuple(sorted((k, str(v)) for k, v in props.items()))
    if len(keys) > 1 or len(parts) != 1:
        raise InvalidConfigError("the timestamp-based key generator takes one record key field and one partition field")
    TimestampKeySpec.from_properties(props)  # refuse what a write could not use, before the table exists
    return TIMESTAMP_KEYGEN, tuple(sorted((k, str(v)) for k, v in props.items()))


def version_properties(table_version: int, has_ordering_field: bool) -> tuple[tuple[str, str], ...]:
    """The merge semantics we implement (event-time ordering with an ordering field, commit-time
    without), stated so Apache Hudi writers merge the same way, plus what a new table of
    `table_version` states beyond the modelled keys.

    Version 6 records the payload class. Version 8 (Apache Hudi 1.0's `HoodieTableConfig` for a
    new table) records the merge mode, the payload class and the merge strategy id; version 9
    the merge mode only (its ordering fields are written by `TableConfig.to_properties`), and
    `hoodie.table.format=native`. Both record the initial version and the timeline folders."""
    payload = DEFAULT_PAYLOAD if has_ordering_field else OVERWRITE_PAYLOAD
    if table_version < 8:
        return ((PAYLOAD_CLASS, payload),)
    mode = "EVENT_TIME_ORDERING" if has_ordering_field else "COMMIT_TIME_ORDERING"
    common = (
        ("hoodie.table.initial.version", str(table_version)),
        ("hoodie.timeline.path", "timeline"),
        ("hoodie.timeline.history.path", "history"),
        ("hoodie.record.merge.mode", mode),
    )
    if table_version == 8:
        strategy = EVENT_TIME_STRATEGY if has_ordering_field else COMMIT_TIME_STRATEGY
        return (*common, (PAYLOAD_CLASS, payload), ("hoodie.record.merge.strategy.id", strategy))
    return (*common, ("hoodie.table.format", "native"))


def require_format_writable(config: TableConfig, where: str | None = None) -> None:
    """Refuse a table service that writes data files where `format_problems` finds any."""
    problems = format_problems(config)
    if problems:
        raise InvalidConfigError((f"{where}: " if where else "") + "this version cannot write " + "; ".join(problems))


def format_problems(config: TableConfig) -> list[str]:
    """What the table's properties ask of a writer that this engine does not do
    (`engine.config.table_features`), and a merge mode it does not implement."""
    from engine.data.slice_reader import merge_mode_for

    problems = write_problems(config.to_properties())
    try:
        merge_mode_for(config)
    except InvalidConfigError as exc:
        problems.append(f"its merge ({exc})")
    return problems


def require_writable(config: TableConfig, where: str | None = None) -> None:
    """Refuse to write a table whose layout options this version does not implement (typed error;
    `where`: the table's hoodie.properties, named in the message)."""
    problems = []
    if config.table_type not in WRITABLE_TABLE_TYPES:
        problems.append(f"table type {config.table_type.value}")
    if config.drop_partition_columns:
        problems.append("dropped partition columns (hoodie.datasource.write.drop.partition.columns=true)")
    if not config.populate_meta_fields and config.table_type is TableType.MERGE_ON_READ:
        # copy-on-write computes stored keys from the key fields; log blocks would need it too
        problems.append("merge-on-read tables without meta fields (hoodie.populate.meta.fields=false; they are read)")
    if config.keygen_class not in (SIMPLE_KEYGEN, COMPLEX_KEYGEN, NONPARTITIONED_KEYGEN, TIMESTAMP_KEYGEN, CUSTOM_KEYGEN):
        problems.append(f"key generator {config.keygen_class}")
    problems.extend(format_problems(config))
    if problems:
        raise InvalidConfigError((f"{where}: " if where else "") + "this version cannot write " + "; ".join(problems))
