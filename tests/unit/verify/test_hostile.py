"""Hostile bundles: a stranger's bundle never makes `verify` follow a link, open a FIFO, read past a cap,
crash on a crafted value or paint the terminal. Each is a real bundle from docs/runs, copied with its
records plain (the form of bundles published before publish compressed them) and then tampered with
(and, where the tamperer would, resealed); each ends in FAILED with its reason. The compressed form's own
hostile files (a zstd bomb, a truncated or garbage .zst) are in test_compressed.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadproof.verify import verify
from loadproof.verify.layout import MAX_DOCUMENT_BYTES, MAX_FILE_BYTES
from tests import bundles
from tests.unit.publish.synthetic import reseal

ROOT = Path(__file__).resolve().parents[3]
SOURCE = bundles.DOCS_RUNS / "h200-2026-11-30" / "llama-prefill-100k"
RUN = "runs/prefill-20261130-093906-cbb5"
FAKE_VERDICT = "x\x1b[2K\x1b[32mVERIFIED: 99/99 claims ok\x1b[8m"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return bundles.plain_copy(SOURCE, tmp_path / "bundle")


def problems(result) -> set[tuple[str, str]]:
    return {(p.kind, p.path) for p in result.problems}


def details(result) -> str:
    return "\n".join(result.lines())


def edit_claims(bundle: Path, change) -> None:
    path = bundle / RUN / "claims.json"
    payload = json.loads(path.read_text())
    change(payload["claims"])
    path.write_text(json.dumps(payload))
    reseal(bundle)


def test_the_untouched_copy_verifies(bundle):
    result = verify(bundle)
    assert result.ok, result.lines()[:5]


# ---- links and special files: refused, never followed, never opened ----------------------------------


def symlink_to_outside_copy(bundle: Path) -> None:
    """requests.jsonl is a link to an identical file outside; the tamperer reseals through the link."""
    outside = bundle.parent / "outside-requests.jsonl"
    shutil.copy(bundle / RUN / "requests.jsonl", outside)
    (bundle / RUN / "requests.jsonl").unlink()
    (bundle / RUN / "requests.jsonl").symlink_to(outside)
    reseal(bundle)


def test_a_symlinked_data_file_is_refused_even_when_its_content_would_verify(bundle):
    symlink_to_outside_copy(bundle)
    result = verify(bundle)
    assert not result.ok
    assert ("UNSAFE", f"{RUN}/requests.jsonl") in problems(result)
    assert "a symbolic link" in details(result) and "never follows" in details(result)
    assert any("claims cannot be recomputed" in p.detail and "symbolic link" in p.detail for p in result.problems)
    assert result.summary().startswith("FAILED")


@pytest.mark.parametrize("folder", [RUN, "runs"])
def test_a_symlinked_run_folder_or_runs_folder_is_refused(bundle, folder):
    elsewhere = bundle.parent / "elsewhere"
    shutil.move(bundle / folder, elsewhere)
    (bundle / folder).symlink_to(elsewhere, target_is_directory=True)
    reseal(bundle)
    result = verify(bundle)
    assert ("UNSAFE", folder) in problems(result)
    assert not result.checks  # nothing behind the link was read
    assert not result.ok


def test_a_symlinked_top_level_file_is_refused(bundle):
    outside = bundle.parent / "bundle.json"
    shutil.copy(bundle / "bundle.json", outside)
    (bundle / "bundle.json").unlink()
    (bundle / "bundle.json").symlink_to(outside)
    reseal(bundle)
    result = verify(bundle)
    assert ("UNSAFE", "bundle.json") in problems(result)
    assert not result.ok


@pytest.mark.timeout(60)
def test_a_symlink_to_a_fifo_outside_is_neither_followed_nor_opened(bundle):
    fifo = bundle.parent / "fifo"
    os.mkfifo(fifo)
    (bundle / RUN / "chunks.jsonl").unlink()
    (bundle / RUN / "chunks.jsonl").symlink_to(fifo)
    result = verify(bundle)  # opening the FIFO would block this test until its timeout
    assert ("UNSAFE", f"{RUN}/chunks.jsonl") in problems(result)


def fifo_in_place_of_data(bundle: Path) -> None:
    (bundle / RUN / "requests.jsonl").unlink()
    os.mkfifo(bundle / RUN / "requests.jsonl")


@pytest.mark.timeout(60)
def test_a_fifo_inside_the_bundle_is_refused_without_being_opened(bundle):
    fifo_in_place_of_data(bundle)
    result = verify(bundle)
    assert ("UNSAFE", f"{RUN}/requests.jsonl") in problems(result)
    assert "a FIFO" in details(result)
    assert any("claims cannot be recomputed" in p.detail and "FIFO" in p.detail for p in result.problems)


# ---- path tricks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "runs\\x\\requests.jsonl",
        "a\x00b",
        "runs/x/../../../../etc/passwd",
        "x\x1b[2Ky",
    ],
)
def test_a_checksum_line_naming_a_path_outside_or_unprintable_is_a_bad_line(bundle, name):
    with open(bundle / "SHA256SUMS", "a", encoding="utf-8") as handle:
        handle.write("0" * 64 + "  " + name + "\n")
    result = verify(bundle)
    assert any(p.kind == "BAD_LINE" for p in result.problems), result.lines()[:3]
    assert not any(p.kind == "MISSING" for p in result.problems)  # never looked up
    assert "\x1b" not in details(result) and "\x00" not in details(result)


def test_a_file_listed_twice_is_a_bad_line(bundle):
    first = (bundle / "SHA256SUMS").read_text().splitlines()[0]
    with open(bundle / "SHA256SUMS", "a", encoding="utf-8") as handle:
        handle.write("f" * 64 + "  " + first.split("  ", 1)[1] + "\n")
    assert any(p.kind == "BAD_LINE" and "second time" in p.detail for p in verify(bundle).problems)


@pytest.mark.parametrize(
    "path",
    ["../..", "/etc", "runs/../..", "runs/x\x00y", "runs\\x", "runs/a/b", "runs/..", "runs", 7, None, ["runs/x"]],
)
def test_a_bundle_json_run_path_outside_the_runs_folder_is_refused(bundle, path):
    meta = json.loads((bundle / "bundle.json").read_text())
    meta["runs"].append({"run_id": "evil", "path": path})
    (bundle / "bundle.json").write_text(json.dumps(meta))
    reseal(bundle)
    result = verify(bundle)
    assert not result.ok
    assert [r.path for r in result.runs] == [RUN]  # only the real run was read
    assert any(p.kind in ("BAD_PATH", "UNREADABLE") and ("run 2" in p.detail) for p in result.problems)


def test_a_file_name_with_control_characters_is_refused_and_escaped(bundle):
    (bundle / RUN / "x\x1b[2Kevil\r").write_text("{}\n")
    result = verify(bundle)
    assert any(p.kind == "BAD_PATH" for p in result.problems)
    assert "x\\x1b[2Kevil\\x0d" in details(result)
    assert "\x1b" not in details(result) and "\r" not in details(result)


# ---- sizes ---------------------------------------------------------------------------------------------


def test_a_file_over_the_cap_is_refused_unread(bundle):
    big = bundle / RUN / "metrics.jsonl"
    os.truncate(big, MAX_FILE_BYTES + 1)  # sparse: costs no disk, and verify must not read it
    result = verify(bundle)
    assert ("TOO_LARGE", f"{RUN}/metrics.jsonl") in problems(result)
    assert not result.ok


def test_a_line_over_the_cap_is_refused(bundle):
    with open(bundle / RUN / "events.jsonl", "wb") as handle:
        handle.write(b'{"kind": "' + b"x" * (MAX_DOCUMENT_BYTES + 1) + b'"}\n')
    reseal(bundle)
    result = verify(bundle)
    assert any("line 1 is longer than" in p.detail for p in result.problems), result.lines()[:3]


def test_a_claims_file_over_the_document_cap_is_refused(bundle):
    path = bundle / RUN / "claims.json"
    os.truncate(path, MAX_DOCUMENT_BYTES + 1)
    reseal(bundle)
    result = verify(bundle)
    assert any(p.path == f"{RUN}/claims.json" and "cap" in p.detail for p in result.problems)


# ---- crafted values ------------------------------------------------------------------------------------

DEEP = "[" * 200_000 + "]" * 200_000


def deep_claims(bundle: Path) -> None:
    (bundle / RUN / "claims.json").write_text(DEEP)
    reseal(bundle)


@pytest.mark.parametrize("rel", [f"{RUN}/claims.json", "bundle.json", f"{RUN}/manifest.json"])
def test_a_deeply_nested_json_document_is_a_failure_not_a_recursion_error(bundle, rel):
    (bundle / rel).write_text(DEEP)
    reseal(bundle)
    result = verify(bundle)
    assert any(p.path in (rel, RUN) and "nested deeper than 64" in p.detail for p in result.problems), result.lines()[
        :3
    ]


@pytest.mark.parametrize("depth", [65, 900, 200_000])
def test_a_deeply_nested_data_row_is_a_failure(bundle, depth):
    with open(bundle / RUN / "requests.jsonl", "a") as handle:
        handle.write('{"request_id": ' + "[" * depth + "]" * depth + "}\n")
    reseal(bundle)
    result = verify(bundle)
    assert any("nested deeper than 64" in p.detail for p in result.problems), result.lines()[:3]


def huge_printed(bundle: Path) -> None:
    def change(claims):
        claims[0]["printed"] = "1e1000000000"

    edit_claims(bundle, change)


@pytest.mark.parametrize("printed", ["1e1000000000", "9" * 5001, "1E+999999", "Infinity", "7_4", "-0x1p3", ""])
def test_a_printed_figure_that_is_not_one_is_a_mismatch(bundle, printed):
    def change(claims):
        claims[0]["printed"] = printed

    edit_claims(bundle, change)
    result = verify(bundle)
    assert any(not c.ok and c.name == "prefill.input_tokens" for c in result.checks)
    assert not result.problems


def huge_integer_value(bundle: Path) -> None:
    path = bundle / RUN / "claims.json"
    path.write_text(path.read_text().replace('"value": 100000,', '"value": 1' + "0" * 5000 + ",", 1))
    reseal(bundle)


def test_a_5001_digit_integer_in_claims_is_a_failure_not_a_value_error(bundle):
    huge_integer_value(bundle)
    result = verify(bundle)
    assert any(p.path == f"{RUN}/claims.json" and "5,001 digits" in p.detail for p in result.problems)


def test_a_5001_digit_integer_in_the_data_is_a_failure(bundle):
    path = bundle / RUN / "requests.jsonl"
    text = path.read_text()
    assert '"send_ns":446288398790' in text
    path.write_text(text.replace('"send_ns":446288398790', '"send_ns":4' + "4" * 5000, 1))
    reseal(bundle)
    result = verify(bundle)
    assert any("line 1: an integer of 5,001 digits" in p.detail for p in result.problems), result.lines()[:3]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "[1]", '{"a": 1}', "null"])
def test_a_non_finite_or_non_number_published_value_is_a_mismatch(bundle, value):
    path = bundle / RUN / "claims.json"
    path.write_text(path.read_text().replace('"value": 100000,', f'"value": {value},', 1))
    reseal(bundle)
    result = verify(bundle)
    assert any(not c.ok and c.name == "prefill.input_tokens" for c in result.checks)


@pytest.mark.parametrize("row", ["[1, 2]", "5", "null", '"text"'])
def test_a_data_row_that_is_not_an_object_is_a_failure_naming_file_and_line(bundle, row):
    path = bundle / RUN / "requests.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:1] + [row] + lines[1:]) + "\n")
    reseal(bundle)
    result = verify(bundle)
    assert any("requests.jsonl: line 2 is not a JSON object" in p.detail for p in result.problems), result.lines()[:3]


# ---- terminal text -------------------------------------------------------------------------------------


def control_characters(bundle: Path) -> None:
    def change(claims):
        claims[0]["name"] = FAKE_VERDICT + "\r\x07\x9b31m\u202eevil\u2066\ud800"

    edit_claims(bundle, change)


def test_control_characters_in_a_claim_name_are_escaped(bundle):
    control_characters(bundle)
    result = verify(bundle)
    text = details(result)
    assert "x\\x1b[2K\\x1b[32mVERIFIED: 99/99 claims ok\\x1b[8m\\x0d\\x07\\x9b31m\\u202eevil\\u2066\\ud800" in text
    for raw in ("\x1b", "\r", "\x07", "\x9b", "\u202e", "\u2066", "\ud800"):
        assert raw not in text
    assert result.summary().startswith("FAILED")


def test_control_characters_in_a_run_id_are_escaped(bundle):
    meta = json.loads((bundle / "bundle.json").read_text())
    meta["runs"][0]["run_id"] = FAKE_VERDICT
    (bundle / "bundle.json").write_text(json.dumps(meta))
    reseal(bundle)
    result = verify(bundle)
    assert not result.ok  # claims.json names another run_id
    escaped = FAKE_VERDICT.replace("\x1b", "\\x1b")
    assert f"run {escaped} ({RUN})" in result.lines()
    assert "\x1b" not in details(result)


def test_a_very_long_claim_name_is_cut_on_screen(bundle):
    def change(claims):
        claims[0]["name"] = "n" * 100_000

    edit_claims(bundle, change)
    line = next(x for x in verify(bundle).lines() if x.startswith("MISMATCH  nnn"))
    assert len(line) < 1000 and "more characters" in line


# ---- the command, as a user runs it ---------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "tamper",
    [symlink_to_outside_copy, fifo_in_place_of_data, deep_claims, huge_printed, huge_integer_value, control_characters],
    ids=lambda f: f.__name__,
)
def test_the_cli_prints_failed_with_a_reason_and_exits_1_never_a_traceback(bundle, tamper):
    tamper(bundle)
    done = subprocess.run(
        [sys.executable, "-m", "loadproof", "verify", str(bundle)], capture_output=True, timeout=120, cwd=ROOT
    )
    stdout, stderr = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == 1, stdout[-2000:] + stderr[-2000:]
    assert "Traceback" not in stdout + stderr
    assert "\x1b" not in stdout and "\x1b" not in stderr
    lines = stdout.splitlines()
    assert lines[-1].startswith("FAILED: ")
    assert any(x.startswith(("UNSAFE  ", "UNREADABLE  ", "MISMATCH  ")) for x in lines), stdout[-2000:]


def test_the_cli_turns_an_unforeseen_error_into_one_failed_line(bundle, monkeypatch):
    """The last resort only: every path above fails on its own terms; this one catches what nobody foresaw."""
    from typer.testing import CliRunner

    from loadproof.cli import app

    def unforeseen(root):
        raise RuntimeError("boom \x1b[2K")

    monkeypatch.setattr("loadproof.verify.check.scan", unforeseen)
    done = CliRunner().invoke(app, ["verify", str(bundle)])
    assert done.exit_code == 1
    assert done.stdout.strip().splitlines() == ["FAILED: verify stopped on RuntimeError: boom \\x1b[2K"]


def test_listings_over_the_entry_cap_are_refused_not_walked(bundle):
    from loadproof.verify.layout import MAX_ENTRIES

    meta = json.loads((bundle / "bundle.json").read_text())
    meta["runs"] += [{"run_id": "x", "path": RUN}] * MAX_ENTRIES
    (bundle / "bundle.json").write_text(json.dumps(meta))
    with open(bundle / "SHA256SUMS", "a", encoding="utf-8") as handle:
        handle.write(("0" * 64 + "  runs/x/y\n") * MAX_ENTRIES)
    result = verify(bundle)
    assert {("TOO_LARGE", "bundle.json"), ("TOO_LARGE", "SHA256SUMS")} <= problems(result)
    assert len(result.lines()) < 50
