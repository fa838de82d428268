"""/healthz: no login; database reachable and the job runner's heartbeat age."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Blueprint, jsonify

from webui.extensions import db

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():  # type: ignore[no-untyped-def]
    from webui.services.jobs import worker_heartbeat_age

    doc: dict[str, object] = {"status": "ok", "database": "ok", "worker_heartbeat_age_s": None}
    try:
        db.session.execute(sa.text("SELECT 1"))
        age = worker_heartbeat_age()
        doc["worker_heartbeat_age_s"] = round(age, 1) if age is not None else None
    except Exception as exc:  # report, do not raise: this is what monitors poll
        db.session.rollback()
        doc.update(status="degraded", database=f"unreachable: {type(exc).__name__}")
        return jsonify(doc), 503
    return jsonify(doc), 200
