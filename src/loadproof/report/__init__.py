"""Reports render only from a run directory: claims recomputed from records, then Markdown."""

from loadproof.report.build import build_report

__all__ = ["build_report"]
