"""The audit log page (admins see every entry, others their own)."""

from __future__ import annotations

import math

from flask import Blueprint, render_template, request

from webui.auth import current_actor, requires
from webui.models import Role
from webui.services import audit

bp = Blueprint("audit", __name__)


@bp.get("/audit")
@requires(Role.VIEWER)
def audit_page():  # type: ignore[no-untyped-def]
    actor = current_actor()
    try:
        page = max(1, int(request.args.get("page", 1)))
    except ValueError:
        page = 1
    see_all = actor.can(Role.ADMIN)  # type: ignore[union-attr]
    rows, total = audit.entries(actor, page=page, see_all=see_all)  # type: ignore[arg-type]
    return render_template("audit.html", rows=rows, total=total, page=page, pages=max(1, math.ceil(total / 50)),
                           see_all=see_all)
