"""The audit log: one appended row per action (never page views or dry runs)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from webui.extensions import db
from webui.models import AuditEntry, User


def record(
    actor: User | None,
    action: str,
    outcome: str,
    *,
    table: str | None = None,
    params: dict[str, Any] | None = None,
    plan_hash: str | None = None,
    job_id: int | None = None,
    commit: bool = True,
    who: str | None = None,
) -> AuditEntry:
    """Append one audit row (`actor` None: the system, e.g. the job runner reporting an outcome).

    `who` names the actor when it is not `actor` itself: the user name tried by a failed login
    (the row still belongs to the account, `actor`, whose owner sees it), or "system" for a lock."""
    entry = AuditEntry(
        user_id=actor.id if actor is not None else None,
        username=(who or "")[:80] or (actor.username if actor is not None else "system"),
        action=action,
        table_name=table,
        params=_safe(params or {}),
        plan_hash=plan_hash,
        outcome=outcome[:512],
        job_id=job_id,
    )
    db.session.add(entry)
    if commit:
        db.session.commit()
    return entry


SECRET_KEYS = ("password", "token", "secret")


def _safe(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as logged: secrets are never stored."""
    return {k: ("<redacted>" if any(s in k.lower() for s in SECRET_KEYS) else v) for k, v in params.items()}


def entries(actor: User, page: int = 1, per_page: int = 50, see_all: bool = False) -> tuple[list[AuditEntry], int]:
    q = sa.select(AuditEntry)
    count_q = sa.select(sa.func.count(AuditEntry.id))
    if not see_all:
        q = q.where(AuditEntry.user_id == actor.id)
        count_q = count_q.where(AuditEntry.user_id == actor.id)
    total = db.session.scalar(count_q) or 0
    rows = list(db.session.scalars(q.order_by(AuditEntry.id.desc()).offset((page - 1) * per_page).limit(per_page)))
    return rows, total
