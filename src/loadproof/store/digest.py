"""A run's digest as a prediction contract's calibration input (`rundir.prediction`): the sha256 of each
request record's measured numbers, in record order, which is what calibration reads of a run. Publishing
sanitizes text and never a timestamp or a count, so a raw run folder and its published copy have the same
digest, and `verify` can tell whether a bundle's run is the one a contract was calibrated on."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

from loadproof.records import RequestRecord

DIGESTED = ("ok", "send_ns", "first_token_ns", "last_token_ns", "end_ns", "prompt_tokens", "output_tokens")


def measurement_digest(records: Sequence[RequestRecord]) -> str:
    rows = [[getattr(r, name) for name in DIGESTED] for r in records]
    return hashlib.sha256(msgspec.json.encode(rows)).hexdigest()
