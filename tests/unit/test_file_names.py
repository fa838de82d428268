"""engine.data.file_names: base/log file names parsed and rendered exactly as Apache Hudi writes them."""

from __future__ import annotations

import re
import uuid
import zipfile
from pathlib import PurePosixPath

import pytest

from engine.data.file_names import (
    BaseFileName,
    LogFileName,
    base_file_name,
    checksum_file_name,
    is_checksum_file,
    is_data_file,
    join_path,
    log_file_name,
    new_file_id,
    parse_base_file_name,
    parse_cdc_log_file_name,
    parse_log_file_name,
    write_token,
)
from tests.support.samples import list_samples, require_samples_dir

# every base file in the sample zips: name -> (file id, write token, instant)
SAMPLE_BASE_FILES = {
    "a22e8257-e249-45e9-ba46-115bc85adcba-0_1-140-199_20240418173213674.parquet": (
        "a22e8257-e249-45e9-ba46-115bc85adcba-0",
        "1-140-199",
        "20240418173213674",
    ),
    "a22e8257-e249-45e9-ba46-115bc85adcba-0_0-161-223_20240418173235694.parquet": (
        "a22e8257-e249-45e9-ba46-115bc85adcba-0",
        "0-161-223",
        "20240418173235694",
    ),
    "bb7c3a45-387f-490d-aab2-981c3f1a8ada-0_0-140-198_20240418173213674.parquet": (
        "bb7c3a45-387f-490d-aab2-981c3f1a8ada-0",
        "0-140-198",
        "20240418173213674",
    ),
    "4668e35e-bff8-4be9-9ff2-e7fb17ecb1a7-0_1-161-224_20240418173235694.parquet": (
        "4668e35e-bff8-4be9-9ff2-e7fb17ecb1a7-0",
        "1-161-224",
        "20240418173235694",
    ),
    "a079bdb3-731c-4894-b855-abfcd6921007-0_0-182-253_20240418173550988.parquet": (
        "a079bdb3-731c-4894-b855-abfcd6921007-0",
        "0-182-253",
        "20240418173550988",
    ),
    "a079bdb3-731c-4894-b855-abfcd6921007-0_0-203-274_20240418173551906.parquet": (
        "a079bdb3-731c-4894-b855-abfcd6921007-0",
        "0-203-274",
        "20240418173551906",
    ),
    "76e0556b-390d-4249-b7ad-9059e2bc2cbd-0_0-98-141_20240418172802262.parquet": (
        "76e0556b-390d-4249-b7ad-9059e2bc2cbd-0",
        "0-98-141",
        "20240418172802262",
    ),
    "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_0-119-166_20240418172804498.parquet": (
        "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0",
        "0-119-166",
        "20240418172804498",
    ),
    "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_1-98-142_20240418172802262.parquet": (
        "97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0",
        "1-98-142",
        "20240418172802262",
    ),
    "6db57019-98ee-480e-8eb1-fb3de48e1c24-0_1-119-167_20240418172804498.parquet": (
        "6db57019-98ee-480e-8eb1-fb3de48e1c24-0",
        "1-119-167",
        "20240418172804498",
    ),
    "d206069c-22c8-4532-b9ea-3cf4282342c4-0_0-13-23_20250117083125837.parquet": (
        "d206069c-22c8-4532-b9ea-3cf4282342c4-0",
        "0-13-23",
        "20250117083125837",
    ),
    "d5c0b12d-088d-48e8-9683-3f0c1eabcaf0-0_1-33-44_20250117083136333.parquet": (
        "d5c0b12d-088d-48e8-9683-3f0c1eabcaf0-0",
        "1-33-44",
        "20250117083136333",
    ),
    "b2506c0e-8ddb-48c0-a683-a1d7d13cae0f-0_0-13-24_20250121000547796.parquet": (
        "b2506c0e-8ddb-48c0-a683-a1d7d13cae0f-0",
        "0-13-24",
        "20250121000547796",
    ),
    "26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_1-13-25_20250121000547796.parquet": (
        "26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0",
        "1-13-25",
        "20250121000547796",
    ),
    "a3ecc652-e61d-4fec-b219-7acbc16ec864-0_1-33-48_20250121000557095.parquet": (
        "a3ecc652-e61d-4fec-b219-7acbc16ec864-0",
        "1-33-48",
        "20250121000557095",
    ),
    "84e82649-b1ee-4a25-a316-17cc6872616b-0_2-13-62_20250331030642808.parquet": (
        "84e82649-b1ee-4a25-a316-17cc6872616b-0",
        "2-13-62",
        "20250331030642808",
    ),
    "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_0-13-60_20250331030642808.parquet": (
        "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0",
        "0-13-60",
        "20250331030642808",
    ),
    "061498b3-e8ef-42f9-9d17-a509b2779501-0_1-13-61_20250331030642808.parquet": (
        "061498b3-e8ef-42f9-9d17-a509b2779501-0",
        "1-13-61",
        "20250331030642808",
    ),
}

# every log file in the sample zips: name -> (file id, base instant, version, write token)
SAMPLE_LOG_FILES = {
    ".d206069c-22c8-4532-b9ea-3cf4282342c4-0_20250117083125837.log.1_0-33-43": (
        "d206069c-22c8-4532-b9ea-3cf4282342c4-0",
        "20250117083125837",
        1,
        "0-33-43",
    ),
    ".26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0_20250121000547796.log.1_0-33-47": (
        "26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0",
        "20250121000547796",
        1,
        "0-33-47",
    ),
    ".d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0_20250331030642808.log.1_0-26-85": (
        "d0304c53-6fd2-4b7a-a9d6-5ff632f79224-0",
        "20250331030642808",
        1,
        "0-26-85",
    ),
}


def _zip_data_file_names() -> tuple[set[str], set[str]]:
    """Base and log file names found in all sample zips (outside `.hoodie/` and `__MACOSX/`)."""
    root = require_samples_dir()
    bases: set[str] = set()
    logs: set[str] = set()
    for name in list_samples():
        with zipfile.ZipFile(root / f"{name}.zip") as zf:
            for member in zf.namelist():
                parts = PurePosixPath(member).parts
                if not parts or parts[0] == "__MACOSX" or ".hoodie" in parts or member.endswith("/"):
                    continue
                leaf = parts[-1]
                if leaf.endswith(".parquet"):
                    bases.add(leaf)
                elif ".log." in leaf:
                    logs.add(leaf)
    return bases, logs


def test_sample_zips_hold_exactly_the_known_data_files() -> None:
    bases, logs = _zip_data_file_names()
    assert bases == set(SAMPLE_BASE_FILES)
    assert logs == set(SAMPLE_LOG_FILES)


@pytest.mark.parametrize("name", sorted(SAMPLE_BASE_FILES))
def test_parse_and_render_sample_base_file(name: str) -> None:
    file_id, token, instant = SAMPLE_BASE_FILES[name]
    parsed = parse_base_file_name(name)
    assert parsed == BaseFileName(file_id, token, instant)
    assert parsed.name == name
    assert base_file_name(file_id, token, instant) == name
    assert parse_log_file_name(name) is None


@pytest.mark.parametrize("name", sorted(SAMPLE_LOG_FILES))
def test_parse_and_render_sample_log_file(name: str) -> None:
    file_id, base_instant, version, token = SAMPLE_LOG_FILES[name]
    parsed = parse_log_file_name(name)
    assert parsed == LogFileName(file_id, base_instant, version, token)
    assert parsed.name == name
    assert log_file_name(file_id, base_instant, version, token) == name
    assert parse_base_file_name(name) is None


def test_log_file_without_token_and_multi_digit_version() -> None:
    name = ".d206069c-22c8-4532-b9ea-3cf4282342c4-0_20250117083125837.log.12"
    parsed = parse_log_file_name(name)
    assert parsed == LogFileName("d206069c-22c8-4532-b9ea-3cf4282342c4-0", "20250117083125837", 12, None)
    assert parsed.name == name
    withtok = log_file_name("f-0", "20250117083125837", 12, "3-4-5")
    assert withtok == ".f-0_20250117083125837.log.12_3-4-5"
    assert parse_log_file_name(withtok) == LogFileName("f-0", "20250117083125837", 12, "3-4-5")


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".hoodie_partition_metadata",
        ".DS_Store",
        "hoodie.properties",
        "20240418173213674.commit",
        "foo.parquet",
        "a079bdb3-0_0-1-2.parquet",  # no instant
        "a079bdb3-0_0-1-2_2024041817355098.parquet",  # 16-digit instant
        "a079bdb3-0_0-1-2_20240418173550988.parquet.crc",
        "a079bdb3-0_0-1-2_20240418173550988.orc",
        "a079bdb3-0_20240418173550988.parquet",  # no token
        "a_079bdb3-0_0-1-2_20240418173550988.parquet",  # extra underscore
        "p/a079bdb3-0_0-1-2_20240418173550988.parquet",  # a path, not a name
    ],
)
def test_bad_base_names_parse_to_none(name: str) -> None:
    assert parse_base_file_name(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".hoodie_partition_metadata",
        "d206069c-0_20250117083125837.log.1_0-33-43",  # no leading dot
        ".d206069c-0_20250117083125837.log._0-33-43",  # no version
        ".d206069c-0_20250117083125837.log.x_0-33-43",
        ".d206069c-0_2025011708312583.log.1_0-33-43",  # 16-digit instant
        ".d206069c-0.log.1_0-33-43",  # no instant
        ".d206069c-0_20250117083125837.1_0-33-43",  # no .log
        "d206069c-0_0-13-23_20250117083125837.parquet",
    ],
)
def test_bad_log_names_parse_to_none(name: str) -> None:
    assert parse_log_file_name(name) is None


def test_base_file_name_rejects_bad_parts() -> None:
    with pytest.raises(ValueError):
        base_file_name("a_b-0", "0-1-2", "20240418173550988")
    with pytest.raises(ValueError):
        base_file_name("ab-0", "0_1-2", "20240418173550988")
    with pytest.raises(ValueError):
        base_file_name("ab-0", "0-1-2", "2024")


def test_new_file_id_format() -> None:
    pattern = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-0$")
    ids = {new_file_id() for _ in range(50)}
    assert len(ids) == 50
    for fid in ids:
        assert pattern.match(fid), fid
        assert uuid.UUID(fid[:-2]).version == 4
    seed = uuid.UUID("a079bdb3-731c-4894-b855-abfcd6921007")
    assert new_file_id(seed) == "a079bdb3-731c-4894-b855-abfcd6921007-0"
    # a new file id makes a parseable base file name
    fid = new_file_id(seed)
    name = base_file_name(fid, write_token(0, 1, 2), "20240418173550988")
    assert name == "a079bdb3-731c-4894-b855-abfcd6921007-0_0-1-2_20240418173550988.parquet"
    assert parse_base_file_name(name) == BaseFileName(fid, "0-1-2", "20240418173550988")


def test_write_token() -> None:
    assert write_token(1, 2, 3) == "1-2-3"
    assert write_token(0, 140, 199) == "0-140-199"


def test_join_path() -> None:
    assert join_path("", "f.parquet") == "f.parquet"
    assert join_path("10", "f.parquet") == "10/f.parquet"
    assert join_path("byteField=10/shortField=300", "f.parquet") == "byteField=10/shortField=300/f.parquet"


# ---- the recognizer: only Hudi files count (issue 32) ------------------------------------------------

_FID = "dfa23995-c289-4e1a-8498-cf48f0d64b70-0"
_LOG = f".{_FID}_20250728220725044.log.1_0-47-193"
_BASE = f"{_FID}_0-47-193_20250728220725044.parquet"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (_BASE, "base"),
        (_LOG, "log"),
        (f".{_FID}_20250728220725044.log.12", "log"),  # no write token (older writers)
        (f"{_LOG}.cdc", "cdc"),  # change data capture: Hudi's CDC_LOGFILE_SUFFIX after the token
        ("files-0000-0_0-6-5_00000000000000010.parquet", "base"),  # metadata table style ids
        (".record-index-0001-0_20250728220725044.log.3_2-10-7", "log"),
        # Hadoop's checksum files beside each of them (its local file system writes them)
        (checksum_file_name(_BASE), "checksum"),
        (checksum_file_name(_LOG), "checksum"),  # ..<fid>_<instant>.log.1_0-47-193.crc: the reported one
        (checksum_file_name(f"{_LOG}.cdc"), "checksum"),
        (checksum_file_name(".hoodie_partition_metadata"), "checksum"),
        # other things found in partitions
        (".hoodie_partition_metadata", "other"),
        (".hoodie_partition_metadata.parquet", "other"),
        ("_SUCCESS", "other"),
        (".DS_Store", "other"),
        (f".{_BASE}.3f9a2b.tmp", "other"),  # this engine's local temp file
        (f"{_BASE}.marker.CREATE", "other"),
        (".commits_.archive.1_1-0-1", "other"),  # an archived timeline file (.hoodie/archived)
        (f".{_FID}_20250728220725044.log.1_0-47-193.bak", "other"),
        (f".{_FID}_20250728220725044.log.1_abc", "other"),  # a token Hudi never writes
        (f"{_FID}_0-47-193_20250728220725044.parquet.tmp", "other"),
        (f"{_FID}_0-47-193_20250728220725044.orc", "other"),  # not a parquet table's base file
    ],
)
def test_the_recognizer_knows_every_hudi_file_kind_and_ignores_the_rest(name: str, kind: str) -> None:
    got = ("base" if parse_base_file_name(name) else "log" if parse_log_file_name(name)
           else "cdc" if parse_cdc_log_file_name(name) else "checksum" if is_checksum_file(name) else "other")
    assert got == kind
    assert is_data_file(name) is (kind in ("base", "log", "cdc"))


def test_a_cdc_log_name_parses_to_its_log_parts() -> None:
    parsed = parse_cdc_log_file_name(f"{_LOG}.cdc")
    assert parsed == LogFileName(_FID, "20250728220725044", 1, "0-47-193")
    assert f"{parsed.name}.cdc" == f"{_LOG}.cdc"
    assert parse_log_file_name(f"{_LOG}.cdc") is None  # not a file slice's data


def test_checksum_names_are_hadoops() -> None:
    assert checksum_file_name(_BASE) == f".{_BASE}.crc"
    assert checksum_file_name(_LOG) == f"..{_LOG[1:]}.crc"
    assert is_checksum_file(".x.crc") and not is_checksum_file("x.crc") and not is_checksum_file(".x.crc.tmp")
