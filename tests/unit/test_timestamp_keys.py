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
from engine.keygen.keys import KeySpec, partition_path, record_key
from engine.keygen.timestamp import (
    TimestampKeySpec,
    TimestampType,
    Token,
    format_time,
    parse_pattern,
    parse_zone,
    partition_paths,
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
# Java's own output, recorded (JDK 17, Locale.ENGLISH): for each epoch millisecond and output zone,
# every Joda pattern printed by java.time with the pattern that prints Joda's fields (the same
# letters, but Joda `Z`/`ZZ` = java.time `xx`/`xxx`, Joda `w`/`x`/`e` = ISO week, weekyear and day
# of week via java.time's IsoFields and ChronoField.DAY_OF_WEEK, Joda `C` = year / 100).
JAVA = {
    (0, "UTC"): {"yyyy/MM/dd/HH": "1970/01/01/00", "yyyy-MM-dd hh": "1970-01-01 12", "yyyy-MM-dd h a": "1970-01-01 12 AM", "K": "0", "KK": "00", "k": "24", "kk": "24", "H": "0", "yy/M/d": "70/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Thu", "EEEE": "Thursday", "E": "Thu", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=1970/week=01", "xxxx-'W'ww-e": "1970-W01-4", "CC": "19", },
    (1705311000123, "UTC"): {"yyyy/MM/dd/HH": "2024/01/15/09", "yyyy-MM-dd hh": "2024-01-15 09", "yyyy-MM-dd h a": "2024-01-15 9 AM", "K": "9", "KK": "09", "k": "9", "kk": "09", "H": "9", "yy/M/d": "24/1/15", "MMM": "Jan", "MMMM": "January", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "15", "DDD": "015", "SSS": "123", "S": "1", "SSSSSS": "123000", "ss": "00", "mm": "30", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=03", "xxxx-'W'ww-e": "2024-W03-1", "CC": "20", },
    (1703980799999, "UTC"): {"yyyy/MM/dd/HH": "2023/12/30/23", "yyyy-MM-dd hh": "2023-12-30 11", "yyyy-MM-dd h a": "2023-12-30 11 PM", "K": "11", "KK": "11", "k": "23", "kk": "23", "H": "23", "yy/M/d": "23/12/30", "MMM": "Dec", "MMMM": "December", "EEE": "Sat", "EEEE": "Saturday", "E": "Sat", "D": "364", "DDD": "364", "SSS": "999", "S": "9", "SSSSSS": "999000", "ss": "59", "mm": "59", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2023/week=52", "xxxx-'W'ww-e": "2023-W52-6", "CC": "20", },
    (1704067200000, "UTC"): {"yyyy/MM/dd/HH": "2024/01/01/00", "yyyy-MM-dd hh": "2024-01-01 12", "yyyy-MM-dd h a": "2024-01-01 12 AM", "K": "0", "KK": "00", "k": "24", "kk": "24", "H": "0", "yy/M/d": "24/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=01", "xxxx-'W'ww-e": "2024-W01-1", "CC": "20", },
    (951782400456, "UTC"): {"yyyy/MM/dd/HH": "2000/02/29/00", "yyyy-MM-dd hh": "2000-02-29 12", "yyyy-MM-dd h a": "2000-02-29 12 AM", "K": "0", "KK": "00", "k": "24", "kk": "24", "H": "0", "yy/M/d": "00/2/29", "MMM": "Feb", "MMMM": "February", "EEE": "Tue", "EEEE": "Tuesday", "E": "Tue", "D": "60", "DDD": "060", "SSS": "456", "S": "4", "SSSSSS": "456000", "ss": "00", "mm": "00", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2000/week=09", "xxxx-'W'ww-e": "2000-W09-2", "CC": "20", },
    (1719791999001, "UTC"): {"yyyy/MM/dd/HH": "2024/06/30/23", "yyyy-MM-dd hh": "2024-06-30 11", "yyyy-MM-dd h a": "2024-06-30 11 PM", "K": "11", "KK": "11", "k": "23", "kk": "23", "H": "23", "yy/M/d": "24/6/30", "MMM": "Jun", "MMMM": "June", "EEE": "Sun", "EEEE": "Sunday", "E": "Sun", "D": "182", "DDD": "182", "SSS": "001", "S": "0", "SSSSSS": "001000", "ss": "59", "mm": "59", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=26", "xxxx-'W'ww-e": "2024-W26-7", "CC": "20", },
    (1609459200000, "UTC"): {"yyyy/MM/dd/HH": "2021/01/01/00", "yyyy-MM-dd hh": "2021-01-01 12", "yyyy-MM-dd h a": "2021-01-01 12 AM", "K": "0", "KK": "00", "k": "24", "kk": "24", "H": "0", "yy/M/d": "21/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Fri", "EEEE": "Friday", "E": "Fri", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "+0000", "ZZ": "+00:00", "G": "AD", "'year='yyyy/'week='ww": "year=2021/week=53", "xxxx-'W'ww-e": "2020-W53-5", "CC": "20", },
    (0, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "1970/01/01/05", "yyyy-MM-dd hh": "1970-01-01 05", "yyyy-MM-dd h a": "1970-01-01 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "70/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Thu", "EEEE": "Thursday", "E": "Thu", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "30", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=1970/week=01", "xxxx-'W'ww-e": "1970-W01-4", "CC": "19", },
    (1705311000123, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2024/01/15/15", "yyyy-MM-dd hh": "2024-01-15 03", "yyyy-MM-dd h a": "2024-01-15 3 PM", "K": "3", "KK": "03", "k": "15", "kk": "15", "H": "15", "yy/M/d": "24/1/15", "MMM": "Jan", "MMMM": "January", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "15", "DDD": "015", "SSS": "123", "S": "1", "SSSSSS": "123000", "ss": "00", "mm": "00", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=03", "xxxx-'W'ww-e": "2024-W03-1", "CC": "20", },
    (1703980799999, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2023/12/31/05", "yyyy-MM-dd hh": "2023-12-31 05", "yyyy-MM-dd h a": "2023-12-31 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "23/12/31", "MMM": "Dec", "MMMM": "December", "EEE": "Sun", "EEEE": "Sunday", "E": "Sun", "D": "365", "DDD": "365", "SSS": "999", "S": "9", "SSSSSS": "999000", "ss": "59", "mm": "29", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2023/week=52", "xxxx-'W'ww-e": "2023-W52-7", "CC": "20", },
    (1704067200000, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2024/01/01/05", "yyyy-MM-dd hh": "2024-01-01 05", "yyyy-MM-dd h a": "2024-01-01 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "24/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "30", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=01", "xxxx-'W'ww-e": "2024-W01-1", "CC": "20", },
    (951782400456, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2000/02/29/05", "yyyy-MM-dd hh": "2000-02-29 05", "yyyy-MM-dd h a": "2000-02-29 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "00/2/29", "MMM": "Feb", "MMMM": "February", "EEE": "Tue", "EEEE": "Tuesday", "E": "Tue", "D": "60", "DDD": "060", "SSS": "456", "S": "4", "SSSSSS": "456000", "ss": "00", "mm": "30", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2000/week=09", "xxxx-'W'ww-e": "2000-W09-2", "CC": "20", },
    (1719791999001, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2024/07/01/05", "yyyy-MM-dd hh": "2024-07-01 05", "yyyy-MM-dd h a": "2024-07-01 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "24/7/1", "MMM": "Jul", "MMMM": "July", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "183", "DDD": "183", "SSS": "001", "S": "0", "SSSSSS": "001000", "ss": "59", "mm": "29", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=27", "xxxx-'W'ww-e": "2024-W27-1", "CC": "20", },
    (1609459200000, "Asia/Kolkata"): {"yyyy/MM/dd/HH": "2021/01/01/05", "yyyy-MM-dd hh": "2021-01-01 05", "yyyy-MM-dd h a": "2021-01-01 5 AM", "K": "5", "KK": "05", "k": "5", "kk": "05", "H": "5", "yy/M/d": "21/1/1", "MMM": "Jan", "MMMM": "January", "EEE": "Fri", "EEEE": "Friday", "E": "Fri", "D": "1", "DDD": "001", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "30", "Z": "+0530", "ZZ": "+05:30", "G": "AD", "'year='yyyy/'week='ww": "year=2021/week=53", "xxxx-'W'ww-e": "2020-W53-5", "CC": "20", },
    (0, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "1969/12/31/16", "yyyy-MM-dd hh": "1969-12-31 04", "yyyy-MM-dd h a": "1969-12-31 4 PM", "K": "4", "KK": "04", "k": "16", "kk": "16", "H": "16", "yy/M/d": "69/12/31", "MMM": "Dec", "MMMM": "December", "EEE": "Wed", "EEEE": "Wednesday", "E": "Wed", "D": "365", "DDD": "365", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=1969/week=01", "xxxx-'W'ww-e": "1970-W01-3", "CC": "19", },
    (1705311000123, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2024/01/15/01", "yyyy-MM-dd hh": "2024-01-15 01", "yyyy-MM-dd h a": "2024-01-15 1 AM", "K": "1", "KK": "01", "k": "1", "kk": "01", "H": "1", "yy/M/d": "24/1/15", "MMM": "Jan", "MMMM": "January", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "15", "DDD": "015", "SSS": "123", "S": "1", "SSSSSS": "123000", "ss": "00", "mm": "30", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=03", "xxxx-'W'ww-e": "2024-W03-1", "CC": "20", },
    (1703980799999, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2023/12/30/15", "yyyy-MM-dd hh": "2023-12-30 03", "yyyy-MM-dd h a": "2023-12-30 3 PM", "K": "3", "KK": "03", "k": "15", "kk": "15", "H": "15", "yy/M/d": "23/12/30", "MMM": "Dec", "MMMM": "December", "EEE": "Sat", "EEEE": "Saturday", "E": "Sat", "D": "364", "DDD": "364", "SSS": "999", "S": "9", "SSSSSS": "999000", "ss": "59", "mm": "59", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=2023/week=52", "xxxx-'W'ww-e": "2023-W52-6", "CC": "20", },
    (1704067200000, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2023/12/31/16", "yyyy-MM-dd hh": "2023-12-31 04", "yyyy-MM-dd h a": "2023-12-31 4 PM", "K": "4", "KK": "04", "k": "16", "kk": "16", "H": "16", "yy/M/d": "23/12/31", "MMM": "Dec", "MMMM": "December", "EEE": "Sun", "EEEE": "Sunday", "E": "Sun", "D": "365", "DDD": "365", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=2023/week=52", "xxxx-'W'ww-e": "2023-W52-7", "CC": "20", },
    (951782400456, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2000/02/28/16", "yyyy-MM-dd hh": "2000-02-28 04", "yyyy-MM-dd h a": "2000-02-28 4 PM", "K": "4", "KK": "04", "k": "16", "kk": "16", "H": "16", "yy/M/d": "00/2/28", "MMM": "Feb", "MMMM": "February", "EEE": "Mon", "EEEE": "Monday", "E": "Mon", "D": "59", "DDD": "059", "SSS": "456", "S": "4", "SSSSSS": "456000", "ss": "00", "mm": "00", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=2000/week=09", "xxxx-'W'ww-e": "2000-W09-1", "CC": "20", },
    (1719791999001, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2024/06/30/16", "yyyy-MM-dd hh": "2024-06-30 04", "yyyy-MM-dd h a": "2024-06-30 4 PM", "K": "4", "KK": "04", "k": "16", "kk": "16", "H": "16", "yy/M/d": "24/6/30", "MMM": "Jun", "MMMM": "June", "EEE": "Sun", "EEEE": "Sunday", "E": "Sun", "D": "182", "DDD": "182", "SSS": "001", "S": "0", "SSSSSS": "001000", "ss": "59", "mm": "59", "Z": "-0700", "ZZ": "-07:00", "G": "AD", "'year='yyyy/'week='ww": "year=2024/week=26", "xxxx-'W'ww-e": "2024-W26-7", "CC": "20", },
    (1609459200000, "America/Los_Angeles"): {"yyyy/MM/dd/HH": "2020/12/31/16", "yyyy-MM-dd hh": "2020-12-31 04", "yyyy-MM-dd h a": "2020-12-31 4 PM", "K": "4", "KK": "04", "k": "16", "kk": "16", "H": "16", "yy/M/d": "20/12/31", "MMM": "Dec", "MMMM": "December", "EEE": "Thu", "EEEE": "Thursday", "E": "Thu", "D": "366", "DDD": "366", "SSS": "000", "S": "0", "SSSSSS": "000000", "ss": "00", "mm": "00", "Z": "-0800", "ZZ": "-08:00", "G": "AD", "'year='yyyy/'week='ww": "year=2020/week=53", "xxxx-'W'ww-e": "2020-W53-4", "CC": "20", },
}


@pytest.mark.parametrize(("millis", "zone"), sorted(JAVA))
def test_partition_paths_print_every_joda_letter_as_java_does(millis, zone):
    for pattern, expected in JAVA[(millis, zone)].items():
        s = spec("EPOCHMILLISECONDS", out=pattern, output_timezone=zone)
        assert paths(s, [millis, millis + 0]) == [expected, expected], pattern  # vectorised path
        when = dt.datetime.fromtimestamp(millis / 1000, parse_zone(zone))
        assert format_time(parse_pattern(pattern), when) == expected, pattern  # row at a time


def test_many_times_print_once_per_distinct_wall_clock_unit():
    s = spec("EPOCHMILLISECONDS", out="yyyy-MM-dd hh a", output_timezone="Asia/Kolkata")
    values = [1705311000123 + i * 600_000 for i in range(48)]  # every 10 minutes for 8 hours
    got = paths(s, values)
    assert got[0] == "2024-01-15 03 PM" and got[-1] == "2024-01-15 10 PM"
    assert len(set(got)) == 8
    assert [g for i, g in enumerate(got) if i % 6 == 0] == [f"2024-01-15 {h:02d} PM" for h in (3, 4, 5, 6, 7, 8, 9, 10)]


def test_pattern_tokens_and_quotes():
    assert parse_pattern("HH''mm") == (Token(letter="H", width=2), Token(text="'"), Token(letter="m", width=2))
    assert parse_pattern(ISO, for_input=True)[-1] == Token(letter="Z", width=1)
    when = dt.datetime(2024, 1, 15, 10, 30, 5, 123000, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    assert format_time(parse_pattern("yyyy'%'MM'T''x'"), when) == "2024%01T'x"


@pytest.mark.parametrize(("pattern", "named"), [
    ("yyyy/MM/dd/uu", "'u' ('uu') is not a Joda-Time pattern letter"),
    ("yyyy-QQ", "'Q' ('QQ') is not a Joda-Time pattern letter"),
    ("yyyy/LL", "'L' ('LL') is not a Joda-Time pattern letter"),
    ("HH zzz", "'zzz' (a time zone name) is not supported"),
    ("HH ZZZ", "'ZZZ' (the zone id) is not supported"),
    ("yyyy'T", "unterminated quote"),
])
def test_letters_that_cannot_be_printed_are_refused_naming_them(pattern, named):
    with pytest.raises(InvalidConfigError, match="date pattern") as err:
        parse_pattern(pattern)
    assert named in str(err.value)
    with pytest.raises(InvalidConfigError):  # refused when the table's options are read, before a write
        spec("EPOCHMILLISECONDS", out=pattern)


def test_input_formats_read_the_letters_they_know():
    with pytest.raises(InvalidConfigError, match="'hh' is not supported for input dates"):
        parse_pattern("yyyy-MM-dd hh", for_input=True)
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
