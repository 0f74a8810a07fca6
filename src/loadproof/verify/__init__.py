"""Offline verification of a publication bundle: checksums, then every claim recomputed from the data.

Imports only the claim definitions (metrics, with compute_claims), the record types (records), the
retrieval rule (workloads.answer_window) and the run-directory reader (store): the standard library
and msgspec, never a client, an engine, a tokenizer, pydantic, typer or rich
(tests/unit/verify/test_isolation.py proves it on every bundle under docs/runs).
"""

from loadproof.verify.check import ClaimCheck, RunResult, VerifyResult, verify
from loadproof.verify.checksums import FileProblem
from loadproof.verify.intervals import matches_printed, printed_interval

__all__ = ["ClaimCheck", "FileProblem", "RunResult", "VerifyResult", "matches_printed", "printed_interval", "verify"]
