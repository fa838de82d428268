"""Tables of versions 4 and 5 (Apache Hudi 0.11 to 0.13) for the tests, made from tables Apache
Hudi 0.14/0.15 wrote (version 6) by Apache Hudi's own downgrade steps.

No table Apache Hudi 0.11-0.13 wrote is reachable from CI (the ones in Apache Hudi's test resources
and in query engines' connector tests live on GitHub only; none ships in a package on PyPI or npm,
which is all CI reaches). Apache Hudi's downgrade path writes exactly the tables its older
versions read, and version 4/5 tables differ from version 6 on disk by no more than these steps:

- `SixToFiveDowngradeHandler`: each requested compaction plan is copied to
  `.hoodie/.aux/<instant>.compaction.requested`; `hoodie.table.version=5`;
- `FiveToFourDowngradeHandler`: `hoodie.table.version=4` (nothing else changes on disk);
- a version 4 table wrote a null partition value as `default` (0.12 on: `__HIVE_DEFAULT_PARTITION__`):
  `with_default_partition` adds such a partition folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import javaproperties


def set_version(table: Path, version: int) -> None:
    """Rewrite `hoodie.properties` with `hoodie.table.version=<version>`, every other entry kept."""
    path = table / ".hoodie" / "hoodie.properties"
    props = javaproperties.loads(path.read_text(encoding="utf-8"))
    props["hoodie.table.version"] = str(version)
    path.write_text("#Updated at 2023-03-01T00:00:00Z\n" + javaproperties.dumps(props, timestamp=False, sort_keys=False),
                    encoding="utf-8")


def downgrade(table: Path, version: int) -> None:
    """Downgrade the version 6 table at `table` to `version` (5 or 4) as Apache Hudi does."""
    assert version in (4, 5)
    hoodie = table / ".hoodie"
    aux = hoodie / ".aux"
    for plan in hoodie.glob("*.compaction.requested"):  # SixToFive: sync requested plans to .aux
        aux.mkdir(exist_ok=True)
        shutil.copyfile(plan, aux / plan.name)
    set_version(table, version)


def with_default_partition(table: Path, hive_field: str | None = None) -> None:
    """A partition folder `default` (`<field>=default` when hive-style), as Apache Hudi 0.11
    (version 4) named the partition of null values, holding its partition metadata file: what
    Apache Hudi's 4 -> 5 upgrade check looks for."""
    folder = table / (f"{hive_field}=default" if hive_field else "default")
    folder.mkdir()
    (folder / ".hoodie_partition_metadata").write_text(
        "#partition metadata\ncommitTime=20230301000000000\npartitionDepth=1\n", encoding="utf-8")
