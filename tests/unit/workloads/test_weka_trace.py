"""Agentic coding traces in the kv-cache-tester format, read on a real published one (a Claude Code session with two
sub-agents, tests/fixtures/README.md) and on small hand-made ones: calls in time order with their sessions, turns and
kinds, sub-agents at their own time, hash ids as recorded (a part block's id its own), local scopes kept apart,
and every malformed trace or call one problem naming its place and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loadproof.workloads.traces import TraceError, read_trace
from loadproof.workloads.weka_trace import WekaCall, weka_calls

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "agent-traces" / "kv-cache-tester-trace_0291.json"


def rows_of(path: Path) -> list[WekaCall]:
    out = []
    for _, row in weka_calls(path):
        assert isinstance(row, WekaCall), row
        out.append(row)
    return out


def test_a_published_session_reads_as_its_calls_with_the_sub_agents_at_their_time():
    rows = rows_of(SAMPLE)
    recorded = json.loads(SAMPLE.read_text())
    subs = [r for r in recorded["requests"] if r["type"] == "subagent"]
    assert len(rows) == 32 and [len(s["requests"]) for s in subs] == [5, 7]
    assert [r.t_s for r in rows] == sorted(r.t_s for r in rows)
    by_session: dict[str, list[WekaCall]] = {}
    for row in rows:
        by_session.setdefault(row.session or "", []).append(row)
    main, first, second = (
        by_session["trace_0291"],
        by_session["trace_0291/agent_001"],
        by_session["trace_0291/agent_002"],
    )
    assert (len(main), len(first), len(second)) == (20, 5, 7)
    assert [r.turn for r in second] == list(range(1, 8)) and {r.kind for r in first + second} == {"Explore"}
    assert {r.kind for r in main} == {"main"} and all(r.trace_block == 64 for r in rows)
    # a sub-agent's calls at its start plus their own time: agent_001 from 1148.013 s, its last call 20 s in
    assert [round(r.t_s, 3) for r in first] == [1148.013, 1153.013, 1159.013, 1163.013, 1168.013]
    # the parent's first call after the sub-agents comes after both started (1209 s: they were launched together)
    after = next(r for r in main if r.t_s > 1148)
    assert after.t_s == 1209.0 and after.t_s > second[0].t_s
    # lengths as recorded; hash ids renamed as they first appear (its 279 whole blocks, then its part block)
    assert (main[0].input_tokens, main[0].output_tokens) == (17869, 426)
    assert main[0].hash_ids == list(range(280))
    # the conversation grows: each main call opens with the previous one's whole blocks, or all but its last
    for a, b in zip(main, main[1:]):
        assert a.hash_ids is not None and b.hash_ids is not None
        whole = a.input_tokens // 64
        assert b.hash_ids[: whole - 1] == a.hash_ids[: whole - 1] and b.hash_ids[whole:] != a.hash_ids[whole:]
    # both sub-agents open with the same tools and instructions (174 blocks), which the main agent does not have
    assert first[0].hash_ids is not None and second[0].hash_ids is not None
    assert first[0].hash_ids[:174] == second[0].hash_ids[:174] and first[0].hash_ids[174] != second[0].hash_ids[174]
    assert first[0].hash_ids[0] not in main[0].hash_ids
    # a part block's id is its call's alone; every recorded id keeps its name wherever it appears
    seen = [i for r in rows for i in r.hash_ids or []]
    parts = [r.hash_ids[-1] for r in rows if r.hash_ids and r.input_tokens % 64]
    assert len(parts) == 29 and all(seen.count(i) == 1 for i in parts)  # 3 of the 32 calls are whole blocks
    flat = [(r["t"], r["hash_ids"]) for r in recorded["requests"] if r["type"] != "subagent"]
    flat += [(s["t"] + r["t"], r["hash_ids"]) for s in subs for r in s["requests"]]
    named: dict[int, int] = {}
    for (_, ids), row in zip(sorted(flat, key=lambda c: c[0]), rows):
        assert row.hash_ids is not None and len(row.hash_ids) - len(ids) == (row.input_tokens % 64 > 0)
        assert all(named.setdefault(h, name) == name for h, name in zip(ids, row.hash_ids))
    assert len(set(named.values())) == len(named)  # and no two recorded ids got one name


def trace(trace_id: str, scope: str = "local", **extra: Any) -> dict[str, Any]:
    call = {"t": 0.0, "type": "s", "model": "m", "in": 128, "out": 4, "hash_ids": [1, 2]}
    sub = {"t": 1.0, "type": "subagent", "agent_id": "a", "subagent_type": "Explore", "requests": [dict(call, t=0.5)]}
    return {
        "id": trace_id,
        "block_size": 64,
        "hash_id_scope": scope,
        "requests": [call, sub, dict(call, t=3.0)],
    } | extra


@pytest.mark.parametrize("scope", ["local", "global"])
def test_the_traces_of_a_json_lines_file_replay_together_their_local_ids_apart(tmp_path, scope):
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(trace("x", scope)) + "\n\n" + json.dumps(trace("y", scope)) + "\n")
    rows = rows_of(path)
    assert [(r.t_s, r.session, r.line) for r in rows] == [
        (0.0, "x", 1), (0.0, "y", 3), (1.5, "x/a", 1), (1.5, "y/a", 3), (3.0, "x", 1), (3.0, "y", 3),
    ]  # fmt: skip
    x, y = rows[0].hash_ids, rows[1].hash_ids
    assert x == [0, 1] and y == ([2, 3] if scope == "local" else [0, 1])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda t: [1, 2], "not a JSON object (a trace"),
        (lambda t: {k: v for k, v in t.items() if k != "requests"}, "no requests"),
        (lambda t: t | {"block_size": 0}, "block_size is not a whole number >= 1 (0)"),
        (lambda t: t | {"hash_id_scope": "team"}, "hash_id_scope is neither local nor global ('team')"),
        (lambda t: t | {"requests": []}, "no API call (type n or s) in requests"),
        (lambda t: _set(t, 0, t=-1.0), "requests[0]: t is negative (-1.0)"),
        (lambda t: _set(t, 2, type="x"), "requests[2]: type 'x' is not n, s or subagent"),
        (lambda t: _set(t, 0, out=None), "requests[0]: out is not a whole number >= 0 (None)"),
        (lambda t: _set(t, 0, hash_ids=[1, 2, 3]), "requests[0]: 3 hash_ids for in 128 (blocks of 64: 2 whole"),
        (lambda t: _set(t, 0, hash_ids=[1, "2"]), "requests[0]: hash_ids is not a list of whole numbers"),
        (lambda t: _set(t, 1, t="soon"), "requests[1]: t is not a number of seconds ('soon')"),
        (lambda t: _set(t, 1, requests=None), "requests[1]: requests is not a list (a sub-agent's calls)"),
        (lambda t: _inner(t, t="x"), "requests[1].requests[0]: t is not a number of seconds"),
        (lambda t: _inner(t, **{"in": 0}), "requests[1].requests[0]: in is not a whole number >= 1 (0)"),
    ],
)
def test_a_malformed_trace_or_call_is_one_problem_naming_its_place(tmp_path, change, said):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(change(trace("x"))))
    read = list(weka_calls(path))
    assert len(read) == 1 and isinstance(read[0][1], str), read
    assert read[0][0] == 1 and said in read[0][1] and "\n" not in read[0][1]


def test_a_line_that_is_not_json_is_its_problem_and_the_other_traces_are_read(tmp_path):
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(trace("x")) + "\n{not json\n")
    read = list(weka_calls(path))
    assert [line for line, _ in read] == [2, 1, 1, 1] and str(read[0][1]).startswith("not JSON")


def _set(trace_: dict[str, Any], i: int, /, **fields: Any) -> dict[str, Any]:
    trace_["requests"][i] = trace_["requests"][i] | fields
    return trace_


def _inner(trace_: dict[str, Any], /, **fields: Any) -> dict[str, Any]:
    trace_["requests"][1]["requests"][0] |= fields
    return trace_


def test_run_replay_reads_it_as_format_weka(tmp_path):
    """`read_trace(..., "weka")`: the rows above, and a malformed call one line naming file, line, call and field."""
    read = read_trace(str(SAMPLE), "weka")
    assert len(read.rows) == 32 and read.format == "weka" and read.rows[-1].t_s == 1363.0
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(_set(trace("x"), 0, t=-1.0)))
    with pytest.raises(TraceError, match=r"trace.json: line 1: requests\[0\]: t is negative \(-1.0\) \(--skip-bad"):
        read_trace(str(path), "weka")
