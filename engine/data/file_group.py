"""File groups and file slices (pure).

A file group is identified by (partition path, file id). Each write of a copy-on-write table
creates a new *slice* of the group: a base file, plus (for merge-on-read) the log files
appended on top of it. Readers pick the latest visible slice of each group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.data.file_names import BaseFileName, LogFileName, join_path


@dataclass(frozen=True)
class _DataFile:
    """A file of a file group: its partition, parsed name and size."""

    partition: str
    name: BaseFileName | LogFileName
    size: int

    @property
    def file_id(self) -> str:
        return self.name.file_id

    @property
    def file_name(self) -> str:
        return self.name.name

    @property
    def path(self) -> str:
        return join_path(self.partition, self.file_name)


@dataclass(frozen=True)
class BaseFile(_DataFile):
    name: BaseFileName

    @property
    def instant(self) -> str:
        return self.name.instant


@dataclass(frozen=True)
class LogFile(_DataFile):
    name: LogFileName

    @property
    def base_instant(self) -> str:
        return self.name.base_instant


@dataclass(frozen=True)
class FileSlice:
    """A base file (possibly absent for MOR log-only groups) plus log files, all at one base instant."""

    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = field(default=())

    @property
    def files(self) -> list[str]:
        paths = [self.base_file.path] if self.base_file else []
        return paths + [lf.path for lf in self.log_files]

    @property
    def size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)


@dataclass(frozen=True)
class FileGroup:
    """All slices of one (partition, file id), ordered by base instant."""

    partition: str
    file_id: str
    slices: tuple[FileSlice, ...]

    @property
    def latest_slice(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None

    def merged_slice(self, pending_compaction: str | None = None) -> FileSlice | None:
        """The slice readers see. While compaction `pending_compaction` is pending, the slice it
        started (log files only, base instant = the compaction) is merged with the one before it:
        the compaction's base file does not exist yet (Apache Hudi's merged file slice)."""
        latest = self.latest_slice
        if latest is None or pending_compaction is None or latest.base_instant != pending_compaction:
            return latest
        if latest.base_file is not None or len(self.slices) < 2:
            return latest
        prev = self.slices[-2]
        return FileSlice(
            prev.partition, prev.file_id, prev.base_instant, prev.base_file, prev.log_files + latest.log_files
        )
