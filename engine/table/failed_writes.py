"""The table's memory of its own failed writes, so that only their leftovers are ever deleted as debris.

A write that fails while it holds the table lock removes its files and timeline files at once
(`engine.write.commit.abort`): afterwards nothing on the timeline says the instant ever existed.
A straggler task of that write may still leave a file named with the instant; archival must
delete such a file before it archives past the instant (archived instants' files count), and
must delete nothing else: a file whose instant this table never knew is not its debris (it may
be another table's). So before an aborted write removes anything, it records itself here:

    .hoodie/.failed_writes/<instant>      JSON {"instant", "action", "groups": [[partition, file id], ...],
                                                "file_id_stems": [...]}

`groups` are the file groups its plan named (a straggler can only write those); a bulk_insert
whose tasks name their own file groups (`engine.write.bulk_stream`) records the stem of its tasks'
file id prefixes instead (`engine.data.file_names.task_file_id_prefix`; any partition). Hudi readers
ignore sub-folders of `.hoodie/`. Archival forgets the records of instants it has passed.
Failed writes rolled back by a rollback (repair of a dead writer, `hoodie rollback`) are known
from the rollback's own metadata instead (`known_failed_writes`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from engine.constants import METAFOLDER
from engine.data.file_names import has_file_id_stem
from engine.errors import CorruptTableError
from engine.storage import Storage

FOLDER = f"{METAFOLDER}/.failed_writes"


@dataclass(frozen=True)
class FailedWrite:
    """One failed write: its instant, action and the file groups it planned (None: unknown,
    e.g. a write rolled back by a rollback instant, whose metadata names files, not groups)."""

    instant: str
    action: str
    groups: frozenset[tuple[str, str]] | None
    file_id_stems: frozenset[str] = frozenset()

    def may_have_written(self, partition: str, file_id: str) -> bool:
        return (
            self.groups is None
            or (partition, file_id) in self.groups
            or has_file_id_stem(file_id, self.file_id_stems)
        )


def record(
    storage: Storage, instant: str, action: str, groups: Iterable[tuple[str, str]], file_id_stems: Iterable[str] = ()
) -> None:
    """Remember a failed write (replacing an earlier record of it)."""
    body: dict = {"instant": instant, "action": action, "groups": sorted([p, f] for p, f in set(groups))}
    stems = sorted(set(file_id_stems))
    if stems:
        body["file_id_stems"] = stems
    storage.write_bytes(f"{FOLDER}/{instant}", json.dumps(body, sort_keys=True).encode())


def load(storage: Storage) -> dict[str, FailedWrite]:
    """The recorded failed writes by instant (CorruptTableError naming a record that does not parse)."""
    out = {}
    for info in storage.list_dir(FOLDER):
        if info.is_dir or info.name.startswith("."):
            continue
        try:
            doc = json.loads(storage.read_bytes(info.path))
            groups = frozenset((str(p), str(f)) for p, f in doc["groups"])
            stems = frozenset(str(x) for x in doc.get("file_id_stems", ()))
            out[str(doc["instant"])] = FailedWrite(str(doc["instant"]), str(doc["action"]), groups, stems)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTableError(f"{storage.uri(info.path)}: not a failed-write record ({exc})") from exc
    return out


def forget_before(storage: Storage, instant: str) -> list[str]:
    """Delete the records of instants before `instant` (archival has passed them); their times."""
    gone = []
    for info in storage.list_dir(FOLDER):
        if not info.is_dir and not info.name.startswith(".") and info.name < instant:
            storage.delete(info.path)
            gone.append(info.name)
    return gone
