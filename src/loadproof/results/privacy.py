"""What the results store keeps of a run's target and names: nothing private, in publish's placeholders.

`publish` (the same layer, so not imported here) removes every private thing from a bundle; the store keeps far
less of a manifest (no options, no launch command, no engine environment, no extra body, no records' text), so
it needs only these rules, which give what publish would for the fields it keeps:

- the server's address: its scheme, port, and its host only where that is a loopback address or `localhost`;
  any other host is `<host>` (a private address, a machine's name, a cluster's service); no user, password,
  path or query (where an API key can sit) is kept;
- a name (the model, the profile, a version): a URL in it becomes `<url>`, an absolute path `<path>`;
- a run published already (placeholders in place of its address) keeps its placeholders.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

HOST, URL, PATH = "<host>", "<url>", "<path>"  # publish.shapes' placeholders
PLACEHOLDERS = frozenset({HOST, URL, PATH, "<ip>", "<secret>", "<redacted>"})
LOCAL_NAMES = frozenset({"localhost"})
_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_PATH_RE = re.compile(r"^(?:~|/|[A-Za-z]:[\\/]|\\\\)\S*")


def is_local(host: str) -> bool:
    """A loopback or unspecified address, or `localhost`: nothing private about it."""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def address(url: str | None) -> str | None:
    """`scheme://host:port`, the host kept only where it is local (`is_local`), else `<host>`."""
    if url is None or url in PLACEHOLDERS:
        return url
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return HOST
    if not parts.scheme or not host:
        return HOST
    kept = host if is_local(host) else HOST
    if ":" in kept:
        kept = f"[{kept}]"
    scheme = parts.scheme.lower() if parts.scheme.isalnum() else "http"
    return f"{scheme}://{kept}" + (f":{port}" if port is not None else "")


def name(text: str | None, limit: int) -> str | None:
    """A name as the store keeps it: URLs `<url>`, an absolute path `<path>`, at most `limit` characters."""
    if text is None:
        return None
    text = _URL_RE.sub(URL, str(text))
    text = _PATH_RE.sub(PATH, text)
    return text[:limit]
