"""Quality claims and answer-by-answer changes from hand-built answer rows, counted by hand."""

from pathlib import Path

from loadproof.metrics.quality import answer_changes, quality_claims
from loadproof.store.run_dir import Run
from tests import rundir_values as rv


def g(item, flexible, strict=None, expected="18", **extra):
    return {
        "suite": "gsm8k",
        "item_id": item,
        "mode": "plain",
        "extracted_strict": strict,
        "extracted_flexible": flexible,
        "expected": expected,
        "correct_strict": None,
        "correct_flexible": None,
        **extra,
    }


def a(item, lang, correct, mode="plain", extracted="x", **extra):
    return {
        "suite": "authored",
        "item_id": item,
        "lang": lang,
        "mode": mode,
        "extracted": extracted,
        "expected": "x",
        "correct": correct,
        **extra,
    }


def r(length, depth, extracted, expected="4829105"):
    return {
        "suite": "retrieval",
        "item_id": f"retrieval-{length}-d{depth}",
        "mode": "plain",
        "length_tokens": length,
        "depth": depth / 100,
        "extracted": extracted,
        "expected": expected,
        "correct": extracted == expected,
    }


ROWS = [
    g("gsm8k-test-0001", "18", "18"),
    g("gsm8k-test-0002", "$18.", None),  # flexible only
    g("gsm8k-test-0003", "18.00", "18.00"),  # lm-eval: not 18
    g("gsm8k-test-0004", None, None, error="http_status"),
    a("en-arith-01", "en", True),
    a("en-arith-02", "en", False),
    a("zh-arith-01", "zh", True),
    a("code-eval-01", "code", True),
    a("en-arith-01", "en", None, mode="low-thinking", skipped="the model has no thinking mode"),
    a("zh-arith-01", "zh", None, mode="low-thinking", skipped="the model has no thinking mode"),
    r(1024, 25, "4829105"),
    r(1024, 75, "1234567"),
    r(4096, 25, None),
    {
        "suite": "retrieval",
        "item_id": "retrieval-16384-d25",
        "mode": "plain",
        "length_tokens": 16384,
        "depth": 0.25,
        "skipped": "longer than the model's max_model_len 8192 with the answer",
    },
    {"suite": "image", "item_id": "image-colour-red", "mode": "plain", "skipped": "completions endpoint"},
]


def claims(rows):
    return {c.name: c for c in quality_claims(rv.answers(rows))}


def test_gsm8k_counts_are_recomputed_from_extracted_and_expected():
    c = claims(ROWS)
    assert c["quality.gsm8k.items"].value == 4
    assert c["quality.gsm8k.correct"].value == 2
    assert c["quality.gsm8k.correct_strict"].value == 1
    assert c["quality.gsm8k.accuracy"].value == 0.5 and c["quality.gsm8k.accuracy"].printed == "0.500"
    assert c["quality.gsm8k.accuracy_strict"].printed == "0.250"
    assert c["quality.request_errors"].value == 1


def test_authored_per_mode_and_language_and_a_skipped_mode():
    c = claims(ROWS)
    assert (c["quality.authored.plain.correct"].value, c["quality.authored.plain.items"].value) == (3, 4)
    assert (c["quality.authored.plain.en.correct"].value, c["quality.authored.plain.en.items"].value) == (1, 2)
    assert c["quality.authored.plain.code.correct"].value == 1
    assert c["quality.authored.low-thinking.skipped"].value == "the model has no thinking mode"
    assert "quality.authored.low-thinking.items" not in c
    assert "quality.authored.low-thinking.en.items" not in c


def test_retrieval_per_length_and_image_skipped():
    c = claims(ROWS)
    assert (c["quality.retrieval.1024.retrieved"].value, c["quality.retrieval.1024.items"].value) == (1, 2)
    assert (c["quality.retrieval.4096.retrieved"].value, c["quality.retrieval.4096.items"].value) == (0, 1)
    assert c["quality.retrieval.16384.skipped"].printed.startswith("longer than")
    assert c["quality.image.skipped"].value == "completions endpoint"
    names = [n for n in c if n.startswith("quality.retrieval.")]
    assert names.index("quality.retrieval.4096.retrieved") < names.index("quality.retrieval.16384.skipped")


def test_a_row_written_twice_counts_once():
    c = claims([g("gsm8k-test-0001", "3"), g("gsm8k-test-0001", "18")])
    assert (c["quality.gsm8k.correct"].value, c["quality.gsm8k.items"].value) == (1, 1)


def test_no_rows_no_suite_claims():
    assert [c.name for c in quality_claims([])] == ["quality.request_errors"]


def run_of(rows) -> Run:
    return rv.run_of(Path("."), {"run_id": "x", "scenario": "quality"}, answers=rows)


def test_answer_changes_item_by_item():
    base = run_of(
        [
            g("gsm8k-test-0001", "18"),  # same answer, both right
            g("gsm8k-test-0002", "18"),  # right -> wrong
            g("gsm8k-test-0003", "7"),  # wrong -> right
            g("gsm8k-test-0004", "7"),  # wrong in both, different wrong answers
            g("gsm8k-test-0005", "18"),  # right in both, different form
            a("en-arith-01", "en", True),
            a("en-arith-01", "en", False, mode="low-thinking"),  # same id, another mode: matched separately
            a("en-only-base", "en", True),
            a("zh-skip", "zh", None, skipped="no thinking mode", mode="low-thinking"),
        ]
    )
    cand = run_of(
        [
            g("gsm8k-test-0001", "18"),
            g("gsm8k-test-0002", "81"),
            g("gsm8k-test-0003", "18"),
            g("gsm8k-test-0004", "9"),
            g("gsm8k-test-0005", "$18."),
            a("en-arith-01", "en", True),
            a("en-arith-01", "en", True, mode="low-thinking"),
            a("en-only-cand", "en", False),
            a("zh-skip", "zh", True, mode="low-thinking"),
        ]
    )
    changes = answer_changes(base, cand)
    ids = {kind: [(e["item_id"], e["mode"]) for e in entries] for kind, entries in changes.items()}
    assert ids["same_answer"] == [("gsm8k-test-0001", "plain"), ("en-arith-01", "plain")]
    assert ids["new_errors"] == [("gsm8k-test-0002", "plain")]
    assert ids["fixed_errors"] == [("gsm8k-test-0003", "plain"), ("en-arith-01", "low-thinking")]
    assert ids["same_errors"] == [("gsm8k-test-0004", "plain")]
    assert ids["changed_answer_both_correct"] == [("gsm8k-test-0005", "plain")]
    assert ids["only_in_base"] == [("en-only-base", "plain")]
    assert ids["only_in_candidate"] == [("en-only-cand", "plain")]
    assert ids["skipped"] == [("zh-skip", "low-thinking")]
    new = changes["new_errors"][0]
    assert (new["base"], new["candidate"], new["expected"]) == ("18", "81", "18")
    assert changes["same_errors"][0]["base"] == "7" and changes["same_errors"][0]["candidate"] == "9"
    assert changes["skipped"][0]["base"] == "skipped: no thinking mode"
