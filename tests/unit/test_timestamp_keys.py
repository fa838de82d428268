"""The timestamp-based key generator's partition paths (pure), against what Apache Hudi writes.

Expected strings follow `TimestampBasedAvroKeyGenerator` + Joda: the fixtures' own folders
(`2024/01/15/09` for 1705311000000 ms, `2024/01/15` for 1705311000 s, `2024/01/15/10` for
`2024-01-15T10:30:00.000Z`) and hand-worked cases for zones, units and nulls.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from engine.config.table_config import TIMESTAMP_KEYGEN, TableConfig
from engine.errors import InvalidConfigError, InvalidInputError
from engine.write.keygen import KeySpec, partition_path, record_key
from engine.write.timestamp_keys import (
    TimestampKeySpec,
    TimestampType,
    Token,
    format_time,
    parse_pattern,
    parse_zone,
    partition_paths,
    to_strftime,
)

T = "hoodie.keygen.timebased."
ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSZ"


def spec(kind: str, out: str = "yyyy/MM/dd/HH", **extra: str) -> TimestampKeySpec:
    props = {T + "timestamp.type": kind, T + "output.dateformat": out}
    props.update({T + k.replace("_", "."): v for k, v in extra.items()})
    return TimestampKeySpec.from_properties(props)


def paths(s: TimestampKeySpec, values: list, field: str | None = None) -> list[str]:
    return partition_paths(s, pa.array(values), field).to_pylist()


# ---- patterns -----------------------------------------------------------------------------
def test_patterns_translate_the_letters_hudi_users_use():
    assert to_strftime(parse_pattern("yyyy/MM/dd/HH")) == "%Y/%m/%d/%H"
    assert to_strftime(parse_pattern("yyyy-MM-dd HH:mm:ss")) == "%Y-%m-%d %H:%M:%S"
    assert to_strftime(parse_pattern("'year='yyyy/'month='MM")) == "year=%Y/month=%m"
    assert to_strftime(parse_pattern("yyMMdd")) == "%y%m%d"
    assert to_strftime(parse_pattern("yyyy'%'MM")) == "%Y%%%m"  # a literal % survives strftime
    assert parse_pattern("HH''mm") == (Token(letter="H", width=2), Token(text="'"), Token(letter="m", width=2))
    assert parse_pattern(ISO, for_input=True)[-1] == Token(letter="Z", width=1)


@pytest.mark.parametrize("pattern", ["yyyy/MM/dd/hh", "yyyy-MMM-dd", "EEE", "yyyy/M/d", "YYYY", "yyyy'T"])
def test_unknown_letters_and_bad_quotes_are_refused(pattern):
    with pytest.raises(InvalidConfigError, match="date pattern"):
        parse_pattern(pattern)


def test_fraction_and_offset_are_input_letters_only():
    with pytest.raises(InvalidConfigError, match="'SSS' is not supported"):
        parse_pattern("yyyy/MM/dd/SSS")
    when = dt.datetime(2024, 1, 15, 10, 30, 5, 123000, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert format_time(parse_pattern(ISO, for_input=True), when) == "2024-01-15T10:30:05.123+0530"


# ---- numbers ------------------------------------------------------------------------------
def test_epoch_millis_as_the_fixture_wrote_them():
    s = spec("EPOCHMILLISECONDS")
    assert s.timestamp_type is TimestampType.EPOCHMILLISECONDS
    assert paths(s, [1705311000000, 1705367700000, 1705489200000]) == ["2024/01/15/09", "2024/01/16/01", "2024/01/17/11"]


def test_unix_seconds_as_the_fixture_wrote_them():
    assert paths(spec("UNIX_TIMESTAMP", "yyyy/MM/dd"), [1705311000, 1705367700, 1705489200]) == [
        "2024/01/15", "2024/01/16", "2024/01/17"]


def test_epoch_micros_truncate_like_java_long_division():
    s = spec("EPOCHMICROSECONDS", "yyyy-MM-dd HH:mm:ss")
    assert paths(s, [1705311000999999, -1]) == ["2024-01-15 09:30:00", "1970-01-01 00:00:00"]  # -1 us -> 0 ms


@pytest.mark.parametrize(("unit", "value", "expected"), [
    ("SECONDS", 1705311000, "2024/01/15/09"),
    ("MILLISECONDS", 1705311000000, "2024/01/15/09"),
    ("MINUTES", 28421850, "2024/01/15/09"),
    ("HOURS", 473697, "2024/01/15/09"),
    ("DAYS", 19737, "2024/01/15/00"),
    ("NANOSECONDS", 1705311000000000000, "2024/01/15/09"),
])
def test_scalar_values_in_their_unit(unit, value, expected):
    assert paths(spec("SCALAR", timestamp_scalar_time_unit=unit), [value]) == [expected]


def test_scalar_unit_defaults_to_seconds_and_bad_units_are_refused():
    assert paths(spec("SCALAR"), [1705311000]) == ["2024/01/15/09"]
    with pytest.raises(InvalidConfigError, match="scalar.time.unit"):
        spec("SCALAR", timestamp_scalar_time_unit="FORTNIGHTS")


def test_numbers_of_every_type_truncate_to_whole_units():
    s = spec("UNIX_TIMESTAMP", "yyyy/MM/dd/HH/mm/ss")
    expected = ["2024/01/15/09/30/00"]
    assert paths(s, [1705311000.9]) == expected
    assert paths(s, [Decimal("1705311000.99")]) == expected
    assert partition_paths(s, pa.array([1705311000], pa.int32())).to_pylist() == expected
    assert paths(s, ["1705311000"]) == expected  # text of a number, as Spark's cast renders it
    assert paths(s, ["1.705311E9"]) == expected


def test_output_zone_and_the_shared_timezone_key():
    assert paths(spec("EPOCHMILLISECONDS", output_timezone="Asia/Kolkata"), [1705311000000]) == ["2024/01/15/15"]
    assert paths(spec("EPOCHMILLISECONDS", output_timezone="GMT-05:00"), [1705311000000]) == ["2024/01/15/04"]
    ny = spec("EPOCHMILLISECONDS", "yyyy-MM-dd HH", timezone="America/New_York")
    assert paths(ny, [1720000000000]) == ["2024-07-03 05"]  # daylight saving: UTC-4
    assert paths(ny, [1705311000000]) == ["2024-01-15 04"]  # standard time: UTC-5
    assert ny.input_zone == ny.output_zone == parse_zone("America/New_York")
    with pytest.raises(InvalidConfigError, match="unknown time zone"):
        spec("EPOCHMILLISECONDS", output_timezone="Mars/Olympus")


def test_null_numbers_take_hudis_default_of_one_unit():
    assert paths(spec("UNIX_TIMESTAMP", "yyyy/MM/dd HH:mm:ss"), [None]) == ["1970/01/01 00:00:01"]
    assert paths(spec("SCALAR", "yyyy/MM/dd", timestamp_scalar_time_unit="DAYS"), [None]) == ["1970/01/02"]


def test_hive_style_puts_the_field_name_first():
    assert paths(spec("UNIX_TIMESTAMP", "yyyy-MM-dd"), [1705311000], "ts") == ["ts=2024-01-15"]


def test_values_that_are_no_numbers_are_invalid_input():
    with pytest.raises(InvalidInputError, match="not numbers"):
        paths(spec("UNIX_TIMESTAMP"), ["yesterday"])
    with pytest.raises(InvalidInputError, match="must be a number"):
        partition_paths(spec("UNIX_TIMESTAMP"), pa.array([dt.date(2024, 1, 15)]))


# ---- date strings -------------------------------------------------------------------------
def test_date_strings_as_the_fixture_wrote_them():
    s = spec("DATE_STRING", input_dateformat=ISO)
    assert paths(s, ["2024-01-15T10:30:00.000Z", "2024-01-18T16:30:00.000Z", "2023-04-01T12:01:00.123Z"]) == [
        "2024/01/15/10", "2024/01/18/16", "2023/04/01/12"]


def test_date_strings_print_in_their_own_offset_unless_an_output_zone_is_set():
    s = spec("DATE_STRING", input_dateformat=ISO)
    assert paths(s, ["2024-01-15T23:30:00.000+0530"]) == ["2024/01/15/23"]
    utc = spec("DATE_STRING", input_dateformat=ISO, output_timezone="UTC")
    assert paths(utc, ["2024-01-15T23:30:00.000+0530"]) == ["2024/01/15/18"]
    tokyo = spec("DATE_STRING", input_dateformat=ISO, input_timezone="Asia/Tokyo")
    assert paths(tokyo, ["2024-01-15T23:30:00.000Z"]) == ["2024/01/16/08"]  # the instant, in the input zone


def test_date_strings_without_offset_are_read_in_the_input_zone():
    s = spec("DATE_STRING", input_dateformat="yyyy-MM-dd HH:mm:ss", input_timezone="Asia/Tokyo",
             output_timezone="UTC")
    assert paths(s, ["2024-01-15 08:00:00"]) == ["2024/01/14/23"]
    plain = spec("DATE_STRING", "yyyyMMdd", input_dateformat="yyyy-MM-dd")
    assert paths(plain, ["2024-01-15"]) == ["20240115"]


def test_the_input_format_list_tries_each_format():
    s = spec("DATE_STRING", "yyyy/MM/dd", input_dateformat="yyyy-MM-dd'T'HH:mm:ss.SSSZ, yyyy-MM-dd,yyyyMMdd")
    assert paths(s, ["2024-01-15T10:30:00.000Z", "2024-01-16", "20240117"]) == ["2024/01/15", "2024/01/16", "2024/01/17"]
    semicolons = spec("DATE_STRING", "yyyy/MM/dd", input_dateformat="yyyy-MM-dd;yyyyMMdd",
                      input_dateformat_list_delimiter_regex=";")
    assert paths(semicolons, ["20240117"]) == ["2024/01/17"]


def test_null_date_strings_take_hudis_default_and_bad_ones_are_invalid():
    s = spec("DATE_STRING", input_dateformat=ISO)
    assert s.default_date_string() == "1970-01-01T00:00:00.001+0000"
    assert paths(s, [None]) == ["1970/01/01/00"]
    with pytest.raises(InvalidInputError, match="matches none of the input date formats"):
        paths(s, ["15/01/2024"])
    with pytest.raises(InvalidInputError, match="must be a string"):
        paths(s, [1705311000])


def test_configuration_problems_are_named():
    with pytest.raises(InvalidConfigError, match="needs hoodie.keygen.timebased.timestamp.type"):
        TimestampKeySpec.from_properties({T + "output.dateformat": "yyyy"})
    with pytest.raises(InvalidConfigError, match="needs hoodie.keygen.timebased.output.dateformat"):
        TimestampKeySpec.from_properties({T + "timestamp.type": "UNIX_TIMESTAMP"})
    with pytest.raises(InvalidConfigError, match="DATE_STRING needs hoodie.keygen.timebased.input.dateformat"):
        spec("DATE_STRING")
    with pytest.raises(InvalidConfigError, match="MIXED is not supported"):
        spec("MIXED")
    with pytest.raises(InvalidConfigError, match="use one of"):
        spec("EPOCH")
    with pytest.raises(InvalidConfigError, match="custom date-time parser"):
        TimestampKeySpec.from_properties({T + "timestamp.type": "UNIX_TIMESTAMP", T + "output.dateformat": "yyyy",
                                          "hoodie.keygen.datetime.parser.class": "com.example.Parser"})


def test_the_deprecated_deltastreamer_keys_are_read():
    s = TimestampKeySpec.from_properties({"hoodie.deltastreamer.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
                                          "hoodie.deltastreamer.keygen.timebased.output.dateformat": "yyyy"})
    assert paths(s, [1705311000]) == ["2024"]


# ---- through the table's key spec -----------------------------------------------------------
def _table(**extra: str) -> TableConfig:
    props = {T + "timestamp.type": "EPOCHMILLISECONDS", T + "output.dateformat": "yyyy/MM/dd/HH", **extra}
    return TableConfig(name="t", record_key_fields=("txn_id",), partition_fields=("ts_millis",),
                       keygen_class=TIMESTAMP_KEYGEN, extra=tuple(sorted(props.items())))


def test_a_timestamp_table_keys_records_simply_and_partitions_by_time():
    keys = KeySpec.from_config(_table())
    assert keys.complex_keys is False and keys.timestamp is not None
    row = {"txn_id": "TXN-001", "ts_millis": 1705311000000}
    assert record_key(keys, row) == "TXN-001"
    assert partition_path(keys, row) == "2024/01/15/09"
    hive = KeySpec.from_config(_table().with_updates(hive_style=True))
    assert partition_path(hive, row) == "ts_millis=2024/01/15/09"
    assert partition_path(keys, {"txn_id": "TXN-002", "ts_millis": None}) == "1970/01/01/00"


def test_a_timestamp_table_needs_one_key_field_and_one_partition_field():
    with pytest.raises(InvalidConfigError, match="one record key field and one partition field"):
        KeySpec.from_config(_table().with_updates(partition_fields=("a", "b")))
    with pytest.raises(InvalidConfigError, match="needs hoodie.keygen.timebased.timestamp.type"):
        KeySpec.from_config(TableConfig(name="t", record_key_fields=("id",), partition_fields=("ts",),
                                        keygen_class=TIMESTAMP_KEYGEN))
