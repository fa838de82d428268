"""The `Storage` contract every table operation does its I/O through, and `FileInfo`.

A `Storage` is rooted at a table's base URI; every method takes a path relative to
that base with "/" separators ("" is the base itself). Reads and listings go through
`pyarrow.fs`, so the same code serves local disks and S3; the subclasses supply the
filesystem and the writes whose atomicity depends on the backend.

Storage objects are pickled and shipped to Spark executors: they carry only their
base URI and resolved options, and rebuild their clients lazily on first use.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from engine.errors import StorageError


@dataclass(frozen=True)
class FileInfo:
    """One entry of a listing.

    `path` is relative to the storage base ("10/abc_0-1-2_20240101000000000.parquet"),
    `name` its last segment, `size` in bytes (0 for directories), `mtime_ms` the
    modification time in epoch milliseconds when the backend reports one.
    """

    path: str
    name: str
    size: int
    is_dir: bool
    mtime_ms: int | None


class Storage(abc.ABC):
    """I/O rooted at one table base URI; see the module docstring for path rules.

    `base_uri` and `options` (resolved connection settings) are all that is pickled.
    """

    # Attributes rebuilt after unpickling instead of being shipped.
    _TRANSIENT: tuple[str, ...] = ("_fs", "_lock")
    # Exceptions that mean "the storage failed" and become StorageError.
    _IO_ERRORS: tuple[type[BaseException], ...] = (OSError, pa.ArrowException)

    def __init__(self, base_uri: str, options: dict[str, str] | None = None) -> None:
        self.base_uri = base_uri
        self.options: dict[str, str] = dict(options or {})
        self._init_transient()

    def _init_transient(self) -> None:
        self._fs: pafs.FileSystem | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in self._TRANSIENT}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_transient()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_uri!r})"

    # -- paths ---------------------------------------------------------------

    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem for `fs_path` paths; created on first use, never pickled."""
        if self._fs is None:
            with self._lock:
                if self._fs is None:
                    self._fs = self._make_filesystem()
        return self._fs

    @abc.abstractmethod
    def _make_filesystem(self) -> pafs.FileSystem:
        """Build the pyarrow filesystem from the stored options."""

    @abc.abstractmethod
    def fs_path(self, rel: str) -> str:
        """The path of `rel` as `filesystem()` expects it (no scheme)."""

    def uri(self, rel: str) -> str:
        """The full URI of `rel`, for messages and JSON."""
        return _join(self.base_uri, rel)

    # -- reads ---------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        """Whether a file or directory exists at `rel`."""
        with self._errors("exists", rel):
            info = self.filesystem().get_file_info(self.fs_path(rel))
        return bool(info.type != pafs.FileType.NotFound)

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of the file at `rel`; FileNotFoundError if it is absent."""
        with self._errors("read", rel):
            with self.filesystem().open_input_stream(self.fs_path(rel)) as f:
                return bytes(f.read())

    def size(self, rel: str) -> int:
        """The size in bytes of the file at `rel`; FileNotFoundError if it is absent."""
        with self._errors("size", rel):
            info = self.filesystem().get_file_info(self.fs_path(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"size {self.uri(rel)}: no such file")
        return info.size or 0

    def open_input_file(self, rel: str) -> pa.NativeFile:
        """A random-access reader (what parquet needs); FileNotFoundError if absent."""
        with self._errors("open", rel):
            return self.filesystem().open_input_file(self.fs_path(rel))

    def list_dir(self, rel: str = "") -> list[FileInfo]:
        """The immediate children of directory `rel`, sorted by name; [] if it is missing."""
        return sorted(self._list(rel, recursive=False), key=lambda f: f.name)

    def list_files_recursive(self, rel: str = "") -> list[FileInfo]:
        """Every file (not directory) below `rel`, sorted by path; [] if it is missing."""
        files = [f for f in self._list(rel, recursive=True) if not f.is_dir]
        return sorted(files, key=lambda f: f.path)

    def _list(self, rel: str, recursive: bool) -> list[FileInfo]:
        selector = pafs.FileSelector(self.fs_path(rel), recursive=recursive, allow_not_found=True)
        with self._errors("list", rel):
            infos = self.filesystem().get_file_info(selector)
        base = self.fs_path("") + "/"
        return [_file_info(info, base) for info in infos]

    # -- writes --------------------------------------------------------------

    @abc.abstractmethod
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write `data` to `rel`, replacing any file there; readers see old or new, never partial."""

    @abc.abstractmethod
    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create `rel` with `data` only if nothing is there, atomically.

        Raises FileExistsError if `rel` exists; of several racing callers exactly one
        wins, and no reader ever sees partial content.
        """

    @abc.abstractmethod
    def delete(self, rel: str) -> None:
        """Delete the file at `rel`; a missing file is not an error."""

    @abc.abstractmethod
    def delete_dir(self, rel: str) -> None:
        """Delete directory `rel` and everything below it; a missing one is not an error."""

    @abc.abstractmethod
    def remove_empty_dirs(self, rel: str) -> None:
        """Remove directory `rel` and the directories below it that are empty, deepest first, each
        with an atomic removal of an empty directory: a file another process puts there meanwhile
        is never deleted (the folder holding it stays). A no-op where directories are implicit."""

    @abc.abstractmethod
    def makedirs(self, rel: str) -> None:
        """Create directory `rel` and its parents (a no-op where directories are implicit)."""

    @abc.abstractmethod
    def open_output_stream(self, rel: str) -> pa.NativeFile:
        """A writable stream to `rel` (creating parents where that matters)."""

    # -- errors --------------------------------------------------------------

    @contextmanager
    def _errors(self, op: str, rel: str) -> Iterator[None]:
        """Let FileNotFoundError/FileExistsError through; wrap other I/O failures in StorageError."""
        try:
            yield
        except (FileNotFoundError, FileExistsError):
            raise
        except self._IO_ERRORS as e:
            raise StorageError(f"{op} {self.uri(rel)}: {e}") from e


def _join(base: str, rel: str) -> str:
    rel = rel.strip("/")
    return f"{base}/{rel}" if rel else base


def _file_info(info: pafs.FileInfo, base: str) -> FileInfo:
    is_dir = info.type == pafs.FileType.Directory
    mtime_ns = info.mtime_ns
    return FileInfo(
        path=info.path[len(base) :] if info.path.startswith(base) else info.path,
        name=info.base_name,
        size=0 if is_dir else (info.size or 0),
        is_dir=is_dir,
        mtime_ms=None if mtime_ns is None else mtime_ns // 1_000_000,
    )
