"""Data sets for `run load --dataset`: every reader, malformed input as one line naming file and row, the
filters, seeded sampling, repetition, the token cache, and a 100,000-row file streamed."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from loadproof.errors import UsageError
from loadproof.workloads import dataset_readers
from loadproof.workloads.datasets import DatasetError, DatasetSpec, TokenCache, parse_columns, select


def words(items):
    """Token counts: whitespace-separated words, + 1 for the engine's BOS."""
    return [len(i.text().split()) + 1 for i in items]


def sharegpt(path: Path, n: int, extra: list | None = None) -> Path:
    rows = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": f"question {i} " + "word " * (i % 9)},
                {"from": "gpt", "value": "answer " * (1 + i % 5)},
            ],
        }
        for i in range(n)
    ]
    path.write_text(json.dumps(rows + (extra or [])), encoding="utf-8")
    return path


def jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_sharegpt_takes_the_first_human_turn_and_its_reply_streaming_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset_readers, "CHUNK", 37)  # objects cut across reads
    path = sharegpt(
        tmp_path / "sg.json",
        20,
        extra=[
            {"id": "empty", "conversations": []},
            {
                "id": "gpt-first",
                "conversations": [{"from": "gpt", "value": "hello"}, {"from": "human", "value": "late question"}],
            },
        ],
    )
    sel = select(DatasetSpec(str(path), sample="first"), 21, words)
    assert sel.format == "sharegpt" and sel.rows == 22 and sel.no_prompt == 1 and sel.usable == 21
    assert [i.row for i in sel.items] == list(range(20)) + [21]
    assert sel.items[3].prompt == "question 3 word word word " and sel.items[3].reply == "answer " * 4
    assert sel.items[20].prompt == "late question" and sel.items[20].reply is None
    assert sel.items[3].input_tokens == 6


def test_a_sharegpt_conversation_keeps_every_human_turn_for_sessions(tmp_path):
    path = tmp_path / "multi.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "system", "value": "be kind"},
                        {"from": "human", "value": "first"},
                        {"from": "gpt", "value": "a"},
                        {"from": "human", "value": "  "},
                        {"from": "user", "value": "second"},
                        {"from": "gpt", "value": "b"},
                        {"from": "human", "value": "third"},
                    ]
                }
            ]
        )
    )
    item = select(DatasetSpec(str(path)), 1, words).items[0]
    assert item.prompt == "first" and item.reply == "a" and item.turns == ["first", "second", "third"]


def test_openai_jsonl_prompt_messages_and_output_tokens(tmp_path):
    path = jsonl(
        tmp_path / "d.jsonl",
        [
            {"prompt": "one two", "output_tokens": 7},
            {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]},
            {"prompt": "   "},
            {"other": 1},
        ],
    )
    sel = select(DatasetSpec(str(path), sample="first"), 2, words)
    assert sel.items[0].prompt == "one two" and sel.items[0].output_tokens == 7
    assert sel.items[1].messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    assert sel.items[1].text() == "system: be brief\nuser: hi there\n" and sel.no_prompt == 2


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_parquet_and_arrow_by_column_mapping(tmp_path, kind):
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"question": [f"what is {i}" for i in range(30)], "n": list(range(1, 31)), "junk": [0] * 30})
    path = tmp_path / f"d.{kind}"
    if kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path, row_group_size=7)
    else:  # a datasets cache file is an IPC stream
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=4)
    spec = DatasetSpec(str(path), columns=parse_columns("prompt=question,output_tokens=n"), sample="first")
    sel = select(spec, 30, words)
    assert sel.format == kind and [i.prompt for i in sel.items[:2]] == ["what is 0", "what is 1"]
    assert [i.output_tokens for i in sel.items] == list(range(1, 31))
    with pytest.raises(DatasetError, match=r"none of the columns .*its columns: junk, n, question.*--dataset-columns"):
        select(DatasetSpec(str(path)), 3, words)


def test_a_folder_reads_every_data_file_in_name_order(tmp_path):
    jsonl(tmp_path / "b.jsonl", [{"prompt": "second file"}])
    jsonl(tmp_path / "a.jsonl", [{"prompt": "first file"}, {"prompt": "first file again"}])
    sel = select(DatasetSpec(str(tmp_path), sample="first"), 3, words)
    assert [(i.row, i.prompt) for i in sel.items] == [(0, "first file"), (1, "first file again"), (2, "second file")]


@pytest.mark.parametrize(
    "rows, problem",
    [
        (['{"prompt": "ok"}', '{"prompt": "cut'], r"d\.jsonl: row 1 \(line 2\): not JSON"),
        (['{"prompt": 5}'], r"row 0 \(line 1\): prompt is not a string \(int\)"),
        (['{"prompt": "x", "output_tokens": 0}'], r"output_tokens must be a whole number >= 1 \(got 0\)"),
        (['{"messages": [{"role": "user"}]}'], r"messages is not a list of messages"),
        (["[1, 2]"], r"not a JSON object \(list\)"),
    ],
)
def test_a_malformed_row_is_one_line_naming_file_and_row(tmp_path, rows, problem):
    path = jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(DatasetError, match=problem) as info:
        select(DatasetSpec(str(path)), 1, words)
    assert "\n" not in str(info.value) and "--skip-bad-rows" in str(info.value)


def test_the_line_named_is_the_files_line_blank_lines_counted(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n\n\n{"prompt": 7}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"d\.jsonl: row 1 \(line 4\): prompt is not a string"):
        select(DatasetSpec(str(path)), 1, words)


DEEP = '{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}"  # the row that once ended a run with a RecursionError
NOT_UTF8 = b'{"prompt": "caf\xe9 au lait"}'  # Latin-1, not UTF-8: once sent as "caf\ufffd au lait", without a word


def bytes_jsonl(path: Path, rows: list[bytes]) -> Path:
    path.write_bytes(b"".join(r + b"\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (DEEP.encode(), r"d\.jsonl: row 1 \(line 2\): nested too deep to read"),
        (NOT_UTF8, r"d\.jsonl: row 1 \(line 2\): not valid UTF-8 \(byte 0xe9 at byte 16 of the row\)"),
    ],
)
def test_a_row_too_deep_or_not_utf8_is_a_bad_row_like_any_other(tmp_path, row, problem):
    path = bytes_jsonl(tmp_path / "d.jsonl", [b'{"prompt": "fine"}', row, b'{"prompt": "also fine"}'])
    with pytest.raises(DatasetError, match=problem) as info:
        select(DatasetSpec(str(path), sample="first"), 2, words)
    assert "\n" not in str(info.value) and "--skip-bad-rows" in str(info.value)
    sel = select(DatasetSpec(str(path), sample="first", skip_bad_rows=True), 2, words)
    assert sel.bad_rows == 1 and [i.prompt for i in sel.items] == ["fine", "also fine"]
    assert sel.first_bad.startswith(f"{path}: row 1 (line 2): ")


def test_valid_utf8_beyond_ascii_is_read_as_written(tmp_path):
    path = bytes_jsonl(tmp_path / "d.jsonl", ['{"prompt": "café, 東京, 🙂"}'.encode()])
    assert select(DatasetSpec(str(path)), 1, words).items[0].prompt == "café, 東京, 🙂"


def test_sharegpt_rows_too_deep_or_not_utf8_are_bad_rows_and_the_rest_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset_readers, "CHUNK", 4096)  # the deep row spans many reads
    good = [json.dumps({"conversations": [{"from": "human", "value": f"q{i}"}]}).encode() for i in range(3)]
    deep = b'{"conversations": ' + b"[" * 100_000 + b"]" * 100_000 + b', "s": "]}[{"}'
    bad = b'{"conversations": [{"from": "human", "value": "caf\xe9"}]}'
    path = tmp_path / "sg.json"
    path.write_bytes(b"[" + good[0] + b",\n" + deep + b",\n" + good[1] + b",\n" + bad + b",\n" + good[2] + b"]")
    with pytest.raises(DatasetError, match=r"sg\.json: row 1 \(line 2\): nested too deep to read"):
        select(DatasetSpec(str(path), sample="first"), 3, words)
    sel = select(DatasetSpec(str(path), sample="first", skip_bad_rows=True), 3, words)
    assert sel.rows == 5 and sel.bad_rows == 2 and [i.prompt for i in sel.items] == ["q0", "q1", "q2"]
    assert [i.row for i in sel.items] == [0, 2, 4]
    path.write_bytes(b"[" + good[0] + b",\n" + bad + b"]")
    with pytest.raises(DatasetError, match=r"sg\.json: row 1 \(line 2\): not valid UTF-8 \(byte 0xe9"):
        select(DatasetSpec(str(path), sample="first"), 2, words)


def test_skip_bad_rows_counts_what_it_skipped(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", ['{"prompt": "a b"}', "{oops", '{"prompt": 3}', '{"prompt": "c d"}'])
    sel = select(DatasetSpec(str(path), skip_bad_rows=True, sample="first"), 2, words)
    assert sel.bad_rows == 2 and [i.prompt for i in sel.items] == ["a b", "c d"] and "row 1" in sel.first_bad


def test_malformed_sharegpt(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"conversations": [{"from": "human", "value": "fine"}]}, {"conversations": 5}]')
    with pytest.raises(DatasetError, match=r"bad\.json: row 1 \(line 1\): 'conversations' is not a list"):
        select(DatasetSpec(str(bad)), 2, words)
    cut = tmp_path / "cut.json"
    cut.write_text('[{"conversations": [{"from": "human", "value": "fine"}]}, {"conversations": [')
    with pytest.raises(DatasetError, match=r"cut\.json: row 1 \(line 1\): not JSON"):
        select(DatasetSpec(str(cut)), 2, words)
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(DatasetError, match="empty"):
        select(DatasetSpec(str(tmp_path / "empty.json")), 1, words)


def test_a_hub_id_without_a_local_copy_is_one_clear_line(tmp_path):
    with pytest.raises(
        UsageError,
        match=r"anon8231489123/ShareGPT_Vicuna_unfiltered: no such local file; it looks "
        r"like a Hugging Face hub id.*downloads nothing at run time",
    ):
        select(DatasetSpec("anon8231489123/ShareGPT_Vicuna_unfiltered"), 1, words)
    with pytest.raises(UsageError, match="no such file or folder"):
        select(DatasetSpec(str(tmp_path / "missing.jsonl")), 1, words)
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(UsageError, match="cannot tell the format"):
        select(DatasetSpec(str(tmp_path / "d.txt")), 1, words)


def test_length_filters_sampling_and_repetition(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [{"prompt": "w " * (i % 10 + 1)} for i in range(200)])
    spec = DatasetSpec(str(path), min_input_tokens=4, max_input_tokens=8, seed=5)  # 3..7 words: 5 of every 10
    one = select(spec, 20, words)
    assert one.too_short == 40 and one.too_long == 60 and one.usable == 100
    assert all(4 <= i.input_tokens <= 8 for i in one.items) and len({i.row for i in one.items}) == 20
    again = select(spec, 20, words)
    other = select(DatasetSpec(str(path), min_input_tokens=4, max_input_tokens=8, seed=6), 20, words)
    assert [i.row for i in again.items] == [i.row for i in one.items] != [i.row for i in other.items]
    assert [i.row for i in one.items] != sorted(i.row for i in one.items)  # shuffled, not file order
    with pytest.raises(DatasetError, match="100 usable prompts for 150 requests.*--dataset-repeat"):
        select(spec, 150, words)
    cycled = select(
        DatasetSpec(str(path), min_input_tokens=4, max_input_tokens=8, sample="first", repeat=True), 150, words
    )
    assert cycled.repeated == 50 and [i.row for i in cycled.items[100:]] == [i.row for i in cycled.items[:50]]
    with pytest.raises(DatasetError, match="no usable prompt among 200 rows.*200 under"):
        select(DatasetSpec(str(path), min_input_tokens=50), 1, words)


def test_the_token_cache_tokenizes_each_text_once():
    calls = []
    cache = TokenCache(lambda texts: calls.append(list(texts)) or [len(t) for t in texts])
    assert cache.count_many(["ab", "abc", "ab"]) == [2, 3, 2]
    assert cache.count_many(["abc", "abcd"]) == [3, 4]
    assert calls == [["ab", "abc"], ["abcd"]] and cache.tokenized == 3


def test_column_mapping_syntax():
    assert parse_columns("prompt=question, output_tokens=n") == {"prompt": "question", "output_tokens": "n"}
    assert parse_columns("{}") == {} and parse_columns({"prompt": "q"}) == {"prompt": "q"}
    for bad, message in (("prompt", "FIELD=COLUMN"), ("answer=x", "unknown field"), ("prompt=a,prompt=b", "twice")):
        with pytest.raises(ValueError, match=message):
            parse_columns(bad)


def test_a_100000_row_file_streams_in_bounded_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(100_000):
            fh.write(json.dumps({"prompt": f"row {i} " + "filler text " * 20, "output_tokens": 1 + i % 50}) + "\n")
    size = path.stat().st_size
    tracemalloc.start()
    started = time.perf_counter()
    sel = select(DatasetSpec(str(path), min_input_tokens=2, seed=1), 64, words)
    took = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert sel.rows == sel.usable == 100_000 and len(sel.items) == 64
    assert peak < size / 5, f"peak {peak:,} bytes for a {size:,}-byte file: not streamed"
    assert took < 30


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_a_table_row_whose_string_is_not_utf8_is_a_bad_row(tmp_path, kind):
    pa = pytest.importorskip("pyarrow")
    # a string column holding "ok", "caf\xe9", "fine": Arrow writes what it is given, unchecked
    offsets = pa.py_buffer(b"".join(n.to_bytes(4, "little") for n in (0, 2, 6, 10)))
    strings = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(b"okcaf\xe9fine")])
    table = pa.table({"prompt": strings})
    path = tmp_path / f"t.{kind}"
    if kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    else:
        import pyarrow.ipc as ipc

        with ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
    with pytest.raises(DatasetError, match=rf"t\.{kind}: row 1: not valid UTF-8 \(byte 0xe9"):
        select(DatasetSpec(str(path), sample="first"), 2, words)
    sel = select(DatasetSpec(str(path), sample="first", skip_bad_rows=True), 2, words)
    assert sel.bad_rows == 1 and [i.prompt for i in sel.items] == ["ok", "fine"]
