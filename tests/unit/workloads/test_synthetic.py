"""Synthetic load prompts: exact token lengths (the engine's overhead included), salted per run and per
request, a shared prefix only when asked; lengths fixed or drawn, as written."""

from __future__ import annotations

import statistics

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from loadproof.errors import UsageError
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.synthetic import Lengths, SyntheticPrompts, draw_lengths, parse_lengths


@pytest.fixture(scope="module")
def words():
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


@pytest.fixture(scope="module")
def byte_level():
    return Tokenizer.from_file(str(tokenizer_path()))  # the simulator's: one token per byte


@pytest.mark.parametrize("which", ["words", "byte_level"])
def test_every_prompt_has_exactly_its_length(which, request):
    tokenizer = request.getfixturevalue(which)
    builder = HaystackBuilder(tokenizer, overhead_tokens=3, seed=7)
    prompts = SyntheticPrompts(builder, run_salt="a1b2c3", seed=7)
    lengths = [prompts.shortest() + 5, 64, 65, 300, 1024, 5000, 70_000]
    texts, built, raised = prompts.build_all(lengths)
    assert raised == 0 and built == lengths
    for text, length in zip(texts, lengths):
        assert len(tokenizer.encode(text, add_special_tokens=False).ids) + 3 == length


def test_salted_per_request_and_per_run_and_reproducible_but_for_the_salt(byte_level):
    builder = HaystackBuilder(byte_level, overhead_tokens=1, seed=7)
    one = SyntheticPrompts(builder, run_salt="run1", seed=7).build_all([200, 200])[0]
    two = SyntheticPrompts(builder, run_salt="run2", seed=7).build_all([200, 200])[0]
    assert one[0].startswith("Archive 0, run run1.\n") and one[1].startswith("Archive 1, run run1.\n")
    a, b = (byte_level.encode(t, add_special_tokens=False).ids for t in one)
    common = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    assert common < 16  # no two requests share even a first KV block of 16 tokens
    assert [t.replace("run1", "run2") for t in one] == two  # the same seed: the same text but for the salt


def test_a_shared_prefix_is_identical_across_the_runs_requests_and_exact(words):
    builder = HaystackBuilder(words, overhead_tokens=2, seed=7)
    prompts = SyntheticPrompts(builder, run_salt="s9", seed=7, shared_prefix_tokens=120)
    texts, built, _ = prompts.build_all([400, 500, 600])
    prefix = prompts.prefix
    assert len(words.encode(prefix, add_special_tokens=False).ids) == 120
    assert all(t.startswith(prefix) for t in texts) and "s9" in prefix
    assert [len(words.encode(t, add_special_tokens=False).ids) + 2 for t in texts] == built == [400, 500, 600]
    assert texts[0][len(prefix) :].startswith("Archive 0, run s9.")
    with pytest.raises(UsageError, match="too short for a shared prefix"):
        SyntheticPrompts(builder, run_salt="s9", seed=7, shared_prefix_tokens=3)


def test_a_length_below_the_shortest_prompt_is_raised_and_counted(words):
    builder = HaystackBuilder(words, overhead_tokens=1, seed=7)
    prompts = SyntheticPrompts(builder, run_salt="x", seed=7)
    shortest = prompts.shortest()
    texts, built, raised = prompts.build_all([1, shortest, shortest + 1])
    assert raised == 1 and built == [shortest, shortest, shortest + 1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512", Lengths("fixed", 512)),
        ("uniform:10:20", Lengths("uniform", 10, 20)),
        ("normal:512:64", Lengths("normal", 512, 64)),
        ("lognormal:512:0.5", Lengths("lognormal", 512, 0.5)),
        (256, Lengths("fixed", 256)),
    ],
)
def test_lengths_parse_and_print_as_written(text, expected):
    assert parse_lengths(text) == expected
    assert parse_lengths(str(expected)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zipf:1:2", "unknown distribution 'zipf'"),
        ("lognormal:512", "two numbers"),
        ("0", "whole number of tokens >= 1"),
        ("12.5", "whole number"),
        ("uniform:20:10", "LOW <= HIGH"),
        ("normal:512:-1", "STD >= 0"),
        ("many", "must be a number"),
        ("uniform:a:3", "must be a number"),
    ],
)
def test_bad_lengths(text, message):
    with pytest.raises(ValueError, match=message):
        parse_lengths(text)


def test_draws_have_the_asked_shape_and_come_from_their_own_seeded_stream():
    n = 20_000
    uniform = draw_lengths(Lengths("uniform", 100, 200), n, 731, "input")
    assert min(uniform) == 100 and max(uniform) == 200
    normal = draw_lengths(Lengths("normal", 512, 64), n, 731, "input")
    assert statistics.fmean(normal) == pytest.approx(512, rel=0.01) and statistics.pstdev(normal) == pytest.approx(
        64, rel=0.03
    )
    lognormal = draw_lengths(Lengths("lognormal", 512, 0.5), n, 731, "output")
    assert statistics.median(lognormal) == pytest.approx(512, rel=0.02)  # the median is the first number
    assert draw_lengths(Lengths("normal", 512, 64), 50, 731, "input") == normal[:50]  # reproducible
    assert draw_lengths(Lengths("normal", 512, 64), 50, 731, "output") != normal[:50]  # another stream
