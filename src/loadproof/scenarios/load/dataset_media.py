"""A data set's media checked before a load run (docs/scenarios.md, "Data sets with media"): every row read and
its media decoded once, with the options, so a truncated image, a wrong type or a media kind the target's route
does not carry is one line naming the file, the row and the field, before any run directory exists."""

from __future__ import annotations

from loadproof.errors import UsageError
from loadproof.protocol.routes import Route
from loadproof.scenarios.load.options import LoadOptions
from loadproof.scenarios.media_options import carriers
from loadproof.workloads.datasets import DatasetSpec, media_kinds


def check_dataset_media(opts: LoadOptions, route: Route, endpoint: str) -> None:
    assert opts.dataset is not None
    spec = DatasetSpec(
        path=opts.dataset,
        format=opts.dataset_format,
        columns=dict(opts.dataset_columns),
        skip_bad_rows=opts.skip_bad_rows,
    )
    found = media_kinds(spec)
    for kind in sorted(set(found) - route.media):
        path, row = found[kind]
        raise UsageError(f"{path}: row {row} carries {kind}; the {endpoint} endpoint carries none ({carriers(kind)})")
    if not route.takes_text and not found:
        raise UsageError(f"--dataset {opts.dataset}: no row carries media, and --endpoint {endpoint} sends media alone")
