"""Merge-on-read log files through Storage: their blocks, their instants, writing a new one.

A log file (`.<fileId>_<baseInstant>.log.<version>_<writeToken>`) is a sequence of log blocks
(`engine.data.log_block`). We never append to one: every write creates a new file with the next
version (`next_log_version`), exclusively, so a failed write leaves whole files to delete, file
order equals write order for Apache Hudi and hudi-rs alike, and object stores need no append.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence

from engine.data.file_names import LogFileName
from engine.data.log_block import (
    MAGIC,
    HeaderKey,
    LogBlock,
    corrupt_reason,
    decode_block_head,
    scan_log_blocks,
)
from engine.errors import CorruptTableError, InvalidInputError
from engine.storage import Storage

_log = logging.getLogger(__name__)

_HEAD_READ = 64 * 1024  # one read covers a block's header (the writer schema is a few KB) in most files


def read_log_blocks(storage: Storage, path: str) -> list[LogBlock]:
    """Every readable block of the log file at `path` (relative to the table), in file order.

    Corrupt blocks (a torn tail, a writer that died mid-block: `scan_log_blocks`) are skipped
    with a warning naming the file and offset, as Apache Hudi's log scanners skip them. A file
    that is otherwise malformed raises CorruptTableError naming the file and the block's offset;
    a missing one stays FileNotFoundError.
    """
    data = storage.read_bytes(path)
    try:
        blocks, skipped = scan_log_blocks(data)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{storage.uri(path)}: {exc}") from exc
    for offset, reason in skipped:
        _log.warning("%s: skipping the corrupt log block at offset %d: %s", storage.uri(path), offset, reason)
    return blocks


def log_block_instants(storage: Storage, path: str) -> list[str]:
    """The INSTANT_TIME of each readable block of the log file at `path`, in file order, reading
    only the blocks' headers (one ranged read per block in the usual case, plus one for the size
    trailer of a block longer than that read). Corrupt blocks are skipped as `read_log_blocks`
    skips them (with a warning), so rollback and archival see the blocks readers count."""
    instants: list[str] = []
    with storage.open_input_file(path) as f:
        size = f.size()
        pos = 0
        while size - pos >= len(MAGIC):
            chunk = f.read_at(min(_HEAD_READ, size - pos), pos)
            if chunk[: len(MAGIC)] != MAGIC:
                raise CorruptTableError(
                    f"{storage.uri(path)}: log block at offset {pos}: missing {MAGIC!r} magic"
                )
            reason = corrupt_reason(functools.partial(_read_at, f, chunk, pos), size, pos)
            if reason is not None:
                _log.warning(
                    "%s: skipping the corrupt log block at offset %d: %s", storage.uri(path), pos, reason
                )
                pos = _next_magic(f, pos + len(MAGIC), size)
                continue
            want = _HEAD_READ
            while True:
                try:
                    head = decode_block_head(chunk, pos)
                except CorruptTableError as exc:
                    raise CorruptTableError(f"{storage.uri(path)}: {exc}") from exc
                if head is not None:
                    break
                want *= 4
                chunk = f.read_at(min(want, size - pos), pos)
            length, block_type, header = head
            instant = header.get(HeaderKey.INSTANT_TIME)
            if instant is None:
                raise CorruptTableError(
                    f"{storage.uri(path)}: log block at offset {pos} (type {block_type}) has no INSTANT_TIME header"
                )
            instants.append(instant)
            pos += length
    return instants


def _read_at(f, chunk: bytes, chunk_at: int, n: int, at: int) -> bytes:  # type: ignore[no-untyped-def]
    if chunk_at <= at and at + n <= chunk_at + len(chunk):
        return chunk[at - chunk_at : at - chunk_at + n]
    return bytes(f.read_at(n, at))


def _next_magic(f, start: int, size: int) -> int:  # type: ignore[no-untyped-def]
    """Offset of the first magic at or after `start`, or `size` (HoodieLogFileReader's resync)."""
    step = 1 << 20
    pos = start
    while pos < size:
        window = bytes(f.read_at(min(step + len(MAGIC) - 1, size - pos), pos))
        found = window.find(MAGIC)
        if found >= 0:
            return pos + found
        pos += step
    return size


def write_log_file(storage: Storage, path: str, blocks: Sequence[bytes]) -> int:
    """Create the log file `path` holding `blocks` (encoded log blocks) and return its size.

    Created exclusively: FileExistsError if anything is there (a log file is never appended to).
    """
    if not blocks:
        raise InvalidInputError(f"a log file needs at least one block: {path}")
    for i, block in enumerate(blocks):
        if not block.startswith(MAGIC):
            raise InvalidInputError(f"block {i} for {path} is not an encoded log block")
    data = b"".join(blocks)
    storage.create_exclusive(path, data)
    return len(data)


def next_log_version(existing: Iterable[LogFileName]) -> int:
    """The version of the next log file of a slice: one more than the highest of `existing`, 1 when
    there is none. Versions are written unpadded (hudi-rs fails to find `log.01`)."""
    return max((name.version for name in existing), default=0) + 1


__all__ = ["log_block_instants", "next_log_version", "read_log_blocks", "write_log_file"]
