"""Measure what one upload request costs the web process: `python -m tests.support.upload_memory
WORKDIR FILE [KEY=VALUE ...]` builds a console (SQLite, a hand-made `trips` table) in WORKDIR
with the given app settings, builds the multipart request for FILE, resets the process's peak
RSS (Linux: `/proc/self/clear_refs` 5), sends the request through the WSGI app and prints JSON
{"status", "body", "rss_before", "peak"} (bytes). Its own process, so the peak is this request's.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path


def _kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def main(argv: list[str]) -> int:
    work, upload = Path(argv[0]), Path(argv[1])
    overrides = {k: int(v) if v.isdigit() else v for k, v in (a.split("=", 1) for a in argv[2:])}
    (work / "lake").mkdir(parents=True, exist_ok=True)
    os.environ.update({"CONSOLE_WAREHOUSE_ROOTS": str(work / "lake"), "CONSOLE_SECRET_KEY": "test-secret-key",
                       "DATABASE_URL": f"sqlite:///{work / 'console.db'}"})
    from flask_migrate import upgrade
    from werkzeug.test import EnvironBuilder

    from tests.support import handmade
    from webui import create_app

    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False, "TESTING": True, **overrides})
    with app.app_context():
        upgrade()
        from webui.services.tables import register_existing
        from webui.services.users import create_user

        create_user("operator", "operator-pass-1", "operator")
        table = handmade.create(str(work / "lake" / "trips"))
        handmade.add_commit(table, {"paris": ["new"]})
        register_existing(table.path, "trips", None)
    client = app.test_client()
    page = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    client.post("/login", data={"csrf_token": token, "username": "operator", "password": "operator-pass-1"})
    form = client.get("/tables/trips/write").get_data(as_text=True)
    up_token = re.search(r'name="up-csrf_token"[^>]*value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
    with upload.open("rb") as f:
        builder = EnvironBuilder(path="/tables/trips/write/upload", method="POST", environ_base=client.environ_base, data={
            "up-csrf_token": up_token, "up-operation": "upsert", "up-file": (f, upload.name)})
        environ = builder.get_environ()  # the body, in memory before the measurement starts
    builder.close()
    environ["HTTP_COOKIE"] = "; ".join(f"{c.key}={c.value}" for c in client._cookies.values())
    Path("/proc/self/clear_refs").write_text("5")
    before = _kb("VmRSS")
    out: dict = {}

    def start_response(status: str, headers: list) -> None:
        out["status"] = int(status.split()[0])

    body = b"".join(app(environ, start_response))
    peak = _kb("VmHWM")
    print(json.dumps({"status": out["status"], "body": body.decode(), "rss_before": before, "peak": peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
