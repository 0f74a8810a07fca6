"""A server's URLs: its base URL, as the user gave it (a path prefix included, e.g. a gateway's
`http://gw/llm`), and a path under it, joined in one place so no caller glues strings."""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit, urlunsplit


def url_of(base: str, path: str) -> str:
    """`path` on the server at `base`: `http://gw/llm/` + `/v1/models` -> `http://gw/llm/v1/models` (the
    prefix kept, one slash between, the base's query and fragment dropped)."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, path_of(base, path), "", ""))


def path_of(base: str, path: str) -> str:
    """The path part of `url_of(base, path)`, what an HTTP request line names (its origin-form target):
    `http://gw/llm/` + `/v1/models` -> `/llm/v1/models`."""
    return posixpath.join(urlsplit(base).path or "/", path.lstrip("/"))


def base_url(host: str, port: int, scheme: str = "http") -> str:
    """The base URL of a server listening on `host:port`: `127.0.0.1`, 8000 -> `http://127.0.0.1:8000`; an IPv6
    address in brackets (`::1` -> `http://[::1]:8000`)."""
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{scheme}://{bracketed}:{port}"
