"""Offline verification of a publication bundle: checksums, then every claim recomputed from the data.

Imports only the claim definitions (metrics), the run-directory reader (store) and compute_claims
(report); never a client, an engine or a model.
"""

from loadproof.verify.check import ClaimCheck, RunResult, VerifyResult, verify
from loadproof.verify.checksums import FileProblem
from loadproof.verify.intervals import matches_printed, printed_interval

__all__ = ["ClaimCheck", "FileProblem", "RunResult", "VerifyResult", "matches_printed", "printed_interval", "verify"]
