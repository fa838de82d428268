"""HFiles (version 3) built by hand for the HFILE log block tests: the subset engine.data.hfile
reads (data blocks and the trailer; no index or file-info blocks, which it does not need)."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

from engine.data import hfile
from engine.data.hfile_writer import hadoop_vlong, varint

vlong = hadoop_vlong  # Hadoop WritableUtils.writeVLong, as the engine's HFile writer has it


def cell(row: bytes, value: bytes, memstore_ts: int = 0) -> bytes:
    """One KeyValue: empty family and qualifier, latest timestamp, type Put."""
    key = struct.pack(">h", len(row)) + row + b"\x00" + struct.pack(">q", 2**63 - 1) + b"\x04"
    return struct.pack(">ii", len(key), len(value)) + key + value + vlong(memstore_ts)


def hfile_bytes(blocks: Sequence[Sequence[bytes]], codec: int = hfile.CODEC_GZ, entry_count: int | None = None,
                inline_leaf_index: bool = False) -> bytes:
    """An HFile of data blocks holding `blocks` (encoded cells each), then its trailer; with
    `inline_leaf_index`, a leaf index block (not a real one) after each data block but the last."""
    out = bytearray()
    offsets = []
    prev = -1
    for i, cells in enumerate(blocks):
        if inline_leaf_index and i:
            body = b"\x00" * 20
            out += b"IDXLEAF2" + struct.pack(">iiqbii", len(body), len(body), prev, 0, 16384, 33 + len(body)) + body
        raw = b"".join(cells)
        data = gzip.compress(raw) if codec == hfile.CODEC_GZ else raw
        checksums = b"\x00" * 4
        header = hfile.DATA_BLOCK_MAGIC + struct.pack(
            ">iiqbii", len(data) + len(checksums), len(raw), prev, 0, 16384, hfile.BLOCK_HEADER_SIZE + len(data))
        offsets.append(len(out))
        prev = len(out)
        out += header + data + checksums
    count = sum(len(c) for c in blocks) if entry_count is None else entry_count
    proto = b"".join([
        varint(2 << 3) + varint(len(out)),  # load-on-open offset (nothing there)
        varint(7 << 3) + varint(count),
        varint(9 << 3) + varint(offsets[0] if offsets else 0),
        varint(10 << 3) + varint(offsets[-1] if offsets else 0),
        varint((11 << 3) | 2) + varint(len(b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"))
        + b"org.apache.hudi.io.storage.HoodieHBaseKVComparator",
        varint(12 << 3) + varint(codec),
    ])
    body = hfile.TRAILER_MAGIC + varint(len(proto)) + proto
    trailer = body + b"\x00" * (hfile.TRAILER_SIZE - 4 - len(body)) + b"\x00\x00\x00\x03"
    return bytes(out) + trailer
