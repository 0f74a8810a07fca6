"""GSM8K: the packaged subset is the documented selection, and extraction follows lm-eval's gsm8k task."""

import importlib.util
import json
import random
from importlib import resources
from pathlib import Path

import pytest

from loadproof.workloads.quality import gsm8k

ROOT = Path(__file__).resolve().parents[4]
SOURCE = ROOT.parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def packaged_text() -> str:
    return (resources.files("loadproof") / "data" / "quality" / gsm8k.SUBSET_FILE).read_text(encoding="utf-8")


def script():
    spec = importlib.util.spec_from_file_location("make_gsm8k_subset", ROOT / "scripts" / "make-gsm8k-subset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_subset_is_the_seeded_sample_of_the_test_indices():
    rows = [json.loads(line) for line in packaged_text().splitlines()]
    assert [r["index"] for r in rows] == sorted(random.Random(20261130).sample(range(1319), 200))
    assert [r["id"] for r in rows] == [f"gsm8k-test-{r['index']:04d}" for r in rows]
    assert all(set(r) == {"id", "index", "question", "answer"} and "####" in r["answer"] for r in rows)


@pytest.mark.skipif(not SOURCE.is_file(), reason="GSM8K source test.jsonl not present next to the checkout")
def test_subset_file_equals_the_regeneration_scripts_output():
    assert script().subset_text(SOURCE.read_bytes()) == packaged_text()


def test_load_subset_takes_the_first_n_in_file_order():
    five = gsm8k.load_subset(5)
    assert [p.id for p in five] == [p.id for p in gsm8k.load_subset()[:5]]
    assert five[0].id == "gsm8k-test-0003" and five[0].expected == "540"


def test_exemplars_are_not_subset_items_and_the_prompt_is_lm_evals_format():
    questions = {p.question for p in gsm8k.load_subset()}
    assert not questions & {q for q, _ in gsm8k.EXEMPLARS}
    prompt = gsm8k.fewshot_prompt("How many?")
    assert prompt.startswith("Question: ") and prompt.endswith("Question: How many?\nAnswer:")
    assert prompt.count("Question:") == len(gsm8k.EXEMPLARS) + 1
    for _, answer in gsm8k.EXEMPLARS:
        assert "\n\n" not in answer and gsm8k.extract_strict(answer) is not None  # a stop never cuts an exemplar


@pytest.mark.parametrize(
    "text, strict, flexible",
    [
        ("She makes 9 * 2 = $18 every day.\n#### 18", "18", "18"),
        ("The answer is 1,000.\n#### 1,000", "1,000", "1,000"),
        ("So it costs $5.50 in all.", None, "$5.50"),
        ("#### -3\nThen 7 more", "-3", "7"),
        ("I do not know.", None, None),
        ("First 12, then 3 and finally 45.", None, "45."),
        ("Answer: 5", None, "5"),
        ("#### 2 and #### 4", "2", "4"),
    ],
)
def test_extraction(text, strict, flexible):
    assert gsm8k.extract_strict(text) == strict
    assert gsm8k.extract_flexible(text) == flexible


@pytest.mark.parametrize(
    "extracted, expected, correct",
    [
        ("18", "18", True),
        ("$18", "18", True),
        ("18.", "18", True),
        ("1,000", "1000", True),
        ("$1,000.", "1000", True),
        ("18.00", "18", False),
        ("-3", "3", False),
        (None, "18", False),
    ],
)
def test_normalized_exact_match(extracted, expected, correct):
    assert gsm8k.is_correct(extracted, expected) is correct


def test_score_row_fields():
    row = gsm8k.score("9 * 2 = 18 dollars.\n#### 18", "18")
    assert row == {
        "extracted_strict": "18",
        "extracted_flexible": "18",
        "expected": "18",
        "correct_strict": True,
        "correct_flexible": True,
    }
    row = gsm8k.score("It is 18 dollars.", "18")
    assert row["correct_strict"] is False and row["correct_flexible"] is True
