"""Which tool wrote a file, and its reader (docs/import.md, "Formats").

A folder is inference-perf's (its stage files), AIPerf's (`profile_export_aiperf.json`) or GuideLLM's
(`benchmarks.json`); a file is told by its content: vllm bench serve's result (`backend`, `request_throughput`),
GuideLLM's (`metadata`, `benchmarks`), AIPerf's (`aiperf_version`), or one of inference-perf's (a stage or summary
report, or the per-request list, read with the folder it is in). `--tool` names the tool instead; a file of
another tool is then refused, as is one no reader knows, each in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadproof.errors import UsageError
from loadproof.ingest import aiperf, guidellm, inference_perf, vllm_bench
from loadproof.ingest.parsed import ParsedRun
from loadproof.ingest.reading import Refused, parse_json, read_bytes, sha256_of

TOOLS = (vllm_bench.TOOL, guidellm.TOOL, aiperf.TOOL, inference_perf.TOOL)
AUTO = "auto"
NAMES = {vllm_bench.TOOL: "vllm bench serve", guidellm.TOOL: "GuideLLM", aiperf.TOOL: "AIPerf"}
NAMES[inference_perf.TOOL] = "inference-perf"


def check_tool(tool: str) -> None:
    if tool != AUTO and tool not in TOOLS:
        raise UsageError(f"--tool {tool!r}: one of {AUTO}, {', '.join(TOOLS)}")


def read_results(path: Path, tool: str = AUTO) -> list[ParsedRun]:
    """Every run in the file (or folder) at `path`, read by its tool's reader (see the module doc)."""
    check_tool(tool)
    if not path.exists():
        raise Refused(f"{path}: no such file or folder")
    if path.is_dir():
        path = _in_folder(path)
    if path.is_dir() or path.name == inference_perf.PER_REQUEST:
        return _as(
            tool, inference_perf.TOOL, path, lambda: inference_perf.read_folder(path if path.is_dir() else path.parent)
        )
    if path.name == aiperf.RECORDS:  # the per-request lines: read with the summary beside them
        path = path.with_name(aiperf.SUMMARY)
    raw = read_bytes(path)
    data = parse_json(raw, str(path))
    found = _tool_of(data)
    if found == inference_perf.TOOL:
        return _as(tool, found, path, lambda: inference_perf.read_folder(path.parent))
    if found == vllm_bench.TOOL:
        return _as(tool, found, path, lambda: vllm_bench.read(data, path.name, sha256_of(raw)))
    if found == guidellm.TOOL:
        return _as(tool, found, path, lambda: guidellm.read(data, path.name, sha256_of(raw)))
    if found == aiperf.TOOL:
        return _as(tool, found, path, lambda: aiperf.read(data, path, sha256_of(raw)))
    said = f"--tool {tool}: " if tool != AUTO else ""
    raise Refused(
        f"{path}: {said}not a result file of {', '.join(NAMES.values())} (docs/import.md lists what each writes)"
    )


def _in_folder(folder: Path) -> Path:
    if inference_perf.is_folder(folder):
        return folder
    for name in (aiperf.SUMMARY, "benchmarks.json", "result.json"):
        if (folder / name).is_file():
            return folder / name
    raise Refused(f"{folder}: a folder with no result file loadproof reads (docs/import.md, Formats)")


def _tool_of(data: Any) -> str | None:
    if vllm_bench.looks_like(data):
        return vllm_bench.TOOL
    if guidellm.looks_like(data):
        return guidellm.TOOL
    if aiperf.looks_like(data):
        return aiperf.TOOL
    if isinstance(data, dict) and "load_summary" in data and "successes" in data:
        return inference_perf.TOOL
    if (
        isinstance(data, list)
        and data
        and isinstance(data[0], dict)
        and {"start_time", "end_time", "info"} <= set(data[0])
    ):
        return inference_perf.TOOL
    return None


def _as(asked: str, found: str, path: Path, read: Any) -> list[ParsedRun]:
    if asked not in (AUTO, found):
        raise Refused(f"{path}: a {NAMES[found]} file, not {NAMES[asked]}'s (--tool {asked})")
    runs: list[ParsedRun] = read()
    return runs
