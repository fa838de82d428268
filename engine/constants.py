"""On-disk names of Apache Hudi's table layout (and this engine's additions to it), in one place."""

from __future__ import annotations

METAFOLDER = ".hoodie"
PROPERTIES_FILE = "hoodie.properties"
PARTITION_METADATA_FILE = ".hoodie_partition_metadata"
ARCHIVED_FOLDER = "archived"
TEMP_FOLDER = ".temp"
HEARTBEAT_FOLDER = ".heartbeat"
# Our single-writer table lock (engine.transaction.lock); Hudi readers ignore sub-folders of .hoodie.
LOCK_FOLDER = ".lock"
HEARTBEAT_DIR = f"{METAFOLDER}/{HEARTBEAT_FOLDER}"


def heartbeat_file(instant: str) -> str:
    """The heartbeat file of a write or service of `instant` (Apache Hudi's
    `.hoodie/.heartbeat/<instant>`); ValueError for a name that is no instant."""
    if not instant or "/" in instant:
        raise ValueError(f"not an instant time: {instant!r}")
    return f"{HEARTBEAT_DIR}/{instant}"

COMMIT_TIME_COL = "_hoodie_commit_time"
COMMIT_SEQNO_COL = "_hoodie_commit_seqno"
RECORD_KEY_COL = "_hoodie_record_key"
PARTITION_PATH_COL = "_hoodie_partition_path"
FILE_NAME_COL = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME_COL, COMMIT_SEQNO_COL, RECORD_KEY_COL, PARTITION_PATH_COL, FILE_NAME_COL)

BASE_FILE_EXTENSION = ".parquet"
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
NULL_RECORD_KEY_PLACEHOLDER = "__null__"
EMPTY_RECORD_KEY_PLACEHOLDER = "__empty__"

TABLE_VERSION = 6
TIMELINE_LAYOUT_VERSION = 1

# parquet footer keys
FOOTER_MIN_RECORD_KEY = "hoodie_min_record_key"
FOOTER_MAX_RECORD_KEY = "hoodie_max_record_key"
FOOTER_BLOOM_FILTER = "org.apache.hudi.bloomfilter"
FOOTER_BLOOM_FILTER_TYPE = "hoodie_bloom_filter_type_code"
