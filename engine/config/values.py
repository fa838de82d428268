"""Option values as Apache Hudi's writers accept them (shared by the config modules)."""

from __future__ import annotations


def parse_bool(value: object) -> bool:
    """true/false (also 1/0, yes/no, any case); ValueError otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


__all__ = ["parse_bool"]
