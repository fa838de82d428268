"""Stage timings of the Spark application from its UI's REST API (needs `spark.ui.enabled=true`):
what `--stages` prints in the benchmarks."""

from __future__ import annotations

import json
from datetime import datetime


def stage_list(spark) -> list[dict]:
    import urllib.request

    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def last_stage_id(spark) -> int:
    return max((s["stageId"] for s in stage_list(spark)), default=-1)


def stages_since(spark, last_id: int) -> list[dict]:
    """Stages after `last_id` (skipped ones left out): id, name, tasks, wall and task seconds."""

    def ts(v: str | None) -> float | None:
        return datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp() if v else None

    out = []
    for st in sorted(stage_list(spark), key=lambda s: s["stageId"]):
        if st["stageId"] <= last_id or st.get("status") == "SKIPPED":
            continue
        sub, done = ts(st.get("submissionTime")), ts(st.get("completionTime"))
        out.append(
            {
                "stage": st["stageId"],
                "name": st.get("name", "")[:60],
                "tasks": st.get("numTasks"),
                "wall_s": round(done - sub, 2) if sub and done else None,
                "task_time_s": round(st.get("executorRunTime", 0) / 1000, 2),
                "input_rows": st.get("inputRecords"),
                "shuffle_read_rows": st.get("shuffleReadRecords"),
            }
        )
    return out


def print_stages(stages: list[dict]) -> None:
    print(f"      {'stage':>5} {'tasks':>5} {'wall s':>7} {'task s':>7}  name", flush=True)
    for st in stages:
        wall = "-" if st["wall_s"] is None else st["wall_s"]
        print(f"      {st['stage']:>5} {st['tasks']:>5} {wall!s:>7} {st['task_time_s']:>7}  {st['name']}", flush=True)
