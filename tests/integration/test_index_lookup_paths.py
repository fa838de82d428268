"""Every index type x both `update.partition.path` settings x each lookup path (issue 33.5).

A write looks its keys up in one of two ways: the planned path tags in a Spark job
(`hoodie.write.driver.plan=never`), the one-job path on the driver (`Index.locate_batch`, `always`;
the GLOBAL_BLOOM crash of 2026-11-26 lived there, with in-place updates). Global indexes with
`update.partition.path=true` never take the driver path (a moved record is deleted in one group and
inserted in another), so that combination runs once. Each case: a random sequence of upserts
(new keys, updates in place, partition changes, in-batch duplicates) and deletes over three
partitions; after every write our snapshot equals the model, and at the end hudi-rs agrees and
`read_keys` finds exactly the model's records.
"""

from __future__ import annotations

import random

import pytest

from engine import Table
from tests.support import hudi_rs
from tests.support.tables import rows

pytestmark = [pytest.mark.spark, pytest.mark.hbase]

SCHEMA = "id int, name string, city string, ts long"
CITIES = ("oslo", "lima", "rome")
NON_GLOBAL = ["SIMPLE", "BLOOM"]
GLOBAL = ["GLOBAL_SIMPLE", "GLOBAL_BLOOM", "HBASE", "RECORD"]
CASES = (
    [(i, None, path) for i in NON_GLOBAL for path in ("spark", "driver")]
    + [(i, True, "spark") for i in GLOBAL]
    + [(i, False, path) for i in GLOBAL for path in ("spark", "driver")]
)


class Model:
    def __init__(self, is_global: bool, update_pp: bool) -> None:
        self.is_global, self.update_pp = is_global, update_pp
        self.rows: dict[tuple[int, str], tuple[str, int, str]] = {}  # (key, stored partition) -> (name, ts, city)

    def _find(self, key: int, city: str) -> tuple[int, str] | None:
        if not self.is_global:
            return (key, city) if (key, city) in self.rows else None
        return next((k for k in self.rows if k[0] == key), None)

    def upsert(self, batch: list[tuple]) -> None:
        winners: dict[tuple, tuple] = {}
        for row in batch:  # in-batch: the largest ts wins, the later row on a tie
            k = row[0] if self.is_global else (row[0], row[2])
            if k not in winners or row[3] >= winners[k][3]:
                winners[k] = row
        for key, name, city, ts in winners.values():
            found = self._find(key, city)
            if found is not None and self.rows[found][1] > ts:
                continue  # the stored record wins (event-time ordering)
            if found is not None and (found[1] == city or not self.update_pp):
                self.rows[found] = (name, ts, city)
            else:
                if found is not None:
                    del self.rows[found]
                self.rows[(key, city)] = (name, ts, city)

    def delete(self, batch: list[tuple]) -> None:
        for key, city in batch:
            found = self._find(key, city)
            if found is not None:
                del self.rows[found]

    def expected(self) -> list[tuple]:
        return sorted((k, v[0], v[2], v[1], part) for (k, part), v in self.rows.items())


def _snapshot(t: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"], r["_hoodie_partition_path"]) for r in rows(t.read()))


@pytest.mark.parametrize(("index", "update_pp", "path"), CASES)
def test_random_writes_through_each_lookup_path_match_the_model(spark, tmp_path, hbase_options, index, update_pp, path):
    rng = random.Random(f"{index}-{update_pp}-{path}")
    t = Table.create(spark, str(tmp_path / "t"), name=f"l_{index.lower()}", record_key="id", partition_fields="city",
                     precombine_field="ts", index=index)
    opts = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
            "hoodie.write.driver.plan": "always" if path == "driver" else "never"}
    if update_pp is not None:
        opts["hoodie.index.update.partition.path"] = str(update_pp).lower()
    if index == "HBASE":
        opts.update(hbase_options())
    model = Model(index in GLOBAL, bool(update_pp))
    first = [(k, "s0", CITIES[k % 3], 1) for k in range(1, 9)]  # every partition holds keys
    t.upsert(spark.createDataFrame(first, SCHEMA), options=opts)
    model.upsert(first)
    for n in range(1, 4):
        if n == 3:
            batch = [(k, rng.choice(CITIES)) for k in rng.sample(range(1, 11), 3)]
            t.delete(spark.createDataFrame([(k, "x", c, 0) for k, c in batch], SCHEMA), options=opts)
            model.delete(batch)
        else:
            batch = [(rng.randint(1, 10), f"s{n}r{i}", rng.choice(CITIES), rng.randint(0, 3)) for i in range(6)]
            t.upsert(spark.createDataFrame(batch, SCHEMA), options=opts)
            model.upsert(batch)
        assert _snapshot(t) == model.expected(), (n, batch)
    theirs = sorted((r["id"], r["name"], r["city"], r["ts"], r["_hoodie_partition_path"]) for r in hudi_rs.snapshot(t.path))
    assert theirs == model.expected()
    found = sorted((r["id"], r["name"], r["city"], r["ts"], r["_hoodie_partition_path"])
                   for r in rows(t.read_keys([str(k) for k in range(1, 12)], options=opts)))
    assert found == model.expected()
