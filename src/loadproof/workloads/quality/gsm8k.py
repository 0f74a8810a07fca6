"""GSM8K: the packaged 200-question subset, its prompts, and lm-evaluation-harness's answer extraction.

Scoring follows lm-eval's `gsm8k` task:
- strict: the first match of `#### (\\-?[0-9\\.\\,]+)`;
- flexible: the last match of `(-?[$0-9.,]{2,})|(-?[0-9]+)` anywhere in the answer;
- the expected answer is what follows `####` in the source answer;
- both sides lose commas, `$` and a trailing period, then must be equal as strings (so `18.00` is not
  `18`, as in lm-eval).
Base models get a few-shot completion prompt ("Question: ...\\nAnswer:", lm-eval's format) with four
exemplars written for loadproof in GSM8K's style (none is a GSM8K item); chat models get one
instruction message asking for the `#### <number>` line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

SUBSET_FILE = "gsm8k-200.jsonl"
STOP = ["Question:", "</s>", "<|im_end|>", "\n\n"]

STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_IGNORE = (re.compile(r","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))

# (question, chain-of-thought answer), authored for loadproof; short, to keep CPU prefill small
EXEMPLARS: tuple[tuple[str, str], ...] = (
    (
        "Tom has 3 boxes with 12 pencils in each box. He gives 10 pencils to his sister. "
        "How many pencils does Tom have left?",
        "Tom has 3 * 12 = 36 pencils. After giving away 10 he has 36 - 10 = 26 pencils.\n#### 26",
    ),
    (
        "A bakery sells muffins for $2 each. It sold 15 muffins on Monday and twice as many on Tuesday. "
        "How much money did it make from muffins on those two days?",
        "On Tuesday it sold 15 * 2 = 30 muffins. In total it sold 15 + 30 = 45 muffins. It made 45 * 2 = $90.\n#### 90",
    ),
    (
        "Maria reads 20 pages every day. Her book has 180 pages and she has read for 4 days. "
        "How many more days does she need to finish it?",
        "She has read 20 * 4 = 80 pages. There are 180 - 80 = 100 pages left. "
        "She needs 100 / 20 = 5 more days.\n#### 5",
    ),
    (
        "A farmer puts 48 apples into bags of 6 and sells each bag for $3. How much money does he get?",
        "He fills 48 / 6 = 8 bags. He gets 8 * 3 = $24.\n#### 24",
    ),
)

CHAT_INSTRUCTION = (
    "Solve the following math problem step by step. Then write the final answer alone on the "
    'last line in the form "#### <number>".\n\n'
)


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: str

    @property
    def expected(self) -> str:
        """The reference number: what follows `####` in the source answer, normalized."""
        return normalize(self.answer.split("####")[-1].strip())


def load_subset(num_items: int | None = None) -> list[Problem]:
    """The first `num_items` problems of the packaged subset (all 200 by default), in file order."""
    path = resources.files("loadproof") / "data" / "quality" / SUBSET_FILE
    problems = [
        Problem(row["id"], row["question"], row["answer"])
        for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    ]
    return problems if num_items is None else problems[:num_items]


def fewshot_prompt(question: str) -> str:
    shots = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in EXEMPLARS)
    return f"{shots}Question: {question}\nAnswer:"


def chat_prompt(question: str) -> str:
    return CHAT_INSTRUCTION + question


def extract_strict(text: str) -> str | None:
    match = STRICT.search(text)
    return match.group(1) if match else None


def extract_flexible(text: str) -> str | None:
    matches = FLEXIBLE.findall(text)
    if not matches:
        return None
    last: tuple[str, str] = matches[-1]  # FLEXIBLE has two groups: findall gives a pair per match
    return next(group for group in last if group)


def normalize(answer: str) -> str:
    """lm-eval's `regexes_to_ignore` for gsm8k, applied in its order, then stripped."""
    for pattern in _IGNORE:
        answer = pattern.sub("", answer)
    return answer.strip()


def is_correct(extracted: str | None, expected: str) -> bool:
    return extracted is not None and normalize(extracted) == normalize(expected)


def score(text: str, expected: str) -> dict[str, object]:
    """The answer row fields for one model answer."""
    strict, flexible = extract_strict(text), extract_flexible(text)
    return {
        "extracted_strict": strict,
        "extracted_flexible": flexible,
        "expected": expected,
        "correct_strict": is_correct(strict, expected),
        "correct_flexible": is_correct(flexible, expected),
    }
