"""Apache Hudi's index definitions (`hoodie.table.index.defs.path`, a JSON file of
`indexDefinitions`: name -> `indexName`, `indexType`, `indexFunction`, `sourceFields`,
`indexOptions`, `version`), read and edited as Hudi's writers keep them when they build or
drop an index of the metadata table."""

from __future__ import annotations

import json
from collections.abc import Iterable

from engine.errors import CorruptTableError
from engine.table.meta_client import MetaClient

INDEX_DEFS_PATH = "hoodie.table.index.defs.path"


def document(meta: MetaClient) -> tuple[str, dict] | None:
    path = dict(meta.config.extra).get(INDEX_DEFS_PATH)
    if not path or not meta.storage.exists(path):
        return None
    try:
        doc = json.loads(meta.storage.read_bytes(path))
        if not isinstance(doc.get("indexDefinitions") or {}, dict):
            raise ValueError("indexDefinitions is not a map")
    except (ValueError, AttributeError) as exc:
        raise CorruptTableError(f"{meta.storage.uri(path)}: not Hudi's index definitions: {exc}") from exc
    return path, doc


def definitions(meta: MetaClient) -> dict:
    """Index name -> Hudi's definition of it (`hoodie.table.index.defs.path`; empty without one)."""
    found = document(meta)
    return dict(found[1].get("indexDefinitions") or {}) if found else {}


def drop(meta: MetaClient, dropped: Iterable[str]) -> None:
    found = document(meta)
    if found is None:
        return
    path, doc = found
    defs = doc.get("indexDefinitions") or {}
    gone = set(dropped)
    if not gone & set(defs):
        return
    doc["indexDefinitions"] = {k: v for k, v in defs.items() if k not in gone}
    meta.storage.write_bytes(path, json.dumps(doc, indent=2).encode("utf-8"))


__all__ = ["INDEX_DEFS_PATH", "definitions", "document", "drop"]
