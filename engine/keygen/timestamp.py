"""Partition paths of Apache Hudi's `TimestampBasedKeyGenerator` (pure: no Spark, no I/O).

The table's one partition field holds a time; its partition path is that time printed with the
output date format (`hoodie.keygen.timebased.output.dateformat`, a Joda pattern) in the output
time zone. How the value is read depends on `hoodie.keygen.timebased.timestamp.type`:

- `EPOCHMILLISECONDS`, `EPOCHMICROSECONDS`, `UNIX_TIMESTAMP` (seconds), `SCALAR` (the unit in
  `hoodie.keygen.timebased.timestamp.scalar.time.unit`, default SECONDS): a number, truncated to a
  whole number of that unit (Java's `longValue()`), then to whole milliseconds (`TimeUnit.convert`).
- `DATE_STRING`: a string parsed with the first of the input date formats
  (`hoodie.keygen.timebased.input.dateformat`, split on `...input.dateformat.list.delimiter.regex`,
  default `,`) that matches. A string without an offset is read in the input time zone.

Time zones: `hoodie.keygen.timebased.timezone` sets both; otherwise `...input.timezone` and
`...output.timezone`. With no output zone, a DATE_STRING prints in the zone it was parsed in (its
own offset, else the input zone) and a number in the writer JVM's default zone, which we take to be
UTC (the zone Hudi's docs and every fixture use). A null value is Hudi's default: 1 of the unit
after the epoch (DATE_STRING: 1 ms after it, printed with the first input format and parsed back).
Values that do not parse are an `InvalidInputError` (Hudi fails the write the same way).

Patterns are Joda-Time's, as Hudi's (`engine.keygen.joda`): output formats print every Joda letter
with a fixed rendering (`h`, `K`, `k`, `a`, `E`, `D`, `w`, `S`... with their widths); input
formats read `yyyy yy MM dd HH mm ss SSS Z ZZ`. Quoted text (`'T'`, `''` for a quote) and any other
non-letter is literal. Other letters are refused with `InvalidConfigError` naming them, when the
table's options are read: before anything is written.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidConfigError, InvalidInputError
from engine.keygen.joda import Token, finest_unit, format_time, parse_pattern, prints_offset

PREFIX = "hoodie.keygen.timebased."
OLD_PREFIX = "hoodie.deltastreamer.keygen.timebased."  # Hudi still reads the deprecated spelling
TIMESTAMP_TYPE = PREFIX + "timestamp.type"
SCALAR_TIME_UNIT = PREFIX + "timestamp.scalar.time.unit"
INPUT_DATE_FORMAT = PREFIX + "input.dateformat"
INPUT_DATE_FORMAT_DELIMITER = PREFIX + "input.dateformat.list.delimiter.regex"
INPUT_TIMEZONE = PREFIX + "input.timezone"
OUTPUT_DATE_FORMAT = PREFIX + "output.dateformat"
OUTPUT_TIMEZONE = PREFIX + "output.timezone"
TIMEZONE = PREFIX + "timezone"
DATE_TIME_PARSER = "hoodie.keygen.datetime.parser.class"
DEFAULT_PARSER = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"


class TimestampType(StrEnum):
    UNIX_TIMESTAMP = "UNIX_TIMESTAMP"
    DATE_STRING = "DATE_STRING"
    MIXED = "MIXED"
    EPOCHMILLISECONDS = "EPOCHMILLISECONDS"
    EPOCHMICROSECONDS = "EPOCHMICROSECONDS"
    SCALAR = "SCALAR"


# java.util.concurrent.TimeUnit -> (multiply, divide) to reach milliseconds
_UNIT_TO_MS = {
    "NANOSECONDS": (1, 1_000_000),
    "MICROSECONDS": (1, 1_000),
    "MILLISECONDS": (1, 1),
    "SECONDS": (1_000, 1),
    "MINUTES": (60_000, 1),
    "HOURS": (3_600_000, 1),
    "DAYS": (86_400_000, 1),
}
_TYPE_UNITS = {
    TimestampType.EPOCHMILLISECONDS: "MILLISECONDS",
    TimestampType.EPOCHMICROSECONDS: "MICROSECONDS",
    TimestampType.UNIX_TIMESTAMP: "SECONDS",
}

# ---- Joda patterns (engine.keygen.joda) -----------------------------------------------------------

# (letter, count) -> regex for parsing input dates
_INPUT_REGEX = {
    ("y", 4): r"(?P<year>\d{4})",
    ("y", 2): r"(?P<yy>\d{2})",
    ("M", 2): r"(?P<month>\d{1,2})",
    ("d", 2): r"(?P<day>\d{1,2})",
    ("H", 2): r"(?P<hour>\d{1,2})",
    ("m", 2): r"(?P<minute>\d{1,2})",
    ("s", 2): r"(?P<second>\d{1,2})",
    ("S", 3): r"(?P<fraction>\d{1,9})",
    ("Z", 1): r"(?P<offset>Z|[+-]\d{2}:?\d{2})",
    ("Z", 2): r"(?P<offset>Z|[+-]\d{2}:?\d{2})",
}


def _input_regex(tokens: Sequence[Token]) -> re.Pattern[str]:
    parts = []
    for t in tokens:
        if not t.letter:
            parts.append(re.escape(t.text))
        else:
            parts.append(_INPUT_REGEX[(t.letter, t.width)])
    return re.compile("".join(parts))


# ---- time zones ---------------------------------------------------------------------------

_OFFSET_ZONE = re.compile(r"^(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?$")


def parse_zone(name: str) -> dt.tzinfo:
    """A Java time-zone id: UTC/GMT, `GMT+08:00`-style offsets, or a region (`Asia/Tokyo`)."""
    name = name.strip()
    if name in ("UTC", "GMT", "Z", "UT"):
        return dt.UTC
    m = _OFFSET_ZONE.match(name)
    if m:
        sign, hh, mm = m.group(1), int(m.group(2)), int(m.group(3) or 0)
        delta = dt.timedelta(hours=hh, minutes=mm)
        return dt.timezone(-delta if sign == "-" else delta)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidConfigError(f"unknown time zone {name!r} in the timestamp key generator's configuration") from exc


def arrow_zone(zone: dt.tzinfo) -> str:
    """The zone as Arrow names it: `UTC`, `+08:00` or the region."""
    if zone is dt.UTC:
        return "UTC"
    if isinstance(zone, ZoneInfo):
        return zone.key
    offset = zone.utcoffset(None) or dt.timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    hh, mm = divmod(abs(minutes), 60)
    return f"{sign}{hh:02d}:{mm:02d}"


# ---- the key generator's configuration ----------------------------------------------------


def _get(props: Mapping[str, str], key: str) -> str | None:
    value = props.get(key)
    if value is None and key.startswith(PREFIX):
        value = props.get(OLD_PREFIX + key[len(PREFIX):])
    return value


@dataclass(frozen=True)
class TimestampKeySpec:
    """The parsed `hoodie.keygen.timebased.*` configuration of one table."""

    timestamp_type: TimestampType
    output_format: tuple[Token, ...]
    time_unit: str | None = None  # numeric types: the unit of the value
    input_formats: tuple[tuple[Token, ...], ...] = ()  # DATE_STRING
    input_zone: dt.tzinfo | None = None
    output_zone: dt.tzinfo | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TimestampKeySpec:
        """Parse and check the options (InvalidConfigError names what is missing or unsupported)."""
        parser = _get(props, DATE_TIME_PARSER) or props.get("hoodie.deltastreamer.keygen.datetime.parser.class")
        if parser and parser.strip() != DEFAULT_PARSER:
            raise InvalidConfigError(f"custom date-time parser {parser} is not supported")
        raw_type = (_get(props, TIMESTAMP_TYPE) or "").strip()
        if not raw_type:
            raise InvalidConfigError(
                f"the timestamp key generator needs {TIMESTAMP_TYPE} (Apache Hudi 0.x does not keep it in "
                "hoodie.properties: give it as a write option)"
            )
        try:
            ttype = TimestampType(raw_type.upper())
        except ValueError as exc:
            names = ", ".join(t.value for t in TimestampType)
            raise InvalidConfigError(f"{TIMESTAMP_TYPE}={raw_type!r}: use one of {names}") from exc
        if ttype is TimestampType.MIXED:
            raise InvalidConfigError(f"{TIMESTAMP_TYPE}=MIXED is not supported")
        output = _get(props, OUTPUT_DATE_FORMAT) or ""
        if not output.strip():
            raise InvalidConfigError(f"the timestamp key generator needs {OUTPUT_DATE_FORMAT}")
        unit = None
        if ttype is TimestampType.SCALAR:
            unit = (_get(props, SCALAR_TIME_UNIT) or "SECONDS").strip().upper()
            if unit not in _UNIT_TO_MS:
                raise InvalidConfigError(f"{SCALAR_TIME_UNIT}={unit!r}: use one of {', '.join(_UNIT_TO_MS)}")
        elif ttype is not TimestampType.DATE_STRING:
            unit = _TYPE_UNITS[ttype]
        inputs: tuple[tuple[Token, ...], ...] = ()
        if ttype is TimestampType.DATE_STRING:
            raw = _get(props, INPUT_DATE_FORMAT) or ""
            if not raw.strip():
                raise InvalidConfigError(f"{TIMESTAMP_TYPE}=DATE_STRING needs {INPUT_DATE_FORMAT}")
            delimiter = _get(props, INPUT_DATE_FORMAT_DELIMITER) or ","
            inputs = tuple(parse_pattern(p.strip(), for_input=True) for p in re.split(delimiter, raw) if p.strip())
        both = _get(props, TIMEZONE)
        in_name = both if both is not None else _get(props, INPUT_TIMEZONE)
        out_name = both if both is not None else _get(props, OUTPUT_TIMEZONE)
        return cls(
            timestamp_type=ttype,
            output_format=parse_pattern(output.strip()),
            time_unit=unit,
            input_formats=inputs,
            input_zone=parse_zone(in_name) if in_name and in_name.strip() else None,
            output_zone=parse_zone(out_name) if out_name and out_name.strip() else None,
        )

    # ---- DATE_STRING ----------------------------------------------------------------------
    def parse_date_string(self, text: str) -> dt.datetime:
        """The aware time a DATE_STRING value names, in the zone Hudi's parser leaves it in."""
        for tokens in self.input_formats:
            m = _input_regex(tokens).fullmatch(text.strip())
            if m is None:
                continue
            g = m.groupdict()
            year = int(g["year"]) if g.get("year") else (2000 + int(g["yy"]) if g.get("yy") else 1970)
            fraction = (g.get("fraction") or "0")[:6].ljust(6, "0")
            try:
                naive = dt.datetime(
                    year, int(g.get("month") or 1), int(g.get("day") or 1), int(g.get("hour") or 0),
                    int(g.get("minute") or 0), int(g.get("second") or 0), int(fraction),
                )
            except ValueError:
                continue
            offset = g.get("offset")
            zone = self.input_zone or dt.UTC  # no offset and no input zone: the JVM default (UTC)
            if offset:
                if offset == "Z":
                    parsed_zone: dt.tzinfo = dt.UTC
                else:
                    digits = offset[1:].replace(":", "")
                    delta = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
                    parsed_zone = dt.timezone(-delta if offset[0] == "-" else delta)
                when = naive.replace(tzinfo=parsed_zone)
                # a formatter with a zone reports the instant in that zone; without, in the offset's
                return when.astimezone(self.input_zone) if self.input_zone is not None else when
            return naive.replace(tzinfo=zone)
        raise InvalidInputError(f"partition value {text!r} matches none of the input date formats")

    def default_date_string(self) -> str:
        """The string Hudi substitutes for a null DATE_STRING: 1 ms after the epoch, first input format."""
        zone = self.input_zone or self.output_zone or dt.UTC
        epoch = dt.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=dt.UTC).astimezone(zone)
        return format_time(self.input_formats[0], epoch)

    def date_string_path(self, text: str | None) -> str:
        when = self.parse_date_string(text if text is not None else self.default_date_string())
        return format_time(self.output_format, when.astimezone(self.output_zone) if self.output_zone else when)

    # ---- numbers --------------------------------------------------------------------------
    def epoch_millis(self, values: pa.Array) -> pa.Array:
        """Numeric values (ints, floats, decimals, or their text) as epoch milliseconds; nulls
        become Hudi's default of 1 unit."""
        assert self.time_unit is not None
        if pa.types.is_null(values.type):
            values = values.cast(pa.int64())
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            try:
                as_float = pc.cast(values, pa.float64())
            except pa.ArrowInvalid as exc:
                raise InvalidInputError(f"partition values are not numbers for {self.timestamp_type.value}: {exc}") from exc
            whole = _integral_text(values)
            longs = pc.if_else(pc.is_valid(whole), pc.cast(whole, pa.int64()), pc.cast(pc.trunc(as_float), pa.int64()))
        elif pa.types.is_integer(values.type):
            longs = pc.cast(values, pa.int64())
        elif pa.types.is_floating(values.type) or pa.types.is_decimal(values.type):
            longs = pc.cast(pc.trunc(pc.cast(values, pa.float64()) if pa.types.is_floating(values.type) else values), pa.int64())
        else:
            raise InvalidInputError(
                f"a {self.timestamp_type.value} partition field must be a number, not {values.type}"
            )
        longs = pc.fill_null(longs, 1)
        mul, div = _UNIT_TO_MS[self.time_unit]
        if mul != 1:
            return pc.multiply_checked(longs, mul)
        if div != 1:  # Java's long division truncates toward zero
            quotient = pc.divide(pc.abs(longs), div)
            return pc.if_else(pc.less(longs, 0), pc.negate(quotient), quotient)
        return longs


def _integral_text(values: pa.Array) -> pa.Array:
    """The values that are plain integers (exact beyond 2**53), others null."""
    plain = pc.match_substring_regex(values, r"^[+-]?\d+$")
    return pc.if_else(pc.fill_null(plain, False), values, pa.scalar(None, values.type))


def partition_paths(spec: TimestampKeySpec, values: pa.Array, field: str | None = None) -> pa.Array:
    """The partition path of every value (`field=path` when `field` is given, i.e. hive style)."""
    if spec.timestamp_type is TimestampType.DATE_STRING:
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                or pa.types.is_null(values.type)):
            raise InvalidInputError(f"a DATE_STRING partition field must be a string, not {values.type}")
        paths = pa.array([spec.date_string_path(v) for v in values.to_pylist()], pa.string())
    else:
        paths = _print_millis(spec, spec.epoch_millis(values))
    if field is not None:
        paths = pc.binary_join_element_wise(pa.scalar(f"{field}="), paths, "")
    return paths


def _print_millis(spec: TimestampKeySpec, millis: pa.Array) -> pa.Array:
    """Epoch milliseconds printed with the output format in the output zone (UTC when none: the
    writer JVM's default zone, taken to be UTC). Each distinct wall-clock time, floored to the
    finest unit the format prints, is printed once (few per batch for a partition format)."""
    zone = spec.output_zone or dt.UTC
    stamps = pc.cast(millis, pa.timestamp("ms", tz=arrow_zone(zone)))
    if prints_offset(spec.output_format):  # the offset too: print aware times, to the second
        unit = "millisecond" if finest_unit(spec.output_format) == "millisecond" else "second"
        keys = stamps if unit == "millisecond" else pc.floor_temporal(stamps, unit="second")
        distinct = pc.unique(keys)
        printed = [format_time(spec.output_format, v.astimezone(zone)) for v in distinct.to_pylist()]
    else:
        local = pc.local_timestamp(stamps)  # the wall clock in the output zone
        unit = finest_unit(spec.output_format)
        keys = local if unit == "millisecond" else pc.floor_temporal(local, unit=unit)
        distinct = pc.unique(keys)
        printed = [format_time(spec.output_format, v) for v in distinct.to_pylist()]
    return pc.take(pa.array(printed, pa.string()), pc.index_in(keys, distinct))


def partition_path(spec: TimestampKeySpec, value: object, field: str | None = None) -> str:
    """One value's partition path (the row-at-a-time form of `partition_paths`)."""
    if value is None:
        array = pa.nulls(1, pa.string() if spec.timestamp_type is TimestampType.DATE_STRING else pa.int64())
    else:
        array = pa.array([value])
    return str(partition_paths(spec, array, field)[0].as_py())


__all__ = [
    "TimestampKeySpec",
    "TimestampType",
    "Token",
    "format_time",
    "parse_pattern",
    "parse_zone",
    "partition_path",
    "partition_paths",
]
