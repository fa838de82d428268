"""`LocalStorage`: a table on a local (or locally mounted) POSIX filesystem.

Writes go through a temporary file in the target's directory so readers never see
partial content: `write_bytes` renames it over the target, `create_exclusive` hard-links
it to the target, which fails if the target exists and so gives exactly one winner.
Temporary files are named ".<name>.<random>.tmp" and are removed unless the process dies.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pyarrow as pa
import pyarrow.fs as pafs

from engine.storage.base import Storage, _join


class LocalStorage(Storage):
    """Storage rooted at an absolute, normalised local path (no trailing slash)."""

    def _make_filesystem(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def fs_path(self, rel: str) -> str:
        """The absolute local path of `rel`."""
        return _join(self.base_uri, rel)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace `rel` atomically (temp file + fsync + os.replace); parents are created."""
        target = self.fs_path(rel)
        with self._errors("write", rel):
            tmp = self._write_temp(target, data)
            try:
                os.replace(tmp, target)
            except BaseException:
                _unlink_quietly(tmp)
                raise
            # a checksum Hadoop wrote for the old content would fail Apache Hudi's reads of the
            # new one (Hadoop checks a file against its .crc when there is one, not without)
            _drop_checksum(target)
            _fsync_dir(os.path.dirname(target))

    def create_exclusive(self, rel: str, data: bytes) -> None:
        """Create `rel` atomically and exclusively (temp file + fsync + os.link)."""
        target = self.fs_path(rel)
        with self._errors("create", rel):
            tmp = self._write_temp(target, data)
            try:
                os.link(tmp, target)  # EEXIST surfaces as FileExistsError
            finally:
                _unlink_quietly(tmp)
            _fsync_dir(os.path.dirname(target))

    def delete(self, rel: str) -> None:
        """Delete the file at `rel`, and the Hadoop checksum file beside it (`.<name>.crc`: Apache
        Hudi on a local file system writes one beside every file, and Hadoop deletes it with its
        file); a missing file is not an error. A checksum file is never deleted alone."""
        target = self.fs_path(rel)
        with self._errors("delete", rel):
            try:
                os.unlink(target)
            except FileNotFoundError:
                pass
            _drop_checksum(target)

    def delete_dir(self, rel: str) -> None:
        """Delete directory `rel` recursively; a missing one is not an error."""
        with self._errors("delete", rel):
            try:
                shutil.rmtree(self.fs_path(rel))
            except FileNotFoundError:
                pass

    def remove_empty_dirs(self, rel: str) -> None:
        """`os.rmdir` bottom-up (it fails on a directory that is not empty: left as it is)."""
        top = self.fs_path(rel)
        with self._errors("delete", rel):
            for folder, _dirs, _files in os.walk(top, topdown=False):
                try:
                    os.rmdir(folder)
                except OSError:  # not empty (a file, or a folder that kept one), or gone
                    pass

    def makedirs(self, rel: str) -> None:
        """Create directory `rel` and its parents."""
        with self._errors("makedirs", rel):
            _makedirs(self.fs_path(rel))

    def open_output_stream(self, rel: str) -> pa.NativeFile:
        """A writable stream to `rel`, parents created; the file is visible while being written."""
        target = self.fs_path(rel)
        with self._errors("open", rel):
            _makedirs(os.path.dirname(target))
            return self.filesystem().open_output_stream(target)

    @staticmethod
    def _write_temp(target: str, data: bytes) -> str:
        parent, name = os.path.split(target)
        _makedirs(parent)
        tmp = os.path.join(parent, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return tmp


def _makedirs(path: str) -> None:
    # os.makedirs raises FileExistsError when a file sits where a directory should be;
    # let that not read as "the target exists" (create_exclusive's lost race).
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError as e:
        raise NotADirectoryError(e.errno, "a file exists where a directory is needed", path) from e


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync_dir(path: str) -> None:
    # Makes the new directory entry durable; without it a crash could lose a commit
    # that a caller was already told had succeeded.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop_checksum(target: str) -> None:
    """Remove Hadoop's checksum file of `target` (`<dir>/.<name>.crc`), if any."""
    folder, name = os.path.split(target)
    _unlink_quietly(os.path.join(folder, f".{name}.crc"))
