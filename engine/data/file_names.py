"""Hudi data-file names (pure): which names in a partition are Apache Hudi's files, and what they say.

- base file: `<fileId>_<writeToken>_<instant>.parquet`, fileId `<uuid4>-0`
- log file:  `.<fileId>_<instant>.log.<version>[_<writeToken>]` (the instant: the slice's base
  instant up to table version 6, the writing deltacommit's from version 8)
- CDC log file: a log file name with the suffix `.cdc` after its write token (change data
  capture; not part of a file slice's data)
- write token: `<taskPartitionId>-<stageId>-<taskAttemptId>`

Only these names are Hudi's data files (Apache Hudi's `FSUtils.isBaseFile` / `isLogFile` and
`HoodieLogFile`, and hudi-rs's parsers, read strictly): a file id and a token of letters, digits and
`-`, a 17-digit instant, and nothing after the name. Everything else in a partition is ignored:
`.hoodie_partition_metadata[.<ext>]`, Hadoop's checksum files `.<name>.crc` (its local file
system writes one beside every file, and Hadoop's listing hides them: `ChecksumFileSystem`), temp
files, `_SUCCESS`, `.DS_Store` and other strays. Apache Hudi's own log pattern is matched with
`find()` and would take `..<log name>.crc` for a log file; Hudi never sees one because Hadoop's
listing hides it, so this module rejects checksum names first.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from engine.constants import BASE_FILE_EXTENSION, PARTITION_METADATA_FILE
from engine.timeline.instant import is_valid_instant_time

_BASE_RE = re.compile(r"^(?P<file_id>[A-Za-z0-9-]+)_(?P<token>[A-Za-z0-9-]+)_(?P<instant>\d{17})\.parquet$")
_LOG_RE = re.compile(
    r"^\.(?P<file_id>[A-Za-z0-9-]+)_(?P<instant>\d{17})\.log\.(?P<version>\d+)"
    r"(?:_(?P<token>\d+-\d+-\d+)(?P<cdc>\.cdc)?)?$"
)
CHECKSUM_SUFFIX = ".crc"
CDC_SUFFIX = ".cdc"


def new_file_id(seed: uuid.UUID | None = None) -> str:
    """A new file group id: a random UUID with the `-0` suffix Apache Hudi uses."""
    return f"{seed or uuid.uuid4()}-0"


def new_file_id_stem() -> str:
    """The first 24 characters of a random UUID (`xxxxxxxx-xxxx-4xxx-yxxx-`): with a task's number
    in the last 12 hex digits (`task_file_id_prefix`) it names that task's file groups."""
    return str(uuid.uuid4())[:24]


def task_file_id_prefix(stem: str, task: int) -> str:
    """The UUID-shaped file id prefix of Spark task (partition) `task` of a write with `stem`."""
    return f"{stem}{task:012x}"


def bulk_file_id(prefix: str, n: int) -> str:
    """The `n`-th file group id a bulk_insert task with file id prefix `prefix` writes:
    `<prefix>-<n>`, as Apache Hudi's bulk insert names them."""
    return f"{prefix}-{n}"


def has_file_id_stem(file_id: str, stems: frozenset[str]) -> bool:
    """Whether `file_id` is a `bulk_file_id` of a task prefix of one of `stems`."""
    prefix, sep, n = file_id.rpartition("-")
    return bool(sep) and n.isdigit() and len(prefix) == 36 and prefix[:24] in stems


def partition_metadata_path(partition: str) -> str:
    """The path (relative to the base) of a partition's `.hoodie_partition_metadata`."""
    return f"{partition}/{PARTITION_METADATA_FILE}" if partition else PARTITION_METADATA_FILE


def partition_metadata(partition: str, instant: str) -> tuple[str, bytes]:
    """The path (relative to the base) and body of a partition's `.hoodie_partition_metadata`,
    first written by `instant`."""
    rel = partition_metadata_path(partition)
    depth = len(partition.split("/")) if partition else 0
    return rel, f"#partition metadata\ncommitTime={instant}\npartitionDepth={depth}\n".encode()


def write_token(task_partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    return f"{task_partition_id}-{stage_id}-{task_attempt_id}"


def base_file_name(file_id: str, token: str, instant: str) -> str:
    if "_" in file_id or "_" in token or not is_valid_instant_time(instant):
        raise ValueError(f"bad base file parts: {file_id!r}, {token!r}, {instant!r}")
    return f"{file_id}_{token}_{instant}{BASE_FILE_EXTENSION}"


def log_file_name(file_id: str, base_instant: str, version: int, token: str) -> str:
    return f".{file_id}_{base_instant}.log.{version}_{token}"


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant: str

    @property
    def name(self) -> str:
        return base_file_name(self.file_id, self.write_token, self.instant)


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    base_instant: str
    version: int
    write_token: str | None

    @property
    def name(self) -> str:
        suffix = f"_{self.write_token}" if self.write_token else ""
        return f".{self.file_id}_{self.base_instant}.log.{self.version}{suffix}"


def parse_base_file_name(name: str) -> BaseFileName | None:
    m = _BASE_RE.match(name)
    if not m:
        return None
    return BaseFileName(m["file_id"], m["token"], m["instant"])


def parse_log_file_name(name: str) -> LogFileName | None:
    """A data log file's name parts; None for any other name (a CDC log file's too)."""
    m = _LOG_RE.match(name)
    if not m or m["cdc"]:
        return None
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"])


def parse_cdc_log_file_name(name: str) -> LogFileName | None:
    """A CDC log file's name parts (its name is `LogFileName(...).name + ".cdc"`); None otherwise."""
    m = _LOG_RE.match(name)
    if not m or not m["cdc"]:
        return None
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["token"])


def is_checksum_file(name: str) -> bool:
    """A Hadoop checksum file (`.<name>.crc`, Hadoop's `ChecksumFileSystem.isChecksumFile`)."""
    return name.startswith(".") and name.endswith(CHECKSUM_SUFFIX)


def checksum_file_name(name: str) -> str:
    """The checksum file Hadoop's local file system keeps beside file `name`."""
    return f".{name}{CHECKSUM_SUFFIX}"


def is_data_file(name: str) -> bool:
    """Whether `name` is one of Apache Hudi's base, log or CDC log files."""
    return parse_base_file_name(name) is not None or _LOG_RE.match(name) is not None


def file_instant(name: str) -> str | None:
    """The instant a data file belongs to: a base file's instant, a log file's base instant;
    None for any other name."""
    bn = parse_base_file_name(name)
    if bn is not None:
        return bn.instant
    ln = parse_log_file_name(name)
    return ln.base_instant if ln is not None else None


def join_path(partition: str, name: str) -> str:
    """Relative path of a file in a partition ("" is the table root)."""
    return f"{partition}/{name}" if partition else name


def name_of(path: str) -> str:
    """The file name at the end of a relative path."""
    return path.rstrip("/").rsplit("/", 1)[-1]
