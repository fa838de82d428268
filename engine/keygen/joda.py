"""Joda-Time date patterns, as Apache Hudi's `TimestampBasedAvroKeyGenerator` prints partition paths
with them (`org.joda.time.format.DateTimeFormat.forPattern`, no locale set: the JVM's default,
which we take to be English) - pure: no Spark, no I/O.

Printing (output formats) knows every letter Joda's `DateTimeFormat` accepts that has a fixed
rendering: `G` era (AD), `C` century of era, `Y` year of era, `y` year, `x` weekyear (ISO), `w`
week of weekyear (ISO), `e` day of week (1 = Monday), `E` day of week (`E`-`EEE` Mon, `EEEE`+
Monday), `D` day of year, `M` month (`M`, `MM` numbers; `MMM` Jan; `MMMM`+ January), `d` day,
`a` AM/PM, `h` clock hour of half day (1-12), `K` hour of half day (0-11), `H` hour (0-23), `k`
clock hour of day (1-24), `m`, `s`, `S` fraction of second (as many digits as letters: `S` tenths,
`SSS` milliseconds), `Z` offset (`+0530`) and `ZZ` (`+05:30`). Numbers are zero-padded to the
letter count; `yy`, `YY` and `xx` print two digits. Text in quotes (`''` for a quote) and every
non-letter is literal.

Refused, each with the letter named: `z` (zone names come from the JVM's locale data), `ZZZ`
(the zone id), and any letter Joda itself rejects (`u`, `L`, `Q`, `W`, `F`, `n`, `V`, `X`, ...).
Joda differs from `java.time.DateTimeFormatter` and `SimpleDateFormat` in `Y` (year of era, not
week-based year), `e` and `w` (ISO, not the locale's week), and `S`; we print what Joda prints.

Parsing (input formats, DATE_STRING values) takes `yyyy yy MM dd HH mm ss`, `SSS` and `Z`/`ZZ`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import InvalidConfigError

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# every letter Joda's DateTimeFormat.parsePatternTo knows
_JODA_LETTERS = frozenset("GCxyYMdahHkKmsSeEDwzZ")
_PRINTED = _JODA_LETTERS - {"z"}
# parsing: (letter, count) pairs (engine.keygen.timestamp builds the regex)
INPUT_FIELDS = frozenset({("y", 4), ("y", 2), ("M", 2), ("d", 2), ("H", 2), ("m", 2), ("s", 2), ("S", 3),
                          ("Z", 1), ("Z", 2)})


@dataclass(frozen=True)
class Token:
    """One piece of a date pattern: literal text, or a field (`letter` repeated `width` times)."""

    text: str = ""
    letter: str = ""
    width: int = 0


def parse_pattern(pattern: str, *, for_input: bool = False) -> tuple[Token, ...]:
    """A Joda pattern as tokens; InvalidConfigError naming a letter that cannot be used."""
    tokens: list[Token] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = i + 1
            text = ""
            while True:
                if end >= len(pattern):
                    raise InvalidConfigError(f"date pattern {pattern!r}: unterminated quote")
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        text += "'"
                        end += 2
                        continue
                    break
                text += pattern[end]
                end += 1
            tokens.append(Token(text="'" if end == i + 1 else text))
            i = end + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            width = j - i
            _check_letter(pattern, ch, width, for_input)
            tokens.append(Token(letter=ch, width=width))
            i = j
        else:
            tokens.append(Token(text=ch))
            i += 1
    return tuple(tokens)


def _check_letter(pattern: str, ch: str, width: int, for_input: bool) -> None:
    field = ch * width
    if ch not in _JODA_LETTERS:
        raise InvalidConfigError(
            f"date pattern {pattern!r}: {ch!r} ({field!r}) is not a Joda-Time pattern letter, which Apache Hudi's "
            "timestamp key generator uses (Joda refuses it too)")
    if for_input:
        if (ch, width) not in INPUT_FIELDS:
            raise InvalidConfigError(
                f"date pattern {pattern!r}: {field!r} is not supported for input dates (use yyyy yy MM dd HH mm ss "
                "SSS Z ZZ, quoted text and punctuation)")
        return
    if ch == "z":
        raise InvalidConfigError(
            f"date pattern {pattern!r}: {field!r} (a time zone name) is not supported: Joda takes zone names from "
            "the JVM's locale data; use Z or ZZ (the offset)")
    if ch == "Z" and width > 2:
        raise InvalidConfigError(
            f"date pattern {pattern!r}: {field!r} (the zone id) is not supported; use Z or ZZ (the offset)")


def _padded(value: int, width: int) -> str:
    return f"{'-' if value < 0 else ''}{abs(value):0{width}d}"


def format_time(tokens: Sequence[Token], when: dt.datetime) -> str:
    """`when` (its wall-clock fields; its offset for `Z`) printed with the tokens as Joda prints it."""
    out = []
    for t in tokens:
        if not t.letter:
            out.append(t.text)
            continue
        letter, width = t.letter, t.width
        if letter in ("y", "Y"):
            year = when.year  # AD years: year and year of era agree
            out.append(f"{year % 100:02d}" if width == 2 else _padded(year, width))
        elif letter == "x":
            weekyear = when.isocalendar()[0]
            out.append(f"{weekyear % 100:02d}" if width == 2 else _padded(weekyear, width))
        elif letter == "w":
            out.append(_padded(when.isocalendar()[1], width))
        elif letter == "e":
            out.append(_padded(when.isoweekday(), width))
        elif letter == "E":
            name = _DAYS[when.weekday()]
            out.append(name if width >= 4 else name[:3])
        elif letter == "D":
            out.append(_padded(when.timetuple().tm_yday, width))
        elif letter == "M":
            out.append(_MONTHS[when.month - 1] if width >= 4 else _MONTHS[when.month - 1][:3] if width == 3
                       else _padded(when.month, width))
        elif letter == "d":
            out.append(_padded(when.day, width))
        elif letter == "a":
            out.append("AM" if when.hour < 12 else "PM")
        elif letter == "h":
            out.append(_padded((when.hour + 11) % 12 + 1, width))
        elif letter == "K":
            out.append(_padded(when.hour % 12, width))
        elif letter == "H":
            out.append(_padded(when.hour, width))
        elif letter == "k":
            out.append(_padded(when.hour or 24, width))
        elif letter == "m":
            out.append(_padded(when.minute, width))
        elif letter == "s":
            out.append(_padded(when.second, width))
        elif letter == "S":
            # Joda's appendFractionOfSecond(n, n): n digits of the millisecond fraction
            millis = when.microsecond // 1000
            out.append(f"{millis:03d}"[:width] if width <= 3 else f"{millis:03d}" + "0" * (width - 3))
        elif letter == "Z":
            offset = when.utcoffset() or dt.timedelta(0)
            minutes = int(offset.total_seconds()) // 60
            sign = "-" if minutes < 0 else "+"
            hh, mm = divmod(abs(minutes), 60)
            out.append(f"{sign}{hh:02d}:{mm:02d}" if width == 2 else f"{sign}{hh:02d}{mm:02d}")
        elif letter == "G":
            out.append("AD")
        elif letter == "C":
            out.append(_padded(when.year // 100, width))
        else:  # pragma: no cover - parse_pattern lets no other letter through
            raise InvalidConfigError(f"date pattern letter {letter!r} cannot be printed")
    return "".join(out)


def finest_unit(tokens: Sequence[Token]) -> str:
    """The finest wall-clock unit the tokens print (`millisecond`, `second`, `minute`, `hour` or
    `day`): times equal after flooring to it print the same."""
    letters = {t.letter for t in tokens if t.letter}
    for unit, marks in (("millisecond", "S"), ("second", "s"), ("minute", "m"), ("hour", "ahHkK")):
        if letters & set(marks):
            return unit
    return "day"


def prints_offset(tokens: Sequence[Token]) -> bool:
    return any(t.letter == "Z" for t in tokens)


__all__ = ["INPUT_FIELDS", "Token", "finest_unit", "format_time", "parse_pattern", "prints_offset"]
