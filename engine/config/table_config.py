"""`TableConfig`: the contents of `.hoodie/hoodie.properties` (table versions 4 to 9), parsed once, immutable."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from enum import StrEnum

import javaproperties

from engine.config.cdc import CdcMode, cdc_mode
from engine.constants import TABLE_VERSION, TIMELINE_LAYOUT_VERSION
from engine.errors import CorruptTableError, InvalidConfigError, UnsupportedTableVersionError

# property keys
NAME = "hoodie.table.name"
DATABASE = "hoodie.database.name"
TYPE = "hoodie.table.type"
VERSION = "hoodie.table.version"
TIMELINE_LAYOUT = "hoodie.timeline.layout.version"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
KEYGEN_CLASS = "hoodie.table.keygenerator.class"
KEYGEN_TYPE = "hoodie.table.keygenerator.type"  # versions 8 and 9 name the key generator by type
ORDERING_FIELDS = "hoodie.table.ordering.fields"  # version 9: replaces the precombine field
HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
ARCHIVELOG_FOLDER = "hoodie.archivelog.folder"
CREATE_SCHEMA = "hoodie.table.create.schema"
CHECKSUM = "hoodie.table.checksum"
INDEX_TYPE = "hoodie.index.type"

SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEYGEN = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_KEYGEN = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM_KEYGEN = "org.apache.hudi.keygen.CustomKeyGenerator"
_KNOWN_KEYGENS = {SIMPLE_KEYGEN, COMPLEX_KEYGEN, NONPARTITIONED_KEYGEN}
# hoodie.table.keygenerator.type (versions 8, 9) -> the class version 6 names
_KEYGEN_TYPES = {
    "SIMPLE": SIMPLE_KEYGEN, "SIMPLE_AVRO": SIMPLE_KEYGEN,
    "COMPLEX": COMPLEX_KEYGEN, "COMPLEX_AVRO": COMPLEX_KEYGEN,
    "NON_PARTITION": NONPARTITIONED_KEYGEN, "NON_PARTITION_AVRO": NONPARTITIONED_KEYGEN,
    "TIMESTAMP": TIMESTAMP_KEYGEN, "TIMESTAMP_AVRO": TIMESTAMP_KEYGEN,
    "CUSTOM": CUSTOM_KEYGEN, "CUSTOM_AVRO": CUSTOM_KEYGEN,
}
_KEYGEN_TYPE_NAMES = {cls: kind for kind, cls in _KEYGEN_TYPES.items() if not kind.endswith("_AVRO")}
# table versions this engine reads, and creates (`Table.create(table_version=...)`); versions 4
# and 5 are written after an upgrade to 6 (engine.table.upgrade), as Apache Hudi's writers do
READ_VERSIONS = (4, 5, 6, 8, 9)
CREATE_VERSIONS = (6, 8, 9)

# the order in which we write the properties (others follow, sorted)
_ORDER = (
    NAME, DATABASE, TYPE, VERSION, TIMELINE_LAYOUT, RECORD_KEY_FIELDS, PARTITION_FIELDS,
    PRECOMBINE_FIELD, KEYGEN_CLASS, HIVE_STYLE, URL_ENCODE, DROP_PARTITION_COLUMNS,
    BASE_FILE_FORMAT, POPULATE_META_FIELDS, ARCHIVELOG_FOLDER, INDEX_TYPE, CREATE_SCHEMA,
)


class TableType(StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"

    @classmethod
    def parse(cls, value: str | TableType) -> TableType:
        try:
            return cls(str(value.value if isinstance(value, TableType) else value).upper())
        except ValueError as exc:
            raise InvalidConfigError(
                f"unknown table type {value!r}: use COPY_ON_WRITE or MERGE_ON_READ"
            ) from exc


class IndexType(StrEnum):
    SIMPLE = "SIMPLE"
    GLOBAL_SIMPLE = "GLOBAL_SIMPLE"
    BLOOM = "BLOOM"
    GLOBAL_BLOOM = "GLOBAL_BLOOM"
    HBASE = "HBASE"
    RECORD = "RECORD"

    @classmethod
    def parse(cls, value: str | IndexType) -> IndexType:
        text = str(value.value if isinstance(value, IndexType) else value).upper()
        text = _INDEX_ALIASES.get(text, text)
        try:
            return cls(text)
        except ValueError as exc:
            names = ", ".join(i.value for i in cls)
            raise InvalidConfigError(f"unknown index type {value!r}: use one of {names}") from exc


# Apache Hudi's names of its global record index (1.0: RECORD_INDEX; 1.1: GLOBAL_RECORD_LEVEL_INDEX)
_INDEX_ALIASES = {"RECORD_INDEX": "RECORD", "GLOBAL_RECORD_LEVEL_INDEX": "RECORD"}


def table_checksum(database: str, name: str) -> int:
    """Apache Hudi's `hoodie.table.checksum`: CRC32 of the UTF-8 string `<database>.<table>`."""
    return zlib.crc32(f"{database}.{name}".encode())


def _split(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class TableConfig:
    """Immutable table configuration; `extra` keeps properties we do not model, for round trips."""

    name: str
    record_key_fields: tuple[str, ...]
    table_type: TableType = TableType.COPY_ON_WRITE
    partition_fields: tuple[str, ...] = ()
    # a CustomKeyGenerator's part types, one per partition field ("SIMPLE"/"TIMESTAMP" as the
    # table states them; "" where it states none: version 6 tables keep the names only)
    partition_types: tuple[str, ...] = ()
    precombine_field: str | None = None
    hive_style: bool = False
    url_encode: bool = False
    database: str = "default"
    keygen_class: str | None = None
    index_type: IndexType | None = None
    create_schema: str | None = None
    version: int = TABLE_VERSION
    timeline_layout_version: int = TIMELINE_LAYOUT_VERSION
    drop_partition_columns: bool = False
    populate_meta_fields: bool = True
    base_file_format: str = "PARQUET"
    archivelog_folder: str = "archived"
    extra: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidConfigError("a table needs a name")
        if not self.record_key_fields and not self.populate_meta_fields:
            raise InvalidConfigError("a table without meta fields needs record key fields (its keys are computed from them)")
        if self.keygen_class is None:
            object.__setattr__(self, "keygen_class", self.default_keygen_class())

    def default_keygen_class(self) -> str:
        if not self.partition_fields:
            return NONPARTITIONED_KEYGEN if len(self.record_key_fields) <= 1 else COMPLEX_KEYGEN
        if len(self.record_key_fields) <= 1 and len(self.partition_fields) == 1:
            return SIMPLE_KEYGEN
        return COMPLEX_KEYGEN

    @property
    def auto_keys(self) -> bool:
        """Record keys generated by the writer (`<instant>_<task>_<row>`, Apache Hudi 0.14's auto
        record key generation): the table names no record key fields."""
        return not self.record_key_fields

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def uses_complex_keys(self) -> bool:
        """Complex key generators write keys as `f1:v1,f2:v2` (even for one field); the
        timestamp-based one extends the simple key generator (the value alone)."""
        return self.keygen_class not in (SIMPLE_KEYGEN, NONPARTITIONED_KEYGEN, TIMESTAMP_KEYGEN)

    @property
    def cdc_mode(self) -> CdcMode | None:
        """The CDC logging mode (`hoodie.table.cdc.*`); None when the table logs no changes."""
        return cdc_mode(dict(self.extra))

    @property
    def checksum(self) -> int:
        return table_checksum(self.database, self.name)

    def with_updates(self, **changes: object) -> TableConfig:
        return replace(self, **changes)  # type: ignore[arg-type]

    def to_properties(self) -> dict[str, str]:
        props: dict[str, str] = {
            NAME: self.name,
            DATABASE: self.database,
            TYPE: self.table_type.value,
            VERSION: str(self.version),
            TIMELINE_LAYOUT: str(self.timeline_layout_version),
            HIVE_STYLE: str(self.hive_style).lower(),
            URL_ENCODE: str(self.url_encode).lower(),
            DROP_PARTITION_COLUMNS: str(self.drop_partition_columns).lower(),
            BASE_FILE_FORMAT: self.base_file_format,
            POPULATE_META_FIELDS: str(self.populate_meta_fields).lower(),
            ARCHIVELOG_FOLDER: self.archivelog_folder,
        }
        if self.record_key_fields:  # none: auto-generated keys (Apache Hudi writes no such property)
            props[RECORD_KEY_FIELDS] = ",".join(self.record_key_fields)
        if self.partition_fields:
            typed = self.version >= 8 and any(self.partition_types)
            props[PARTITION_FIELDS] = ",".join(
                f"{f}:{t}" if typed and t else f
                for f, t in zip(self.partition_fields, self.partition_types or ("",) * len(self.partition_fields),
                                strict=True))
        # versions 8 and 9 name the key generator by type, version 9 the ordering field(s)
        # instead of the precombine field (Apache Hudi 1.x's HoodieTableConfig)
        if self.version < 8:
            props[KEYGEN_CLASS] = str(self.keygen_class)
        elif self.keygen_class in _KEYGEN_TYPE_NAMES:
            props[KEYGEN_TYPE] = _KEYGEN_TYPE_NAMES[str(self.keygen_class)]
        if self.precombine_field:
            props[ORDERING_FIELDS if self.version >= 9 else PRECOMBINE_FIELD] = self.precombine_field
        if self.index_type is not None:
            props[INDEX_TYPE] = self.index_type.value
        if self.create_schema:
            props[CREATE_SCHEMA] = self.create_schema
        props.update(dict(self.extra))
        ordered = {k: props[k] for k in _ORDER if k in props}
        ordered.update({k: props[k] for k in sorted(props) if k not in ordered})
        ordered[CHECKSUM] = str(self.checksum)
        return ordered

    def to_text(self, comment: str | None = None) -> str:
        """Serialise as Java properties (`:` and `=` escaped like java.util.Properties)."""
        body = javaproperties.dumps(self.to_properties(), timestamp=False, sort_keys=False)
        header = f"#{comment}\n" if comment else ""
        return header + body

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TableConfig:
        for key in (NAME, VERSION):
            if not props.get(key):
                raise CorruptTableError(f"hoodie.properties lacks {key}")
        name = props[NAME]
        try:
            version = int(props[VERSION])
        except ValueError as exc:
            raise CorruptTableError(f"hoodie.properties: {VERSION}={props[VERSION]!r} is not a number") from exc
        if version not in READ_VERSIONS:
            way = ("upgrade it with Apache Hudi 0.11 or later first (its first write upgrades the table), then "
                   "this engine reads it" if version < min(READ_VERSIONS) else
                   "it was written by an Apache Hudi newer than this engine knows")
            raise UnsupportedTableVersionError(
                f"table version {version} is not supported: this engine reads versions 4, 5, 6, 8 and 9 and writes "
                f"6, 8 and 9 (4 and 5 after upgrading them to 6); {way}",
                version,
            )
        layout = props.get(TIMELINE_LAYOUT, str(TIMELINE_LAYOUT_VERSION)).strip()
        if not layout.isdigit():
            raise CorruptTableError(f"hoodie.properties: {TIMELINE_LAYOUT}={layout!r} is not a number")
        if int(layout) not in (1, 2):
            raise UnsupportedTableVersionError(
                f"timeline layout version {layout} is not supported (this engine reads layouts 1 and 2)", version)
        database = props.get(DATABASE, "default") or "default"
        stored = props.get(CHECKSUM)
        # Apache Hudi sums the database name as stated, "" when the properties name none
        stated_db = props.get(DATABASE, "")
        if stored is not None and stored.strip() != str(table_checksum(stated_db, name)):
            raise CorruptTableError(
                f"hoodie.properties checksum mismatch: stored {stored}, "
                f"expected {table_checksum(stated_db, name)} for {stated_db}.{name}"
            )
        # no record key fields: keys generated by the writer (Apache Hudi 0.14+'s auto keys)
        record_keys = _split(props.get(RECORD_KEY_FIELDS))
        if not record_keys and not _bool(props.get(POPULATE_META_FIELDS), True):
            raise CorruptTableError("hoodie.properties lacks hoodie.table.recordkey.fields (a table without "
                                    "meta fields needs them)")
        keygen = props.get(KEYGEN_CLASS)
        if not keygen and props.get(KEYGEN_TYPE):
            kind = props[KEYGEN_TYPE].strip().upper()
            keygen = _KEYGEN_TYPES.get(kind) or (None if kind == "USER_PROVIDED" else f"type:{kind}")
        # CUSTOM key generators of versions 8 and 9 store partition fields as `field:TYPE` (SIMPLE or
        # TIMESTAMP); version 6 ones the names alone (Apache Hudi 0.x strips the types)
        specs = _split(props.get(PARTITION_FIELDS))
        partition_fields = tuple(f.partition(":")[0].strip() for f in specs)
        partition_types = tuple(f.partition(":")[2].strip() for f in specs)
        if not any(partition_types):
            partition_types = ()
        ordering = _split(props.get(ORDERING_FIELDS))
        precombine = props.get(PRECOMBINE_FIELD) or (ordering[0] if ordering else None)
        modelled = set(_ORDER) | {CHECKSUM}
        extra = tuple(sorted((k, v) for k, v in props.items() if k not in modelled))
        index = props.get(INDEX_TYPE)
        return cls(
            name=name,
            database=database,
            table_type=TableType.parse(props.get(TYPE, "COPY_ON_WRITE")),
            version=version,
            timeline_layout_version=int(layout),
            record_key_fields=record_keys,
            partition_fields=partition_fields,
            partition_types=partition_types,
            precombine_field=precombine,
            keygen_class=keygen if keygen in _KNOWN_KEYGENS else (keygen or None),
            hive_style=_bool(props.get(HIVE_STYLE), False),
            url_encode=_bool(props.get(URL_ENCODE), False),
            drop_partition_columns=_bool(props.get(DROP_PARTITION_COLUMNS), False),
            base_file_format=props.get(BASE_FILE_FORMAT, "PARQUET"),
            populate_meta_fields=_bool(props.get(POPULATE_META_FIELDS), True),
            archivelog_folder=props.get(ARCHIVELOG_FOLDER, "archived"),
            index_type=IndexType.parse(index) if index else None,
            create_schema=props.get(CREATE_SCHEMA) or None,
            extra=extra,
        )

    @classmethod
    def from_text(cls, text: str) -> TableConfig:
        try:
            props = javaproperties.loads(text)
        except Exception as exc:  # javaproperties raises ValueError subclasses on bad escapes
            raise CorruptTableError(f"hoodie.properties is not a valid properties file: {exc}") from exc
        return cls.from_properties(props)
