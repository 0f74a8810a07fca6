"""Units shared across loadproof: one definition each.

Times are integer nanoseconds on a run's monotonic clock (`time.perf_counter_ns()`); figures are in
seconds. Standard library only: `verify` reaches this module.
"""

NS_PER_S = 1_000_000_000  # nanoseconds in a second
