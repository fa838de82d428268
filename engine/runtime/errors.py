"""Turning errors raised inside Spark tasks back into the engine's typed errors."""

from __future__ import annotations

import re

from engine import errors as engine_errors

_TYPED = re.compile(r"engine\.errors\.(\w+Error): (.+)")
_PY_ERROR = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Invalid)): (.+)$", re.M)


def task_error_message(exc: BaseException) -> str:
    """The last Python error line of a Spark task failure (no JVM stack), else str(exc)."""
    text = str(exc)
    found = _PY_ERROR.findall(text)
    if found:
        name, message = found[-1]
        return f"{name.rsplit('.', 1)[-1]}: {message.strip()}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def translate(exc: BaseException) -> engine_errors.EngineError | None:
    """The engine error a Spark task raised, rebuilt on the driver; None if it was something else."""
    if isinstance(exc, engine_errors.EngineError):
        return exc
    found = _TYPED.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(engine_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, engine_errors.EngineError):
        return cls(message.strip())
    return None
