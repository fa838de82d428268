"""The OpenAPI 3.1 document of /api/v1 (validated by openapi-spec-validator in the tests)."""

from __future__ import annotations

from typing import Any

ERROR = {"$ref": "#/components/responses/Error"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _path_param(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": schema or {"type": "string"}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


TABLE = _path_param("name", "registered table name")
JOB_ID = _path_param("job_id", "job id", {"type": "integer"})
JOB_ACCEPTED = _json(_obj(job_id={"type": "integer"}, already_queued={
    "type": "boolean", "description": "table services: the same plan on the same timeline was confirmed before "
    "and its job is still queued or running; job_id names that job (nothing new was queued)"}), "the job was queued")
STD_ERRORS = {"400": ERROR, "401": ERROR, "403": ERROR, "404": ERROR}


def document() -> dict[str, Any]:
    table_schema = _obj(
        name={"type": "string"}, path={"type": "string"}, table_type={"type": "string"},
        record_key={"type": "string"}, partition_fields={"type": "array", "items": {"type": "string"}},
        precombine_field={"type": ["string", "null"]}, index={"type": ["string", "null"]},
        registered_at={"type": "string"},
    )
    job_schema = _obj(
        id={"type": "integer"}, table={"type": ["string", "null"]}, operation={"type": "string"},
        params={"type": "object"},
        state={"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]},
        progress={"type": "object"}, log_tail={"type": "string"}, result={"type": ["object", "null"]},
        error={"type": ["string", "null"]}, created_by={"type": ["string", "null"]},
        created_at={"type": ["string", "null"]}, started_at={"type": ["string", "null"]},
        finished_at={"type": ["string", "null"]}, worker_id={"type": ["string", "null"]},
        cancel_requested={"type": "boolean"},
    )
    service_body = {"required": True, "content": {"application/json": {"schema": _obj(
        instant={"type": "string", "pattern": "^[0-9]{17}$"},
        fingerprint={"type": "string", "description": "timeline fingerprint of a plan from GET .../plans/{operation}; "
                     "when given, a changed table refuses the call with 409 stale_plan"},
        plan_hash={"type": "string"}, comment={"type": "string"})}}}
    compaction_body = {"required": False, "content": {"application/json": {"schema": _obj(
        instant={"type": "string", "pattern": "^[0-9]{17}$", "description": "a pending compaction to run"},
        fingerprint={"type": "string", "description": "timeline fingerprint of GET .../plans/compaction; when given, "
                     "a changed table refuses the call with 409 stale_plan"},
        plan_hash={"type": "string"})}}}
    paths: dict[str, Any] = {
        "/tokens": {
            "post": {
                "summary": "Exchange a user name and password for a bearer token (throttled per client address and "
                           "locked after repeated failures, like the login page; the token expires after "
                           "CONSOLE_TOKEN_LIFETIME_DAYS)", "security": [],
                "requestBody": {"required": True, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["username", "password"],
                    "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}}}},
                "responses": {"201": _json(_obj(token={"type": "string"}, id={"type": "integer"},
                                                username={"type": "string"}, role={"type": "string"},
                                                expires_at={"type": ["string", "null"], "format": "date-time"}),
                                           "a new token (shown once; only its hash is stored)"),
                              "401": ERROR,
                              "403": _json({"$ref": "#/components/schemas/Error"},
                                           "account_locked (repeated failed logins), or password_change_required "
                                           "(a first-login or reset password: change it in the console first)"),
                              "429": ERROR}},
            "get": {
                "summary": "Your tokens (never their values); admins: ?user=NAME or ?all=1",
                "parameters": [_query("user", {"type": "string"}, "admins: this user's tokens"),
                               _query("all", {"type": "string", "enum": ["1", "true"]}, "admins: everyone's tokens")],
                "responses": {"200": _json(_obj(tokens={"type": "array", "items": {"$ref": "#/components/schemas/Token"}})),
                              "401": ERROR, "403": ERROR}},
        },
        "/tokens/{token_id}/revoke": {"post": {
            "summary": "Revoke a token: your own (admins: anyone's); revoking a revoked token changes nothing",
            "parameters": [_path_param("token_id", "token id", {"type": "integer"})],
            "responses": {"200": _json({"$ref": "#/components/schemas/Token"}, "the token, now revoked"), **STD_ERRORS}}},
        "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _json({"type": "object"}), "401": ERROR}}},
        "/tables": {
            "get": {"summary": "Registered tables", "responses": {
                "200": _json(_obj(tables={"type": "array", "items": {"$ref": "#/components/schemas/Table"}})), "401": ERROR}},
            "post": {"summary": "Create a table (operator); without path it goes under the first warehouse root",
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "type": "object", "required": ["name", "record_key"], "properties": {
                             "name": {"type": "string"}, "path": {"type": "string"},
                             "record_key": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                             "partition_fields": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                             "precombine_field": {"type": "string"},
                             "table_type": {"type": "string", "enum": ["COPY_ON_WRITE", "MERGE_ON_READ"],
                                            "default": "COPY_ON_WRITE"},
                             "index": {"type": "string"}, "hive_style": {"type": "boolean"},
                             "table_version": {"type": "integer", "enum": [6, 8, 9], "default": 6},
                             "cdc_mode": {"type": ["string", "null"], "enum": ["OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER", None],
                                          "description": "Apache Hudi CDC logging (hoodie.table.cdc.*); null: none"}}}}}},
                     "responses": {"201": _json({"$ref": "#/components/schemas/Table"}, "created"), "409": ERROR, **STD_ERRORS}},
        },
        "/tables/{name}": {"get": {"summary": "Overview and health of a table (merge_on_read: log files, pending "
                                              "compactions, inline compaction setting; null for copy-on-write)",
                                   "parameters": [TABLE],
                                   "responses": {"200": _json({"type": "object"}), **STD_ERRORS}}},
        "/tables/{name}/commits": {"get": {
            "summary": "Instants of the timeline, newest first, filtered and paged",
            "parameters": [TABLE, _query("action", {"type": "string"}, "action filter (repeatable)"),
                           _query("state", {"type": "string"}, "state filter (repeatable)"),
                           _query("since", {"type": "string"}, "instant time lower bound (inclusive)"),
                           _query("until", {"type": "string"}, "instant time upper bound (inclusive)"),
                           _query("archived", {"type": "string", "enum": ["0", "1", "true", "false"]}, "include archived"),
                           _query("page", {"type": "integer"}, "page number"),
                           _query("per_page", {"type": "integer"}, "rows per page (max 500)")],
            "responses": {"200": _json(_obj(rows={"type": "array", "items": {"type": "object"}}, total={"type": "integer"},
                                            page={"type": "integer"}, pages={"type": "integer"},
                                            fingerprint={"type": "string"})), **STD_ERRORS}}},
        "/tables/{name}/commits/{instant}": {"get": {
            "summary": "One instant: per-partition and per-file stats (log files: logVersion, slice, baseFile, "
                       "logFiles; compactions: their counters), replaced files, schema, and for a compaction its plan",
            "parameters": [TABLE, _path_param("instant", "instant time")],
            "responses": {"200": _json({"type": "object"}), **STD_ERRORS}}},
        "/tables/{name}/commits/{instant}/changes": {"get": {
            "summary": "The records one write inserted, updated (before and after) and deleted (change data capture: "
                       "from the table's CDC log, or inferred from its file group versions), paged; unavailable "
                       "says why when cleaning or archival removed the versions it changed",
            "parameters": [TABLE, _path_param("instant", "instant time"),
                           _query("op", {"type": "string", "enum": ["i", "u", "d"]}, "only inserts, updates or deletes"),
                           _query("page", {"type": "integer"}, "page number"),
                           _query("per_page", {"type": "integer"}, "changes per page (max 500)")],
            "responses": {"200": _json(_obj(
                instant={"type": "string"}, op={"type": ["string", "null"]},
                columns={"type": "array", "items": {"type": "string"}},
                rows={"type": "array", "items": _obj(op={"type": "string", "enum": ["i", "u", "d"]},
                                                     kind={"type": "string"}, cells={"type": "array"})},
                counts=_obj(i={"type": "integer"}, u={"type": "integer"}, d={"type": "integer"}),
                total={"type": "integer"}, page={"type": "integer"}, pages={"type": "integer"},
                per_page={"type": "integer"}, source={"type": "string", "enum": ["CDC log", "inferred"]},
                unavailable={"type": ["string", "null"]})), **STD_ERRORS}}},
        "/tables/{name}/file-groups": {"get": {
            "summary": "Partitions, file groups (with their pending compaction), slices newest first, and their base "
                       "and log files (size, records, deletes, the commit that wrote each)",
            "parameters": [TABLE, _query("partition", {"type": "string"}, "only this partition"),
                           _query("logs", {"type": "string", "enum": ["1", "true"]}, "only groups whose latest slice has log files"),
                           _query("pending", {"type": "string", "enum": ["1", "true"]}, "only groups in a pending compaction"),
                           _query("page", {"type": "integer"}, "page"), _query("per_page", {"type": "integer"}, "groups per page")],
            "responses": {"200": _json({"type": "object"}), **STD_ERRORS}}},
        "/tables/{name}/jobs": {"post": {
            "summary": "Queue a write (operator: upsert|insert|delete, JSON records or a multipart file) or a data preview",
            "parameters": [TABLE],
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": _obj(
                    operation={"type": "string", "enum": ["upsert", "insert", "delete", "preview"]},
                    records={"type": "array", "items": {"type": "object"}},
                    mode={"type": "string", "enum": ["snapshot", "as_of", "incremental", "read_optimized"],
                          "description": "read_optimized: base files only (MERGE_ON_READ tables)"},
                    instant={"type": "string"}, limit={"type": "integer"})},
                "multipart/form-data": {"schema": _obj(
                    operation={"type": "string", "enum": ["upsert", "insert", "delete"]},
                    file={"type": "string", "format": "binary"})}}},
            "responses": {"202": JOB_ACCEPTED, "413": ERROR, "415": ERROR, "422": ERROR, **STD_ERRORS}}},
        "/jobs/{job_id}": {"get": {"summary": "State, progress, log tail and result of a job", "parameters": [JOB_ID],
                                   "responses": {"200": _json({"$ref": "#/components/schemas/Job"}), **STD_ERRORS}}},
        "/jobs/{job_id}/cancel": {"post": {"summary": "Ask for a job's cancellation", "parameters": [JOB_ID],
                                           "responses": {"200": _json({"$ref": "#/components/schemas/Job"}, "already finished"),
                                                         "202": _json({"$ref": "#/components/schemas/Job"}, "requested"),
                                                         **STD_ERRORS}}},
        "/tables/{name}/plans/{operation}": {"get": {
            "summary": "Dry-run plan of a table service, with the timeline fingerprint and the plan hash",
            "parameters": [TABLE, _path_param("operation", "rollback|restore|savepoint|savepoint_delete|clean|archive|compaction"),
                           _query("instant", {"type": "string"}, "the instant (rollback, restore, savepoints; compaction: "
                                  "a pending compaction to run, else every pending one or a new plan)")],
            "responses": {"200": _json({"$ref": "#/components/schemas/Plan"}), "409": ERROR, **STD_ERRORS}}},
        "/tables/{name}/rollback": {"post": {"summary": "Roll back one instant (admin)", "parameters": [TABLE],
                                             "requestBody": service_body,
                                             "responses": {"202": JOB_ACCEPTED, "409": ERROR, **STD_ERRORS}}},
        "/tables/{name}/restore": {"post": {"summary": "Restore the table to an instant (admin)", "parameters": [TABLE],
                                            "requestBody": service_body,
                                            "responses": {"202": JOB_ACCEPTED, "409": ERROR, **STD_ERRORS}}},
        "/tables/{name}/compaction": {"post": {
            "summary": "Compact a MERGE_ON_READ table (operator): run the pending compaction `instant`, or every "
                       "pending one, or schedule and run a new one, in the job runner (its SparkSession)",
            "parameters": [TABLE], "requestBody": compaction_body,
            "responses": {"202": JOB_ACCEPTED, "409": ERROR, **STD_ERRORS}}},
        "/tables/{name}/services/{operation}": {"post": {
            "summary": "Run a table service (savepoint, savepoint_delete, clean, archive, compaction: operator; "
                       "rollback, restore: admin)",
            "parameters": [TABLE, _path_param("operation", "table service")], "requestBody": service_body,
            "responses": {"202": JOB_ACCEPTED, "409": ERROR, **STD_ERRORS}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "hoodie console API", "version": "1.0.0",
                 "description": "Browse Hudi tables and act on them: writes, table services, jobs."},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],  # 401 with error.code token_expired / token_revoked / user_deactivated says why
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Table": table_schema,
                "Job": job_schema,
                "Token": _obj(id={"type": "integer"}, user={"type": "string"},
                              state={"type": "string", "enum": ["active", "revoked", "expired"]},
                              created_at={"type": "string", "format": "date-time"},
                              expires_at={"type": ["string", "null"], "format": "date-time"},
                              last_used_at={"type": ["string", "null"], "format": "date-time",
                                            "description": "written at most once a minute"},
                              revoked={"type": "boolean"},
                              revoked_at={"type": ["string", "null"], "format": "date-time"}),
                "Plan": _obj(operation={"type": "string"}, params={"type": "object"}, fingerprint={"type": "string"},
                             plan={}, summary={"type": "object"}, hash={"type": "string"}),
                "Error": {"type": "object", "required": ["error"], "properties": {"error": _obj(
                    code={"type": "string"}, message={"type": "string"})}},
            },
            "responses": {"Error": {"description": "an error", "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}}},
        },
    }
