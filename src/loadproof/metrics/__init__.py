"""Claims as pure functions of stored records: each names its formula and unit."""

from loadproof.metrics.claims import Claim, claims_payload

__all__ = ["Claim", "claims_payload"]
