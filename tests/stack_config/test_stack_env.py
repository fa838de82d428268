"""Every environment variable the code reads is set for the services that need it, and the
values agree across services (the keys minio-init creates are the keys the engine uses, ...).

The variables are found in the source: each line of engine/ and webui/ that touches the environment must read a named variable, alias os.environ, or be one of
the indirect reads listed here; a new variable fails these tests until it is classified below.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from engine import failpoints
from engine.storage.s3 import _ENV_VARS as S3_ENV_VARS
from tests.stack_config.stack_checks import REPO, compose_config, env_reads

# the console's interface (issue 10): what webui reads, given to console, job runner and migrations
CONSOLE_VARS = {"DATABASE_URL", "CONSOLE_SECRET_KEY", "CONSOLE_WAREHOUSE_ROOTS", "CONSOLE_ADMIN_USER",
                "CONSOLE_ADMIN_PASSWORD", "CONSOLE_MAX_UPLOAD_MB"}
# what the engine needs to reach the stack: S3 (MinIO), the HBase Thrift server, the Spark master
ENGINE_VARS = {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
               "HBASE_THRIFT_HOST", "HBASE_THRIFT_PORT", "SPARK_MASTER", "PYSPARK_PYTHON"}
# read by the code, deliberately not set in the stack
NOT_SET_IN_STACK = {
    "AWS_SESSION_TOKEN": "temporary credentials; MinIO's access key is permanent",
    "AWS_DEFAULT_REGION": "fallback for AWS_REGION, which is set",
    "PYSPARK_DRIVER_PYTHON": "defaults to the interpreter that runs the driver",
    "HOODIE_SPARK_LOG_LEVEL": "optional Spark log level (default ERROR)",
    "PYSPARK_GATEWAY_PORT": "set by spark-submit for a driver it starts (build_session then keeps its JVM)",
    "HOODIE_DEBUG": "CLI tracebacks, for debugging",
    "HOODIE_FAILPOINT": "crash tests only",
    "HOODIE_FAILPOINT_PGID": "crash tests only",
    "HOODIE_PAUSEPOINT": "concurrency tests only",
    "HOODIE_PAUSEPOINT_DIR": "concurrency tests only",
    # the console's optional settings (webui/config.py and its CLI, as on the console branch)
    "CONSOLE_SECURE_COOKIES": "Secure cookies behind TLS; the local stack serves plain HTTP",
    "CONSOLE_LOGIN_LIMIT": "login throttling rate per address (default 10 per minute), counted in the database",
    "CONSOLE_LOCKOUT_ATTEMPTS": "failed logins that lock an account (default 5)",
    "CONSOLE_LOCKOUT_WINDOW_MIN": "the window those failures count in (default 15 minutes)",
    "CONSOLE_LOCKOUT_MIN": "how long a lock lasts (default 15 minutes)",
    "CONSOLE_TOKEN_LIFETIME_DAYS": "API token lifetime (default 30 days)",
    "CONSOLE_PORT": "the port of `hoodie-console run` (make run); in the stack gunicorn's -b sets it, and "
                    "CONSOLE_PORT in .env is the published host port, never passed into a container",
    "CONSOLE_NEW_PASSWORD": "input of `hoodie-console create-user`",
    "CONSOLE_MAX_UPLOAD_ROWS": "bound on one upload's rows; the default (1,000,000) suits the local stack",
    "CONSOLE_MAX_UPLOAD_DECODED_MB": "bound on one upload once decoded; the default (256) suits the local stack",
    "CONSOLE_MAX_JOBS_PER_USER": "queued/running preview or write jobs per user; the default (4) suits the local stack",
    "CONSOLE_CONCURRENCY_MODE": "the console's hoodie.write.concurrency.mode; the default (SINGLE_WRITER) suits a "
                                "stack where only the console writes",
    "CONSOLE_URL": "the console's address as tests/stack and the demo's printed links see it: set for "
                   "stack-test only; elsewhere the demo prints http://127.0.0.1:$CONSOLE_PORT (default 8000), "
                   "what a browser on the host opens",
    "CONSOLE_TEST_HOLD_AT": "console tests only",
}
# lines that read variables through a name the line does not spell; their names come from the module
INDIRECT = {
    "engine/storage/s3.py": ({v for names in S3_ENV_VARS.values() for v in names},
                             "value = given.get(key) or next((os.environ[v] for v in env_vars if os.environ.get(v)), None)"),
    "engine/failpoints.py": ({failpoints.ENV_POINT, failpoints.ENV_PGID, failpoints.ENV_PAUSE, failpoints.ENV_PAUSE_DIR},
                             "if os.environ.get(ENV_POINT) != point:", "pgid = os.environ.get(ENV_PGID)",
                             "if os.environ.get(ENV_PAUSE) == point and os.environ.get(ENV_PAUSE_DIR):",
                             "_pause(point, os.environ[ENV_PAUSE_DIR])"),
    # the console (once merged): its test hold point, and a generic reader its callers name
    "webui/jobs/progress.py": ({"CONSOLE_TEST_HOLD_AT"},
                               'hold, _, table = (os.environ.get(HOLD_ENV) or "").partition("@")'),
    "webui/config.py": (set(), "return os.environ.get(name)"),
}
# the web console only: where it is published, and its volume for a generated secret key
CONSOLE_WEB_VARS = {"CONSOLE_BIND", "CONSOLE_INSTANCE_DIR"}
NEEDS = {
    "spark-master": ENGINE_VARS,
    "spark-worker": ENGINE_VARS,
    "console": ENGINE_VARS | CONSOLE_VARS | CONSOLE_WEB_VARS,
    "worker": ENGINE_VARS | CONSOLE_VARS,
    "console-migrate": CONSOLE_VARS,
}


def code_roots():
    return [p for p in (REPO / "engine", REPO / "webui") if p.is_dir()]


def variables_read() -> set[str]:
    found, unexplained = env_reads(code_roots())
    left = []
    for line in unexplained:
        path, _, code = line.partition(": ")
        module = path.rsplit(":", 1)[0]
        names, *lines = INDIRECT.get(module, (set(),))
        if code in lines:
            found |= names
        else:
            left.append(line)
    assert left == [], "environment reads this test does not understand: classify them in INDIRECT"
    return found


def test_every_variable_the_code_reads_is_classified():
    found = variables_read()
    assert found - ENGINE_VARS - CONSOLE_VARS - CONSOLE_WEB_VARS - set(NOT_SET_IN_STACK) == set()
    # the scan sees what the engine reads (a broken scanner would find nothing and pass above)
    assert ENGINE_VARS <= found
    assert {"AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "HOODIE_FAILPOINT"} <= found


def test_the_scanner_finds_reads_and_flags_what_it_cannot_name(tmp_path):
    (tmp_path / "m.py").write_text(
        "import os\n"
        "A = os.environ.get('NEW_A')\n"
        "B = os.getenv(\"NEW_B\", '1')\n"
        "if 'NEW_C' not in os.environ:  # comment os.environ['NOT_READ']\n"
        "    env = os.environ\n"
        "    D = env.get('NEW_D')\n"
        "name = 'X'\n"
        "E = os.environ[name]\n"
    )
    found, unexplained = env_reads([tmp_path])
    assert found == {"NEW_A", "NEW_B", "NEW_C", "NEW_D"}
    assert unexplained == [f"{tmp_path / 'm.py'}:8: E = os.environ[name]"]


@pytest.fixture(scope="module")
def env():
    return {name: svc.get("environment") or {} for name, svc in compose_config()["services"].items()}


@pytest.mark.parametrize("service", sorted(NEEDS))
def test_each_service_has_what_it_needs(env, service):
    assert NEEDS[service] - set(env[service]) == set()
    assert set(NOT_SET_IN_STACK) & set(env[service]) == set()


def test_the_engine_points_at_the_stacks_services(env):
    config = compose_config()
    for service in ("spark-master", "spark-worker", "console", "worker"):
        e = env[service]
        assert (e["AWS_ENDPOINT_URL"], e["HBASE_THRIFT_HOST"], e["HBASE_THRIFT_PORT"], e["SPARK_MASTER"]) == (
            "http://minio:9000", "hbase", "9090", "spark://spark-master:7077")
        assert e["PYSPARK_PYTHON"] == "/usr/local/bin/python"  # the image's interpreter everywhere
    master = config["services"]["spark-master"]["command"]
    assert master[master.index("--host") + 1] == "spark-master" and master[master.index("--port") + 1] == "7077"
    assert "hbase" in config["services"] and "9000" in {str(p["target"]) for p in config["services"]["minio"]["ports"]}


def test_the_keys_minio_init_creates_are_the_keys_the_engine_uses(env):
    init = env["minio-init"]
    for service in ("spark-master", "spark-worker", "console", "worker"):
        assert (env[service]["AWS_ACCESS_KEY_ID"], env[service]["AWS_SECRET_ACCESS_KEY"]) == (
            init["LAKEHOUSE_ACCESS_KEY"], init["LAKEHOUSE_SECRET_KEY"])
    assert (init["MINIO_ROOT_USER"], init["MINIO_ROOT_PASSWORD"]) == (
        env["minio"]["MINIO_ROOT_USER"], env["minio"]["MINIO_ROOT_PASSWORD"])
    assert init["MINIO_URL"] == env["console"]["AWS_ENDPOINT_URL"]
    # the engine's key is not MinIO's root: the root login stays with minio and minio-init
    assert env["console"]["AWS_ACCESS_KEY_ID"] != env["minio"]["MINIO_ROOT_USER"]
    assert {s for s, e in env.items() if "MINIO_ROOT_PASSWORD" in e} == {"minio", "minio-init"}


def test_the_warehouse_is_the_bucket_minio_init_creates(env):
    for service in ("console", "worker", "console-migrate"):
        assert env[service]["CONSOLE_WAREHOUSE_ROOTS"] == f"s3://{env['minio-init']['LAKEHOUSE_BUCKET']}/warehouse"


def test_the_console_database_is_the_postgres_service(env):
    pg = env["postgres"]
    for service in ("console", "worker", "console-migrate"):
        url = urlsplit(env[service]["DATABASE_URL"])
        assert (url.scheme, url.hostname, url.port, url.path) == (
            "postgresql+psycopg", "postgres", 5432, f"/{pg['POSTGRES_DB']}")
        assert (url.username, url.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"])


def test_console_and_runner_share_one_configuration(env):
    web = {k: v for k, v in env["console"].items() if k not in CONSOLE_WEB_VARS}
    assert web == env["worker"] == env["console-migrate"]
    assert {k: env["console"][k] for k in CONSOLE_WEB_VARS} == {
        "CONSOLE_BIND": "127.0.0.1", "CONSOLE_INSTANCE_DIR": "/var/lib/hoodie-console"}
