"""A table's metadata table checked against storage (the property tests' per-step check)."""

from __future__ import annotations

import os


def metadata_in_step(path: str, required: bool = False) -> None:
    """Where the table has a metadata table (`required`: it must have one), its files partition
    equals the committed data files storage holds (a recomputation from storage)."""
    from engine.data.file_names import parse_base_file_name, parse_log_file_name
    from engine.metadata.reader import MetadataTableReader
    from engine.table.meta_client import MetaClient

    meta = MetaClient.open(path)
    if not os.path.exists(f"{path}/.hoodie/metadata/.hoodie/hoodie.properties"):
        assert not required, f"{path} lost its metadata table"
        return
    timeline = meta.timeline()
    listed = {p: f for p, f in MetadataTableReader(meta, timeline).file_listing().items() if f}
    committed = timeline.completed_times
    storage: dict[str, dict[str, int]] = {}
    for df in meta.list_data_files():
        base, log = parse_base_file_name(df.name), parse_log_file_name(df.name)
        instant = base.instant if base else (log.base_instant if log else None)
        if instant is not None and instant in committed:
            storage.setdefault(df.partition, {})[df.name] = df.size
    assert listed == storage
