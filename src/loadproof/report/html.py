"""`report.html`: the Markdown report as one self-contained page, plus figures drawn from the run data.

Nothing is fetched when the page opens: no script, no web font, no external stylesheet or image; CSS
and SVG are inline. Each figure derives only from the run directory (records with their chunk times
and server token counts, the manifest's plan, telemetry rows); a figure whose data the run lacks is
left out. Every text taken from the run (manifest fields, names, errors) is escaped.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from html import escape
from itertools import accumulate

from loadproof.metrics.throughput import batch_aggregate_per_s, decode_rate_per_s
from loadproof.plans import load_plan
from loadproof.plans.capacity import CapacityPlan
from loadproof.plans.interference import InterferencePlan
from loadproof.records import RequestRecord
from loadproof.report.plots import bar_chart, line_chart, telemetry_svg
from loadproof.store.run_dir import Run

NS = 1_000_000_000
MAX_POINTS = 300  # per line; cumulative series thinned beyond this (every k-th point and the last)

Figure = tuple[str, str]  # (svg, caption)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 980px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.table { overflow-x: auto; margin: 0.8em 0; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; white-space: nowrap; } td.text { min-width: 14em; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; }
td code, .name { white-space: nowrap; }
figure { margin: 1.2em 0; } figcaption { font-size: 0.88em; color: #555; max-width: 720px; }
svg { max-width: 100%; height: auto; background: #fff; }
@media (max-width: 720px) {  /* a narrow window: each row a block, figures named by their column */
  .table table, .table tbody, .table tr { display: block; }
  .table tr:first-child { display: none; }
  .table tr { border: 1px solid #ccc; margin-bottom: 0.4em; padding: 3px 8px; }
  .table td { display: inline-block; border: none; padding: 1px 0.7em 1px 0; text-align: left; min-width: 0; }
  .table td:first-child, .table td.text { display: block; }
  .table td:empty { display: none; }
  .table td.num::before { content: attr(data-label) ": "; color: #666; }
}
"""


def render_html(run: Run, markdown: str) -> str:
    """The page: the Markdown report's content, with a Figures section before its claims table."""
    images = {"telemetry.svg": telemetry_svg(run.telemetry)}
    head, sep, tail = markdown.partition("\n## Claims\n")
    title = f"<h1>loadproof run {escape(run.run_id, quote=False)}</h1>"
    body = [markdown_to_html(head, images).replace(
        title, f'<h1>loadproof run <span class="name">{escape(run.run_id, quote=False)}</span></h1>', 1)]
    figs = figures(run)
    if figs:
        body.append("<h2>Figures</h2>")
        body += [f"<figure>\n{svg}<figcaption>{escape(caption)}</figcaption>\n</figure>" for svg, caption in figs]
    if sep:
        body.append(markdown_to_html("## Claims\n" + tail, images))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>loadproof run {escape(run.run_id)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


# --- the Markdown subset report.md uses: headings, lists, tables, paragraphs, `code`, images ---------

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")
_NUMBER = re.compile(r"^[-+]?(\d[\d,]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s?%?$")


def _inline(text: str) -> str:
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text, quote=False))
    return re.sub(r"^_(.+)_$", r"<em>\1</em>", html)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _td(cell: str, label: str) -> str:
    """A cell: figures right-aligned and named by `label` (their column's header) where a narrow window
    stacks the row; prose (evidence, formulas) in a column wide enough to read; other words as they are."""
    if _NUMBER.match(cell):
        return f'<td class="num" data-label="{escape(label)}">{_inline(cell)}</td>'
    if len(cell) > 16 and " " in cell:
        return f'<td class="text">{_inline(cell)}</td>'
    return f"<td>{_inline(cell)}</td>"


def markdown_to_html(text: str, images: dict[str, str]) -> str:
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("<ul>\n" + "\n".join(items) + "\n</ul>")
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            body = [r for r in rows[1:] if not set(r) <= set("|-: ")]
            html = ['<div class="table"><table>',
                    "<tr>" + "".join(f"<th>{_inline(c)}</th>" for c in _cells(rows[0])) + "</tr>"]
            labels = [c.strip("`") for c in _cells(rows[0])]
            html += ["<tr>" + "".join(_td(c, labels[k] if k < len(labels) else "") for k, c in enumerate(_cells(r)))
                     + "</tr>" for r in body]
            out.append("\n".join(html + ["</table></div>"]))
        elif _IMAGE.match(line.strip()):
            alt, src = _IMAGE.match(line.strip()).groups()  # type: ignore[union-attr]
            svg = images.get(src)
            out.append(f"<figure>\n{svg}<figcaption>{escape(alt)}</figcaption>\n</figure>" if svg
                       else f"<p>[{escape(alt)}]</p>")
            i += 1
        else:
            para = []
            while (i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "- ", "|"))
                   and not _IMAGE.match(lines[i].strip())):
                para.append(_inline(lines[i]))
                i += 1
            out.append("<p>" + "\n".join(para) + "</p>")
    return "\n".join(out)


# --- figures, each a pure function of the run ------------------------------------------------------


def figures(run: Run) -> list[Figure]:
    out: list[Figure] = []
    for make in (throughput_figures, stream_timeline_figure, interference_figure, ab_round_figures, ttft_figure):
        out += make(run)
    return out


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    k = -(-len(points) // MAX_POINTS)
    return points[::k] + ([points[-1]] if (len(points) - 1) % k else [])


def _cumulative(rec: RequestRecord, t0: int) -> list[tuple[float, float]]:
    totals = list(accumulate(rec.chunk_tokens))
    return _thin([((rec.send_ns - t0) / NS, 0.0)] + [((t - t0) / NS, float(n)) for t, n in zip(rec.chunk_ns, totals)])


def throughput_figures(run: Run) -> list[Figure]:
    """Grouped bars by concurrency and task family: aggregate rate, and one stream's decode rate."""
    recs = [r for r in run.records if r.scenario == "throughput"]
    families = list(dict.fromkeys(r.family for r in recs))
    levels = sorted({r.concurrency for r in recs})
    if not recs:
        return []
    batches: dict[tuple[str, int], dict[tuple[int, int], list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in recs:
        batches[(r.family, r.concurrency)][(r.repeat, r.batch)].append(r)

    def aggregate(fam: str, n: int) -> float | None:
        values = [v for v in (batch_aggregate_per_s(b) for b in batches[(fam, n)].values()) if v is not None]
        return statistics.median(values) if values else None

    def decode(fam: str, n: int) -> float | None:
        values = [v for v in (decode_rate_per_s(r) for r in recs if r.family == fam and r.concurrency == n)
                  if v is not None]
        return statistics.median(values) if values else None

    groups = [f"c{n}" for n in levels]
    agg = bar_chart("Aggregate throughput by concurrency and task family", groups,
                    [(f, [aggregate(f, n) for n in levels]) for f in families], "tokens/s, all streams", "concurrency")
    one = bar_chart("One stream's decode rate by concurrency and task family", groups,
                    [(f, [decode(f, n) for n in levels]) for f in families], "tokens/s, one stream", "concurrency")
    out = []
    if agg:
        out.append((agg, "Median over batches of output tokens / (last completion - first send): all streams "
                         "together, not any one user's rate (at c1, one request from send to end)."))
    if one:
        out.append((one, "Median over requests of (output_tokens - 1) / (t_last_token - t_first_token)."))
    return out


def _plan_records(run: Run, plan: CapacityPlan | InterferencePlan) -> list[RequestRecord]:
    by_id = {r.request_id: r for r in run.records}
    return [by_id[s.request_id] for s in plan.sessions if s.request_id in by_id]


def stream_timeline_figure(run: Run) -> list[Figure]:
    """Cumulative tokens of every capacity stream over time, the shared window shaded."""
    plan = load_plan(run) if run.manifest.scenario == "capacity" else None
    if not isinstance(plan, CapacityPlan):
        return []
    recs = [r for r in _plan_records(run, plan) if r.chunk_ns]
    if not recs or not any(sum(r.chunk_tokens) for r in recs):
        return []
    t0 = min(r.send_ns for r in recs)
    spans = []
    window_s = plan.window_s
    started = [r.first_token_ns for r in recs if r.first_token_ns is not None]
    if window_s and len(started) == len(plan.sessions):
        start = (max(started) - t0) / NS
        spans.append((start, start + window_s, f"shared window, W = {window_s:g} s", "#2ca02c"))
    svg = line_chart(f"Tokens per stream over time ({len(recs)} streams)",
                     [(r.prompt_id or r.request_id, _cumulative(r, t0)) for r in recs],
                     "seconds since the first send", "cumulative output tokens", spans=spans)
    return [(svg, "One line per stream: tokens from the server's per-chunk usage. The shaded band is the "
                  "shared generation window: from the last stream's first token, W seconds.")] if svg else []


def interference_figure(run: Run) -> list[Figure]:
    """The M streams' aggregate token rate over time, the newcomer's prefill and the windows shaded."""
    plan = load_plan(run) if run.manifest.scenario == "interference" else None
    if not isinstance(plan, InterferencePlan):
        return []
    streams = [r for r in _plan_records(run, plan) if r.chunk_ns]
    if not streams:
        return []
    t0 = min(r.send_ns for r in streams)
    events = sorted((t, n) for r in streams for t, n in zip(r.chunk_ns, r.chunk_tokens))
    span_s = (events[-1][0] - t0) / NS
    if span_s <= 0 or not any(n for _, n in events):
        return []
    width = max(span_s / 60, 0.25)  # coarse enough that chunk arrival jitter does not look like rate
    bins: dict[int, int] = defaultdict(int)
    for t, n in events:
        bins[int((t - t0) / NS / width)] += n
    points = [((k + 0.5) * width, bins.get(k, 0) / width) for k in range(int(span_s / width) + 1)]
    spans, marks = [], []
    window_s = plan.window_s
    firsts = [r.first_token_ns for r in streams if r.first_token_ns is not None]
    if window_s and firsts:
        start = (max(firsts) - t0) / NS
        spans.append((start, start + window_s, "before", "#2ca02c"))
    newcomer = next((r for r in run.records if r.request_id == plan.newcomer.request_id), None)
    if newcomer is not None:
        sent = (newcomer.send_ns - t0) / NS
        marks.append((sent, "newcomer sent"))
        if newcomer.first_token_ns is not None:
            first = (newcomer.first_token_ns - t0) / NS
            spans.append((sent, first, "during: newcomer prefill", "#d62728"))
            if window_s:
                spans.append((first, first + window_s, "after", "#1f77b4"))
    svg = line_chart(f"Aggregate token rate of the {len(streams)} running streams", [("M streams", points)],
                     "seconds since the first send", "tokens/s, all M streams", spans=spans, marks=marks)
    return [(svg, f"Tokens of the M streams per {width:.2f} s bin (server per-chunk usage) / bin width. Shaded: "
                  "the before window, the newcomer's prefill (send to first token), the after window.")] if svg else []


def ttft_figure(run: Run) -> list[Figure]:
    """Empirical CDF of TTFT over requests with a first token, one line per family (arm, for ab runs)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in run.records:
        if r.ttft_ns is not None:
            groups[r.family or r.scenario or "requests"].append(r.ttft_ns / NS)
    total = sum(len(v) for v in groups.values())
    if total < 2:
        return []
    series = []
    for name, values in groups.items():
        values.sort()
        series.append((f"{name} (n={len(values)})",
                       [(values[0], 0.0)] + [(v, (i + 1) / len(values)) for i, v in enumerate(values)]))
    svg = line_chart(f"TTFT distribution ({total} requests)", series, "time to first token, s",
                     "fraction of requests at or below", step=True, x_from_zero=True)
    return [(svg, "Empirical CDF of t_first_token - t_send over every request that produced a first token "
                  "(streams cancelled after it included).")] if svg else []


def ab_round_figures(run: Run) -> list[Figure]:
    """Per round, each arm's figure (the median over its requests in that round), for an ab run."""
    if run.manifest.scenario != "ab":
        return []
    from loadproof.metrics.ab import METRICS, round_figures

    out = []
    for name, (metric, unit, _) in METRICS.items():
        rows = round_figures(run.records, metric)
        if not rows:
            continue
        series = [("a", [(float(r), a) for r, a, _ in rows]), ("b", [(float(r), b) for r, _, b in rows])]
        svg = line_chart(f"{name} per round, by arm", series, "round", unit, y_from_zero=True, dots=True)
        if svg:
            out.append((svg, f"Each point: the median {name} over the arm's requests in that round. The arms ran "
                             "in a seeded random order within each round (order in the manifest)."))
    return out
