"""Jinja filters: sizes, numbers, instants."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask

from webui.services.text import age_text, human_bytes


def thousands(n: Any) -> str:
    if n is None:
        return "–"
    try:
        return f"{int(n):,}"
    except (TypeError, ValueError):
        return str(n)


def pretty(value: Any, key: str = "") -> str:
    """A result value for people: lists joined, dicts as k=v, byte counts sized."""
    if isinstance(value, list | tuple):
        return ", ".join(pretty(v) for v in value) or "–"
    if isinstance(value, dict):
        return ", ".join(f"{k}={pretty(v)}" for k, v in value.items()) or "–"
    if key.startswith("bytes") or key.endswith("bytes"):
        return human_bytes(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return thousands(value)
    return str(value)


def age(seconds: Any) -> str:
    """A duration for people: 45 s, 12 min, 5 h, 3 days."""
    return age_text(int(seconds or 0))


def with_page(page: int) -> str:
    """This page's URL with `page` set (other query arguments kept)."""
    from urllib.parse import urlencode

    from flask import request

    args = [(k, v) for k, v in request.args.items(multi=True) if k != "page"] + [("page", str(page))]
    return f"{request.path}?{urlencode(args)}"


def register(app: Flask) -> None:
    app.jinja_env.filters["bytes"] = human_bytes
    app.jinja_env.filters["num"] = thousands
    app.jinja_env.filters["pretty"] = pretty
    app.jinja_env.filters["age"] = age
    app.jinja_env.filters["tojson_attr"] = lambda v: json.dumps(v, default=str)
    app.jinja_env.globals["with_page"] = with_page  # a global: imported macros (the pager) see it too

    @app.context_processor
    def _globals() -> dict[str, Any]:
        from webui.auth import current_actor
        from webui.models import Role

        return {"Role": Role, "me": current_actor()}
