"""The storage contract, run against a local directory and a moto S3 server alike."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import InvalidConfigError, StorageError
from engine.storage import FileInfo, Storage, storage_for
from engine.storage.local import LocalStorage
from engine.storage.s3 import S3Storage
from tests.support.moto_s3 import MotoS3


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return storage_for(str(tmp_path / "table"))
    server: MotoS3 = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    return storage_for(f"s3://{bucket}/warehouse/table", server.storage_options())


def _entries(infos: list[FileInfo]) -> list[tuple[str, str, int, bool]]:
    return [(f.path, f.name, f.size, f.is_dir) for f in infos]


# -- bytes ------------------------------------------------------------------


def test_write_then_read_round_trips_bytes(storage: Storage) -> None:
    storage.write_bytes(".hoodie/hoodie.properties", b"hoodie.table.name=t\n")
    assert storage.read_bytes(".hoodie/hoodie.properties") == b"hoodie.table.name=t\n"
    assert storage.exists(".hoodie/hoodie.properties") is True
    assert storage.exists(".hoodie") is True
    assert storage.size(".hoodie/hoodie.properties") == 20


def test_write_bytes_overwrites(storage: Storage) -> None:
    storage.write_bytes("a.txt", b"first, longer content")
    storage.write_bytes("a.txt", b"second")
    assert storage.read_bytes("a.txt") == b"second"
    # Local writes go through a temp file; none may be left behind.
    assert _entries(storage.list_dir("")) == [("a.txt", "a.txt", 6, False)]


def test_empty_file_round_trips(storage: Storage) -> None:
    storage.write_bytes("empty", b"")
    assert storage.read_bytes("empty") == b""
    assert storage.size("empty") == 0


def test_missing_file_raises_file_not_found(storage: Storage) -> None:
    with pytest.raises(FileNotFoundError):
        storage.read_bytes("nope/missing.txt")
    with pytest.raises(FileNotFoundError):
        storage.open_input_file("missing.parquet")
    with pytest.raises(FileNotFoundError):
        storage.size("missing.parquet")
    assert storage.exists("nope/missing.txt") is False


# -- create_exclusive ---------------------------------------------------------


def test_create_exclusive_twice_keeps_the_first(storage: Storage) -> None:
    storage.create_exclusive(".hoodie/20240101000000000.commit.requested", b"first")
    with pytest.raises(FileExistsError):
        storage.create_exclusive(".hoodie/20240101000000000.commit.requested", b"second")
    assert storage.read_bytes(".hoodie/20240101000000000.commit.requested") == b"first"
    assert _entries(storage.list_dir(".hoodie")) == [
        (".hoodie/20240101000000000.commit.requested", "20240101000000000.commit.requested", 5, False)
    ]


def test_create_exclusive_race_has_exactly_one_winner(storage: Storage) -> None:
    storage.makedirs(".hoodie")
    storage.filesystem()  # build clients up front so the threads race on the write itself
    if isinstance(storage, S3Storage):
        storage.client()
    n = 8
    barrier = threading.Barrier(n)
    winners: list[int] = []
    losers: list[int] = []
    unexpected: list[BaseException] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            storage.create_exclusive(".hoodie/20240101000000000.commit", f"writer-{i}".encode())
            winners.append(i)
        except FileExistsError:
            losers.append(i)
        except BaseException as e:  # surfaced by the assert below
            unexpected.append(e)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert unexpected == []
    assert len(winners) == 1
    assert sorted(winners + losers) == list(range(n))
    assert storage.read_bytes(".hoodie/20240101000000000.commit") == f"writer-{winners[0]}".encode()
    assert [f.name for f in storage.list_dir(".hoodie")] == ["20240101000000000.commit"]


# -- listing ------------------------------------------------------------------


def _populate(storage: Storage) -> None:
    storage.write_bytes(".hoodie/hoodie.properties", b"12345")
    storage.write_bytes(".hoodie/20240101000000000.commit", b"{}")
    storage.write_bytes("2024/01/b.parquet", b"bbb")
    storage.write_bytes("2024/01/a.parquet", b"aaaa")
    storage.write_bytes("2024/02/c.parquet", b"c")
    storage.write_bytes("top.txt", b"top!!!")


def test_list_dir_returns_immediate_children_sorted_by_name(storage: Storage) -> None:
    _populate(storage)
    assert _entries(storage.list_dir("")) == [
        (".hoodie", ".hoodie", 0, True),
        ("2024", "2024", 0, True),
        ("top.txt", "top.txt", 6, False),
    ]
    assert _entries(storage.list_dir("2024/01")) == [
        ("2024/01/a.parquet", "a.parquet", 4, False),
        ("2024/01/b.parquet", "b.parquet", 3, False),
    ]
    assert _entries(storage.list_dir("2024")) == [
        ("2024/01", "01", 0, True),
        ("2024/02", "02", 0, True),
    ]


def test_list_dir_reports_file_mtime(storage: Storage) -> None:
    storage.write_bytes("x.txt", b"x")
    [info] = storage.list_dir("")
    assert isinstance(info.mtime_ms, int)
    assert info.mtime_ms > 1_600_000_000_000  # after 2020: milliseconds, not seconds or ns


def test_list_files_recursive_returns_every_file_below(storage: Storage) -> None:
    _populate(storage)
    assert _entries(storage.list_files_recursive("")) == [
        (".hoodie/20240101000000000.commit", "20240101000000000.commit", 2, False),
        (".hoodie/hoodie.properties", "hoodie.properties", 5, False),
        ("2024/01/a.parquet", "a.parquet", 4, False),
        ("2024/01/b.parquet", "b.parquet", 3, False),
        ("2024/02/c.parquet", "c.parquet", 1, False),
        ("top.txt", "top.txt", 6, False),
    ]
    assert [f.path for f in storage.list_files_recursive("2024")] == [
        "2024/01/a.parquet",
        "2024/01/b.parquet",
        "2024/02/c.parquet",
    ]


def test_listing_a_missing_directory_is_empty(storage: Storage) -> None:
    assert storage.list_dir("") == []
    assert storage.list_dir("no/such/dir") == []
    assert storage.list_files_recursive("no/such/dir") == []


# -- deletes ------------------------------------------------------------------


def test_delete_removes_one_file_and_tolerates_missing(storage: Storage) -> None:
    _populate(storage)
    storage.delete("2024/02/c.parquet")
    storage.delete("2024/02/c.parquet")
    storage.delete("never/existed.txt")
    assert storage.exists("2024/02/c.parquet") is False
    assert [f.path for f in storage.list_files_recursive("2024")] == [
        "2024/01/a.parquet",
        "2024/01/b.parquet",
    ]


def test_delete_dir_removes_everything_below_and_tolerates_missing(storage: Storage) -> None:
    _populate(storage)
    storage.delete_dir("2024")
    storage.delete_dir("2024")
    storage.delete_dir("never/existed")
    assert storage.exists("2024") is False
    assert [f.path for f in storage.list_files_recursive("")] == [
        ".hoodie/20240101000000000.commit",
        ".hoodie/hoodie.properties",
        "top.txt",
    ]


def test_delete_dir_does_not_touch_siblings_sharing_a_name_prefix(storage: Storage) -> None:
    storage.write_bytes("2024/a", b"1")
    storage.write_bytes("20240/b", b"2")
    storage.delete_dir("2024")
    assert [f.path for f in storage.list_files_recursive("")] == ["20240/b"]


# -- pickling and parquet -----------------------------------------------------


def test_pickled_storage_works_after_round_trip(storage: Storage) -> None:
    storage.write_bytes("p.txt", b"before")
    storage.filesystem()  # a cached client must not be pickled
    clone = pickle.loads(pickle.dumps(storage))
    assert type(clone) is type(storage)
    assert clone.base_uri == storage.base_uri
    assert clone.options == storage.options
    assert clone.read_bytes("p.txt") == b"before"
    clone.write_bytes("p.txt", b"after")
    assert storage.read_bytes("p.txt") == b"after"


def test_parquet_written_to_output_stream_reads_back_from_input_file(storage: Storage) -> None:
    table = pa.table({"_hoodie_record_key": ["k1", "k2", "k3"], "value": [1, 2, 3]})
    with storage.open_output_stream("2024/01/f1_0-1-2_20240101000000000.parquet") as out:
        pq.write_table(table, out)
    with storage.open_input_file("2024/01/f1_0-1-2_20240101000000000.parquet") as f:
        assert f.size() == storage.size("2024/01/f1_0-1-2_20240101000000000.parquet")
        assert pq.read_table(f).to_pydict() == {"_hoodie_record_key": ["k1", "k2", "k3"], "value": [1, 2, 3]}


# -- URIs and configuration -----------------------------------------------------


def test_local_uris_are_normalised(tmp_path: Path) -> None:
    expected = str(tmp_path / "t")
    assert storage_for(f"{tmp_path}/t/").base_uri == expected
    assert storage_for(f"file://{tmp_path}/t").base_uri == expected
    assert storage_for(f"file://localhost{tmp_path}/t/").base_uri == expected
    local = storage_for(f"{tmp_path}/t")
    assert isinstance(local, LocalStorage)
    assert local.uri("") == expected
    assert local.uri("2024/01/a.parquet") == f"{expected}/2024/01/a.parquet"
    assert local.fs_path(".hoodie") == f"{expected}/.hoodie"


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("s3://bucket/warehouse/?x", "query or fragment"),
        ("s3://bucket/warehouse/#x", "query or fragment"),
        ("s3://bucket/warehouse?x=1", "query or fragment"),
        ("s3://bucket/warehouse/../other", "'..' segment"),
        ("s3://bucket/warehouse/./t", "'.' segment"),
        ("s3://bucket/warehouse//t", "empty path segment"),
        ("s3://bucket//warehouse", "empty path segment"),
        ("s3://bucket/warehouse%2Ft", "percent-encoded"),
        ("s3://bucket/warehouse%2ft", "percent-encoded"),
        ("s3://bucket/warehouse%5Ct", "percent-encoded"),
        ("s3://bucket/%2E%2E/t", "percent-encoded"),
        ("s3://bucket/ware\\house", "backslash"),
        ("s3://Bucket_1/t", "valid S3 bucket"),
        ("file:///data/t?x", "query or fragment"),
        ("file:///data/%2E%2E/t", "percent-encoded"),
        ("file:///data/../t", "contains '..'"),
        ("/data/../t", "contains '..'"),
        ("/data//t", "empty path segment"),
        ("/data/./t", "'.' segment"),
        ("/data/t\x00", "control character"),
        ("/data/t\n", "control character"),
        (" /data/t", "leading or trailing spaces"),
        ("hdfs://nn/t", "unsupported storage scheme"),
    ],
)
def test_non_canonical_locations_are_refused(uri: str, problem: str) -> None:
    """Every spelling that could name another folder than it seems to is refused, with the reason."""
    with pytest.raises(InvalidConfigError) as err:
        storage_for(uri)
    assert problem in str(err.value)


def test_canonical_forms() -> None:
    from engine.storage.uri import ancestors, canonical_uri, is_within

    assert canonical_uri("s3://bucket/warehouse/t/") == "s3://bucket/warehouse/t"
    assert canonical_uri("s3://bucket") == canonical_uri("s3://bucket/") == "s3://bucket"
    assert canonical_uri("S3://bucket/t") == "s3://bucket/t"
    assert canonical_uri("file:///data/t/") == canonical_uri("/data/t") == "/data/t"
    assert ancestors("s3://b/w/t") == ["s3://b/w", "s3://b"]
    assert ancestors("/data/w/t") == ["/data/w", "/data", "/"]
    assert is_within("s3://b/w/t", "s3://b/w") and not is_within("s3://b/w", "s3://b/w")
    assert not is_within("s3://b/wx", "s3://b/w") and is_within("/data/w/t", "/")


def test_relative_local_path_becomes_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage_for("tables/t1").base_uri == os.path.join(str(tmp_path), "tables", "t1")


def test_s3_paths_and_options_from_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    s3 = storage_for(
        "s3://bucket/warehouse/t1/",
        {"endpoint_url": "http://127.0.0.1:9000", "access_key_id": "ak", "secret_access_key": "sk"},
    )
    assert isinstance(s3, S3Storage)
    assert s3.base_uri == "s3://bucket/warehouse/t1"
    assert s3.fs_path("") == "bucket/warehouse/t1"
    assert s3.fs_path(".hoodie/hoodie.properties") == "bucket/warehouse/t1/.hoodie/hoodie.properties"
    assert s3.key("2024/a.parquet") == "warehouse/t1/2024/a.parquet"
    assert s3.uri("2024/a.parquet") == "s3://bucket/warehouse/t1/2024/a.parquet"
    assert s3.options == {
        "endpoint_url": "http://127.0.0.1:9000",
        "access_key_id": "ak",
        "secret_access_key": "sk",
        "region": "us-east-1",
    }
    bucket_root = storage_for("s3://bucket", {"access_key_id": "ak", "secret_access_key": "sk"})
    assert bucket_root.base_uri == "s3://bucket"
    assert bucket_root.fs_path("a/b") == "bucket/a/b"


def test_s3_options_fall_back_to_env_once_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio:9000")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-ak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-sk")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    s3 = storage_for("s3://bucket/t", {"access_key_id": "arg-ak"})
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var)
    expected = {
        "endpoint_url": "http://minio:9000",
        "access_key_id": "arg-ak",
        "secret_access_key": "env-sk",
        "session_token": "env-token",
        "region": "eu-west-1",
    }
    assert s3.options == expected
    assert pickle.loads(pickle.dumps(s3)).options == expected
    assert "env-sk" not in repr(s3)


@pytest.mark.parametrize(
    "uri",
    [
        "hdfs://namenode/table",
        "gs://bucket/table",
        "s3a://bucket/table",
        "http://host/table",
        "file://otherhost/t",
    ],
)
def test_unsupported_scheme_raises_invalid_config(uri: str) -> None:
    with pytest.raises(InvalidConfigError) as err:
        storage_for(uri)
    assert uri in str(err.value)


@pytest.mark.parametrize(
    ("uri", "options", "message"),
    [
        ("", None, "a table location is required"),
        ("s3:///no-bucket", None, "does not name a valid S3 bucket"),
        ("s3://bucket/t", {"endpont_url": "http://x"}, "unknown S3 storage option(s) ['endpont_url']"),
        ("s3://bucket/t", {"endpoint_url": "127.0.0.1:9000"}, "S3 endpoint must look like"),
    ],
)
def test_bad_storage_config_raises_invalid_config(
    uri: str, options: dict[str, str] | None, message: str
) -> None:
    with pytest.raises(InvalidConfigError) as err:
        storage_for(uri, options)
    assert message in str(err.value)


def test_io_failures_are_wrapped_in_storage_error(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path / "t"))
    storage.write_bytes("file", b"x")
    with pytest.raises(StorageError) as err:
        storage.write_bytes("file/child", b"y")  # a parent that is a file
    assert str(err.value).startswith(f"write {tmp_path}/t/file/child: ")
    assert isinstance(err.value.__cause__, OSError)


@pytest.mark.s3
def test_s3_missing_bucket_is_a_storage_error(s3_server: MotoS3) -> None:
    storage = storage_for("s3://no-such-bucket-here/t", s3_server.storage_options())
    with pytest.raises(StorageError) as err:
        storage.write_bytes("a.txt", b"x")
    assert str(err.value).startswith("write s3://no-such-bucket-here/t/a.txt: ")


def test_create_exclusive_under_a_file_is_a_storage_error_not_file_exists(tmp_path: Path) -> None:
    storage = storage_for(str(tmp_path / "t"))
    storage.write_bytes("file", b"x")
    with pytest.raises(StorageError):
        storage.create_exclusive("file/child", b"y")


def test_local_delete_takes_the_hadoop_checksum_along_and_a_rewrite_drops_a_stale_one(tmp_path):
    """Issue 32: Apache Hudi on a local file system leaves `.<name>.crc` beside each file. Deleting
    a file deletes its checksum (as Hadoop does); replacing one drops the old checksum, which would
    fail Hadoop's check of the new content; other checksum files are never touched."""
    from engine.storage import storage_for

    storage = storage_for(str(tmp_path))
    (tmp_path / "p").mkdir()
    for name in ("f.parquet", "g.parquet"):
        (tmp_path / "p" / name).write_bytes(b"data")
        (tmp_path / "p" / f".{name}.crc").write_bytes(b"crc")
    (tmp_path / ".hoodie").mkdir()
    (tmp_path / ".hoodie" / "hoodie.properties").write_bytes(b"a=1\n")
    (tmp_path / ".hoodie" / ".hoodie.properties.crc").write_bytes(b"crc")
    storage.delete("p/f.parquet")
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [".g.parquet.crc", "g.parquet"]
    storage.write_bytes(".hoodie/hoodie.properties", b"a=2\n")
    assert sorted(p.name for p in (tmp_path / ".hoodie").iterdir()) == ["hoodie.properties"]
    storage.delete("p/missing.parquet")  # missing: no error, nothing else goes
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [".g.parquet.crc", "g.parquet"]
