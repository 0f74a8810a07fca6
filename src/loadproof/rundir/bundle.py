"""`bundle.json`: what a published bundle holds (docs/publish-and-verify.md, "What a bundle holds"), as
`publish` writes it and `verify` reads it back through `store.schema.read_bundle`.

The bundle's format (`format`, `format_version`: `Bundle.version`), who published it and when, and one
entry per run (`BundleRun`: its folder, scenario, sizes and provenance, the same `Publication` its
manifest carries) and per rate search or sweep (`BundleSeries`: its trial runs in order; a search's
claims folder, target attainment and whether it was interrupted).

Version 1: every bundle published so far (each under docs/runs records `format_version: 1`); a
bundle.json without `format_version` is read as version 1. Standard library and msgspec only: `verify`
reaches here.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import msgspec

from loadproof.rundir.manifest import Publication

FORMAT = "loadproof-bundle"


class BundleRun(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One run of the bundle: its id, its folder (`runs/<name>`), and what it is."""

    run_id: str
    path: str
    scenario: str | None = None
    num_records: int | None = None
    num_claims: int | None = None
    provenance: Publication | None = None  # the manifest's `publication`


class BundleSeries(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A rate search or sweep published as its trial runs (`runs`, in the order tried); a search also has
    its recomputed claims in `path` (`series/<series_id>`), its target `attainment`, `interrupted` (None: a
    sweep, or a search published before it was recorded, which was not interrupted) and `decision`, the rule
    its levels were decided on (`interval`; None: a sweep, or a search decided on the point value, #41)."""

    kind: Literal["search", "sweep"]
    series_id: str
    runs: list[str]
    path: str | None = None
    attainment: float | None = None
    interrupted: bool | None = None
    decision: str | None = None


class Bundle(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """bundle.json. Every field but `series` is always written (None as null); `series` only when the
    bundle holds one."""

    version: ClassVar[int] = 1

    format: str
    format_version: int
    loadproof_version: str | None
    published_wall_time: str | None
    engine_image: str | None
    raw_data: str | None
    runs: list[BundleRun]
    series: list[BundleSeries] = []


__all__ = ["FORMAT", "Bundle", "BundleRun", "BundleSeries"]
