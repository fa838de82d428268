"""The JSON API under /api/v1: the same services and role checks as the pages, bearer tokens.

Authentication: `POST /api/v1/tokens {username, password}` gives a token; every other call
sends `Authorization: Bearer <token>` (the session cookie is ignored here). The OpenAPI
document is `GET /api/v1/openapi.json` (`webui/openapi.py`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request

from engine.facade import CREATE_VERSIONS, TABLE_VERSION, EngineError
from webui.auth import api_error, authorize, current_actor, requires
from webui.models import Role
from webui.ratelimit import login_limit
from webui.services import audit, browse, changes, jobs, logins, plans, tables, tokens, uploads
from webui.services import file_groups as groups
from webui.services.snapshot import TableSnapshot

bp = Blueprint("api", __name__, url_prefix="/api/v1")


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    return data if isinstance(data, dict) else {}


def _int(key: str, default: int) -> int:
    try:
        return int(request.args.get(key, default))
    except (TypeError, ValueError):
        return default


@bp.post("/tokens")
@login_limit  # the login page's budget per address (429 too_many_requests, Retry-After)
def create_token():  # type: ignore[no-untyped-def]
    """The same rate limit (`webui.ratelimit`) and lockout (`webui.services.logins`) as the login page."""
    body = _body()
    result = logins.attempt(str(body.get("username") or ""), str(body.get("password") or ""),
                            request.remote_addr or "", "api", logins.LoginPolicy.from_config(current_app.config))
    if result.verdict is logins.Verdict.LOCKED:
        return api_error(403, "account_locked", result.message)
    user = result.user
    if result.verdict is not logins.Verdict.SUCCEEDED or user is None:
        return api_error(401, "unauthorized", "wrong user name or password")
    if user.must_change_password:  # the password was right (audited as a login), but no token yet
        audit.record(user, "token.create", "refused: password change required")
        return api_error(403, "password_change_required", tokens.MUST_CHANGE.format(name=user.username))
    token, row = tokens.issue(user, int(current_app.config["CONSOLE_TOKEN_LIFETIME_DAYS"]))
    return jsonify({"token": token, "username": user.username, "role": user.role, "id": row.id,
                    "expires_at": tokens.describe(row)["expires_at"]}), 201


@bp.get("/tokens")
@requires(Role.VIEWER)
def list_tokens():  # type: ignore[no-untyped-def]
    """Your tokens; an admin may ask for ?user=NAME or ?all=1."""
    actor = current_actor()
    rows = tokens.visible(actor, request.args.get("user") or None,  # type: ignore[arg-type]
                          everyone=request.args.get("all") in ("1", "true"))
    return jsonify({"tokens": [tokens.describe(r) for r in rows]})


@bp.post("/tokens/<int:token_id>/revoke")
@requires(Role.VIEWER)
def revoke_token(token_id: int):  # type: ignore[no-untyped-def]
    """Revoke one of your tokens (admins: anyone's); revoking the token of this very call works."""
    actor = current_actor()
    try:
        row = tokens.get_for(actor, token_id)  # type: ignore[arg-type]
    except tokens.TokenError as exc:
        return api_error(exc.status, "not_found" if exc.status == 404 else "forbidden", exc.message)
    tokens.revoke(actor, row, via="api")  # type: ignore[arg-type]  # a second revoke changes nothing
    return jsonify(tokens.describe(row))


@bp.get("/openapi.json")
@requires(Role.VIEWER)
def openapi():  # type: ignore[no-untyped-def]
    from webui.openapi import document

    return jsonify(document())


# ---- tables --------------------------------------------------------------------------------------
@bp.get("/tables")
@requires(Role.VIEWER)
def list_tables():  # type: ignore[no-untyped-def]
    return jsonify({"tables": [tables.describe(t) for t in tables.list_tables()]})


@bp.post("/tables")
@requires(Role.OPERATOR)
def create_table():  # type: ignore[no-untyped-def]
    body = _body()
    actor = current_actor()
    pf = body.get("partition_fields") or ""
    version = body.get("table_version", TABLE_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version not in CREATE_VERSIONS:
        return api_error(400, "invalid", f"table_version must be one of {', '.join(map(str, CREATE_VERSIONS))}, "
                                         f"got {version!r}")
    spec = tables.NewTable(
        name=str(body.get("name") or ""), record_key=",".join(body["record_key"]) if isinstance(body.get("record_key"), list)
        else str(body.get("record_key") or ""),
        partition_fields=",".join(pf) if isinstance(pf, list) else str(pf),
        precombine_field=body.get("precombine_field") or None, table_type=str(body.get("table_type") or "COPY_ON_WRITE"),
        index=str(body.get("index") or tables.DEFAULT_INDEX_NAME), path=body.get("path") or None,
        hive_style=bool(body.get("hive_style", False)),
        table_version=version,
        cdc_mode=str(body["cdc_mode"]) if body.get("cdc_mode") else None,
    )
    params = {k: v for k, v in body.items() if k in ("path", "record_key", "partition_fields", "precombine_field",
                                                        "table_type", "index", "hive_style", "table_version", "cdc_mode")}
    try:
        entry = tables.create_table(spec, actor)
    except tables.RegistryError as exc:
        audit.record(actor, "table.create", f"refused: {exc}", table=spec.name or None, params=params)
        return api_error(exc.status, "refused", str(exc))
    audit.record(actor, "table.create", "created", table=entry.name, params={**params, "path": entry.base_path})
    return jsonify(tables.describe(entry)), 201


def _snap(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    return entry, TableSnapshot.load(tables.open_meta(entry))


@bp.get("/tables/<name>")
@requires(Role.VIEWER)
def table_overview(name: str):  # type: ignore[no-untyped-def]
    entry, snap = _snap(name)
    from webui.services import compactions, health

    return jsonify({"table": tables.describe(entry), "overview": browse.overview(snap),
                    "merge_on_read": compactions.overview(snap), "health": health.check(snap)})


@bp.get("/tables/<name>/commits")
@requires(Role.VIEWER)
def commits(name: str):  # type: ignore[no-untyped-def]
    _entry, snap = _snap(name)
    page = browse.timeline_page(
        snap, actions=[a for a in request.args.getlist("action") if a], states=[s for s in request.args.getlist("state") if s],
        since=request.args.get("since") or None, until=request.args.get("until") or None,
        include_archived=request.args.get("archived") in ("1", "true"), page=_int("page", 1),
        per_page=_int("per_page", browse.TIMELINE_PAGE))
    page.pop("visual", None)
    return jsonify(page)


@bp.get("/tables/<name>/commits/<instant>")
@requires(Role.VIEWER)
def commit(name: str, instant: str):  # type: ignore[no-untyped-def]
    _entry, snap = _snap(name)
    return jsonify(browse.commit_detail(snap, instant))


@bp.get("/tables/<name>/commits/<instant>/changes")
@requires(Role.VIEWER)
def commit_changes(name: str, instant: str):  # type: ignore[no-untyped-def]
    _entry, snap = _snap(name)
    return jsonify(changes.commit_changes(snap, instant, op=request.args.get("op") or None, page=_int("page", 1),
                                          per_page=_int("per_page", changes.CHANGES_PAGE)))


@bp.get("/tables/<name>/file-groups")
@requires(Role.VIEWER)
def file_groups(name: str):  # type: ignore[no-untyped-def]
    _entry, snap = _snap(name)
    return jsonify(groups.page(snap, request.args.get("partition"), page=_int("page", 1),
                                    per_page=_int("per_page", groups.GROUPS_PAGE),
                                    with_logs=request.args.get("logs") in ("1", "true"),
                                    pending_only=request.args.get("pending") in ("1", "true")))


# ---- jobs ------------------------------------------------------------------------------------------
@bp.post("/tables/<name>/jobs")
@requires(Role.VIEWER)
def submit_job(name: str):  # type: ignore[no-untyped-def]
    entry = tables.get_table(name)
    actor = current_actor()
    if request.files:
        operation = request.form.get("operation", "upsert")
    else:
        operation = str(_body().get("operation") or "")
    if operation == "preview":
        body = _body()
        mode = str(body.get("mode") or "snapshot")
        if mode not in jobs.PREVIEW_MODES or (mode in ("as_of", "incremental") and not body.get("instant")):
            return api_error(400, "invalid", "preview needs mode snapshot|as_of|incremental|read_optimized "
                                             "(and an instant for as_of and incremental)")
        if mode == "read_optimized" and entry.table_type != "MERGE_ON_READ":
            return api_error(400, "invalid", "read_optimized applies to MERGE_ON_READ tables only")
        params = {"mode": mode, "instant": body.get("instant"), "limit": int(body.get("limit") or 50)}
        job = jobs.enqueue(actor, entry, "preview", params)
        audit.record(actor, "preview", "queued", table=entry.name, params=params, job_id=job.id)
        return jsonify({"job_id": job.id}), 202
    if operation not in uploads.OPERATIONS:
        return api_error(400, "invalid", f"operation must be one of {', '.join(uploads.OPERATIONS)} or preview")
    authorize(actor, jobs.ROLE_FOR[operation])
    jobs.check_user_quota(actor, operation)  # before the batch is read and stored
    try:
        if request.files:
            f = request.files.get("file")
            if f is None:
                raise uploads.UploadError("send the batch as the multipart field 'file'")
            filename = f.filename or "upload"
            table = uploads.parse(filename, f.stream)
        else:
            filename = "records.json"
            table = uploads.from_records(_body().get("records"))
        checked = uploads.check(tables.open_meta(entry), table, operation)
    except uploads.UploadError as exc:
        audit.record(actor, operation, f"refused: {exc}", table=entry.name, params={"filename": filename if request.files else "records"})
        return api_error(exc.status, "invalid_batch", str(exc))
    except EngineError as exc:
        return api_error(409, "engine_error", f"{type(exc).__name__}: {exc}")
    stored = uploads.store(checked.table, entry, filename, actor)
    job = jobs.enqueue(actor, entry, operation, {"upload": stored.id, "rows": stored.rows, "filename": filename})
    audit.record(actor, operation, "queued", table=entry.name, params={"rows": stored.rows, "filename": filename}, job_id=job.id)
    return jsonify({"job_id": job.id}), 202


@bp.get("/jobs/<int:job_id>")
@requires(Role.VIEWER)
def job(job_id: int):  # type: ignore[no-untyped-def]
    return jsonify(jobs.describe(jobs.get(job_id)))


@bp.post("/jobs/<int:job_id>/cancel")
@requires(Role.VIEWER)
def cancel_job(job_id: int):  # type: ignore[no-untyped-def]
    job = jobs.get(job_id)
    actor = current_actor()
    changed = jobs.request_cancel(actor, job)  # type: ignore[arg-type]
    return jsonify(jobs.describe(job)), 202 if changed else 200


# ---- table services --------------------------------------------------------------------------------
@bp.get("/tables/<name>/plans/<operation>")
@requires(Role.VIEWER)
def plan(name: str, operation: str):  # type: ignore[no-untyped-def]
    if operation not in plans.SERVICES:
        return api_error(404, "not_found", f"unknown table service {operation!r}")
    authorize(current_actor(), plans.SERVICES[operation][0])
    entry = tables.get_table(name)
    try:
        p = plans.preview(entry, operation, dict(request.args))
    except plans.PlanError as exc:
        return api_error(exc.status, "refused", str(exc))
    return jsonify(p.to_dict())


def _service(name: str, operation: str):  # type: ignore[no-untyped-def]
    if operation not in plans.SERVICES:
        return api_error(404, "not_found", f"unknown table service {operation!r}")
    actor = authorize(current_actor(), plans.SERVICES[operation][0])
    entry = tables.get_table(name)
    body = _body()
    raw = {k: body.get(k) for k in ("instant", "comment", "partition", "sort_columns", "layout")}
    try:
        if body.get("fingerprint") or body.get("plan_hash"):
            p = plans.confirm(entry, operation, raw, str(body.get("fingerprint") or ""), str(body.get("plan_hash") or ""))
        else:
            p = plans.runnable(plans.preview(entry, operation, raw))
    except plans.StalePlanError as exc:
        audit.record(actor, operation, "refused: stale plan", table=entry.name, params=raw, plan_hash=body.get("plan_hash"))
        return api_error(409, "stale_plan", str(exc), plan=exc.fresh.to_dict())
    except plans.PlanError as exc:
        audit.record(actor, operation, f"refused: {exc}", table=entry.name, params=raw)
        return api_error(exc.status, "refused", str(exc))
    params = {**p.params, "fingerprint": p.fingerprint, "plan_hash": p.hash, "user": actor.username}
    job, queued = jobs.enqueue_once(actor, entry, operation, params, jobs.plan_key(entry, operation, p.hash, p.fingerprint))
    if queued:
        audit.record(actor, operation, "queued", table=entry.name, params=p.params, plan_hash=p.hash, job_id=job.id)
    return jsonify({"job_id": job.id, "plan": p.to_dict(), "already_queued": not queued}), 202


@bp.post("/tables/<name>/rollback")
@requires(Role.ADMIN)
def rollback(name: str):  # type: ignore[no-untyped-def]
    return _service(name, "rollback")


@bp.post("/tables/<name>/restore")
@requires(Role.ADMIN)
def restore(name: str):  # type: ignore[no-untyped-def]
    return _service(name, "restore")


@bp.post("/tables/<name>/compaction")
@requires(Role.OPERATOR)
def compaction(name: str):  # type: ignore[no-untyped-def]
    return _service(name, "compaction")


@bp.post("/tables/<name>/services/<operation>")
@requires(Role.OPERATOR)
def service(name: str, operation: str):  # type: ignore[no-untyped-def]
    return _service(name, operation)
