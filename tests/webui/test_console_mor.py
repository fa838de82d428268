"""Merge-on-read in the console (no Spark): creating MOR tables, the file groups of a table with log
files and a pending compaction, deltacommit and compaction instants, the overview and health
panel, the compaction service's preview and confirmation, and the read-optimized preview.

The table is `tests.support.console.mor_table` (built with pyarrow and the engine's log-block
encoders), registered as `rides` by the `mor` fixture: I1 base files of FID and FID2, I2 and I3
log files on FID, I4 a compaction requested on FID's slice, I5 log files after it (FID's new
slice at I4, and FID2).
"""

from __future__ import annotations

import re

from tests.support.console import PASSWORDS, audit_rows, csrf, jobs_rows
from tests.support.mor_tables import FID, FID2, I, MorTable
from tests.support.tables import tree_bytes


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" type="hidden" value="([^"]*)"', page)
    assert found, name
    return found.group(1)


def _confirm(client, page: str, url: str):
    return client.post(url, data={k: _hidden(page, k) for k in ("csrf_token", "instant", "comment", "fingerprint",
                                                                  "plan_hash")})


def _api(client, role: str) -> dict[str, str]:
    token = client.post("/api/v1/tokens", json={"username": role, "password": PASSWORDS[role]}).get_json()["token"]
    return {"Authorization": f"Bearer {token}"}


def _size(fx, *labels: str) -> int:
    return sum((fx.path / fx.files[k]).stat().st_size for k in labels)


def _kb(n: int) -> str:
    from webui.filters import human_bytes

    return human_bytes(n)


def _name(fx, label: str) -> str:
    return fx.files[label].rpartition("/")[2]


# ---- creating ------------------------------------------------------------------------------------
def test_create_a_merge_on_read_table_from_the_page(console):
    client = console.client("operator")
    form = client.get("/tables/new").get_data(as_text=True)
    assert '<option value="MERGE_ON_READ">MERGE_ON_READ: updates go to log files, compaction merges them' in form
    resp = client.post("/tables/new", data={"csrf_token": csrf(client), "name": "rides", "record_key": "ride_id",
                                            "precombine_field": "ts", "index": "BLOOM", "table_type": "MERGE_ON_READ"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/tables/rides"
    props = (console.root / "rides" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.type=MERGE_ON_READ" in props
    page = client.get("/tables/rides").get_data(as_text=True)
    assert '<span class="badge text-bg-light border" data-testid="table-type">MERGE_ON_READ</span>' in page
    assert 'data-testid="config-type">MERGE_ON_READ<' in page and 'data-testid="nav-compaction"' in page
    assert 'data-testid="mor-log-files">0 in 0 of 0 slice(s), 0 B<' in page
    listing = client.get("/tables").get_data(as_text=True)
    assert 'data-testid="table-type-rides">MERGE_ON_READ<' in listing and 'data-testid="table-type-trips">COPY_ON_WRITE<' in listing
    cow = client.get("/tables/trips").get_data(as_text=True)
    assert 'data-testid="nav-compaction"' not in cow and 'data-testid="mor-panel"' not in cow
    bad = client.post("/tables/new", data={"csrf_token": csrf(client), "name": "odd", "record_key": "id",
                                           "index": "BLOOM", "table_type": "MERGE_ON_WRITE"})
    assert bad.status_code == 400 and "Not a valid choice" in bad.get_data(as_text=True)
    assert not (console.root / "odd").exists()
    assert [(a[1], a[2], a[3]["table_type"], a[5]) for a in audit_rows(console.app)] == [
        ("table.create", "rides", "MERGE_ON_READ", "created")]


def test_create_a_merge_on_read_table_through_the_api(console):
    client = console.client()
    h = _api(client, "operator")
    resp = client.post("/api/v1/tables", headers=h, json={"name": "rides", "record_key": "id", "table_type": "MERGE_ON_READ"})
    assert resp.status_code == 201 and resp.get_json()["table_type"] == "MERGE_ON_READ"
    assert "hoodie.table.type=MERGE_ON_READ" in (console.root / "rides" / ".hoodie" / "hoodie.properties").read_text()
    bad = client.post("/api/v1/tables", headers=h, json={"name": "odd", "record_key": "id", "table_type": "merge_on_read"})
    assert bad.status_code == 400
    assert bad.get_json()["error"]["message"] == "table_type must be COPY_ON_WRITE or MERGE_ON_READ, got 'merge_on_read'"
    assert not (console.root / "odd").exists()
    listed = client.get("/api/v1/tables", headers=h).get_json()["tables"]
    assert [(t["name"], t["table_type"]) for t in listed] == [("rides", "MERGE_ON_READ"), ("trips", "COPY_ON_WRITE")]
    viewer = client.post("/api/v1/tables", headers=_api(client, "viewer"), json={"name": "v", "record_key": "id",
                                                                                  "table_type": "MERGE_ON_READ"})
    assert viewer.status_code == 403


# ---- browsing ------------------------------------------------------------------------------------
def test_file_groups_show_slices_log_files_and_the_pending_compaction(console, mor):
    client = console.client("operator")
    page = client.get("/tables/rides/file-groups").get_data(as_text=True)
    assert 'data-testid="groups-total">2 file group(s)<' in page
    assert page.count('data-testid="pending-badge"') == 1 and page.count('data-testid="being-compacted"') == 1
    assert page.count('data-testid="log-file"') == 4
    assert f'data-testid="run-compaction-{I[4]}"' in page
    assert f"1 slice(s), 2 log file(s), {_kb(_size(mor, 'log1', 'log2'))} of logs" in page
    # FID: the slice written after the compaction was planned, then the slice being compacted (rows in this order)
    rows = re.findall(r'<tr class="[^"]*" data-file-id="([^"]+)" data-slice="(\d+)">', page)
    assert rows == [(FID, I[4]), (FID, I[1]), (FID2, I[1])]
    assert "none until the compaction completes" in page
    assert f'<span class="lf-name" title="{_name(mor, "log1")}">….log.1_0-1-0</span>' in page
    assert f'{_kb(_size(mor, "log1"))} · 2 rec / 1 del · <a href="/tables/rides/commits/{I[2]}">{I[2]}</a>' in page
    assert (f'data-testid="log-summary">2 log files, {_kb(_size(mor, "log1", "log2"))}, 3 records written, '
            "1 deleted<") in page
    assert f'title="{_name(mor, "base")}">0-1-0_{I[1]}.parquet</div>' in page
    # filters: groups whose latest slice has log files (both), groups in a pending compaction (FID)
    logs = client.get("/tables/rides/file-groups?logs=1").get_data(as_text=True)
    assert 'data-testid="groups-total">2 file group(s)<' in logs
    pending = client.get("/tables/rides/file-groups?pending=1").get_data(as_text=True)
    assert 'data-testid="groups-total">1 file group(s)<' in pending and f'data-file-id="{FID2}"' not in pending
    # a viewer sees the same without the buttons
    viewer = console.client("viewer").get("/tables/rides/file-groups").get_data(as_text=True)
    assert 'data-testid="compact"' not in viewer and "run-compaction-" not in viewer
    assert viewer.count('data-testid="log-file"') == 4


def test_file_groups_through_the_api(console, mor):
    client = console.client()
    doc = client.get("/api/v1/tables/rides/file-groups", headers=_api(client, "viewer")).get_json()
    assert doc["total"] == 2 and doc["table_type"] == "MERGE_ON_READ"
    assert doc["partitions"] == [{"partition": "", "file_groups": 2, "log_files": 2,
                                  "bytes": _size(mor, "log3") + _size(mor, "base2", "log4")}]
    summary = [(g["file_id"], g["pending_compaction"],
                [(s["base_instant"], s["base_file"]["name"] if s["base_file"] else None,
                  [(lf["name"], lf["size"], lf["records"], lf["deletes"], lf["commit"]) for lf in s["log_files"]],
                  s["records"], s["latest"], s["being_compacted"], s["after_pending_compaction"]) for s in g["slices"]])
               for g in doc["groups"]]
    log = {k: (_name(mor, k), _size(mor, k)) for k in ("log1", "log2", "log3", "log4")}
    assert summary == [
        (FID, I[4], [
            (I[4], None, [(*log["log3"], 1, 0, I[5])], None, True, False, True),
            (I[1], _name(mor, "base"), [(*log["log1"], 2, 1, I[2]), (*log["log2"], 1, 0, I[3])], 3, False, True, False)]),
        (FID2, None, [(I[1], _name(mor, "base2"), [(*log["log4"], 1, 0, I[5])], 2, True, False, False)]),
    ]
    only = client.get("/api/v1/tables/rides/file-groups?pending=true", headers=_api(client, "viewer")).get_json()
    assert [g["file_id"] for g in only["groups"]] == [FID]


def test_timeline_shows_deltacommits_and_the_pending_compaction(console, mor):
    admin = console.client("admin").get("/tables/rides/timeline").get_data(as_text=True)
    rows = re.findall(r'<tr data-instant="(\d+)">.*?<td>(\w+)</td><td><span class="badge istate istate-(\w+)">', admin, re.S)
    assert rows == [(I[5], "deltacommit", "completed"), (I[4], "compaction", "requested"),
                    (I[3], "deltacommit", "completed"), (I[2], "deltacommit", "completed"),
                    (I[1], "deltacommit", "completed")]
    assert f'data-testid="plan-{I[4]}">plan: 1 slice(s), 2 log file(s)<' in admin
    assert f'data-testid="run-compaction-{I[4]}"' in admin and f'data-testid="rollback-{I[4]}"' in admin
    assert f'data-testid="rollback-{I[5]}"' in admin  # deltacommits can be rolled back
    operator = console.client("operator").get("/tables/rides/timeline").get_data(as_text=True)
    assert f'data-testid="run-compaction-{I[4]}"' in operator and "data-testid=\"rollback-" not in operator
    viewer = console.client("viewer").get("/tables/rides/timeline").get_data(as_text=True)
    assert "run-compaction-" not in viewer and "rollback-" not in viewer
    filtered = console.client("viewer").get("/tables/rides/timeline?action=compaction").get_data(as_text=True)
    assert 'data-testid="timeline-total">1 instant(s)<' in filtered


def test_commit_detail_of_a_deltacommit_lists_its_log_files(console, mor):
    page = console.client("viewer").get(f"/tables/rides/commits/{I[3]}").get_data(as_text=True)
    assert '<span class="badge text-bg-warning">log file v2</span>' in page
    stats = page[page.index('data-testid="log-stats"'):]
    stats = stats[:stats.index("</table>")]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", stats, re.S)]
    assert cells == [FID, "2", I[1], _name(mor, "base"), _name(mor, "log1") + _name(mor, "log2"), "1 / 0"]
    doc = console.client().get(f"/api/v1/tables/rides/commits/{I[5]}", headers=_api(console.client(), "viewer")).get_json()
    assert [(f["file_id"], f["kind"], f["log_version"], f["slice_base_instant"], f["base_file"], f["log_files"], f["writes"])
            for f in doc["files"]] == [
        (FID, "log", 1, I[4], None, [_name(mor, "log3")], 1),
        (FID2, "log", 1, I[1], _name(mor, "base2"), [_name(mor, "log4")], 1)]
    assert doc["log_files_written"] == 2 and doc["compaction"] is None and doc["compaction_plan"] is None


def test_a_pending_compaction_shows_its_plan(console, mor):
    page = console.client("operator").get(f"/tables/rides/commits/{I[4]}").get_data(as_text=True)
    assert f"This compaction is requested: it will merge the file slices below into new base files at <code>{I[4]}</code>" in page
    assert 'data-testid="plan-slices">1<' in page and 'data-testid="run-compaction"' in page
    ops = page[page.index('data-testid="plan-operations"'):]
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", ops[:ops.index("</table>")], re.S)]
    assert cells == ["(root)", FID, I[1], f"{_name(mor, 'base')} ({_kb(_size(mor, 'base'))})",
                     _name(mor, "log1") + _name(mor, "log2"), _kb(_size(mor, "log1", "log2"))]
    doc = console.client().get(f"/api/v1/tables/rides/commits/{I[4]}", headers=_api(console.client(), "viewer")).get_json()
    assert doc["instant"]["state"] == "requested" and doc["files"] == []
    assert doc["compaction_plan"]["operations"] == [{
        "partition": "", "file_id": FID, "base_instant": I[1], "base_file": _name(mor, "base"),
        "base_size": _size(mor, "base"), "log_files": [_name(mor, "log1"), _name(mor, "log2")],
        "log_bytes": _size(mor, "log1", "log2")}]
    assert "run-compaction" not in console.client("viewer").get(f"/tables/rides/commits/{I[4]}").get_data(as_text=True)


def test_overview_says_what_the_numbers_mean(console, mor):
    page = console.client("operator").get("/tables/rides").get_data(as_text=True)
    assert 'data-testid="stat-records">5<' in page  # 3 + 2 records written into the latest base files
    assert 'data-testid="stat-records-note">written into the latest base files<' in page
    assert 'data-testid="stat-log-records">5<' in page  # 2 + 1 + 1 + 1 written into the log files since
    assert 'data-testid="stat-log-records-note">1 deleted; written since, merged on read<' in page
    logs = _size(mor, "log1", "log2", "log3", "log4")
    base = _size(mor, "base", "base2")
    assert f'data-testid="stat-bytes">{_kb(base + logs)}<' in page
    assert f'data-testid="stat-bytes-note">{_kb(base)} base + {_kb(logs)} in 4 log file(s)<' in page
    assert f'data-testid="mor-log-files">4 in 2 of 2 slice(s), {_kb(logs)}<' in page
    assert 'data-testid="mor-deltacommits">4 (Hudi compacts inline after 5)<' in page
    assert 'data-testid="mor-inline">off <span class="small text-muted">(<code>hoodie.compact.inline=false</code>' in page
    assert page.count('data-testid="mor-pending"') == 1 and f"<code>{I[4]}</code></a><span>requested</span>" in page
    assert "the table's row count after merging is known only by reading it" in page


def test_health_panel_on_merge_on_read(console, mor):
    from engine.timeline.instant import parse_instant_time
    from webui.services import health, tables
    from webui.services.snapshot import TableSnapshot

    now = parse_instant_time(I[4]).timestamp() + 7200
    with console.app.app_context():
        snap = TableSnapshot.load(tables.open_meta(tables.get_table("rides")))
        findings = health.check(snap, now=now)
    logs, most = _size(mor, "log1", "log2", "log3", "log4"), _size(mor, "log1", "log2", "log3")
    assert findings == [
        {"level": "warn", "title": f"compaction {I[4]} requested 2 h ago",
         "detail": f"Planned on 1 file slice(s), 2 log file(s) ({_kb(_size(mor, 'log1', 'log2'))}). Writers keep appending "
                   "to new slices and snapshot reads merge both until it runs: run it from the Compact page (or roll it "
                   "back from the timeline)."},
        {"level": "warn", "title": "compact soon: 2 slice(s) with more log than base bytes",
         "detail": f"Snapshot reads merge 4 log file(s) ({_kb(logs)}, 5 records written) into 2 slice(s); the most in one "
                   f"slice: 3 ({_kb(most)} of logs on a {_kb(_size(mor, 'base'))} base file). Apache Hudi compacts inline "
                   "after hoodie.compact.inline.max.delta.commits = 5 deltacommits; the console's writes do not compact "
                   "inline, so run Compact. 1 of these slices are in a pending compaction: run it first."},
    ]
    # an inflight compaction older than 15 minutes is stuck
    (mor.path / ".hoodie" / f"{I[4]}.compaction.inflight").write_bytes(
        (mor.path / ".hoodie" / f"{I[4]}.compaction.requested").read_bytes())
    with console.app.app_context():
        snap = TableSnapshot.load(tables.open_meta(tables.get_table("rides")))
        stuck = health.check(snap, now=now)[0]
    assert (stuck["level"], stuck["title"]) == ("bad", f"compaction {I[4]} stuck inflight for 2 h")
    assert "running it again (Compact) deletes the base files the interrupted attempt left" in stuck["detail"]


def test_compact_soon_after_five_deltacommits(tmp_path):
    """Six deltacommits, each a log file on one slice with a big base file: the deltacommit count and
    the log-file count trigger it, the log size does not."""
    from engine.table.meta_client import MetaClient
    from webui.services import compactions
    from webui.services.health import _compact_soon
    from webui.services.snapshot import TableSnapshot

    t = MorTable(tmp_path / "t")
    rows = [(f"k{i:05d}", 1, "x" * 40) for i in range(20_000)]
    base = t.base_file(I[1], rows)
    t.commit(I[1], [base], stats={base: {"numWrites": 20_000, "numInserts": 20_000}})
    for n in range(2, 8):
        log = t.log_file([t.parquet_block(I[n], [("k00001", n, f"v{n}")])], base_instant=I[1], version=n - 1)
        t.commit(I[n], [log], stats={log: {"numWrites": 1, "numUpdateWrites": 1, "logVersion": n - 1}})
    snap = TableSnapshot.load(MetaClient.open(str(tmp_path / "t")))
    status = compactions.log_status(snap)
    assert (status["deltacommits_since_compaction"], status["many_logs"], status["big_logs"], status["log_files"],
            status["log_records"]) == (7, 1, 0, 6, 6)
    found = _compact_soon(status)
    assert found is not None
    assert found.title == "compact soon: 7 deltacommits since the last compaction, 1 slice(s) with 5 or more log files"
    assert found.detail.startswith("Snapshot reads merge 6 log file(s) (")


# ---- the compaction service ----------------------------------------------------------------------
def test_compaction_preview_then_confirm_queues_a_job(console, mor):
    client = console.client("operator")
    before = tree_bytes(mor.path)
    resp = client.get("/tables/rides/services/compaction")
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert 'data-testid="plan-instants">1<' in page and 'data-testid="plan-slices">1<' in page
    assert 'data-testid="plan-log-files">2<' in page
    assert f'data-testid="plan-bytes">{_kb(_size(mor, "base", "log1", "log2"))}<' in page
    assert f"Runs the pending compaction plan(s) {I[4]} (oldest first) as planned" in page
    assert tree_bytes(mor.path) == before and jobs_rows(console.app) == [] and audit_rows(console.app) == []
    resp = _confirm(client, page, "/tables/rides/services/compaction")
    assert resp.status_code == 302 and resp.headers["Location"] == "/jobs/1"
    assert jobs_rows(console.app) == [(1, "compaction", "queued", 2)]
    assert audit_rows(console.app) == [("operator", "compaction", "rides", {}, True, "queued", 1)]
    # the same for one pending plan by its instant
    page = client.get(f"/tables/rides/services/compaction?instant={I[4]}").get_data(as_text=True)
    assert _hidden(page, "instant") == I[4]
    assert _confirm(client, page, "/tables/rides/services/compaction").status_code == 302
    from webui.extensions import db
    from webui.models import Job

    with console.app.app_context():
        params = [db.session.get(Job, n).params for n in (1, 2)]
    assert [sorted(p) for p in params] == [["fingerprint", "plan_hash", "user"], ["fingerprint", "instant", "plan_hash", "user"]]
    assert params[1]["instant"] == I[4] and tree_bytes(mor.path) == before


def test_compaction_refuses_viewers_stale_plans_and_bad_instants(console, mor):
    viewer = console.client("viewer")
    assert viewer.get("/tables/rides/services/compaction").status_code == 403
    resp = viewer.post("/tables/rides/services/compaction", data={"csrf_token": csrf(viewer)})
    assert resp.status_code == 403 and "needs the operator role" in resp.get_data(as_text=True)
    client = console.client("operator")
    assert client.post("/tables/rides/services/compaction", data={}).status_code == 400  # no CSRF token
    page = client.get("/tables/rides/services/compaction").get_data(as_text=True)
    # a writer starts a deltacommit meanwhile
    (mor.path / ".hoodie" / f"{I[6]}.deltacommit.requested").write_bytes(b"")
    resp = _confirm(client, page, "/tables/rides/services/compaction")
    fresh = resp.get_data(as_text=True)
    assert resp.status_code == 409 and "the table changed since this plan was shown" in fresh
    assert _hidden(fresh, "fingerprint") != _hidden(page, "fingerprint")
    assert jobs_rows(console.app) == []
    assert audit_rows(console.app) == [("operator", "compaction", "rides", {"instant": "", "comment": ""}, True,
                                        "refused: stale plan", None)]
    missing = client.get(f"/tables/rides/services/compaction?instant={I[9]}")
    assert missing.status_code == 404 and f"no pending compaction {I[9]} on this table" in missing.get_data(as_text=True)
    done = client.get(f"/tables/rides/services/compaction?instant={I[3]}")
    assert done.status_code == 409 and f"compaction {I[3]} is already completed" in done.get_data(as_text=True)
    cow = client.get("/tables/trips/services/compaction")
    assert cow.status_code == 409
    assert "InvalidInputError: compaction applies to MERGE_ON_READ tables only" in cow.get_data(as_text=True)


def test_the_compaction_preview_says_what_it_means_for_other_writers(console, mor):
    client = console.client("operator")
    page = client.get("/tables/rides/services/compaction").get_data(as_text=True)
    assert ("It holds the table lock while it runs: other writes to this table are refused until it finishes "
            "(CONSOLE_CONCURRENCY_MODE=OPTIMISTIC_CONCURRENCY_CONTROL lets them go on).") in page
    assert "Writers can keep writing meanwhile" not in page
    console.app.config["CONSOLE_CONCURRENCY_MODE"] = "OPTIMISTIC_CONCURRENCY_CONTROL"
    page = client.get("/tables/rides/services/compaction").get_data(as_text=True)
    assert ("Writers can keep writing meanwhile: the plan leaves out file groups being written, and writes to "
            "the slices it merges go to the new slices.") in page
    assert "It holds the table lock" not in page


def test_nothing_to_compact(console):
    t = MorTable(console.root / "plain", name="plain")
    base = t.base_file(I[1], [("a", 1, "a1")])
    t.commit(I[1], [base])
    with console.app.app_context():
        from webui.services.tables import register_existing

        register_existing(str(t.root), "plain", None)
    client = console.client("operator")
    page = client.get("/tables/plain/services/compaction").get_data(as_text=True)
    assert "Nothing to do: the table needs no compaction now. No file slice has log files." in page
    assert 'data-testid="confirm-service" disabled' in page
    resp = client.post("/api/v1/tables/plain/compaction", headers=_api(client, "operator"), json={})
    assert resp.status_code == 409 and resp.get_json()["error"]["message"] == "nothing to compact: no file slice has log files"
    assert jobs_rows(console.app) == []


def test_compaction_through_the_api(console, mor):
    client = console.client()
    op = _api(client, "operator")
    plan = client.get("/api/v1/tables/rides/plans/compaction", headers=op).get_json()
    assert plan["operation"] == "compaction" and plan["params"] == {}
    assert plan["plan"] == {"mode": "pending", "plans": [{"instant": I[4], "operations": [{
        "partition": "", "file_id": FID, "base_instant": I[1], "base_file": _name(mor, "base"),
        "log_files": [_name(mor, "log1"), _name(mor, "log2")],
        "metrics": plan["plan"]["plans"][0]["operations"][0]["metrics"]}]}]}
    assert plan["summary"]["slices"] == 1 and plan["summary"]["log_bytes"] == _size(mor, "log1", "log2")
    assert client.post("/api/v1/tables/rides/compaction", headers=_api(client, "viewer"), json={}).status_code == 403
    resp = client.post("/api/v1/tables/rides/compaction", headers=op,
                       json={"fingerprint": plan["fingerprint"], "plan_hash": plan["hash"]})
    assert resp.status_code == 202 and resp.get_json()["job_id"] == 1
    stale = client.post("/api/v1/tables/rides/compaction", headers=op, json={"fingerprint": "0" * 24, "plan_hash": plan["hash"]})
    assert stale.status_code == 409 and stale.get_json()["error"]["code"] == "stale_plan"
    by_instant = client.post("/api/v1/tables/rides/compaction", headers=op, json={"instant": I[4]})
    assert by_instant.status_code == 202 and by_instant.get_json()["plan"]["params"] == {"instant": I[4]}
    assert jobs_rows(console.app) == [(1, "compaction", "queued", 2), (2, "compaction", "queued", 2)]


def test_read_optimized_preview_is_offered_on_merge_on_read_only(console, mor):
    client = console.client("viewer")
    mor_page = client.get("/tables/rides/preview").get_data(as_text=True)
    assert '<option value="read_optimized">read-optimized (base files only)</option>' in mor_page
    assert 'value="read_optimized"' not in client.get("/tables/trips/preview").get_data(as_text=True)
    resp = client.post("/tables/trips/preview", data={"csrf_token": csrf(client), "mode": "read_optimized", "limit": "5"})
    assert resp.status_code == 400 and jobs_rows(console.app) == []
    resp = client.post("/tables/rides/preview", data={"csrf_token": csrf(client), "mode": "read_optimized", "limit": "5"})
    assert resp.status_code == 302 and resp.headers["Location"] == "/jobs/1"
    h = _api(client, "viewer")
    api = client.post("/api/v1/tables/rides/jobs", headers=h, json={"operation": "preview", "mode": "read_optimized"})
    assert api.status_code == 202 and api.get_json() == {"job_id": 2}
    cow = client.post("/api/v1/tables/trips/jobs", headers=h, json={"operation": "preview", "mode": "read_optimized"})
    assert cow.status_code == 400
    assert cow.get_json()["error"]["message"] == "read_optimized applies to MERGE_ON_READ tables only"
    from webui.extensions import db
    from webui.models import Job

    with console.app.app_context():
        assert [db.session.get(Job, n).params["mode"] for n in (1, 2)] == ["read_optimized", "read_optimized"]


def test_mor_fixture_is_what_its_docstring_says(mor):
    """The reads the docstring promises, by the pure slice reader (so the worker test can rely on them)."""
    from tests.support.mor_tables import read_ours, values

    assert values(read_ours(mor.path).to_pylist(), "id", "ts", "val") == [
        ("a", 3, "a3"), ("b", 5, "b5"), ("d", 5, "d5"), ("e", 1, "e1")]
    assert values(read_ours(mor.path, read_optimized=True).to_pylist(), "id", "val") == [
        ("a", "a1"), ("b", "b1"), ("c", "c1"), ("d", "d1"), ("e", "e1")]
