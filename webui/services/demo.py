"""The demo table `make run` seeds: demo_trips, registered once, filled by a first upsert job."""

from __future__ import annotations

from engine.facade import TableExistsError
from webui.services import audit, jobs, tables, uploads
from webui.services.tables import NewTable, RegistryError

DEMO_TABLE = "demo_trips"


def seed_demo(rows: int = 300) -> str:
    """Register demo_trips (creating it under the first warehouse root) unless it is registered,
    and queue an upsert of a generated batch when the table has never been written."""
    from webui.paths import default_table_path

    existing = [t for t in tables.list_tables() if t.name == DEMO_TABLE]
    if existing:
        entry = existing[0]
    else:
        spec = NewTable(name=DEMO_TABLE, record_key="trip_id", partition_fields="city", precombine_field="ts")
        try:
            entry = tables.create_table(spec, None)
        except RegistryError as exc:
            if not isinstance(exc.__cause__, TableExistsError):
                raise
            entry = tables.register_existing(default_table_path(DEMO_TABLE, tables.roots()), DEMO_TABLE, None)
        audit.record(None, "table.create", "created", table=DEMO_TABLE, params={"path": entry.base_path, "demo": True})
    meta = tables.open_meta(entry)
    if meta.timeline().completed_writes.instants:
        return f"demo table {DEMO_TABLE} at {entry.base_path} already has data"
    if any(j.state in ("queued", "running") for j in jobs.recent(entry)):
        return f"demo table {DEMO_TABLE}: its first batch is already queued"
    batch = uploads.demo_batch(meta, rows=rows, seed=7, start_key=0)
    upload = uploads.store(batch, entry, "demo-batch.parquet", None)
    job = jobs.enqueue(None, entry, "upsert", {"upload": upload.id, "rows": batch.num_rows, "source": "demo batch"})
    audit.record(None, "upsert", "queued", table=DEMO_TABLE, params={"rows": batch.num_rows, "source": "demo batch"},
                 job_id=job.id)
    return f"demo table {DEMO_TABLE} at {entry.base_path}: queued job {job.id} ({batch.num_rows} trips)"
