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


def split_pairs(text: str, form: str, *, need_value: bool = False) -> list[tuple[str, str]]:
    """`a=1,b=2` -> [("a", "1"), ("b", "2")], each side stripped, blank parts skipped. A part without `=` (or,
    with `need_value`, without a value after it) is a ValueError: `form` (what a part looks like) and the part."""
    pairs = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or (need_value and not value.strip()):
            raise ValueError(f"{form} (got {part!r})")
        pairs.append((key.strip(), value.strip()))
    return pairs
