"""The LSM archived timeline of layout 2 (engine.timeline.lsm): names, manifests, compaction
choice; the slicing of archived instants' log files by their completion time from the history."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from engine.errors import CorruptTableError, InvalidInputError
from engine.services.archive_lsm import encode_parquet
from engine.table.fs_view import DataFile, FileSystemView
from engine.timeline import lsm
from engine.timeline.instant import Action, Instant, State
from engine.timeline.timeline import Timeline

A, B, C, D = "20250101000000001", "20250101000000002", "20250101000000003", "20250101000000004"


def test_data_file_names_round_trip_and_other_names_are_not_data_files() -> None:
    assert lsm.data_file_name(A, C, 0) == f"{A}_{C}_0.parquet"
    assert lsm.parse_data_file_name(f"{A}_{C}_1.parquet") == lsm.DataFileName(A, C, 1)
    assert lsm.parse_data_file_name(f"{A}_{C}_1.parquet").name == f"{A}_{C}_1.parquet"
    for other in ("manifest_1", "_version_", f"{A}_{C}_10.parquet", f"{A}_{C}_0.parquet.crc", f"{A}_0.parquet"):
        assert lsm.parse_data_file_name(other) is None, other
    assert lsm.batch_file_name([A, B, C]) == f"{A}_{C}_0.parquet"
    with pytest.raises(InvalidInputError):
        lsm.data_file_name(C, A, 0)
    with pytest.raises(InvalidInputError):
        lsm.batch_file_name([])


def test_manifest_and_version_names() -> None:
    assert lsm.manifest_name(1) == "manifest_1"
    assert lsm.parse_manifest_name("manifest_12") == 12
    assert lsm.parse_manifest_name("manifest_12.tmp") is None
    assert lsm.parse_manifest_name("_version_") is None
    with pytest.raises(InvalidInputError):
        lsm.manifest_name(0)
    assert lsm.parse_version_file(b"7") == 7
    assert lsm.parse_version_file(lsm.encode_version_file(12)) == 12
    assert lsm.parse_version_file(b"") is None and lsm.parse_version_file(b"\xff") is None


def test_manifest_json_is_jacksons_pretty_print_and_round_trips() -> None:
    m = lsm.Manifest().with_file(lsm.ManifestEntry(f"{A}_{B}_0.parquet", 1234))
    m = m.with_file(lsm.ManifestEntry(f"{C}_{D}_0.parquet", 99))
    assert m.to_json().decode() == (
        "{\n"
        '  "files" : [ {\n'
        f'    "fileName" : "{A}_{B}_0.parquet",\n'
        '    "fileLen" : 1234\n'
        "  }, {\n"
        f'    "fileName" : "{C}_{D}_0.parquet",\n'
        '    "fileLen" : 99\n'
        "  } ]\n"
        "}"
    )
    assert json.loads(m.to_json()) == {"files": [{"fileName": f"{A}_{B}_0.parquet", "fileLen": 1234},
                                                 {"fileName": f"{C}_{D}_0.parquet", "fileLen": 99}]}
    assert lsm.Manifest.from_json(m.to_json()) == m
    assert lsm.Manifest().to_json() == b'{\n  "files" : [ ]\n}'
    assert lsm.Manifest.from_json(lsm.Manifest().to_json()) == lsm.Manifest()
    assert lsm.Manifest.from_json(b"") == lsm.Manifest()
    # unknown fields are ignored, as Java's @JsonIgnoreProperties(ignoreUnknown = true)
    assert lsm.Manifest.from_json(b'{"files":[{"fileName":"x","fileLen":3,"other":1}],"v":2}').file_names == ["x"]
    with pytest.raises(CorruptTableError):
        lsm.Manifest.from_json(b"{not json")
    compacted = m.with_file(lsm.ManifestEntry(f"{A}_{D}_1.parquet", 5), removing=[f"{A}_{B}_0.parquet"])
    assert compacted.file_names == [f"{C}_{D}_0.parquet", f"{A}_{D}_1.parquet"]


def _manifest(names_sizes: list[tuple[str, int]]) -> lsm.Manifest:
    return lsm.Manifest(tuple(lsm.ManifestEntry(n, s) for n, s in names_sizes))


def _l0(i: int) -> str:
    return lsm.data_file_name(f"2025010100000{i:04d}", f"2025010100000{i:04d}", 0)


def test_compaction_waits_for_a_full_layer_then_takes_the_oldest_batch() -> None:
    files = [(_l0(i), 10) for i in range(12)]
    assert lsm.compaction_candidates(_manifest(files[:9]), 0, batch_size=10) == []
    # listed out of order: chosen by name (min instant first), at most the batch size
    shuffled = _manifest(list(reversed(files)))
    assert lsm.compaction_candidates(shuffled, 0, batch_size=10) == [_l0(i) for i in range(10)]
    assert lsm.compaction_candidates(shuffled, 1, batch_size=10) == []
    assert lsm.compacted_file_name([_l0(i) for i in range(10)]) == (
        f"{'2025010100000' + '0000'}_{'2025010100000' + '0009'}_1.parquet")
    with pytest.raises(InvalidInputError):
        lsm.compaction_candidates(shuffled, 0, batch_size=1)


def test_compaction_respects_the_size_cap() -> None:
    # the first file alone passes the cap: the run restarts after it
    files = [(_l0(0), 500), *[(_l0(i), 10) for i in range(1, 4)]]
    assert lsm.compaction_candidates(_manifest(files), 0, batch_size=4, max_bytes=100) == [_l0(1), _l0(2), _l0(3)]
    # the run stops once two or more files pass the cap together
    files = [(_l0(i), 60) for i in range(4)]
    assert lsm.compaction_candidates(_manifest(files), 0, batch_size=4, max_bytes=100) == [_l0(0), _l0(1)]


def test_versions_to_clean_keep_three_plus_one_per_compacted_layer() -> None:
    assert lsm.versions_to_clean([1, 2, 3], 1) == ([3, 2, 1], [])
    assert lsm.versions_to_clean(range(1, 8), 1) == ([7, 6, 5, 4], [3, 2, 1])
    assert lsm.versions_to_clean(range(1, 8), 0) == ([7, 6, 5], [4, 3, 2, 1])


def test_parquet_rows_carry_the_avro_schema_as_parquet_avro_writes_it() -> None:
    rows = [lsm.instant_row(A, B, "commit", b"Obj\x01meta", None),
            lsm.instant_row(C, D, "clean", b"", b"plan")]
    data = encode_parquet(rows)
    f = pq.ParquetFile(io.BytesIO(data))
    kv = f.metadata.metadata
    assert json.loads(kv[b"parquet.avro.schema"]) == lsm.INSTANT_SCHEMA
    assert kv[b"writer.model.name"] == b"avro"
    assert b"ARROW:schema" not in kv
    assert f.schema_arrow.names == list(lsm.COLUMNS)
    parquet_schema = str(f.schema)
    assert "optional binary field_id=-1 instantTime (String)" in parquet_schema
    assert "optional binary field_id=-1 metadata;" in parquet_schema
    assert "required int32 field_id=-1 version;" in parquet_schema
    assert f.read().to_pylist() == [
        {"instantTime": A, "completionTime": B, "action": "commit", "metadata": b"Obj\x01meta", "plan": None,
         "version": 1},
        {"instantTime": C, "completionTime": D, "action": "clean", "metadata": None, "plan": b"plan", "version": 1},
    ]


F1 = "11111111-1111-4111-8111-111111111111-0"


def test_an_archived_log_is_sliced_by_its_completion_time_from_the_history() -> None:
    """Deltacommit A (archived) began before compaction B and completed after it: its log belongs
    to B's slice, which only the history's completion time can say."""
    tl = Timeline((Instant(B, Action.COMMIT, State.COMPLETED, C), Instant(D, Action.DELTA_COMMIT, State.COMPLETED, D)))
    files = [DataFile(f"p/{F1}_0-1-2_{'20250101000000000'}.parquet", 10),
             DataFile(f"p/{F1}_0-1-2_{B}.parquet", 10),
             DataFile(f"p/.{F1}_{A}.log.1_0-1-2", 5)]
    without = FileSystemView.build(files, tl).group("p", F1)
    assert [(s.base_instant, [lf.name.base_instant for lf in s.log_files]) for s in without.slices] == [
        ("20250101000000000", [A]), (B, [])]
    calls = []

    def history() -> dict[str, str]:
        calls.append(1)
        return {A: "20250101000000002", "20250101000000000": "20250101000000000"}  # A completed at B

    with_history = FileSystemView.build(files, tl, archived_completions=history).group("p", F1)
    assert [(s.base_instant, [lf.name.base_instant for lf in s.log_files]) for s in with_history.slices] == [
        ("20250101000000000", []), (B, [A])]
    assert calls == [1]
    # no log older than the active timeline: the history is not read
    FileSystemView.build(files[:2], tl, archived_completions=history)
    assert calls == [1]
