#!/usr/bin/env python3
"""Wait for the local lakehouse to be up, then print its URLs and the console login.

Run by `make up` after `docker compose up --detach` (stdlib only: it runs on the host).
The stack is up when every container of every long-running service (one with a healthcheck)
is running and healthy, and every one-shot service (no healthcheck: minio-init,
console-migrate) has exited with status 0. It fails at once, naming the service, when a
one-shot exits non-zero or a service's container exits or turns unhealthy, and after
--timeout seconds otherwise.

`docker compose ps --format json` prints one JSON object per line (Compose >= 2.21) or one
JSON array (older releases); both are read.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Service:
    name: str
    replicas: int
    long_running: bool  # has a healthcheck; otherwise a one-shot that must exit 0


@dataclass
class Assessment:
    ready: bool
    waiting: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def services_of(config: dict[str, Any]) -> list[Service]:
    """The services `docker compose up` starts, from `docker compose config --format json`."""
    out = []
    for name, svc in sorted(config.get("services", {}).items()):
        replicas = (svc.get("deploy") or {}).get("replicas")
        healthcheck = svc.get("healthcheck") or {}
        out.append(Service(name, 1 if replicas is None else int(replicas),
                           bool(healthcheck) and not healthcheck.get("disable")))
    return out


def parse_ps(text: str) -> list[dict[str, Any]]:
    """Rows of `docker compose ps --all --format json`, in either output form."""
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assess(services: list[Service], rows: list[dict[str, Any]]) -> Assessment:
    """Whether the stack is up: what is still starting and what has failed."""
    result = Assessment(ready=False)
    for svc in services:
        mine = [r for r in rows if r.get("Service") == svc.name]
        if svc.long_running:
            for r in mine:
                state, health = r.get("State", ""), r.get("Health", "")
                if state in ("exited", "dead") or health == "unhealthy":
                    result.failed.append(f"{r.get('Name', svc.name)}: {state} {health}".rstrip())
                elif state != "running" or health != "healthy":
                    result.waiting.append(f"{r.get('Name', svc.name)}: {state} {health or '-'}")
            if len(mine) < svc.replicas:
                result.waiting.append(f"{svc.name}: {len(mine)} of {svc.replicas} containers")
        else:
            if not mine:
                result.waiting.append(f"{svc.name}: not started")
            for r in mine:
                state, code = r.get("State", ""), r.get("ExitCode", 0)
                if state == "exited" and code != 0:
                    result.failed.append(f"{r.get('Name', svc.name)}: exited with status {code}")
                elif state != "exited":
                    result.waiting.append(f"{r.get('Name', svc.name)}: {state}")
    result.ready = not result.waiting and not result.failed
    return result


def _published(rows: list[dict[str, Any]], service: str, target: int) -> list[str]:
    ports = []
    for r in sorted(rows, key=lambda r: r.get("Name", "")):
        if r.get("Service") != service:
            continue
        for p in r.get("Publishers") or []:
            if p.get("TargetPort") == target and p.get("PublishedPort"):
                host = p.get("URL") or "127.0.0.1"
                host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
                ports.append(f"{host}:{p['PublishedPort']}")
    return list(dict.fromkeys(ports))


# (service, container port, what it is, URL scheme or None for a plain address)
ENDPOINTS = [
    ("console", 8000, "console", "http"),
    ("spark-master", 8080, "Spark master UI", "http"),
    ("spark-worker", 8081, "Spark worker UI", "http"),
    ("spark-master", 7077, "Spark master", "spark"),
    ("minio", 9001, "MinIO console", "http"),
    ("minio", 9000, "MinIO S3 API", "http"),
    ("hbase", 16010, "HBase master UI", "http"),
    ("hbase", 9090, "HBase Thrift", None),
]


def summary(config: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """The lines `make up` prints: one per published endpoint, then the console login."""
    lines = []
    for service, target, what, scheme in ENDPOINTS:
        for address in _published(rows, service, target):
            lines.append(f"  {what:<17} {scheme + '://' if scheme else ''}{address}")
    env = (config.get("services", {}).get("console") or {}).get("environment") or {}
    if env.get("CONSOLE_ADMIN_USER"):
        lines.append(f"  console login     {env['CONSOLE_ADMIN_USER']} / {env.get('CONSOLE_ADMIN_PASSWORD', '')}"
                     "   (CONSOLE_ADMIN_USER / CONSOLE_ADMIN_PASSWORD in .env)")
    return lines


def _run(compose: list[str], *args: str) -> str:
    return subprocess.run([*compose, *args], check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--compose", default="docker compose", help="the compose command (default: %(default)s)")
    args = parser.parse_args(argv)
    compose = shlex.split(args.compose)
    config = json.loads(_run(compose, "config", "--format", "json"))
    services = services_of(config)
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        rows = parse_ps(_run(compose, "ps", "--all", "--format", "json"))
        state = assess(services, rows)
        if state.failed:
            print("the stack did not come up: " + "; ".join(state.failed)
                  + "\n(see `make logs`, or `docker compose logs SERVICE`)", file=sys.stderr)
            return 1
        if state.ready:
            print("The local lakehouse is up:")
            print("\n".join(summary(config, rows)))
            return 0
        if time.monotonic() > deadline:
            print(f"timed out after {args.timeout:.0f}s waiting for: " + "; ".join(state.waiting)
                  + "\n(see `make ps` and `make logs`)", file=sys.stderr)
            return 1
        if state.waiting != last:
            print("waiting for: " + "; ".join(state.waiting), flush=True)
            last = state.waiting
        time.sleep(3)


if __name__ == "__main__":
    sys.exit(main())
