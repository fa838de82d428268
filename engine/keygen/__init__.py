"""Record keys and partition paths, as Apache Hudi's key generators make them (pure but for
`spark_keys`: no Spark, no I/O). Used by every layer that names records (data, index, read, write, the console), so it sits
below them all.

- `keys`: `KeySpec` (simple, complex, timestamp-based, custom, auto-generated keys), record keys
  and partition paths, URL encoding of partition values;
- `values`: how a value of each type becomes key or path text, as Hudi renders it;
- `timestamp`: the timestamp-based generator's options and its partition paths;
- `joda`: Joda-Time date patterns (what Hudi prints partition times with);
- `murmur`, `record_hash`: Hadoop's MurmurHash (bloom filters) and the record index's key hashing;
- `spark_keys`: the same keys and paths as Spark expressions over a DataFrame (writes, lookups).
"""

from engine.keygen.keys import AUTO_KEY, KeySpec, partition_path, partition_paths, record_key

__all__ = ["AUTO_KEY", "KeySpec", "partition_path", "partition_paths", "record_key"]
