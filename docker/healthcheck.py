#!/usr/bin/env python3
"""Container healthchecks for the local lakehouse (stdlib only; installed as `stack-health`).

    stack-health http URL [--json KEY=VALUE ...]   URL answers 2xx; its JSON has each KEY == VALUE
    stack-health tcp HOST:PORT [HOST:PORT ...]     each address accepts a TCP connection
    stack-health proc TEXT                         a process whose command line contains TEXT runs

Exit status 0 when healthy; 1 with one line on stderr when not (Docker keeps the last lines
of a healthcheck's output: `docker inspect --format '{{json .State.Health}}' CONTAINER`).
Every probe is bounded by --timeout (default 5 s).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path


class Unhealthy(Exception):
    """The probe failed; the message says what was seen."""


def check_http(url: str, expect: list[str], timeout: float) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        raise Unhealthy(f"{url} answered HTTP {e.code}") from e
    except (OSError, urllib.error.URLError) as e:
        raise Unhealthy(f"{url} unreachable: {e}") from e
    if not 200 <= status < 300:
        raise Unhealthy(f"{url} answered HTTP {status}")
    if expect:
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise Unhealthy(f"{url} did not answer JSON") from e
        for pair in expect:
            key, _, want = pair.partition("=")
            got = doc.get(key) if isinstance(doc, dict) else None
            if str(got) != want:
                raise Unhealthy(f"{url}: {key} is {got!r}, want {want!r}")
    return f"{url} HTTP {status}"


def check_tcp(addresses: list[str], timeout: float) -> str:
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise Unhealthy(f"not HOST:PORT: {address!r}")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except OSError as e:
            raise Unhealthy(f"{address} refused: {e}") from e
    return "tcp " + " ".join(addresses)


def check_proc(text: str, proc_root: Path = Path("/proc")) -> str:
    for cmdline in proc_root.glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue  # the process ended while we looked
        joined = b" ".join(args).decode(errors="replace")
        if text in joined and "stack-health" not in joined:
            return f"pid {cmdline.parent.name}: {joined}"
    raise Unhealthy(f"no process runs {text!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack-health", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=5.0)
    sub = parser.add_subparsers(dest="probe", required=True)
    http = sub.add_parser("http")
    http.add_argument("url")
    http.add_argument("--json", action="append", default=[], metavar="KEY=VALUE")
    tcp = sub.add_parser("tcp")
    tcp.add_argument("addresses", nargs="+", metavar="HOST:PORT")
    proc = sub.add_parser("proc")
    proc.add_argument("text")
    args = parser.parse_args(argv)
    try:
        if args.probe == "http":
            seen = check_http(args.url, args.json, args.timeout)
        elif args.probe == "tcp":
            seen = check_tcp(args.addresses, args.timeout)
        else:
            seen = check_proc(args.text)
    except Unhealthy as e:
        print(f"unhealthy: {e}", file=sys.stderr)
        return 1
    print(f"healthy: {seen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
