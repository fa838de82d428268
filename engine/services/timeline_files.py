"""Reading and writing the Avro plans/metadata of table-service instants, and instant files."""

from __future__ import annotations

from engine.constants import METAFOLDER
from engine.errors import CorruptTableError
from engine.table.meta_client import MetaClient, instant_file_names
from engine.timeline.instant import Action, Instant, State


def write_avro(meta: MetaClient, instant: Instant, model: str, record: dict, exclusive: bool = True) -> None:
    """Write an instant file holding one Avro record (Apache Hudi's container-file form)."""
    from engine.timeline import avro_models

    body = avro_models.serialize(model, record)
    path = meta.instant_path(instant)
    if exclusive:
        try:
            meta.storage.create_exclusive(path, body)
        except FileExistsError:
            if meta.storage.read_bytes(path) != body:
                raise
    else:
        meta.storage.write_bytes(path, body)


def read_avro(meta: MetaClient, instant: Instant, model: str) -> dict:
    from engine.timeline import avro_models

    data = meta.read_instant(instant)
    try:
        return avro_models.deserialize(model, data)
    except CorruptTableError as exc:
        raise CorruptTableError(f"{meta.instant_path(instant)}: {exc}") from exc


def ensure_file(meta: MetaClient, instant: Instant, body: bytes = b"") -> None:
    """Create an instant file if it is missing (resuming an interrupted service)."""
    try:
        meta.storage.create_exclusive(meta.instant_path(instant), body)
    except FileExistsError:
        pass


def remove_instant(meta: MetaClient, time: str, action: Action) -> None:
    """Remove an instant's timeline files: requested and inflight first, the completed file last,
    so an interrupted removal never leaves a completed-looking instant without its history."""
    names = instant_file_names(Instant(time, action, State.REQUESTED))
    for name in names:  # requested, inflight, completed (State's order)
        meta.storage.delete(f"{METAFOLDER}/{name}")


def heartbeat_path(time: str) -> str:
    from engine.table.heartbeat import heartbeat_file

    return heartbeat_file(time)
