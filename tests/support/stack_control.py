"""Kill and start a service of the running stack from tests/stack, as `docker compose kill SERVICE`
and `docker compose start SERVICE` do.

Only the process-based stack offers this (`make stack-local`: tests/support/process_stack.py
serves it on STACK_CONTROL_URL), which SIGKILLs the service's process group and starts it again.
`make stack-test` runs the suite inside a container that has no Docker socket (giving it one
would give the tests root on the host), so there `unavailable()` says why and the tests that need
it skip.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

WAIT_S = 60.0


class ControlError(RuntimeError):
    """The stack refused or failed a kill/start; the message says what it answered."""


def unavailable() -> str | None:
    """None when a service can be killed and started here, else why not."""
    if os.environ.get("STACK_CONTROL_URL"):
        return None
    return ("no way to kill and restart the stack's services here: STACK_CONTROL_URL is unset (only make "
            "stack-local's process stack offers it)")


def kill(service: str) -> dict[str, Any]:
    """SIGKILL the service (all its processes) and wait until they are gone; {service, pid, started}."""
    return _post(service, "kill")


def start(service: str) -> dict[str, Any]:
    """Start the service again (a no-op if it runs); {service, pid, started}."""
    return _post(service, "start")


def _post(service: str, verb: str) -> dict[str, Any]:
    url = os.environ.get("STACK_CONTROL_URL")
    if not url:
        raise ControlError(unavailable() or "")
    req = urllib.request.Request(f"{url.rstrip('/')}/services/{service}/{verb}", data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=WAIT_S) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise ControlError(f"{verb} {service}: HTTP {exc.code} {exc.read().decode(errors='replace')}") from exc
