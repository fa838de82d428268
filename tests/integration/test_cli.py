"""The `hoodie` command, run in-process through `engine.cli.main` and once as the installed script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.cli import main
from engine.constants import META_COLUMNS, METAFOLDER, PARTITION_METADATA_FILE

pytestmark = pytest.mark.spark

HOODIE = Path(sys.executable).with_name("hoodie")

FIRST = [
    {"id": 1, "name": "a", "region": "eu", "ts": 1, "amount": 1.5},
    {"id": 2, "name": "b", "region": "us", "ts": 1, "amount": 2.5},
    {"id": 3, "name": "c", "region": "eu", "ts": 1, "amount": 3.5},
]
SECOND = [  # updates id 2, inserts id 4
    {"id": 2, "name": "B", "region": "us", "ts": 2, "amount": 20.0},
    {"id": 4, "name": "d", "region": "us", "ts": 2, "amount": 4.0},
]
SNAPSHOT = [FIRST[0], SECOND[0], FIRST[2], SECOND[1]]


def by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["id"])


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def data_rows(parquet_file: Path) -> list[dict]:
    table = pq.read_table(parquet_file)
    return by_id(table.drop_columns([c for c in META_COLUMNS if c in table.column_names]).to_pylist())


def cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], *argv: object) -> dict:
    code, out, err = cli(capsys, *argv, "--json")
    assert (code, err) == (0, ""), err
    return json.loads(out)


def init_args(path: Path) -> list[str]:
    return ["init", str(path), "--name", "people", "--record-key", "id", "--partition-field", "region",
            "--precombine", "ts"]


def snapshot_files(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under `root`, except the table lock's lease files
    (every write takes the lock, also one that then commits nothing; see tests/support/tables.py)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if not p.relative_to(root).as_posix().startswith(".hoodie/.lock")
    }


def assert_user_error(code: int, out: str, err: str, message: str | None = None) -> None:
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("hoodie: error: "), err
    if message is not None:
        assert err == f"hoodie: error: {message}\n"


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """A table written by two upserts through the CLI (parquet, then JSON lines); tests must not modify it."""
    root = tmp_path_factory.mktemp("cli")
    table = root / "people"
    first_in = write_parquet(root / "first.parquet", FIRST)
    second_in = write_jsonl(root / "second.jsonl", SECOND)
    results = []
    for argv in (
        init_args(table),
        ["upsert", table, "--input", first_in, "--json"],
        ["upsert", table, "--input", second_in, "--json"],
    ):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main([str(a) for a in argv])
        assert (code, err.getvalue()) == (0, ""), err.getvalue()
        results.append(json.loads(out.getvalue()) if "--json" in argv else None)
    return {"root": root, "table": table, "first": results[1], "second": results[2]}


# ---- init / show --------------------------------------------------------------------------
def test_init_creates_the_table_and_prints_its_config(tmp_path, capsys):
    table = tmp_path / "t"
    doc = cli_json(capsys, *init_args(table), "--hive-style")

    assert doc["path"] == str(table)
    assert doc["name"] == "people"
    assert doc["table_type"] == "COPY_ON_WRITE"
    assert doc["record_key_fields"] == ["id"]
    assert doc["partition_fields"] == ["region"]
    assert doc["precombine_field"] == "ts"
    assert doc["hive_style"] is True
    assert doc["index_type"] == "BLOOM"  # Apache Hudi's default
    assert doc["keygen_class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    props = doc["properties"]
    assert props["hoodie.table.name"] == "people"
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "true"
    on_disk = (table / METAFOLDER / "hoodie.properties").read_text()
    for key, value in props.items():
        assert f"{key}={value}\n" in on_disk
    assert sorted(p.name for p in (table / METAFOLDER).iterdir()) == ["hoodie.properties"]

    code, out, err = cli(capsys, *init_args(table))
    assert_user_error(code, out, err, f"a Hudi table already exists at {table}")


def test_init_refuses_what_this_version_cannot_write(tmp_path, capsys):
    code, out, err = cli(capsys, *init_args(tmp_path / "m"), "--type", "NOPE")
    assert_user_error(code, out, err, "unknown table type 'NOPE': use COPY_ON_WRITE or MERGE_ON_READ")
    code, out, err = cli(capsys, *init_args(tmp_path / "h"), "--index", "NOPE")
    assert_user_error(
        code, out, err,
        "unknown index type 'NOPE': use one of SIMPLE, GLOBAL_SIMPLE, BLOOM, GLOBAL_BLOOM, HBASE, RECORD",
    )
    code, out, err = cli(capsys, *init_args(tmp_path / "s"), "--record-index-buckets", "8")
    assert_user_error(code, out, err, "record index buckets and hash function apply to index RECORD only")
    code, out, err = cli(capsys, *init_args(tmp_path / "r"), "--index", "RECORD", "--record-index-buckets", "0")
    assert_user_error(code, out, err, "hoodie.record.index.buckets must be a positive integer, got 0")
    assert list(tmp_path.iterdir()) == []
    code, out, err = cli(capsys, *init_args(tmp_path / "b"), "--index", "BLOOM", "--json")
    assert code == 0 and "hoodie.index.type=BLOOM" in (tmp_path / "b" / ".hoodie" / "hoodie.properties").read_text()
    code, out, err = cli(capsys, *init_args(tmp_path / "ri"), "--index", "RECORD", "--record-index-buckets", "8",
                         "--json")
    props = (tmp_path / "ri" / ".hoodie" / "hoodie.properties").read_text()
    assert code == 0 and "hoodie.index.type=RECORD" in props
    assert "hoodie.record.index.buckets=8\n" in props and "hoodie.record.index.hash.function=JAVA_STRING_HASH\n" in props


def test_show_reports_schema_and_timeline(written, capsys):
    doc = cli_json(capsys, "show", written["table"])
    assert doc["schema"] == [
        {"name": "id", "type": "int64"},
        {"name": "name", "type": "string"},
        {"name": "region", "type": "string"},
        {"name": "ts", "type": "int64"},
        {"name": "amount", "type": "double"},
    ]
    assert doc["timeline"] == {
        "instants": 2,
        "completed_writes": 2,
        "pending": [],
        "latest_completed_write": written["second"]["instant"],
    }


# ---- writes -------------------------------------------------------------------------------
def test_upserts_report_exact_counts(written):
    first, second = written["first"], written["second"]
    assert (first["operation"], first["inserts"], first["updates"], first["deletes"]) == ("UPSERT", 3, 0, 0)
    assert (first["input_records"], first["partitions"], first["files_written"]) == (3, ["eu", "us"], 2)
    assert (second["operation"], second["inserts"], second["updates"], second["deletes"]) == ("UPSERT", 1, 1, 0)
    assert (second["input_records"], second["partitions"]) == (2, ["us"])
    assert first["instant"] < second["instant"]


def test_delete_reports_absent_keys_and_progress(spark, tmp_path, capsys):
    table = tmp_path / "t"
    assert cli(capsys, *init_args(table))[0] == 0
    code, out, err = cli(capsys, "insert", table, "--input", write_parquet(tmp_path / "in.parquet", FIRST))
    assert (code, err) == (0, "")  # stderr is not a TTY: no progress without --verbose
    inserted = dict(line.split(maxsplit=1) for line in out.splitlines())  # "key  value" lines
    assert inserted["operation"] == "INSERT"
    assert (inserted["inserts"], inserted["updates"], inserted["partitions"]) == ("3", "0", "eu, us")

    keys = write_jsonl(tmp_path / "keys.json", [{"id": 3, "region": "eu"}, {"id": 99, "region": "eu"}])
    code, out, err = cli(capsys, "delete", table, "--input", keys, "--json", "--verbose")
    assert code == 0
    deleted = json.loads(out)
    assert (deleted["operation"], deleted["deletes"], deleted["absent_deletes"]) == ("DELETE", 1, 1)
    assert (deleted["inserts"], deleted["updates"], deleted["input_records"]) == (0, 0, 2)
    progress = err.splitlines()
    assert progress and all(line.startswith("hoodie: [") for line in progress)
    assert any(line.endswith("] preparing keys") for line in progress)
    assert any(line.endswith(f"for instant {deleted['instant']}") for line in progress)

    commits = cli_json(capsys, "commits", table)["instants"]
    assert [(c["time"], c["state"], c["operation"], c["deletes"]) for c in commits] == [
        (inserted["instant"], "completed", "INSERT", 0),
        (deleted["instant"], "completed", "DELETE", 1),
    ]
    out_file = tmp_path / "after.parquet"
    assert cli_json(capsys, "read", table, "--output", out_file)["rows"] == 2
    assert data_rows(out_file) == [FIRST[0], FIRST[1]]


def test_insert_overwrite_verbs_commit_replacecommits(spark, tmp_path, capsys):
    table = tmp_path / "t"
    assert cli(capsys, *init_args(table))[0] == 0
    assert cli(capsys, "insert", table, "--input", write_parquet(tmp_path / "in.parquet", FIRST))[0] == 0
    new_eu = [{"id": 9, "name": "z", "region": "eu", "ts": 2, "amount": 9.0}]
    doc = cli_json(capsys, "insert-overwrite", table, "--input", write_parquet(tmp_path / "eu.parquet", new_eu))
    assert (doc["operation"], doc["inserts"], doc["replaced_file_groups"]) == ("INSERT_OVERWRITE", 1, 1)
    out_file = tmp_path / "after.parquet"
    assert cli_json(capsys, "read", table, "--output", out_file)["rows"] == 2
    assert data_rows(out_file) == [FIRST[1], new_eu[0]]
    doc = cli_json(capsys, "insert-overwrite-table", table, "--input", write_parquet(tmp_path / "all.parquet", SECOND))
    assert (doc["operation"], doc["inserts"], doc["replaced_file_groups"]) == ("INSERT_OVERWRITE_TABLE", 2, 2)
    assert cli_json(capsys, "read", table, "--output", out_file)["rows"] == 2
    assert data_rows(out_file) == SECOND
    commits = cli_json(capsys, "commits", table)["instants"]
    assert [(c["action"], c["operation"]) for c in commits][1:] == [
        ("replacecommit", "INSERT_OVERWRITE"), ("replacecommit", "INSERT_OVERWRITE_TABLE")
    ]


def test_empty_input_commits_nothing(written, capsys):
    empty = written["root"] / "empty.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=pa.Table.from_pylist(FIRST).schema), empty)
    before = snapshot_files(written["table"])
    code, out, err = cli(capsys, "bulk-insert", written["table"], "--input", empty)
    assert (code, out, err) == (0, "the input is empty: nothing was committed\n", "")
    assert snapshot_files(written["table"]) == before


# ---- commits / fsview ---------------------------------------------------------------------
def test_commits_json_lists_the_written_instants(written, capsys):
    first, second = written["first"], written["second"]
    doc = cli_json(capsys, "commits", written["table"])
    assert doc["path"] == str(written["table"])
    assert doc["instants"] == [
        {
            "time": first["instant"], "action": "commit", "state": "completed", "operation": "UPSERT",
            "files": 2, "partitions": 2, "writes": 3, "inserts": 3, "updates": 0, "deletes": 0,
            "bytes": first["bytes_written"],
        },
        {
            "time": second["instant"], "action": "commit", "state": "completed", "operation": "UPSERT",
            "files": 1, "partitions": 1, "writes": 2, "inserts": 1, "updates": 1, "deletes": 0,
            "bytes": second["bytes_written"],
        },
    ]


def test_commits_text_has_one_row_per_instant(written, capsys):
    code, out, err = cli(capsys, "commits", written["table"])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["TIME", "ACTION", "STATE", "OPERATION", "FILES", "INSERTS", "UPDATES",
                                "DELETES", "BYTES"]
    assert [line.split() for line in lines[1:]] == [
        [written["first"]["instant"], "commit", "completed", "UPSERT", "2", "3", "0", "0",
         str(written["first"]["bytes_written"])],
        [written["second"]["instant"], "commit", "completed", "UPSERT", "1", "1", "1", "0",
         str(written["second"]["bytes_written"])],
    ]


def base_files_on_disk(table: Path, partition: str) -> dict[str, int]:
    return {
        p.name: p.stat().st_size
        for p in (table / partition).iterdir()
        if p.name != PARTITION_METADATA_FILE
    }


def fsview_files(doc: dict) -> dict[str, dict[str, int]]:
    return {
        p["partition"]: {s["base_file"]["name"]: s["base_file"]["size"] for g in p["file_groups"] for s in g["slices"]}
        for p in doc["partitions"]
    }


def test_fsview_json_lists_the_files_on_disk(written, capsys):
    table, first, second = written["table"], written["first"]["instant"], written["second"]["instant"]
    doc = cli_json(capsys, "fsview", table)
    on_disk = {p: base_files_on_disk(table, p) for p in ("eu", "us")}
    assert fsview_files(doc) == on_disk
    # eu: one group, one slice; us: one group updated in place -> two slices, oldest first
    (eu,) = doc["partitions"][0]["file_groups"]
    (us,) = doc["partitions"][1]["file_groups"]
    assert [s["base_instant"] for s in eu["slices"]] == [first]
    assert [s["base_instant"] for s in us["slices"]] == [first, second]
    assert all(s["base_file"]["name"].startswith(g["file_id"]) for g in (eu, us) for s in g["slices"])
    # each file names the commit that wrote it and its record count (from the commit's stats)
    assert [(s["base_file"]["commit"], s["log_files"]) for s in us["slices"]] == [(first, []), (second, [])]
    # eu: ids 1 and 3; us: id 2, then ids 2 and 4
    assert [s["base_file"]["records"] for s in eu["slices"] + us["slices"]] == [2, 1, 2]
    assert (eu["pending_compaction"], us["pending_compaction"]) == (None, None)

    as_of = cli_json(capsys, "fsview", table, "--as-of", first)
    assert as_of["as_of"] == first
    assert fsview_files(as_of) == {
        p: {n: size for n, size in files.items() if n.endswith(f"_{first}.parquet")} for p, files in on_disk.items()
    }


def test_fsview_rejects_a_bad_instant(written, capsys):
    code, out, err = cli(capsys, "fsview", written["table"], "--as-of", "2024")
    assert_user_error(code, out, err, "--as-of must be an instant time yyyyMMddHHmmssSSS, got '2024'")


# ---- read ---------------------------------------------------------------------------------
def test_read_writes_one_parquet_file_with_the_exact_rows(written, capsys, tmp_path):
    table, first, second = written["table"], written["first"]["instant"], written["second"]["instant"]

    snapshot = tmp_path / "snapshot.parquet"
    doc = cli_json(capsys, "read", table, "--output", snapshot)
    assert (doc["mode"], doc["rows"], doc["output"]) == ("snapshot", 4, str(snapshot))
    assert data_rows(snapshot) == by_id(SNAPSHOT)
    assert pq.read_table(snapshot).column_names[:5] == list(META_COLUMNS)

    past = tmp_path / "past.parquet"
    code, out, err = cli(capsys, "read", table, "--as-of", first, "--output", past)
    assert (code, out, err) == (0, f"wrote 3 row(s) to {past}\n", "")
    assert data_rows(past) == by_id(FIRST)

    changes = tmp_path / "changes.parquet"
    doc = cli_json(capsys, "read", table, "--since", first, "--until", second, "--output", changes)
    assert (doc["mode"], doc["rows"]) == ("incremental", 2)
    assert data_rows(changes) == by_id(SECOND)
    assert set(pq.read_table(changes).column("_hoodie_commit_time").to_pylist()) == {second}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changes.parquet", "past.parquet", "snapshot.parquet"]


# ---- errors -------------------------------------------------------------------------------
def test_bad_input_exits_2_and_leaves_the_table_untouched(written, capsys, tmp_path):
    table = written["table"]
    before = snapshot_files(table)
    good = write_parquet(tmp_path / "good.parquet", FIRST)
    no_key = tmp_path / "no_key.csv"
    no_key.write_text("name,region,ts,amount\nx,eu,5,1.0\n")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(good.read_bytes()[:100])
    missing = tmp_path / "missing.parquet"
    not_a_table = tmp_path / "not_a_table"
    not_a_table.mkdir()

    code, out, err = cli(capsys, "upsert", table, "--input", missing)
    assert_user_error(code, out, err, f"input file not found: {missing}")

    code, out, err = cli(capsys, "upsert", not_a_table, "--input", good)
    assert_user_error(code, out, err, f"no Hudi table at {not_a_table} (missing .hoodie/hoodie.properties)")
    assert list(not_a_table.iterdir()) == []

    code, out, err = cli(capsys, "upsert", table, "--input", no_key)
    assert_user_error(code, out, err, "the input has no record key column 'id' (columns: name, region, ts, amount)")

    code, out, err = cli(capsys, "insert", table, "--input", corrupt)  # read by pyarrow (the local write)
    assert_user_error(code, out, err)
    assert err.startswith(f"hoodie: error: cannot read {corrupt} as parquet: Could not open Parquet input source")
    code, out, err = cli(capsys, "insert", table, "--input", corrupt, "--option", "hoodie.write.local=never")
    assert_user_error(code, out, err)
    assert err.startswith(f"hoodie: error: cannot read {corrupt} as parquet: [FAILED_READ_FILE")

    code, out, err = cli(capsys, "upsert", table, "--input", good, "--option", "hoodie.no.such=1")
    assert_user_error(code, out, err, "unknown write option 'hoodie.no.such'")

    assert snapshot_files(table) == before


def test_usage_errors_are_one_line(tmp_path, capsys):
    cases = [
        ([], "the following arguments are required: COMMAND"),
        (["upsert", tmp_path], "the following arguments are required: --input"),
        (["upsert", tmp_path, "--input", "x.txt"],
         "cannot tell the format of 'x.txt' from its extension; pass --format parquet|csv|json"),
        (["upsert", tmp_path, "--input", "x.csv", "--option", "novalue"], "--option expects key=value, got 'novalue'"),
        (["read", tmp_path, "--until", "20240101000000000", "--output", tmp_path / "o.parquet"], "--until needs --since"),
        (["read", tmp_path, "--as-of", "20240101000000000", "--since", "20240101000000000", "--output", "o.parquet"],
         "argument --since: not allowed with argument --as-of"),
        (["commits", tmp_path / "none"], f"no Hudi table at {tmp_path / 'none'} (missing .hoodie/hoodie.properties)"),
    ]
    for argv, message in cases:
        code, out, err = cli(capsys, *argv)
        assert_user_error(code, out, err, message)
    assert list(tmp_path.iterdir()) == []


def test_unexpected_errors_are_one_line_with_traceback_only_in_debug(tmp_path, capsys, monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("engine.cli.table_cmds.MetaClient.open", boom)
    monkeypatch.delenv("HOODIE_DEBUG", raising=False)
    assert cli(capsys, "commits", tmp_path) == (1, "", "hoodie: error: unexpected RuntimeError: boom\n")

    monkeypatch.setenv("HOODIE_DEBUG", "1")
    code, out, err = cli(capsys, "commits", tmp_path)
    assert (code, out) == (1, "")
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("hoodie: error: unexpected RuntimeError: boom\n")


# ---- the installed console script ---------------------------------------------------------
def run_hoodie(*argv: object, env: dict[str, str] | None = None,
               drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """The installed `hoodie` with `argv`, in this environment plus `env` and without `drop`."""
    return subprocess.run(
        [str(HOODIE), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop},
    )


def test_console_script_browses_without_spark(written, tmp_path):
    assert HOODIE.is_file(), f"console script not installed at {HOODIE}"
    trace_imports = {"PYTHONPROFILEIMPORTTIME": "1"}  # stderr lists every module imported

    made = run_hoodie(*init_args(tmp_path / "t"), "--json", env=trace_imports)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["path"] == str(tmp_path / "t")
    assert (tmp_path / "t" / METAFOLDER / "hoodie.properties").is_file()
    assert "import time:" in made.stderr and "pyspark" not in made.stderr and "py4j" not in made.stderr

    listed = run_hoodie("commits", written["table"], "--json", env=trace_imports)
    assert listed.returncode == 0, listed.stderr
    assert "pyspark" not in listed.stderr
    instants = json.loads(listed.stdout)["instants"]
    assert [(i["time"], i["state"], i["inserts"], i["updates"]) for i in instants] == [
        (written["first"]["instant"], "completed", 3, 0),
        (written["second"]["instant"], "completed", 1, 1),
    ]


def test_console_script_user_error_is_one_line(written, tmp_path):
    missing = tmp_path / "missing.parquet"
    done = run_hoodie("upsert", written["table"], "--input", missing, env={"HOODIE_DEBUG": "0"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"hoodie: error: input file not found: {missing}\n"

    done = run_hoodie("commits", tmp_path / "nope", "--json")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"hoodie: error: no Hudi table at {tmp_path / 'nope'} (missing .hoodie/hoodie.properties)\n"
    assert "Traceback" not in done.stderr


# ---- the JVM's start-up noise (a fresh JVM per command) ---------------------------------------
INCUBATOR_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"  # the JVM's own, before any config


def test_console_script_starting_spark_prints_only_its_own_output(tmp_path):
    table = tmp_path / "t"
    assert run_hoodie(*init_args(table)).returncode == 0
    done = run_hoodie("upsert", table, "--input", write_parquet(tmp_path / "in.parquet", FIRST), "--json",
                      env={"HOODIE_DEBUG": "0"}, drop=("HOODIE_SPARK_LOG_LEVEL",))
    assert (done.returncode, done.stderr) == (0, "")  # no JVM warning, log4j banner or hadoop warning
    doc = json.loads(done.stdout)
    assert (doc["operation"], doc["inserts"], doc["updates"]) == ("UPSERT", 3, 0)


def test_console_script_bad_input_error_still_shows(tmp_path):
    table = tmp_path / "t"
    assert run_hoodie(*init_args(table)).returncode == 0
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    # read by pyarrow (a parquet input small enough for the local write: no Spark started)
    done = run_hoodie("upsert", table, "--input", bad, env={"HOODIE_DEBUG": "0"}, drop=("HOODIE_SPARK_LOG_LEVEL",))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"hoodie: error: cannot read {bad} as parquet: Could not open Parquet input source '{bad}': Parquet magic"
        " bytes not found in footer. Either the file is corrupted or this is not a parquet file.\n"
    )
    # read by Spark
    done = run_hoodie("upsert", table, "--input", bad, "--option", "hoodie.write.local=never",
                      env={"HOODIE_DEBUG": "0"}, drop=("HOODIE_SPARK_LOG_LEVEL",))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"hoodie: error: cannot read {bad} as parquet: [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER] Encountered error"
        f" while reading file file:{bad}. Could not read footer. Please ensure that the file is in either ORC or"
        " Parquet format.\n"
    )
    assert list(table.joinpath(".hoodie").glob("*.commit*")) == []


def test_console_script_jvm_error_passes_the_filter(tmp_path):
    table = tmp_path / "t"
    assert run_hoodie(*init_args(table)).returncode == 0
    done = run_hoodie("upsert", table, "--input", write_parquet(tmp_path / "in.parquet", FIRST), "--master",
                      "bogus://x", "--option", "hoodie.write.local=never", env={"HOODIE_DEBUG": "0"},
                      drop=("HOODIE_SPARK_LOG_LEVEL",))
    assert (done.returncode, done.stdout) == (1, "")
    lines = done.stderr.splitlines()
    # spark-submit's own report, unchanged, then the CLI's line
    assert lines[0] == ('Exception in thread "main" org.apache.spark.SparkException: Master must either be yarn or'
                        " start with spark, k8s, or local")
    assert lines[1].startswith("\tat org.apache.spark.deploy.SparkSubmit.error(")
    assert all(line.startswith("\tat ") for line in lines[1:-1])
    assert lines[-1] == ("hoodie: error: unexpected PySparkRuntimeError: [JAVA_GATEWAY_EXITED] Java gateway process"
                         " exited before sending its port number.")


def test_console_script_with_spark_log_level_shows_spark_logs(tmp_path):
    table = tmp_path / "t"
    assert run_hoodie(*init_args(table)).returncode == 0
    source = write_parquet(tmp_path / "in.parquet", FIRST)
    # a small parquet input is written locally: no JVM, so no Spark log at all
    done = run_hoodie("upsert", table, "--input", source, "--json", env={"HOODIE_SPARK_LOG_LEVEL": "WARN"})
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["write_path"], done.stderr) == ("local", "")
    done = run_hoodie("upsert", table, "--input", source, "--json", "--option", "hoodie.write.local=never",
                      env={"HOODIE_SPARK_LOG_LEVEL": "WARN"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["write_path"] in ("one-job", "distributed")
    lines = done.stderr.splitlines()
    assert "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties" in lines
    assert 'Setting default log level to "WARN".' in lines
    assert INCUBATOR_WARNING not in lines  # not a log line: never wanted


# ---- table services -------------------------------------------------------------------------
def test_service_commands_dry_run_then_run(spark, tmp_path, capsys):
    from engine import Table

    t = Table.create(spark, str(tmp_path / "s"), name="s", record_key="id", partition_fields="region",
                     precombine_field="ts")
    manual = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
    i1 = t.upsert(spark.createDataFrame([(1, "eu", 1)], "id int, region string, ts long"), options=manual).instant
    i2 = t.upsert(spark.createDataFrame([(1, "eu", 2)], "id int, region string, ts long"), options=manual).instant
    i3 = t.upsert(spark.createDataFrame([(2, "us", 3)], "id int, region string, ts long"), options=manual).instant
    root = Path(t.path)
    before = snapshot_files(root)

    plan = cli_json(capsys, "rollback", root, i3, "--dry-run")
    assert plan["dry_run"] is True and plan["rollback"]["target"]["time"] == i3
    assert [f.rpartition("_")[2] for f in plan["rollback"]["files"]] == [f"{i3}.parquet"]
    plan = cli_json(capsys, "restore", root, i1, "--dry-run")
    assert [i["time"] for i in plan["restore"]["instants"]] == [i3, i2]
    plan = cli_json(capsys, "clean", root, "--dry-run", "--option", "hoodie.cleaner.policy=KEEP_LATEST_FILE_VERSIONS",
                    "--option", "hoodie.cleaner.fileversions.retained=1")
    assert [f.rpartition("_")[2] for fs in plan["clean"]["files"].values() for f in fs] == [f"{i1}.parquet"]
    assert cli_json(capsys, "archive", root, "--dry-run")["archive"] == {"instants": [], "debris": [], "held_back": []}
    assert cli_json(capsys, "repair", root, "--dry-run")["repair"]["failed_writes_rolled_back"] == []
    assert snapshot_files(root) == before  # dry runs change nothing

    code, out, err = cli(capsys, "rollback", root, i1)  # i2 rewrote its file group
    assert_user_error(code, out, err)
    assert f"cannot roll back {i1}: later commit(s) {i2} rewrote or replaced file groups it wrote" in err
    assert snapshot_files(root) == before

    done = cli_json(capsys, "rollback", root, i3)
    assert done["rollback"]["target"] == i3 and len(done["rollback"]["deleted"]) == 1
    sp = cli_json(capsys, "savepoint", "create", root, i2, "--comment", "keep")
    assert sp["savepoint"]["time"] == i2
    listed = cli_json(capsys, "savepoints", root)["savepoints"]
    assert [(s["time"], s["comment"]) for s in listed] == [(i2, "keep")]
    code, out, err = cli(capsys, "savepoints", root)
    assert code == 0 and i2 in out and "keep" in out
    cli_json(capsys, "savepoint", "delete", root, i2)
    assert cli_json(capsys, "savepoints", root)["savepoints"] == []
    res = cli_json(capsys, "restore", root, i1)
    assert res["restore"]["rolled_back"] == [i2]
    commits = cli_json(capsys, "commits", root)["instants"]
    assert [(c["time"], c["action"], c["state"]) for c in commits if c["action"] == "commit"] == [(i1, "commit", "completed")]
    code, out, err = cli(capsys, "rollback", root, "not-an-instant")
    assert_user_error(code, out, err)


# ---- merge-on-read: init --type, compaction, read --read-optimized, fsview with log files ---------
def test_merge_on_read_through_the_cli(tmp_path, capsys):
    table = tmp_path / "mor"
    doc = cli_json(capsys, *init_args(table), "--type", "MERGE_ON_READ")
    assert doc["table_type"] == "MERGE_ON_READ"
    first = cli_json(capsys, "upsert", table, "--input", write_parquet(tmp_path / "a.parquet", FIRST))
    # no small-file packing: the update goes to a log file of the us group's slice
    second = cli_json(capsys, "upsert", table, "--input", write_jsonl(tmp_path / "b.jsonl", SECOND),
                      "--option", "hoodie.parquet.small.file.limit=0")
    assert (second["updates"], second["inserts"]) == (1, 1)
    # fsview: the us group's slice has one log file holding the update
    view = cli_json(capsys, "fsview", table)
    us = {p["partition"]: p for p in view["partitions"]}["us"]
    logs = [lf for g in us["file_groups"] for s in g["slices"] for lf in s["log_files"]]
    assert [(lf["records"], lf["deletes"], lf["commit"]) for lf in logs] == [(1, 0, second["instant"])]
    # the plan of a compaction, then the compaction itself (no Spark)
    before = snapshot_files(table)
    plan = cli_json(capsys, "compaction", "schedule", table, "--dry-run")
    assert plan["dry_run"] is True and len(plan["compaction plan"]["operations"]) == 1
    assert snapshot_files(table) == before  # a dry run changes nothing
    scheduled = cli_json(capsys, "compaction", "schedule", table)["compaction plan"]
    shown = cli_json(capsys, "compaction", "show", table)
    assert [p["instant"] for p in shown["pending"]] == [scheduled["instant"]]
    ran = cli_json(capsys, "compaction", "run", table)["compaction"]
    assert ran["instant"] == scheduled["instant"] and len(ran["files"]) == 1
    assert cli_json(capsys, "compaction", "show", table)["pending"] == []
    # read-optimized now sees the update too
    out = tmp_path / "ro.parquet"
    cli_json(capsys, "read", table, "--read-optimized", "--output", out)
    got = sorted(pq.read_table(out).select(["id", "name"]).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": r["id"], "name": r["name"]} for r in by_id(SNAPSHOT)]
    assert first["instant"] < second["instant"] < ran["instant"]


def test_compaction_of_a_copy_on_write_table_is_a_user_error(written, capsys):
    code, out, err = cli(capsys, "compaction", "schedule", written["table"])
    assert_user_error(code, out, err, "compaction applies to MERGE_ON_READ tables only")
