"""Sizes and durations as people read them (pages, Jinja filters and health findings)."""

from __future__ import annotations

from typing import Any


def human_bytes(n: Any) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def age_text(seconds: int) -> str:
    """A duration for people: 45 s, 12 min, 5 h, 3 days."""
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


__all__ = ["age_text", "human_bytes"]
