"""Where an imported run came from (`loadproof import`, docs/import.md): another tool's result file, as the
manifest keeps it under `source`. A run loadproof measured itself has none.

`Source` names the tool, the version its file's shape is (the tool's own word where the file states one), the
file and its sha256, and whether the run holds the file's per-request data (its records then carry every
claim, recomputed as for any run) or only what the file states (`stated`: each figure as the file gives it,
in loadproof's units, with where the file holds it; no interval is invented for them), and where the run's dates
come from (`dated`: the manifest's start and end are the tool's, read from the field it names, or, where the file
states no date, the run is dated by its import). Standard library and msgspec only: `verify` reaches here.
"""

from __future__ import annotations

import msgspec


class StatedFigure(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One figure an imported file states: `figure` is the part of a loadproof claim of the same meaning
    (`metrics.imported` names the claim), `stat` its statistic (mean, p50, p99, ...; "" for a rate), `value`
    in loadproof's unit (seconds, requests or tokens per second), `where` the file holds it."""

    figure: str
    stat: str = ""
    value: float
    where: str  # the file's key (a secret-sounding name, `key`, would be redacted by publish)


class Source(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    tool: str  # vllm-bench, guidellm, aiperf, inference-perf
    version: str  # the version the file states, else the shape it was read as (e.g. "0.7 shape")
    file: str  # the file's name as given (a folder's files: the one read for the figures)
    sha256: str  # of that file's bytes
    per_request: bool  # True: the records are the file's requests; False: only `stated`
    part: str = ""  # a part of the file made into this run (inference-perf: "stage 1"), "" for all of it
    imported_by: str = ""  # the loadproof version that imported it
    stated: list[StatedFigure] = []
    # where the manifest's start and end wall times come from: the file's field(s) and how they were read
    # (`date (local time ...) less duration`), or DATED_BY_IMPORT: the file states no date, the run is dated by
    # its import; "" in a manifest imported before this was kept (dated by its import too)
    dated: str = ""

    @property
    def dated_by_import(self) -> bool:
        return self.dated in ("", DATED_BY_IMPORT)


DATED_BY_IMPORT = "import"


__all__ = ["DATED_BY_IMPORT", "Source", "StatedFigure"]
