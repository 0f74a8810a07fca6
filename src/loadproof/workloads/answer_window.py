"""The retrieval rule, in one place: a planted value counts as stated when it appears within the first
`ANSWER_WINDOW_CHARS` characters of the answer.

Used by the haystack workload and the quality retrieval suite (scoring), by the capacity and
interference claims (`probes_retrieved`, `followup_retrieved`), and by publish, which keeps of each
answer exactly the planted values found in this window; if publish kept a shorter window than the
claims read, a published bundle would no longer verify. Standard library only: `verify` reaches it.
"""

from __future__ import annotations

ANSWER_WINDOW_CHARS = 200


def answer_head(answer: str) -> str:
    """The part of an answer the rule reads."""
    return answer[:ANSWER_WINDOW_CHARS]


def states(answer: str, value: str) -> bool:
    """True iff `value` appears within the answer's first ANSWER_WINDOW_CHARS characters."""
    return value in answer[:ANSWER_WINDOW_CHARS]
