"""One retrieval rule, one window: every reader of an answer agrees at the window's edge.

Publish keeps of each answer the planted values inside the window, and the capacity, interference,
haystack and quality-retrieval checks read the same window; if any of them read more or less, a
published bundle would stop verifying or a claim would change meaning.
"""

import pytest
from msgspec import convert

from loadproof.metrics.capacity import evaluate_capacity
from loadproof.metrics.interference import interference_claims
from loadproof.plans.capacity import CapacityPlan
from loadproof.plans.interference import InterferencePlan
from loadproof.publish.bundle import _without_output
from loadproof.records import RequestRecord
from loadproof.workloads.answer_window import ANSWER_WINDOW_CHARS, answer_head, states
from loadproof.workloads.haystack import HaystackPrompt, Probe, retrieved
from loadproof.workloads.quality.retrieval import RetrievalItem, score

VALUE = "1234567"
INSIDE = "x" * (ANSWER_WINDOW_CHARS - len(VALUE)) + VALUE  # ends on the window's last character
OUTSIDE = "x" + INSIDE  # one character too late


def test_the_window_is_200_characters():
    assert ANSWER_WINDOW_CHARS == 200
    assert answer_head("y" * 500) == "y" * 200
    assert states(INSIDE, VALUE) and not states(OUTSIDE, VALUE)


def claim(claims, name):
    return next(c.value for c in claims if c.name == name)


@pytest.mark.parametrize(("answer", "stated"), [(INSIDE, True), (OUTSIDE, False)])
def test_every_reader_of_an_answer_uses_the_same_window(answer, stated):
    probe = Probe(key="session 1", value=VALUE, depth=0.5)
    assert retrieved(probe, answer) is stated
    prompt = HaystackPrompt(session_id="s1", salt="0", text="", num_tokens=0, probes=(probe,), asked=probe, context="")
    assert score(RetrievalItem("retrieval-1-d50", 1, 0.5, prompt), answer)["correct"] is stated
    assert ("output_text" in _without_output({"output_text": answer}, [VALUE])) is stated  # publish keeps it

    record = RequestRecord(request_id="r1", endpoint="completions", ok=True, output_text=answer)
    plan = convert(
        {
            "sessions": [{"session_id": "s1", "request_id": "r1", "expected": VALUE}],
            "input_tokens": 1,
            "window_s": 1.0,
            "max_gap_s": 1.0,
            "drain_timeout_s": 1.0,
            "kv_idle_bound": 0.02,
        },
        CapacityPlan,
    )
    assert claim(evaluate_capacity(plan, [record], [], []).claims, "capacity.probes_retrieved") == int(stated)
    plan = convert(
        {
            "sessions": [{"session_id": "s1", "request_id": "r0", "followup_request_id": "r1", "expected": VALUE}],
            "newcomer": {"request_id": "n"},
            "window_s": 1.0,
            "session_tokens": 1,
            "newcomer_tokens": 1,
        },
        InterferencePlan,
    )
    assert claim(interference_claims(plan, [record], []), "interference.followup_retrieved") == int(stated)
