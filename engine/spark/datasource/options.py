"""Apache Hudi's Spark data source options, parsed and checked (pure: no Spark, no I/O).

Option names are Apache Hudi's (`DataSourceReadOptions`, `DataSourceWriteOptions`,
`HoodieWriteConfig`); Spark hands them over as strings in a case-insensitive map, so every name
here is lower case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.config.cdc import CDC_ENABLED, CDC_LOGGING_MODE, CdcMode
from engine.errors import InvalidConfigError

# ---- reads -------------------------------------------------------------------------------------
QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF = "as.of.instant"
BEGIN = "hoodie.datasource.read.begin.instanttime"
END = "hoodie.datasource.read.end.instanttime"
INCREMENTAL_FORMAT = "hoodie.datasource.query.incremental.format"
DATA_SKIPPING = "hoodie.enable.data.skipping"
QUERY_TYPES = ("snapshot", "read_optimized", "incremental")
# Spark's own time-travel options (DataFrameReader passes them to sources that are not catalogs)
SPARK_TIMESTAMP_AS_OF = "timestampasof"
SPARK_VERSION_AS_OF = "versionasof"

# ---- writes ------------------------------------------------------------------------------------
OPERATION = "hoodie.datasource.write.operation"
RECORD_KEY = "hoodie.datasource.write.recordkey.field"
PARTITION_FIELD = "hoodie.datasource.write.partitionpath.field"
PRECOMBINE = "hoodie.datasource.write.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
TABLE_NAME = "hoodie.table.name"
LEGACY_TABLE_NAME = "hoodie.datasource.write.table.name"
TABLE_TYPE = "hoodie.datasource.write.table.type"
LEGACY_TABLE_TYPE = "hoodie.datasource.write.storage.type"
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
TABLE_VERSION = "hoodie.write.table.version"
METADATA_ENABLE = "hoodie.metadata.enable"
KEYGEN_CLASS = "hoodie.datasource.write.keygenerator.class"
KEYGEN_TYPE = "hoodie.datasource.write.keygenerator.type"
STORAGE_OPTION_PREFIX = "hoodie.storage."  # hoodie.storage.<key> -> the Storage's options

OPERATIONS = ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite_table", "insert_overwrite")
# accepted for Apache Hudi compatibility, without effect here (Spark's partitions set the parallelism)
IGNORED = frozenset({
    "hoodie.insert.shuffle.parallelism", "hoodie.bulkinsert.shuffle.parallelism",
    "hoodie.delete.shuffle.parallelism",
    "hoodie.datasource.write.drop.partition.columns", "hoodie.datasource.write.row.writer.enable",
    "hoodie.datasource.hive_sync.enable",
    "hoodie.embed.timeline.server",
})
# options Spark or the session catalog add that are not Hudi's
CATALOG_KEYS = frozenset({"path", "paths", "location", "owner", "provider", "external", "comment",
                          "is_managed_location"})
_KEYGENS = {
    "org.apache.hudi.keygen.simplekeygenerator": "SIMPLE",
    "org.apache.hudi.keygen.complexkeygenerator": "COMPLEX",
    "org.apache.hudi.keygen.nonpartitionedkeygenerator": "NON_PARTITION",
    "org.apache.hudi.keygen.timestampbasedkeygenerator": "TIMESTAMP",
    "org.apache.hudi.keygen.customkeygenerator": "CUSTOM",
    "org.apache.hudi.keygen.customavrokeygenerator": "CUSTOM",
    "org.apache.hudi.keygen.timestampbasedavrokeygenerator": "TIMESTAMP",
}
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
META_KEY = "hoodie.datasource"  # StructField metadata key carrying a catalog table's options
PAYLOAD_CLASS = "hoodie.datasource.write.payload.class"
# the payloads whose merge this engine does (the latest record wins, or the larger ordering value)
KNOWN_PAYLOADS = frozenset({
    "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
    "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
})


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def table_path(options: Mapping[str, str]) -> str | None:
    """The table's location: `load(path)` / `save(path)`, `OPTIONS (path ...)` or `LOCATION`."""
    opts = _lower(options)
    for key in ("path", "location"):
        if opts.get(key):
            return normalize_location(opts[key])
    if opts.get("paths"):
        try:
            paths = json.loads(opts["paths"])
        except ValueError:
            paths = None
        if isinstance(paths, list) and len(paths) == 1:
            return normalize_location(str(paths[0]))
        raise InvalidConfigError(f"a Hudi table is read from one path, not {opts['paths']}")
    return None


def normalize_location(location: str) -> str:
    """A catalog location (`file:/x`, `file:///x`) as the engine's path; other schemes unchanged."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        return "/" + rest.lstrip("/")
    return location


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """`hoodie.storage.<key>` options: settings for the table's storage (S3 endpoint, keys)."""
    return {k[len(STORAGE_OPTION_PREFIX):]: v for k, v in _lower(options).items() if k.startswith(STORAGE_OPTION_PREFIX)}


_INSTANT_FORMS = (
    # digits: an instant time or a prefix of one, compared as Apache Hudi compares instant
    # strings ("000" in its quick start: from the beginning)
    (re.compile(r"\d{1,17}"), lambda s: s.ljust(17, "0")),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), lambda s: s.replace("-", "") + "000000000"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}"),
     lambda s: re.sub(r"\D", "", s) + "000"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\.\d{1,3}"),
     lambda s: re.sub(r"\D", "", s.split(".")[0]) + s.split(".")[1].ljust(3, "0")),
)


def instant_of(value: str, option: str) -> str:
    """An instant time from the forms Apache Hudi accepts for `as.of.instant` and the incremental
    bounds: yyyyMMddHHmmssSSS or a prefix of it (padded with zeros), yyyy-MM-dd,
    yyyy-MM-dd HH:mm:ss[.SSS]."""
    text = str(value).strip()
    for pattern, convert in _INSTANT_FORMS:
        if pattern.fullmatch(text):
            return convert(text)
    raise InvalidConfigError(
        f"{option}={value!r} is not an instant time: use yyyyMMddHHmmssSSS, yyyyMMddHHmmss, "
        "yyyy-MM-dd or 'yyyy-MM-dd HH:mm:ss[.SSS]'"
    )


@dataclass(frozen=True)
class ReadOptions:
    query_type: str = "snapshot"
    as_of: str | None = None
    begin: str | None = None
    end: str | None = None
    data_skipping: bool = True  # skip file slices by the metadata table's column statistics
    cdc: bool = False  # an incremental query in the CDC format (op, ts_ms, before, after)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = _lower(options)
        query = _choice(opts, QUERY_TYPE, "snapshot", QUERY_TYPES)
        fmt = opts.get(INCREMENTAL_FORMAT, "latest_state").strip().lower()
        if fmt not in ("latest_state", "cdc"):
            raise InvalidConfigError(f"{INCREMENTAL_FORMAT}={fmt!r}: use latest_state or cdc")
        if fmt == "cdc" and query != "incremental":
            raise InvalidConfigError(f"{INCREMENTAL_FORMAT}=cdc needs {QUERY_TYPE}=incremental")
        if opts.get(SPARK_VERSION_AS_OF):
            raise InvalidConfigError(
                f"versionAsOf is not a Hudi option: time travel with {AS_OF} (an instant time)")
        as_of_raw = opts.get(AS_OF) or opts.get(SPARK_TIMESTAMP_AS_OF)
        as_of = instant_of(as_of_raw, AS_OF) if as_of_raw else None
        begin = instant_of(opts[BEGIN], BEGIN) if opts.get(BEGIN) else None
        end = instant_of(opts[END], END) if opts.get(END) else None
        if query == "incremental":
            if begin is None:
                raise InvalidConfigError(f"an incremental query needs {BEGIN}")
            if as_of is not None:
                raise InvalidConfigError(f"{AS_OF} does not apply to an incremental query (bound it with {END})")
        elif begin is not None or end is not None:
            raise InvalidConfigError(f"{BEGIN} / {END} need {QUERY_TYPE}=incremental")
        if query == "read_optimized" and as_of is not None:
            raise InvalidConfigError(f"{AS_OF} is for snapshot queries, not read_optimized")
        skipping = _bool(opts[DATA_SKIPPING], DATA_SKIPPING) if opts.get(DATA_SKIPPING) else True
        return cls(query, as_of, begin, end, skipping, cdc=fmt == "cdc")


@dataclass(frozen=True)
class WriteOptions:
    """A data source write's operation, the table's creation settings (used on the first write and
    checked against an existing table), and the options the engine's `WriteConfig` takes."""

    operation: str = "upsert"
    table_name: str | None = None
    record_key: tuple[str, ...] = ()
    partition_fields: tuple[str, ...] = ()
    precombine: str | None = None
    table_type: str | None = None
    hive_style: bool | None = None
    table_version: int | None = None
    key_generator: str | None = None
    index_type: str | None = None
    engine_options: dict[str, str] = field(default_factory=dict)
    operation_given: bool = False  # hoodie.datasource.write.operation was set (else upsert, or deduced)
    url_encode: bool | None = None
    partition_specs: tuple[str, ...] = ()  # the partition field option as given (`field:TYPE` for CUSTOM)
    # hoodie.metadata.enable (None: unset): whether a table this write creates gets a metadata table;
    # it stays among the engine options, for the write itself
    metadata: bool | None = None
    # hoodie.table.cdc.enabled / .supplemental.logging.mode (None: unset): a new table's CDC logging
    cdc: bool | None = None
    cdc_mode: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        opts = _lower(options)
        op = _choice(opts, OPERATION, "upsert", OPERATIONS)
        specs = _fields(opts.get(PARTITION_FIELD))
        fields = {
            "record_key": _fields(opts.get(RECORD_KEY)),
            "partition_fields": tuple(f.partition(":")[0].strip() for f in specs),
        }
        precombine = opts.get(PRECOMBINE) or opts.get(ORDERING_FIELDS) or None
        if precombine is not None and "," in precombine:
            raise InvalidConfigError(f"one ordering field is supported, not {precombine!r}")
        table_type = opts.get(TABLE_TYPE) or opts.get(LEGACY_TABLE_TYPE)
        hive = opts.get(HIVE_STYLE)
        version = opts.get(TABLE_VERSION)
        keygen = None
        if opts.get(KEYGEN_CLASS):
            keygen = _KEYGENS.get(opts[KEYGEN_CLASS].strip().lower())
            if keygen is None:
                raise InvalidConfigError(f"{KEYGEN_CLASS}={opts[KEYGEN_CLASS]!r} is not a key generator this engine has")
        elif opts.get(KEYGEN_TYPE):
            keygen = opts[KEYGEN_TYPE].strip().upper()
        payload = opts.get(PAYLOAD_CLASS, "").strip()
        if payload and payload not in KNOWN_PAYLOADS:
            raise InvalidConfigError(
                f"{PAYLOAD_CLASS}={payload}: this engine merges records as "
                f"{' or '.join(sorted(p.rsplit('.', 1)[1] for p in KNOWN_PAYLOADS))} do, not with another payload class")
        consumed = {OPERATION, RECORD_KEY, PARTITION_FIELD, PRECOMBINE, ORDERING_FIELDS, TABLE_NAME,
                    LEGACY_TABLE_NAME, TABLE_TYPE, LEGACY_TABLE_TYPE, HIVE_STYLE, TABLE_VERSION, KEYGEN_CLASS,
                    KEYGEN_TYPE, QUERY_TYPE, AS_OF, URL_ENCODE, PAYLOAD_CLASS, CDC_ENABLED, CDC_LOGGING_MODE}
        engine = {k: v for k, v in opts.items()
                  if k.startswith("hoodie.") and k not in consumed and k not in IGNORED
                  and not k.startswith(STORAGE_OPTION_PREFIX)}
        if any(":" in f for f in specs):
            # a custom key generator's typed fields go to the write too (version 6 tables keep the names only)
            engine["hoodie.datasource.write.partitionpath.field"] = ",".join(specs)
        try:
            table_version = int(version) if version else None
            hive_style = _bool(hive, HIVE_STYLE) if hive is not None else None
            url_encode = _bool(opts[URL_ENCODE], URL_ENCODE) if opts.get(URL_ENCODE) else None
            metadata = _bool(engine[METADATA_ENABLE], METADATA_ENABLE) if engine.get(METADATA_ENABLE) else None
            cdc = _bool(opts[CDC_ENABLED], CDC_ENABLED) if opts.get(CDC_ENABLED) else None
        except ValueError as exc:
            raise InvalidConfigError(f"bad value: {exc}") from exc
        return cls(
            operation=op,
            table_name=opts.get(TABLE_NAME) or opts.get(LEGACY_TABLE_NAME) or None,
            precombine=precombine,
            table_type=table_type.strip().upper() if table_type else None,
            hive_style=hive_style,
            table_version=table_version,
            key_generator=keygen,
            index_type=engine.get("hoodie.index.type"),
            engine_options=engine,
            operation_given=bool(opts.get(OPERATION)),
            url_encode=url_encode,
            partition_specs=specs,
            metadata=metadata,
            cdc=cdc,
            cdc_mode=CdcMode.parse(opts[CDC_LOGGING_MODE]).value if opts.get(CDC_LOGGING_MODE) else None,
            **fields,
        )

    def creation_problem(self) -> str | None:
        """Why these options cannot create a table (None when they can). No record key field:
        the table's keys are generated (Apache Hudi 0.14's auto keys), for inserts only."""
        if not self.table_name:
            return f"the first write to a path creates its table: set {TABLE_NAME}"
        if not self.record_key and self.operation_given and self.operation not in ("insert", "bulk_insert"):
            return (f"the first write to a path creates its table: set {RECORD_KEY} (the record key field), or "
                    f"insert without one (the keys are then generated, as Apache Hudi 0.14+ does)")
        return None

    def conflicts(self, table: Mapping[str, Any]) -> list[str]:
        """Options that state something else than the existing table (`table`: the same keys)."""
        mine: dict[str, Any] = {
            RECORD_KEY: self.record_key or None,
            PARTITION_FIELD: self.partition_fields if self.partition_fields else None,
            PRECOMBINE: self.precombine,
            TABLE_TYPE: self.table_type,
            TABLE_NAME: self.table_name,
            CDC_ENABLED: self.cdc,
            CDC_LOGGING_MODE: self.cdc_mode,
        }
        out = []
        for key, value in mine.items():
            if value is not None and key in table and value != table[key]:
                out.append(f"{key}={_show(value)} but the table has {_show(table[key])}")
        return out


def save_mode_operation(operation: str, overwrite: bool, sql: bool = False) -> tuple[str, bool]:
    """(the operation to run, whether the table is replaced first) for a write of `operation` in
    save mode overwrite or append, as Apache Hudi's `HoodieSparkSqlWriter.handleSaveModes` decides:

    - append: the operation, on the table (created by the first write);
    - overwrite with insert_overwrite_table: the table stays, the operation replaces every file group;
    - overwrite with any other operation but a delete: the existing table is deleted and created
      again from the write's options, and the operation is its first commit (`fs.delete(basePath)`);
    - overwrite with delete: refused ("Append is the only save mode applicable for DELETE");
    - a catalog table's `INSERT OVERWRITE` (`sql`): insert_overwrite_table, as Apache Hudi's SQL runs it.

    Spark itself refuses the modes `errorifexists` (its default) and `ignore` for Python data
    sources (UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before a source sees the write."""
    if not overwrite:
        return operation, False
    if operation == "delete":
        raise InvalidConfigError(
            "Append is the only save mode applicable for delete (Apache Hudi refuses mode('overwrite') with it): "
            "use mode('append')")
    if sql or operation == "insert_overwrite_table":
        return "insert_overwrite_table", False
    return operation, True


def _choice(opts: Mapping[str, str], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = opts.get(key, default).strip().lower()
    if value not in choices:
        raise InvalidConfigError(f"{key}={opts[key]!r}: use one of {', '.join(choices)}")
    return value


def _show(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _fields(text: str | None) -> tuple[str, ...]:
    return tuple(f.strip() for f in text.split(",") if f.strip()) if text else ()


def _bool(text: str, key: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise ValueError(f"{key}={text!r} (true or false)")
    return low == "true"


def pack_catalog_options(options: Mapping[str, str]) -> str:
    """The options of a `CREATE TABLE ... USING hudi` (its location and Hudi options), as JSON for
    the table schema's metadata: Spark 4's session catalog hands a Python data source no options
    when the table is read or written later, only its schema."""
    opts = _lower(options)
    out = {k: v for k, v in opts.items() if k not in CATALOG_KEYS and not k.startswith("option.")}
    path = table_path(opts)
    if path is not None:
        out["path"] = path
    return json.dumps(out, sort_keys=True)


def unpack_catalog_options(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
