"""answers.jsonl: one scored row per quality item, on disk as soon as written, read back by load_run."""

import json

from loadproof.rundir import Answer
from loadproof.store.run_dir import ANSWERS, RunWriter, load_run


def test_answer_rows_are_flushed_and_read_back_a_torn_line_skipped(tmp_path):
    writer = RunWriter.create(tmp_path, "quality")
    writer.write_manifest({"run_id": writer.run_id, "scenario": "quality"})
    row = {"suite": "gsm8k", "item_id": "gsm8k-test-0003", "mode": "cot", "extracted_flexible": "540"}
    writer.answer(row)
    assert json.loads((writer.path / ANSWERS).read_text()) == row  # not closed yet
    writer.close()
    with open(writer.path / ANSWERS, "a") as f:
        f.write('{"suite": "gsm8k", "item_')
    run = load_run(writer.path)
    assert run.answers == [Answer(suite="gsm8k", item_id="gsm8k-test-0003", mode="cot", extracted_flexible="540")]
    assert run.num_torn_lines == 1


def test_a_run_without_answers_has_none(tmp_path):
    with RunWriter.create(tmp_path, "throughput") as writer:
        writer.write_manifest({"run_id": writer.run_id, "scenario": "throughput"})
    assert load_run(writer.path).answers == []
