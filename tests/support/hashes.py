"""Hash functions a user might plug into the RECORD index (`module:function`), for tests."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa


def crc32(keys: pa.Array) -> np.ndarray:
    """zlib's CRC-32 of the UTF-8 bytes: unsigned, 0 .. 2**32 - 1 (outside the signed 32-bit range)."""
    return np.array([zlib.crc32(k.encode("utf-8")) for k in keys.to_pylist()], dtype=np.int64)


def wrong_length(keys: pa.Array) -> np.ndarray:
    return np.zeros(len(keys) + 1, dtype=np.int64)
