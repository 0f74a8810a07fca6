"""The strict base every config model derives from: an unknown key is an error, never dropped."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from loadproof.errors import ConfigError


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def one_line(exc: ValidationError, source: str) -> ConfigError:
    """A pydantic error as one clear line: where, which key, what is wrong."""
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{where}: {err['msg']}")
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return ConfigError(f"{source}: " + "; ".join(parts) + more)
