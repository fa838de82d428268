"""Property test: random sequences of upsert, delete, rollback (of the latest or an older commit),
restore, savepoint and clean against an in-memory model of the table; zero divergence after every
step, and hudi-rs agrees at the end. On tables of version 6 and of version 8 (timeline layout 2)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine import Table
from engine.errors import RollbackRefusedError
from engine.services.maintenance import Maintenance
from tests.support import hudi_rs
from tests.support.metadata_check import metadata_in_step
from tests.support.tables import rows

pytestmark = pytest.mark.spark

SCHEMA = "id int, name string, city string, ts long"
MANUAL = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
KEYS = st.integers(min_value=1, max_value=8)


def city(key: int) -> str:
    return "paris" if key % 2 else "rome"


OPS = st.one_of(
    st.tuples(st.just("upsert"), st.lists(KEYS, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("rollback"), st.just(None)),
    st.tuples(st.just("rollback_older"), st.integers(min_value=0, max_value=10)),
    st.tuples(st.just("restore"), st.integers(min_value=0, max_value=10)),
    st.tuples(st.just("savepoint"), st.just(None)),
    st.tuples(
        st.just("clean"),
        st.tuples(st.sampled_from(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]), st.integers(1, 2)),
    ),
)


class Model:
    """The table as a list of (instant, state) per completed commit, plus savepoints and cleans."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, dict[int, tuple]]] = []
        self.ops: list[tuple[str, list[tuple]]] = []  # per commit: ("upsert" | "delete", rows)
        self.savepoints: set[str] = set()
        self.cleaned_after: str | None = None  # the newest commit time before the last clean ran

    @property
    def state(self) -> dict[int, tuple]:
        return dict(self.commits[-1][1]) if self.commits else {}

    def expected(self) -> list[tuple]:
        return sorted(self.state.values())

    def replay(self) -> None:
        """Recompute every commit's state from the ops (after a commit was taken out)."""
        state: dict[int, tuple] = {}
        for n, (kind, batch) in enumerate(self.ops):
            state = dict(state)
            for row in batch:
                if kind == "upsert":
                    state[row[0]] = row
                else:
                    state.pop(row[0], None)
            self.commits[n] = (self.commits[n][0], state)

    def touched(self, n: int) -> tuple[set[str], set[int]]:
        """Partitions commit n rewrote and keys it took out (one file group per partition here)."""
        kind, batch = self.ops[n]
        before = self.commits[n - 1][1] if n else {}
        if kind == "upsert":
            return {city(r[0]) for r in batch}, set()
        gone = {r[0] for r in batch if r[0] in before}
        return {city(k) for k in gone}, gone


def ours(t: Table) -> list[tuple]:
    return sorted((r["id"], r["name"], r["city"], r["ts"]) for r in rows(t.read()))


@pytest.mark.parametrize("version", [6, 8])
@settings(max_examples=16, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=5, max_size=9))
def test_random_service_sequences_match_the_model(spark, version, ops):
    root = tempfile.mkdtemp(prefix="hoodie-prop-")
    try:
        t = Table.create(spark, f"{root}/t", name="trips", record_key="id", partition_fields="city",
                         precombine_field="ts", table_version=version)
        model = Model()
        for step, (op, arg) in enumerate(ops):
            apply(spark, t, model, step, op, arg)
            assert ours(t) == model.expected(), (step, op, arg)
            # version 8: created with a metadata table, which every step keeps (restores too)
            metadata_in_step(t.path, required=version >= 8)
        assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(t.path)) == model.expected()
        assert list(t.timeline().pending) == []
        if version >= 8:  # nothing written in timeline layout 1's place
            assert not [n for n in os.listdir(f"{root}/t/.hoodie") if "commit" in n or "clean" in n
                        or "rollback" in n or "restore" in n or "savepoint" in n]
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@settings(max_examples=6, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=5, max_size=9))
def test_random_sequences_keep_the_metadata_table(spark, table_type, ops):
    """Issue 35: the same random sequences on a version 9 table whose writes ask for Apache Hudi's
    metadata table: after every step our reads equal the model and its files partition equals the
    recomputation from storage (restores keep it); at the end hudi-rs, which lists through it,
    agrees."""
    root = tempfile.mkdtemp(prefix="hoodie-prop-mdt-")
    options = {**MANUAL, "hoodie.metadata.enable": "true"}
    try:
        t = Table.create(spark, f"{root}/t", name="trips", record_key="id", partition_fields="city",
                         precombine_field="ts", table_version=9, table_type=table_type)
        model = Model()
        for step, (op, arg) in enumerate(ops):
            apply(spark, t, model, step, op, arg, options)
            assert ours(t) == model.expected(), (step, op, arg)
            metadata_in_step(t.path, required=True)
        assert sorted((r["id"], r["name"], r["city"], r["ts"]) for r in hudi_rs.snapshot(t.path)) == model.expected()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def apply(spark, t: Table, model: Model, step: int, op: str, arg, options: dict | None = None) -> None:
    options = options or MANUAL
    if op == "upsert":
        batch = [(k, f"s{step}", city(k), step) for k in arg]
        r = t.upsert(spark.createDataFrame(batch, SCHEMA), options=options)
        state = model.state
        for row in batch:
            state[row[0]] = row
        model.commits.append((r.instant, state))
        model.ops.append(("upsert", batch))
    elif op == "delete":
        batch = [(k, "x", city(k), step) for k in arg]
        r = t.delete(spark.createDataFrame(batch, SCHEMA), options=options)
        state = model.state
        for k in arg:
            state.pop(k, None)
        if r.instant is not None:
            model.commits.append((r.instant, state))
            model.ops.append(("delete", batch))
    elif op == "rollback" and model.commits:
        latest = model.commits[-1][0]
        protected = any(sp >= latest for sp in model.savepoints)
        try:
            t.maintenance.rollback(latest)
        except RollbackRefusedError as exc:
            # refused only for a reason the model knows: a savepoint, or a clean since the commit before
            before = model.commits[-2][0] if len(model.commits) > 1 else ""
            assert protected or (model.cleaned_after is not None and model.cleaned_after >= before), exc
            event("rollback refused")
            return
        assert not protected
        event("rollback done")
        model.commits.pop()
        model.ops.pop()
    elif op == "rollback_older" and len(model.commits) > 1:
        n = arg % (len(model.commits) - 1)  # never the latest: that is "rollback"
        target = model.commits[n][0]
        protected = any(sp >= target for sp in model.savepoints)
        parts, gone = model.touched(n)
        later = range(n + 1, len(model.commits))
        rewrote = any(model.touched(m)[0] & parts for m in later)
        wrote_again = any(model.ops[m][0] == "upsert" and {r[0] for r in model.ops[m][1]} & gone for m in later)
        try:
            t.maintenance.rollback(target)
        except RollbackRefusedError as exc:
            before = model.commits[n - 1][0] if n else ""
            cleaned = model.cleaned_after is not None and model.cleaned_after >= before
            assert protected or rewrote or wrote_again or cleaned, exc
            event("older rollback refused")
            return
        assert not protected
        event("older rollback done")
        del model.commits[n]
        del model.ops[n]
        model.replay()  # the table must now be what the other commits alone make of it
    elif op == "restore" and len(model.commits) > 1:
        target_i = arg % (len(model.commits) - 1)
        target = model.commits[target_i][0]
        try:
            t.maintenance.restore(target)
        except RollbackRefusedError as exc:
            assert target not in model.savepoints and model.cleaned_after is not None, exc
            event("restore refused")
            return
        event("restore done")
        del model.commits[target_i + 1:]
        del model.ops[target_i + 1:]
        model.savepoints = {sp for sp in model.savepoints if sp <= target}
    elif op == "savepoint" and model.commits:
        latest = model.commits[-1][0]
        if latest not in model.savepoints:
            t.maintenance.create_savepoint(latest)
            model.savepoints.add(latest)
    elif op == "clean":
        policy, n = arg
        key = "hoodie.cleaner.commits.retained" if policy == "KEEP_LATEST_COMMITS" else "hoodie.cleaner.fileversions.retained"
        Maintenance(t.meta, {**options, "hoodie.cleaner.policy": policy, key: str(n)}).clean()
        if model.commits:
            model.cleaned_after = model.commits[-1][0]
