"""engine.keygen.values: key and partition values rendered as Apache Hudi renders them, against
Java's output recorded from JDK 17 (`Double.toString`, `Float.toString`, `BigDecimal.toString`,
`java.sql.Timestamp.toString` in UTC)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from engine.keygen.values import java_double, java_float, java_timestamp, texts

# value -> (Double.toString, Float.toString((float) value)), JDK 17
JAVA_DOUBLES = {
    1.0e7: ("1.0E7", "1.0E7"), 0.001: ("0.001", "0.001"), 0.0001: ("1.0E-4", "1.0E-4"), 1.1: ("1.1", "1.1"),
    100.0: ("100.0", "100.0"), 0.1: ("0.1", "0.1"), 9999999.0: ("9999999.0", "9999999.0"),
    0.00099: ("9.9E-4", "9.9E-4"), -2.5: ("-2.5", "-2.5"), 1e-300: ("1.0E-300", "0.0"),
    12345.678: ("12345.678", "12345.678"), 0.3: ("0.3", "0.3"), 2.0 / 3.0: ("0.6666666666666666", "0.6666667"),
    1e21: ("1.0E21", "1.0E21"), 123e-10: ("1.23E-8", "1.23E-8"), -0.0: ("-0.0", "-0.0"),
    1.7976931348623157e308: ("1.7976931348623157E308", "Infinity"),
}


@pytest.mark.parametrize("value", sorted(JAVA_DOUBLES))
def test_doubles_and_floats_print_as_java(value):
    double, single = JAVA_DOUBLES[value]
    assert java_double(value) == double
    with np.errstate(over="ignore"):
        assert java_float(float(np.float32(value))) == single


def test_decimals_print_as_big_decimal():
    # new BigDecimal(unscaled, scale).toString(), JDK 17
    assert [str(Decimal(v)) for v in ("0E-18", "1.0E-7", "100", "123.45", "-0.000005")] == [
        "0E-18", "1.0E-7", "100", "123.45", "-0.000005"]
    arr = pa.array([Decimal("0.000000000000000000"), Decimal("0.00000010"), None], pa.decimal128(38, 18))
    assert texts(arr).to_pylist() == ["0E-18", "1.00000000000E-7", None]
    assert texts(pa.array([Decimal("0.00000010")], pa.decimal128(10, 8))).to_pylist() == ["1.0E-7"]


def test_timestamps_are_epoch_micros_or_java_timestamps():
    stamps = pa.array([dt.datetime(2024, 1, 15, 10, 0, 0, 123456), dt.datetime(2024, 1, 15, 10, 0), None],
                      pa.timestamp("us", tz="UTC"))
    assert texts(stamps).to_pylist() == ["1705312800123456", "1705312800000000", None]
    # java.sql.Timestamp(micros / 1000).toString() with user.timezone=UTC, JDK 17
    assert texts(stamps, consistent_timestamps=True).to_pylist() == [
        "2024-01-15 10:00:00.123", "2024-01-15 10:00:00.0", None]
    assert java_timestamp(-1) == "1970-01-01 00:00:00.0"  # truncating division, as Java's
    assert java_timestamp(-1_500_000) == "1969-12-31 23:59:58.5"


def test_other_types():
    assert texts(pa.array([True, False, None])).to_pylist() == ["true", "false", None]
    assert texts(pa.array([-3, 300], pa.int16())).to_pylist() == ["-3", "300"]
    assert texts(pa.array([dt.date(2024, 1, 15)])).to_pylist() == ["2024-01-15"]
    assert texts(pa.array([b"\x0a\xff"])).to_pylist() == ["0aff"]
    assert texts(pa.array(["x y", ""])).to_pylist() == ["x y", ""]
