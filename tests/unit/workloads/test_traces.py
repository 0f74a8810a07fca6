"""Traces for `run replay`: the readers (Mooncake JSONL, Azure CSV, plain CSV) and their bad rows as one line
naming file and line, selection and scaling, and prompts built from hash ids that share exactly the
blocks the trace says and nothing else."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from loadproof.metrics.replay import expected_hits
from loadproof.sim.text import tokenizer_path
from loadproof.workloads.haystack import HaystackBuilder
from loadproof.workloads.synthetic import SyntheticPrompts
from loadproof.workloads.traces import BlockPrompts, TraceError, TraceRow, read_trace, shape

SLICE = Path(str(files("loadproof") / "data" / "traces" / "mooncake-conversation-300.jsonl"))


@pytest.fixture(scope="module")
def byte_level():
    return Tokenizer.from_file(str(tokenizer_path()))  # the simulator's: one token per byte


@pytest.fixture(scope="module")
def words():
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def mooncake(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def row(t, n, out=4, ids=None):
    return {"timestamp": t, "input_length": n, "output_length": out, "hash_ids": ids or list(range(-(-n // 512)))}


def test_the_shipped_slice_reads_whole_with_its_licence_and_attribution():
    read = read_trace(str(SLICE), "mooncake")
    assert len(read.rows) == read.lines == 300 and read.rows[0].t_s == 0 and read.rows[-1].t_s == 102.0
    assert all(r.hash_ids is not None and len(r.hash_ids) == -(-r.input_tokens // 512) for r in read.rows)
    readme = (SLICE.parent / "README.md").read_text()
    assert "Apache" in readme and "kvcache-ai/Mooncake" in readme and "FAST'25" in readme
    assert "Apache License" in (SLICE.parent / "LICENSE-mooncake").read_text()


def test_offset_and_limit_select_from_the_first_timestamp(tmp_path):
    path = mooncake(tmp_path / "t.jsonl", [row(1000 + 500 * i, 600) for i in range(10)])
    read = read_trace(str(path), "mooncake", start_offset_s=1.2, max_requests=3)
    assert [r.t_s for r in read.rows] == [2.5, 3.0, 3.5] and read.before_offset == 3 and read.origin_s == 1.0


@pytest.mark.parametrize(
    "bad, problem",
    [
        ("{not json", r"t\.jsonl: line 2: not JSON"),
        (json.dumps({"timestamp": 5, "input_length": 10, "output_length": 1}), r"line 2: no hash_ids"),
        (json.dumps(row(-5, 10)), r"line 2: negative timestamp -5"),
        (
            json.dumps(row(0.5, 10)),
            r"line 2: timestamp goes back \(0\.0005 s after 0\.001 s\): the trace must be sorted",
        ),
        (json.dumps(row(9, 10, ids=[1, 2])), r"line 2: 2 hash_ids for input_length 10"),
        (json.dumps(row(9, 0)), r"line 2: input_length is not a whole number >= 1"),
    ],
)
def test_a_bad_mooncake_row_is_one_line_naming_file_and_line(tmp_path, bad, problem):
    path = mooncake(tmp_path / "t.jsonl", [row(1, 10), bad, row(20, 10)])
    with pytest.raises(TraceError, match=problem) as info:
        read_trace(str(path), "mooncake")
    assert "\n" not in str(info.value) and "--skip-bad-rows" in str(info.value)
    skipped = read_trace(str(path), "mooncake", skip_bad_rows=True)
    assert skipped.bad_rows == 1 and len(skipped.rows) == 2 and "line 2" in skipped.first_bad


@pytest.mark.parametrize(
    "bad, problem",
    [
        (
            b'{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [0], "x": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}",
            r"t\.jsonl: line 2: nested too deep to read",
        ),
        (
            b'{"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [0], "note": "caf\xe9"}',
            r"t\.jsonl: line 2: not valid UTF-8 \(byte 0xe9 at byte 87 of the row\)",
        ),
    ],
)
def test_a_mooncake_row_too_deep_or_not_utf8_is_a_bad_row(tmp_path, bad, problem):
    path = tmp_path / "t.jsonl"
    path.write_bytes(json.dumps(row(1, 10)).encode() + b"\n" + bad + b"\n" + json.dumps(row(20, 10)).encode() + b"\n")
    with pytest.raises(TraceError, match=problem) as info:
        read_trace(str(path), "mooncake")
    assert "\n" not in str(info.value) and "--skip-bad-rows" in str(info.value)
    skipped = read_trace(str(path), "mooncake", skip_bad_rows=True)
    assert skipped.bad_rows == 1 and [r.line for r in skipped.rows] == [1, 3]


def test_a_csv_row_not_utf8_is_a_bad_row(tmp_path):
    path = tmp_path / "p.csv"
    path.write_bytes(b"timestamp,input,output,note\n0,100,5,ok\n1,200,6,caf\xe9\n2,300,7,ok\n")
    with pytest.raises(TraceError, match=r"p\.csv: line 3: not valid UTF-8 \(byte 0xe9"):
        read_trace(str(path), "csv")
    skipped = read_trace(str(path), "csv", skip_bad_rows=True)
    assert skipped.bad_rows == 1 and [r.input_tokens for r in skipped.rows] == [100, 300]
    path.write_bytes(b"timestamp,input,output,n\xf6te\n0,100,5,ok\n")
    with pytest.raises(TraceError, match=r"p\.csv: line 1: the header is not valid UTF-8"):
        read_trace(str(path), "csv")


def test_azure_and_plain_csv(tmp_path):
    azure = tmp_path / "azure.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,4808,10\n"
        "2023-11-16 18:15:50.9951690,3180,8\n"
    )
    read = read_trace(str(azure), "azure")
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in read.rows] == [(4808, 10, None), (3180, 8, None)]
    assert abs(read.rows[1].t_s - read.rows[0].t_s - 4.314579) < 1e-6
    plain = tmp_path / "p.csv"
    plain.write_text("timestamp,input,output\n0,100,5\n0.25,200,6\n")
    assert [(r.t_s, r.input_tokens) for r in read_trace(str(plain), "csv").rows] == [(0.0, 100), (0.25, 200)]
    (tmp_path / "cols.csv").write_text("time,input,output\n0,1,1\n")
    with pytest.raises(
        TraceError, match=r"cols\.csv: line 1: no column 'timestamp' \(its columns: time, input, output\)"
    ):
        read_trace(str(tmp_path / "cols.csv"), "csv")
    (tmp_path / "bad.csv").write_text("timestamp,input,output\n0,100,5\n1,lots,5\n")
    with pytest.raises(TraceError, match=r"bad\.csv: line 3: input 'lots' is not a whole number"):
        read_trace(str(tmp_path / "bad.csv"), "csv")
    (tmp_path / "when.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n")
    with pytest.raises(TraceError, match=r"line 2: TIMESTAMP 'yesterday' is not a date and time"):
        read_trace(str(tmp_path / "when.csv"), "azure")
    with pytest.raises(TraceError, match="no such file"):
        read_trace(str(tmp_path / "none.csv"), "csv")


def test_block_tokens_scale_mooncake_lengths_keeping_the_blocks_and_caps_apply():
    rows = [TraceRow(1, 0.0, 1000, 300, [1, 2]), TraceRow(2, 1.0, 1025, 5, [1, 2, 3]), TraceRow(3, 2.0, 50, 5, None)]
    shaped = shape(
        rows, block_tokens=32, overhead_tokens=1, max_input_tokens=None, max_output_tokens=100, max_model_len=None
    )
    assert [s.text_tokens for s in shaped] == [63, 65, 50]  # ceil(1000 * 32 / 512), ceil(1025 / 16)
    assert [s.blocks for s in shaped[:2]] == [[1, 2], [1, 2, 3]] and [s.output_tokens for s in shaped] == [100, 5, 5]
    assert shaped[2].blocks == ["r3.0", "r3.1"]  # no hashes: blocks of its own
    capped = shape(
        rows,
        block_tokens=32,
        overhead_tokens=1,
        max_input_tokens=40,
        max_output_tokens=None,
        max_model_len=None,
        min_tail=10,
    )
    # 39 tokens would leave a last part of 7, under a block's shortest (10), and 42 passes the cap: dropped
    assert [s.text_tokens for s in capped] == [32, 32, 32] and all(s.capped for s in capped)
    assert capped[1].blocks == [1]
    tail = shape(
        [TraceRow(1, 0.0, 1040, 5, [1, 2, 3])],
        block_tokens=32,
        overhead_tokens=1,
        max_input_tokens=None,
        max_output_tokens=None,
        max_model_len=None,
        min_tail=10,
    )
    assert tail[0].text_tokens == 74  # 65 -> a last part of 1 token raised to the shortest block (10)


@pytest.fixture(scope="module")
def gemma():
    path = Path.home() / ".cache" / "loadproof" / "models" / "gemma3-270m-bf16" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("the embedded engine's tokenizer is not installed")
    return Tokenizer.from_file(str(path))


@pytest.mark.parametrize("which", ["words", "byte_level", "gemma"])
def test_every_prompt_is_exactly_its_length(which, request):
    tok = request.getfixturevalue(which)
    builder = HaystackBuilder(tok, overhead_tokens=1, seed=7)
    blocks = BlockPrompts(SyntheticPrompts(builder, run_salt="", seed=7), 32, salt="a1b2c3", seed=7)
    for n in (blocks.shortest_block(), 32, 32 + blocks.shortest_block(), 95, 512, 3000):  # every last part >= a head
        text = blocks.prompt(n, list(range(100, 100 + -(-n // 32))))
        assert len(tok.encode(text, add_special_tokens=False).ids) == n


@pytest.mark.parametrize("which", ["byte_level", "gemma"])
def test_requests_sharing_a_hash_id_share_exactly_that_block(which, request):
    tok = request.getfixturevalue(which)
    builder = HaystackBuilder(tok, overhead_tokens=1, seed=7)
    B = 64
    blocks = BlockPrompts(SyntheticPrompts(builder, run_salt="", seed=7), B, salt="a1b2c3", seed=7)

    def ids(text: str) -> list[int]:
        return tok.encode(text, add_special_tokens=False).ids

    a = ids(blocks.prompt(3 * B, [7, 8, 9]))
    b = ids(blocks.prompt(2 * B + 40, [7, 10, 11]))
    c = ids(blocks.prompt(3 * B, [12, 13, 14]))
    assert (len(a), len(b), len(c)) == (3 * B, 2 * B + 40, 3 * B)  # exact lengths, the cut last block too
    assert a[:B] == b[:B] == ids(blocks.block(7))  # block 7's tokens, exactly
    common = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    head = len(ids(blocks.head(10)))
    assert B <= common < B + head  # they part within the next block's head line
    assert a[0] != c[0] or a[:head] != c[:head]  # no shared first block

    # what a prefix cache can reuse: KV blocks of 16 tokens, each known by its tokens and every token before
    # it (the engine chains block hashes); A and B share exactly block 7's, C none
    def kv(seq: list[int]) -> set[tuple[int, ...]]:
        return {tuple(seq[: i + 16]) for i in range(0, len(seq) - 15, 16)}

    assert kv(a) & kv(b) == kv(a[:B]) and len(kv(a[:B])) == B // 16
    assert not kv(a) & kv(c) and not kv(b) & kv(c)
    # a cut last block shares a prefix of the whole block
    d = ids(blocks.prompt(B + 40, [7, 8]))
    assert d[:B] == a[:B] and d[B : B + head] == a[B : B + head]
    # another run (another salt) shares nothing with this one
    other = BlockPrompts(SyntheticPrompts(builder, run_salt="", seed=7), B, salt="ffffff", seed=7)
    assert ids(other.prompt(B, [7]))[: head + 2] != a[: head + 2]


def test_expected_hits_follow_the_prefix_chain():
    assert expected_hits([64, 64, 64, 64], [[1, 2], [1, 3], [1, 2], [4, 2]], 32) == [0, 32, 64, 0]
    assert expected_hits([64, 48], [[1, 2], [1, 2]], 32) == [0, 48]  # at most its own text


def bailian_row(chat: int, parent: int, t: float, inp: int, ids: list[int], turn: int = 1, kind: str = "text") -> dict:
    return {
        "chat_id": chat,
        "parent_chat_id": parent,
        "timestamp": t,
        "input_length": inp,
        "output_length": 7,
        "type": kind,
        "turn": turn,
        "hash_ids": ids,
    }


def test_a_bailian_trace_reads_sessions_turns_and_16_token_blocks(tmp_path):
    """Alibaba's Qwen-Bailian format: seconds, 16-token hash ids, and each row's session (the first chat of
    its parent chain), turn and type; a 32-token replay doubles every input and keeps the blocks."""
    path = tmp_path / "b.jsonl"
    path.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                bailian_row(0, -1, 0.0, 40, [1, 2, 3]),
                bailian_row(5, -1, 0.5, 20, [1, 9], kind="search"),
                bailian_row(7, 0, 1.25, 60, [1, 2, 3, 4], turn=2),
                bailian_row(8, 7, 2.0, 70, [1, 2, 3, 4, 5], turn=3),
                bailian_row(9, 42, 2.5, 16, [6], turn=4),  # its parent is not in the file: a session of its own
            ]
        )
    )
    read = read_trace(str(path), "bailian")
    assert [r.t_s for r in read.rows] == [0.0, 0.5, 1.25, 2.0, 2.5]
    assert [r.session for r in read.rows] == ["0", "5", "0", "0", "9"]
    assert [r.turn for r in read.rows] == [1, 1, 2, 3, 4] and read.rows[1].kind == "search"
    assert {r.trace_block for r in read.rows} == {16}
    shaped = shape(
        read.rows, block_tokens=32, overhead_tokens=1, max_input_tokens=None, max_output_tokens=None, max_model_len=None
    )
    assert [s.text_tokens for s in shaped] == [80, 40, 120, 140, 32] and shaped[3].blocks == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "bad, problem",
    [
        (bailian_row(3, -1, 1.0, 40, [1, 2]), r"line 2: 2 hash_ids for input_length 40 \(blocks of 16 need 3\)"),
        (
            {k: v for k, v in bailian_row(3, -1, 1.0, 16, [1]).items() if k != "parent_chat_id"},
            r"line 2: no parent_chat_id",
        ),
        (bailian_row(3, -2, 1.0, 16, [1]), r"line 2: parent_chat_id is not a whole number >= -1"),
        (bailian_row(3, -1, 1.0, 16, [1], turn=0), r"line 2: turn is not a whole number >= 1"),
    ],
)
def test_a_bad_bailian_row_is_one_line(tmp_path, bad, problem):
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [bailian_row(0, -1, 0.0, 16, [1]), bad]))
    with pytest.raises(TraceError, match=problem) as info:
        read_trace(str(path), "bailian")
    assert "\n" not in str(info.value)
