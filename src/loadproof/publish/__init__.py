"""Publication: sanitized run data, provenance, recomputed claims and checksums in one bundle folder."""

from loadproof.publish.bundle import Publication, PublishedRun, publish
from loadproof.publish.sanitize import PLACEHOLDERS, Sanitizer

__all__ = ["PLACEHOLDERS", "Publication", "PublishedRun", "Sanitizer", "publish"]
