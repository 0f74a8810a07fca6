"""`loadproof report RUN`: recompute claims from the stored records, write claims.json and report.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadproof.metrics import compute_claims
from loadproof.metrics.claims import Claim, claims_payload, criteria_of, criterion_name, verdict_of
from loadproof.store.run_dir import Run, load_run, write_claims

REPORT = "report.md"
REPORT_HTML = "report.html"  # the same content, self-contained, with figures


@dataclass
class Report:
    run: Run
    claims: list[Claim]
    markdown: str


def build_report(path: Path) -> Report:
    run = load_run(path)
    claims = compute_claims(run)
    write_claims(path, claims_payload(run.run_id, claims))
    from loadproof.report.plots import telemetry_svg

    svg = telemetry_svg(run.telemetry)
    if svg:
        (path / "telemetry.svg").write_text(svg, encoding="utf-8")
    markdown = render_markdown(run, claims, with_plot=bool(svg))
    (path / REPORT).write_text(markdown, encoding="utf-8")
    from loadproof.report.html import render_html

    (path / REPORT_HTML).write_text(render_html(run, markdown), encoding="utf-8")
    return Report(run=run, claims=claims, markdown=markdown)


def throughput_table(claims: list[Claim]) -> tuple[list[str], list[list[str]]]:
    """Rows family x columns concurrency: c1 shows the single-request decode rate, N>1 the aggregate."""
    by_name = {c.name: c for c in claims}
    families: list[str] = []
    levels: list[int] = []
    for c in claims:
        parts = c.name.split(".")
        if parts[0] == "throughput" and len(parts) == 4:
            if parts[1] not in families:
                families.append(parts[1])
            level = int(parts[2][1:])
            if level not in levels:
                levels.append(level)
    levels.sort()
    header = ["family"] + [
        "c1 decode tok/s (one user)" if n == 1 else f"c{n} aggregate tok/s (all streams)" for n in levels
    ]
    rows = []
    for fam in families:
        row = [fam]
        for n in levels:
            key = "decode_tokens_per_s" if n == 1 else "aggregate_tokens_per_s"
            claim = by_name.get(f"throughput.{fam}.c{n}.{key}")
            row.append(claim.printed if claim else "n/a")
        rows.append(row)
    return header, rows


def quality_rows(claims: list[Claim]) -> list[list[str]]:
    """(check, correct, items, share) per quality suite, mode, language and length; skipped ones say why."""
    by_name = {c.name: c for c in claims}
    rows = []
    for c in claims:
        if not c.name.startswith("quality."):
            continue
        stem, _, leaf = c.name.rpartition(".")
        label = stem.removeprefix("quality.").replace(".", " ")
        if leaf == "skipped":
            rows.append([label, "skipped", "", str(c.value)])
            continue
        if leaf != "items":
            continue
        items = int(c.value)
        pairs = [("", by_name.get(f"{stem}.correct") or by_name.get(f"{stem}.retrieved"))]
        if f"{stem}.correct_strict" in by_name:
            pairs = [(" (flexible)", pairs[0][1]), (" (strict)", by_name[f"{stem}.correct_strict"])]
        for suffix, good in pairs:
            if good is not None:
                share = f"{int(good.value) / items:.3f}" if items else "n/a"
                rows.append([label + suffix, good.printed, c.printed, share])
    return rows


def criteria_rows(claims: list[Claim]) -> list[tuple[str, str, str]]:
    """(criterion, status, evidence) of every acceptance criterion among the claims."""
    return [(criterion_name(c), c.printed, c.formula) for c in criteria_of(claims)]


def render_markdown(run: Run, claims: list[Claim], with_plot: bool = False) -> str:
    m = run.manifest
    lines = [f"# loadproof run {run.run_id}", ""]
    lines.append(f"- scenario: {m.scenario}; model: {m.target.model} via /{m.target.endpoint}")
    if m.engine_version:
        lines.append(f"- engine version: {m.engine_version}")
    startup = m.engine_startup
    if startup is not None and startup.line:
        lines.append(f"- engine startup report: `{startup.line}` (the engine's own figure, not measured capacity)")
    ended = "unfinished" if m.end_wall_time is None else m.end_wall_time
    lines.append(f"- started {m.start_wall_time}, ended {ended}; {requests_line(run)}")
    if run.num_torn_lines:
        lines.append(f"- {run.num_torn_lines} torn line(s) skipped (interrupted write)")
    if m.telemetry is not None and not m.telemetry.sampled:
        lines.append(f"- samples absent: {m.telemetry.note}; the claims that need them are absent, not zero")
    criteria = criteria_rows(claims)
    if criteria:
        verdict = verdict_of(claims)
        lines += ["", f"## Acceptance: {verdict.printed if verdict else '?'}", "", "| criterion | status | evidence |",
                  "|---|---|---|"]
        lines += [f"| {name} | {status} | {evidence} |" for name, status, evidence in criteria]
    header, rows = throughput_table(claims)
    if rows:
        lines += ["", "## Throughput", "",
                  "c1 is the median single-request decode rate over the family's prompts. Columns c4, c8 are",
                  "batch aggregate throughput: all streams together, not any one user's rate.", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    quality = quality_rows(claims)
    if quality:
        lines += ["", "## Quality", "", "Scored item by item (answers.jsonl); GSM8K by lm-eval's strict and flexible "
                  "extraction.", "", "| check | correct | items | share |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(r) + " |" for r in quality]
    lines += ["", "## Claims", "", "| name | value | unit | formula |", "|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.printed} | {c.unit} | {c.formula} |" for c in claims if c.kind != "criterion"]
    if with_plot:
        note = run.manifest.telemetry.note if run.manifest.telemetry is not None else None
        lines += ["", "## Telemetry", "", "![telemetry over the run](telemetry.svg)"] + ([f"", note] if note else [])
    mismatch = _token_count_note(run)
    if mismatch:
        lines += ["", mismatch]
    return "\n".join(lines) + "\n"


def request_counts(run: Run) -> tuple[int, int, int]:
    """(recorded, failed, cancelled as planned): the streams the scenario itself cancelled when its
    window ended (capacity, interference: at or after its `cancel` event) did not fail."""
    cancel_ns = min((e.t_ns for e in run.events if e.kind == "cancel" and e.t_ns is not None), default=None)
    planned = sum(r.error_kind == "cancelled" and cancel_ns is not None and r.end_ns >= cancel_ns for r in run.records)
    return len(run.records), sum(not r.ok for r in run.records) - planned, planned


def requests_line(run: Run) -> str:
    """`4 requests recorded, 0 failed (4 cancelled after the window, as planned)`."""
    recorded, failed, planned = request_counts(run)
    line = f"{recorded} request{'' if recorded == 1 else 's'} recorded, {failed} failed"
    return line + (f" ({planned} cancelled after the window, as planned)" if planned else "")


def _token_count_note(run: Run) -> str:
    pairs = [(r.output_tokens, r.client_output_tokens) for r in run.records
             if r.ok and r.output_tokens is not None and r.client_output_tokens is not None]
    if not pairs:
        return ""
    server = sum(p[0] for p in pairs)
    client = sum(p[1] for p in pairs)
    diff = (client - server) / server * 100 if server else 0.0
    return (f"Output tokens: server usage {server}, client tokenizer re-count {client} ({diff:+.1f}%); "
            "rates use the server's count. Re-tokenizing decoded text can merge or split tokens.")
