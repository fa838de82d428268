"""Apache Hudi's bloom filters: moved to `engine.data.bloom_filter` (the metadata table's HFiles
carry one as well as base-file footers do); re-exported here for the index and its callers."""

from typing import Any

from engine.data import bloom_filter as _impl
from engine.data.bloom_filter import *  # noqa: F403
from engine.data.bloom_filter import __all__  # noqa: F401


def __getattr__(name: str) -> Any:
    return getattr(_impl, name)
