"""The haystack builder's logic on a small in-memory tokenizer (the real one is exercised on the engine)."""

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from loadproof.errors import UsageError
from loadproof.workloads.haystack import HaystackBuilder, retrieved


@pytest.fixture(scope="module")
def tokenizer():
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


@pytest.mark.parametrize("length", [60, 61, 500, 4097, 20_000])
def test_exact_length_with_overhead(tokenizer, length):
    builder = HaystackBuilder(tokenizer, overhead_tokens=3, seed=1)
    prompt = builder.build("s1", length, num_probes=3)
    assert builder.additive
    assert len(tokenizer.encode(prompt.text).ids) + 3 == length == prompt.num_tokens


def test_salt_first_unique_and_probes_planted_in_order_of_depth(tokenizer):
    builder = HaystackBuilder(tokenizer, overhead_tokens=1, seed=1)
    a = builder.build("s1", 3000, num_probes=2, depths=[0.9, 0.1])
    b = builder.build("s1", 3000, num_probes=2, depths=[0.9, 0.1])
    assert a.text.startswith(f"Archive s1, salt {a.salt}.")
    assert a.salt != b.salt  # never seeded: a second run shares no prefix
    assert a.probes == b.probes  # the facts are seeded: reproducible
    deep, shallow = (a.text.index(p.sentence) for p in a.probes)
    assert shallow < deep
    assert a.text.endswith(f"The secret code of {a.asked.key} is")
    assert a.followup().startswith(a.context) and a.followup() != a.text


def test_negative_control_asks_about_a_fact_never_planted(tokenizer):
    builder = HaystackBuilder(tokenizer, overhead_tokens=1, seed=1)
    prompt = builder.build("s2", 2000, plant=False)
    assert prompt.asked.value not in prompt.text
    assert f"secret code of {prompt.asked.key}?" in prompt.text
    assert len(tokenizer.encode(prompt.text).ids) + 1 == 2000


def test_filler_is_varied(tokenizer):
    prompt = HaystackBuilder(tokenizer, overhead_tokens=1, seed=1).build("s3", 5000)
    lines = prompt.text.splitlines()
    assert len(set(lines)) > 0.9 * len(lines)


def test_too_short_is_a_clear_error(tokenizer):
    with pytest.raises(UsageError, match="too short"):
        HaystackBuilder(tokenizer, overhead_tokens=1, seed=1).build("s1", 20)


def test_retrieved_looks_at_the_start_of_the_answer():
    from loadproof.workloads.haystack import Probe

    probe = Probe(key="session 1", value="1234567", depth=0.5)
    assert retrieved(probe, " 1234567. Then")
    assert not retrieved(probe, "x" * 300 + "1234567")
