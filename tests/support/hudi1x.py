"""Tables written by Apache Hudi 1.x (table versions 8 and 9), fetched for the tests (issue 18).

hudi-rs keeps such tables, each zipped with a Spark `SELECT *` snapshot of it (`gold_data/`), in
its test crate; the PyPI source package `hudi==0.5.0` ships that crate (Apache-2.0). CI reaches
PyPI, so the tests fetch the package from the package index (PEP 503 simple page of
`PIP_INDEX_URL`, default PyPI), check its pinned SHA-256, and keep the zips in a cache folder
(`HOODIE_FIXTURE_CACHE`, default `~/.cache/hoodie-tests`). Nothing is copied into the project.
Where the fetch fails the calling test is skipped with the reason; with `CI=true` it fails.

A zip holds the table folder (named like the zip) and, beside it, `gold_data/` (one parquet) and
often `gold_options/`. `__MACOSX/` entries are left out when unpacking; Hadoop's `.crc` checksum
files beside the table's files stay, as Apache Hudi left them (issue 32: only Hudi's files are
Hudi's), unless `checksums=False`.
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

SDIST = "hudi-0.5.0.tar.gz"
SDIST_SHA256 = "dc8e1f3405d262491b97e8f009bcae2cbd66279dd2a8300b738ecdc3d9cba51d"
DATA_PREFIX = "hudi-0.5.0/crates/test/data/"
CORE_DATA_PREFIX = "hudi-0.5.0/crates/core/tests/data/"
CORE_DATA_FOLDERS = ("hfile/", "metadata_slices/")


def cache_dir() -> Path:
    return Path(os.environ.get("HOODIE_FIXTURE_CACHE") or Path.home() / ".cache" / "hoodie-tests")


def _fail_or_skip(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def _sdist_url(index: str) -> str:
    page_url = index.rstrip("/") + "/hudi/"
    with urllib.request.urlopen(page_url, timeout=60) as response:  # noqa: S310 (the package index)
        parser = _Links()
        parser.feed(response.read().decode("utf-8", "replace"))
    for href in parser.hrefs:
        if urllib.parse.urlparse(href).path.rsplit("/", 1)[-1] == SDIST:
            return urllib.parse.urljoin(page_url, href)
    raise FileNotFoundError(f"{SDIST} is not listed on {page_url}")


def _fetch_sdist(target: Path) -> None:
    index = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple"
    url = _sdist_url(index)
    partial = target.with_suffix(".partial")
    with urllib.request.urlopen(url, timeout=300) as response, open(partial, "wb") as out:  # noqa: S310
        while chunk := response.read(1 << 20):
            out.write(chunk)
    digest = hashlib.sha256(partial.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        partial.unlink()
        raise ValueError(f"{url}: sha256 {digest}, expected {SDIST_SHA256}")
    partial.replace(target)


def data_dir() -> Path:
    """The folder of hudi-rs's fixture zips (fetched once); skips (fails with CI=true) if it cannot be had."""
    return _extracted("hudi-rs-0.5.0-data", DATA_PREFIX, (".zip",))


def core_data_dir() -> Path:
    """hudi-rs's own HFile test files (`hfile/`: HFiles HBase wrote for Hudi 1.0's tests;
    `metadata_slices/`: metadata-table HFiles Hudi's HFileWriterImpl wrote, see its README.md)."""
    return _extracted("hudi-rs-0.5.0-core-data", CORE_DATA_PREFIX, (".hfile", ".avsc", ".md"), CORE_DATA_FOLDERS)


def _extracted(folder: str, prefix: str, suffixes: tuple[str, ...], subfolders: tuple[str, ...] = ("",)) -> Path:
    root = cache_dir()
    data = root / folder
    if (data / ".complete").exists():
        return data
    try:
        root.mkdir(parents=True, exist_ok=True)
        sdist = root / SDIST
        if not sdist.exists():
            _fetch_sdist(sdist)
        data.mkdir(exist_ok=True)
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                if (member.isfile() and member.name.startswith(prefix) and member.name.endswith(suffixes)
                        and member.name[len(prefix):].startswith(subfolders)):
                    rel = member.name[len(prefix):]
                    if ".." in Path(rel).parts:
                        continue
                    dest = data / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    dest.write_bytes(source.read())
        (data / ".complete").write_text(SDIST_SHA256)
    except (OSError, ValueError, tarfile.TarError) as exc:
        _fail_or_skip(f"Hudi 1.x fixtures unavailable ({SDIST} from the package index): {exc}")
    return data


@dataclass(frozen=True)
class Fixture:
    name: str  # e.g. "sample_table/cow/v8_nonpartitioned"
    table: Path  # the table folder
    gold: Path | None  # the folder of the Spark snapshot (one parquet), if the zip has one



def fixture(name: str, tmp_dir: Path, checksums: bool = True) -> Fixture:
    """Unpack fixture `name` into `tmp_dir` (no `__MACOSX/`; `.crc` files unless `checksums=False`)."""
    archive = data_dir() / f"{name}.zip"
    if not archive.is_file():
        raise FileNotFoundError(f"no Hudi 1.x fixture {name!r} in {archive.parent}")
    stem = Path(name).name
    target = Path(tmp_dir) / stem
    with zipfile.ZipFile(archive) as zf:
        for member in zf.infolist():
            parts = Path(member.filename).parts
            if (not parts or parts[0] == "__MACOSX" or ".." in parts or Path(member.filename).is_absolute()
                    or (not checksums and member.filename.endswith(".crc"))):
                continue
            zf.extract(member, target)
    table = target / stem
    if not (table / ".hoodie").is_dir():
        raise FileNotFoundError(f"fixture {name!r} holds no table folder {stem}/")
    gold = target / "gold_data"
    return Fixture(name, table, gold if gold.is_dir() else None)
