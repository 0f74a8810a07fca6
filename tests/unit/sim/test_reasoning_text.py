"""The simulator as a reasoning model: when a request asks to think, and for how many tokens."""

import pytest

from loadproof.sim import text


@pytest.mark.parametrize(
    ("body", "thinks"),
    [
        ({"chat_template_kwargs": {"enable_thinking": True}}, True),
        ({"chat_template_kwargs": {"enable_thinking": False}}, False),
        ({"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"}, False),
        ({"reasoning_effort": "low"}, True),
        ({}, False),  # not asked: a plain request never reasons
    ],
)
def test_a_request_thinks_as_a_thinking_chat_template_reads_it(body, thinks):
    assert text.thinks(body) is thinks


def test_reasoning_is_the_share_of_the_output():
    assert text.reasoning_tokens(0.3, 28, 100, ignore_eos=False) == 12  # 12 of 40: 30%, the answer's 28 kept
    assert text.reasoning_tokens(0.3, 28, 40, ignore_eos=True) == 12  # 30% of max_tokens
    assert text.reasoning_tokens(0.0, 28, 40, ignore_eos=True) == 0
    assert text.reasoning("a prompt", 20) == text.reasoning("a prompt", 20)
    assert len(text.reasoning("a prompt", 900)) == 900 and text.reasoning("a prompt", 900).startswith("Let me think.")
