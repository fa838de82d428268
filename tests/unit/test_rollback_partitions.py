"""Rollback and partition folders (issue 33.4): a rolled-back write's new, now empty partition is
removed only while no other write is pending; an optimistic writer that claimed its instant
earlier may be about to put its first file there (hand-made tables, no Spark)."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.constants import PARTITION_METADATA_FILE
from engine.services.rollback import undo_instant
from engine.timeline.instant import Action
from tests.support import handmade


def _two_commits(tmp_path):
    t = handmade.create(str(tmp_path / "t"))
    handmade.add_commit(t, {"paris": ["new"]}, at=datetime(2026, 1, 1, 0, tzinfo=UTC))
    second = handmade.add_commit(t, {"oslo": ["new"]}, at=datetime(2026, 1, 1, 1, tzinfo=UTC))
    return t, second


def test_a_rolled_back_partition_stays_while_another_write_is_pending(tmp_path):
    t, second = _two_commits(tmp_path)
    other = handmade.add_pending(t, datetime(2026, 1, 1, 2, tzinfo=UTC))  # claimed, writing without the lock
    deleted = undo_instant(t.meta, second, Action.COMMIT, (), None)
    assert [d.rpartition("/")[0] for d in deleted if not d.startswith(".hoodie")] == ["oslo"]
    assert sorted(p.name for p in (tmp_path / "t" / "oslo").iterdir()) == [PARTITION_METADATA_FILE]
    timeline = t.meta.timeline()
    assert timeline.get(second) is None and timeline.get(other) is not None


def test_a_rolled_back_partition_goes_when_no_other_write_is_pending(tmp_path):
    t, second = _two_commits(tmp_path)
    undo_instant(t.meta, second, Action.COMMIT, (), None)
    assert not (tmp_path / "t" / "oslo").exists()
    assert sorted(p.name for p in (tmp_path / "t" / "paris").iterdir())[0] == PARTITION_METADATA_FILE
