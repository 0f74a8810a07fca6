"""A recorded agent's prompts rebuilt: the one tokens-per-character ratio by least squares, each message's text a
pure function of its digest and salt and exactly its tokens, and block ids shared exactly where everything before
and in a block is, so the replay's expected hits count whole shared leading blocks only."""

from __future__ import annotations

import pytest

from loadproof.metrics.replay import expected_hits
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.agent_prompts import MessageTexts, block_ids, chain, fit_tokens_per_char, head
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.tokens import LocalTokens


@pytest.fixture(scope="module")
def texts() -> MessageTexts:
    builder = HaystackBuilder(LocalTokens.load(tokenizer_path()), overhead_tokens=0, seed=7, style="chat")
    return MessageTexts(SyntheticPrompts(builder, run_salt="", seed=7), 7)


def test_the_ratio_is_fitted_by_least_squares_over_the_calls_that_recorded_both():
    # y = input - template: 10 and 20 for 10 and 20 characters: exactly 1 token a character
    assert fit_tokens_per_char([10, 20], [15, 25], [5, 5]) == pytest.approx(1.0)
    # (10 x 5 + 20 x 20) / (100 + 400) = 0.9; a call without an input, or without characters, is left out
    assert fit_tokens_per_char([10, 20, 30, 0], [10, 25, None, 50], [5, 5, 5, 5]) == pytest.approx(0.9)
    assert fit_tokens_per_char([0], [10], [2]) == 0.0 and fit_tokens_per_char([10], [1], [5]) == 0.0


def test_a_messages_text_is_a_pure_function_of_its_digest_and_salt_and_exactly_its_tokens(texts):
    one = texts.text("d1", "s", 40)
    assert texts.prompts.builder.count(one) == 40
    fresh = MessageTexts(texts.prompts, 7)
    assert fresh.text("d1", "s", 40) == one  # another planner, the same text
    assert texts.text("d1", "s2", 40) != one and texts.text("d2", "s", 40) != one
    assert one.startswith(head("d1", "s")) and not texts.text("d1", "s2", 40).startswith(head("d1", "s"))
    assert texts.text("d1", "s", 0) == ""
    least = texts.shortest("d1", "s")
    assert texts.tokens(3, 1.0, "d1", "s") == (least, True)  # raised to its head line and a pad
    assert texts.tokens(100, 0.5, "d1", "s") == (50, False) and texts.tokens(0, 1.0, "d1", "s") == (0, False)


def test_block_ids_are_shared_exactly_where_everything_before_and_in_the_block_is():
    a_keys = chain(["system|x", "user|y"])
    b_keys = chain(["system|x", "user|y", "assistant|z"])
    assert b_keys[:2] == a_keys  # a chain extends
    a = block_ids(list(zip(a_keys, [10, 10])), 8)  # 20 tokens: ends 8, 16, 20 (a cut last block)
    b = block_ids(list(zip(b_keys, [10, 10, 12])), 8)  # 32 tokens: ends 8, 16, 24, 32
    assert len(a) == 3 and len(b) == 4
    assert a[:2] == b[:2] and a[2] != b[2]
    other = block_ids(list(zip(chain(["system|x", "user|w"]), [10, 10])), 8)
    assert other[0] == a[0] and other[1] != a[1]  # block 2 holds user tokens that differ
    # the replay's expectation: b hits a's two whole blocks, never its cut last one
    assert expected_hits([20, 32, 20], [a, b, other], 8) == [0, 16, 8]
    # a segment that ends where a block ends holds that end
    km, kn = block_ids([("k", 8), ("m", 8)], 8), block_ids([("k", 8), ("n", 8)], 8)
    assert km[0] == kn[0] and km[1] != kn[1]
