"""`--session-header NAME` (`run replay`, `run sessions`): the HTTP header each request of a session carries its
session's id in, as routers that keep a conversation on one replica read it (vLLM's router hashes a session
header, llm-d's scheduler and SGLang's router take one too). The id is the scenario's: a sessions user's, a
Bailian trace's session, a recorded agent's copy; the plan keeps it per request, so a fleet's expectation groups
the requests by it. A name is an HTTP token (RFC 9110), never one the client sets itself.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from loadproof.scenarios.options import Panel, cli

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_OWN = {"authorization", "content-type", "content-length", "host", "accept", "connection", "transfer-encoding"}


def _header_name(value: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} is not an HTTP header name (letters, digits and -, e.g. x-session-id)")
    if value.lower() in _OWN:
        raise ValueError(f"{value} is a header the client sets itself: name another (e.g. x-session-id)")
    return value


HeaderName = Annotated[str, AfterValidator(_header_name)]


def session_header_field(what: str) -> Any:
    """The option, its help naming what the session id is in this scenario (`what`)."""
    return Field(
        default=None,
        description=f"send each request's session id in this HTTP header (e.g. x-session-id), for a router's "
        f"session affinity; the id: {what}",
        json_schema_extra=cli(panel=Panel.ARRIVALS, metavar="NAME"),
    )


def session_headers(name: str | None, session: str) -> dict[str, str] | None:
    """The headers of one request of `session` (None: no header asked)."""
    return {name: session} if name else None
