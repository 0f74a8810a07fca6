"""Retrieval items: one planted code per prompt, at every length and depth asked."""

from tokenizers import Tokenizer, models, pre_tokenizers

from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.quality import retrieval


def builder() -> HaystackBuilder:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return HaystackBuilder(tok, overhead_tokens=1, seed=1)


def test_items_at_every_length_and_depth_and_scoring():
    items = retrieval.build_items(builder(), [300, 600], [0.25, 0.75])
    assert [i.item_id for i in items] == [
        "retrieval-300-d25",
        "retrieval-300-d75",
        "retrieval-600-d25",
        "retrieval-600-d75",
    ]
    item = items[0]
    assert item.prompt.num_tokens == 300 and item.prompt.asked.sentence in item.prompt.text
    right = retrieval.score(item, f" {item.expected}. The code")
    assert right == {
        "length_tokens": 300,
        "depth": 0.25,
        "extracted": item.expected,
        "expected": item.expected,
        "correct": True,
    }
    wrong = retrieval.score(item, " 1234567, I think")
    assert wrong["extracted"] == "1234567" and wrong["correct"] is False
    assert retrieval.score(item, " unknown")["extracted"] is None
