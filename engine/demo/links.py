"""The admin console's page addresses for what the demo did (pure).

The shapes are the console's routes (webui/blueprints/browse.py); the demo's test opens every
address it printed through the console's test client.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlencode

DEFAULT_PORT = "8000"


def console_base_url(env: Mapping[str, str] | None = None) -> str:
    """CONSOLE_URL (the stack sets it), else the address `make run` serves on."""
    env = os.environ if env is None else env
    url = env.get("CONSOLE_URL")
    if url:
        return url.rstrip("/")
    return f"http://127.0.0.1:{env.get('CONSOLE_PORT') or DEFAULT_PORT}"


@dataclass(frozen=True)
class ConsoleLinks:
    """Pages of one registered table in the console at `base`."""

    base: str
    table: str

    def _page(self, path: str = "", **query: str) -> str:
        url = f"{self.base}/tables/{quote(self.table)}{path}"
        return f"{url}?{urlencode(query)}" if query else url

    def overview(self) -> str:
        return self._page()

    def timeline(self) -> str:
        return self._page("/timeline")

    def commit(self, instant: str) -> str:
        return self._page(f"/commits/{quote(instant)}")

    def file_groups(self, partition: str | None = None) -> str:
        return self._page("/file-groups", partition=partition) if partition is not None else self._page("/file-groups")
