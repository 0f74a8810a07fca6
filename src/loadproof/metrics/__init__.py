"""Claims as pure functions of stored runs: each names its formula and unit.

`claim_functions` maps a scenario name to the function computing its claims from a loaded Run.
"""

from loadproof.metrics.claims import Claim, claims_payload
from loadproof.registry import Registry

claim_functions: Registry[object] = Registry("scenario")
claim_functions.register("throughput", "loadproof.metrics.throughput:claims_of_run")
claim_functions.register("capacity", "loadproof.metrics.capacity:claims_of_run")
claim_functions.register("prefill", "loadproof.metrics.prefill:claims_of_run")
claim_functions.register("interference", "loadproof.metrics.interference:claims_of_run")
claim_functions.register("soak", "loadproof.metrics.soak:claims_of_run")
claim_functions.register("quality", "loadproof.metrics.quality:claims_of_run")
claim_functions.register("ab", "loadproof.metrics.ab:claims_of_run")

__all__ = ["Claim", "claim_functions", "claims_payload"]
