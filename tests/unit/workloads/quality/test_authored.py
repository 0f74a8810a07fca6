"""Authored tasks: enough of them in each language, and every checker accepts its reference and rejects wrong answers."""

import pytest

from loadproof.workloads.quality import authored

TASKS = authored.load_tasks()


def test_at_least_thirty_tasks_in_english_chinese_and_code():
    assert len(TASKS) >= 30
    assert len({t.id for t in TASKS}) == len(TASKS)
    assert {t.lang for t in TASKS} == set(authored.LANGS)
    assert all(sum(t.lang == lang for t in TASKS) >= 8 for lang in authored.LANGS)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_checker_accepts_its_reference_and_rejects_wrong_answers(task):
    right = authored.check(task, task.reference)
    assert right["correct"] is True, right
    assert right["extracted"] is not None
    other = next(
        t
        for t in TASKS
        if t.check["kind"] == task.check["kind"]
        and t.check != task.check
        and authored.check(task, t.reference)["extracted"] != right["extracted"]
    )
    for wrong in ("I do not know.", "", other.reference):
        assert authored.check(task, wrong)["correct"] is False, wrong


def by_id(ident: str) -> authored.Task:
    return next(t for t in TASKS if t.id == ident)


@pytest.mark.parametrize(
    "ident, answer, correct",
    [
        ("en-arith-01", " 42\n", True),
        ("en-arith-01", "The answer is 42.", True),
        ("en-arith-01", "4,2", False),
        ("en-reverse-01", " 'Enots'.", True),
        ("en-upper-01", "lantern", False),
        ("en-sort-01", "apple,mango ,pear", True),
        ("en-capital-01", " Paris is the capital.", True),
        ("zh-capital-01", "北京市", True),
        ("zh-translate-01", "Cat。", True),
        ("en-json-01", 'Sure: {"age": 36, "name": "Ada"} done', True),
        ("en-json-01", '{"name": "Ada", "age": "36"}', False),
        ("code-eval-05", "[1, 2, 3]", True),
    ],
)
def test_extraction_is_lenient_on_form_strict_on_content(ident, answer, correct):
    assert authored.check(by_id(ident), answer)["correct"] is correct


def test_python_checker_runs_the_function_in_a_separate_limited_process():
    task = by_id("code-func-01")
    fenced = "```python\ndef add(a, b):\n    return a + b\n```"
    assert authored.check(task, fenced) == {"extracted": "[3,0,7]", "expected": "[3,0,7]", "correct": True}
    wrong = authored.check(task, "def add(a, b):\n    return a - b")
    assert wrong["extracted"] == "[-1,0,-13]" and wrong["correct"] is False
    assert authored.check(task, "def add(a, b):\n    import os\n    return 0")["extracted"] == "error: ImportError"
    assert authored.check(task, "def add(a, b):\n    return open('x').read()")["extracted"] == "error: NameError"
    assert authored.check(task, "no code here")["extracted"] is None


def test_python_checker_bounds_a_runaway_answer():
    result = authored.run_python("def f():\n    while True:\n        pass\n", "f", [[]], timeout_s=10)
    assert result.startswith("error:")


def test_python_body_at_the_indentation_of_its_first_line_is_dedented():
    assert (
        authored.python_source("   def add(a, b):\n       return a + b", "add") == "def add(a, b):\n    return a + b\n"
    )


def test_extracted_answers_are_cut_short():
    row = authored.check(by_id("en-reverse-01"), "x" * 500)
    assert len(row["extracted"]) <= authored.MAX_EXTRACTED_CHARS + 1
