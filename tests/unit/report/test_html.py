"""report.html: one self-contained page, a figure per available plot (each with its stable key), the claims
folded, every text from the run escaped."""

import re

from loadproof.metrics.claims import fact, number
from loadproof.metrics.figures import Table, panels_of
from loadproof.report.build import build_report, render_markdown
from loadproof.report.html import figures, markdown_to_html, render_html
from loadproof.store.run_dir import load_run
from tests import rundir_values as rv
from tests.unit.report.synthetic import stream, write_run

PLANTED = "<script>alert('x')</script>"


def telemetry(n=5):
    return [{"t_ns": i * 1_000_000_000, "host": {"cpu_busy_pct": 10.0 * i, "mem_used_bytes": 2**30}} for i in range(n)]


def throughput_records():
    out = []
    for f, fam in enumerate(("english", "code")):
        out.append(stream(f"{fam}-c1", send=f * 10.0, first=f * 10.0 + 0.1, rate=20.0, family=fam))
        out += [
            stream(
                f"{fam}-c4-{j}",
                send=50.0 + f * 10,
                first=50.2 + f * 10 + j * 0.01,
                rate=15.0,
                family=fam,
                concurrency=4,
            )
            for j in range(4)
        ]
    return out


def plots(run):
    """The page's figures: the scenario's plots (its report panels), then the TTFT distribution."""
    return figures(run, panels_of(run, []))


def svg_titles(html):
    return re.findall(r"<svg[^>]*>\s*<title>([^<]*)</title>", html)


def plot_keys(html):
    """The stable key of every figure of a page, in order."""
    return re.findall(r'<figure class="plot [a-z]+" id="fig-[^"]+" data-plot="([^"]+)">', html)


def assert_self_contained(html):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "<script" not in html.lower()
    assert "<link" not in html.lower() and "@import" not in html and "url(" not in html


def test_throughput_report_writes_a_self_contained_page(tmp_path):
    path = write_run(
        tmp_path,
        "tp",
        "throughput",
        throughput_records(),
        {"target": {"model": PLANTED, "endpoint": "completions"}, "engine_version": PLANTED},
        telemetry=telemetry(),
    )
    build_report(path)
    html = (path / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert_self_contained(html)
    assert (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html or "&lt;script&gt;alert('x')&lt;/script&gt;" in html
    )
    assert plot_keys(html) == [
        "aggregate-throughput",
        "stream-decode-rate",
        "tokens-over-time",
        "ttft-over-time",
        "itl-over-time",
        "ttft-cdf",
        "ttft-histogram",
        "itl-cdf",
        "itl-histogram",
        "e2el-cdf",
        "e2el-histogram",
        "telemetry",
    ]
    assert html.count("<svg") == len(plot_keys(html))
    assert "<h2>Claims</h2>" in html and "<code>throughput.english.c1.decode_tokens_per_s</code>" in html
    # the verdict-free headline, then the figures, the scenario's table, the claims folded
    order = ['id="summary"', "<h2>Figures</h2>", "<h2>Throughput</h2>"]
    assert [html.index(part) for part in order] == sorted(html.index(part) for part in order)
    assert '<details class="fold" id="claims">' in html and html.index("<h2>Claims</h2>") > html.index(order[-1])
    assert 'title="throughput.english.c1.decode_tokens_per_s"' in html  # a headline card names its claim


def test_planted_markup_in_a_family_name_is_escaped_inside_svg(tmp_path):
    records = [
        stream("x1", send=0, first=0.1, rate=10, family=PLANTED),
        stream("x2", send=1, first=1.3, rate=10, family=PLANTED),
    ]
    run = load_run(write_run(tmp_path, "tp", "throughput", records))
    html = render_html(run, "# report\n", panels_of(run, []))
    assert_self_contained(html)
    assert "&lt;script&gt;" in html


def capacity_run(tmp_path):
    sessions = [{"request_id": f"cap-s{i}", "session_id": f"s{i}", "expected": "1"} for i in range(3)]
    plan = {
        "sessions": sessions,
        "window_s": 4.0,
        "input_tokens": 64,
        "max_gap_s": 5.0,
        "drain_timeout_s": 30.0,
        "kv_idle_bound": 0.02,
    }
    records = [
        stream(
            f"cap-s{i}",
            send=0.0,
            first=1.0 + i,
            rate=10.0,
            tokens=80,
            scenario="capacity",
            family="capacity",
            prompt_id=f"s{i}",
            ok=False,
        )
        for i in range(3)
    ]  # cancelled after the window
    return load_run(write_run(tmp_path, "cap", "capacity", records, {"plan": plan}))


def test_capacity_stream_timelines_with_the_window_shaded(tmp_path):
    figs = plots(capacity_run(tmp_path))
    assert [f.key for f in figs] == [
        "tokens-per-stream",
        "window-rate-per-stream",
        "window-gap-per-stream",
        "cold-ttft-per-stream",
        "ttft-cdf",
    ]
    timeline = figs[0].svg
    assert svg_titles(timeline) == ["Tokens per stream over time (3 streams)"]
    assert timeline.count("<polyline") == 3
    assert "shared window, W = 4 s" in timeline and 'fill-opacity="0.18"' in timeline
    gaps = figs[2].svg  # every stream's longest silence against the criterion's bound
    assert gaps.count("<circle") == 3 and ">bound: 5 s<" in gaps


def test_interference_rate_with_the_newcomer_prefill_marked(tmp_path):
    sessions = [
        {"request_id": f"int-s{i}", "followup_request_id": f"int-f{i}", "session_id": f"s{i}", "expected": "1"}
        for i in range(2)
    ]
    records = [
        stream(f"int-s{i}", send=0.0, first=0.5, rate=20.0, tokens=200, scenario="interference", family="interference")
        for i in range(2)
    ]
    records.append(
        stream("int-new", send=3.0, first=6.0, rate=20.0, tokens=5, scenario="interference", family="interference")
    )
    plan = {
        "sessions": sessions,
        "newcomer": {"request_id": "int-new"},
        "window_s": 2.0,
        "session_tokens": 64,
        "newcomer_tokens": 64,
    }
    figs = plots(load_run(write_run(tmp_path, "int", "interference", records, {"plan": plan})))
    rate = next(f.svg for f in figs if f.key == "stream-rate")
    for label in ("before", "during: newcomer prefill", "after", "newcomer sent"):
        assert f">{label}<" in rate


def test_ab_rounds_by_arm(tmp_path):
    records = [
        stream(
            f"ab-{r}-{arm}",
            send=r * 10.0 + (5 if arm == "b" else 0),
            first=r * 10.0 + 0.2,
            rate=rate,
            scenario="ab",
            family=arm,
            repeat=r,
        )
        for r in range(3)
        for arm, rate in (("a", 10.0), ("b", 12.0))
    ]
    plan = {
        "arms": {arm: {"target": {}, "settings": {}} for arm in "ab"},
        "order": [["a", "b"]] * 3,
        "order_seed": 1,
        "prompts": ["p"],
        "family": "english",
        "bootstrap_seed": 2,
    }
    figs = plots(load_run(write_run(tmp_path, "ab", "ab", records, {"plan": plan})))
    assert [f.key for f in figs] == [
        "decode-cdf-by-arm",
        "ttft-cdf",
        "decode-tokens-per-s-per-round",
        "ttft-s-per-round",
        "output-tokens-per-round",
    ]
    titles = [svg_titles(f.svg)[0] for f in figs]
    assert "decode_tokens_per_s per round, by arm" in titles and "ttft_s per round, by arm" in titles
    overlaid = figs[0].svg  # both arms' distributions on one plot
    assert ">arm a (n=3)<" in overlaid and ">arm b (n=3)<" in overlaid and overlaid.count("<polyline") == 2


def test_no_figure_without_data(tmp_path):
    assert plots(load_run(write_run(tmp_path, "empty", "throughput", []))) == []


def test_markdown_subset():
    html = markdown_to_html(
        "# T <b>\n\n- a `x<y`\n- b\n\n| h1 | h2 |\n|---|---|\n| 1 | <i> |\n\ntext & more\n"
        "![telemetry](telemetry.svg)\n",
        {"telemetry.svg": "<svg></svg>"},
    )
    assert "<h1>T &lt;b&gt;</h1>" in html
    assert "<li>a <code>x&lt;y</code></li>" in html
    assert "<tr><th>h1</th><th>h2</th></tr>" in html and "<td>&lt;i&gt;</td>" in html
    assert "<p>text &amp; more</p>" in html
    assert (
        '<figure class="plot full" id="fig-telemetry" data-plot="telemetry">\n<svg></svg>'
        "<figcaption>telemetry</figcaption>" in html
    )


def test_the_telemetry_figure_draws_the_cpu_used_outside_loadproof_where_samples_carry_it():
    from loadproof.report.plots import telemetry_svg

    rows = telemetry()
    assert "outside loadproof" not in telemetry_svg(rv.telemetry(rows))
    for i, row in enumerate(rows):
        row["host"]["cpu_outside_pct"] = 5.0 * i
    svg = telemetry_svg(rv.telemetry(rows))
    assert "host CPU used outside loadproof (%); max 20.0, over 4 s" in svg


def test_a_cell_holding_a_pipe_stays_one_cell_in_report_md_and_report_html(tmp_path):
    run = load_run(write_run(tmp_path, "tp", "throughput", throughput_records()))
    claims = [
        number("x.spread", 0.5, "s", "|a - b| / b over the requests", 3, direction="neither"),
        fact("x.error", "HTTP 400: expected one of a | b", "the engine's own words | as said"),
    ]
    panel = Table(title="Failures", header=["kind", "message"], rows=[["http", "a | b\\|c"]])
    markdown = render_markdown(run, claims, panels=[panel])
    rows = [line for line in markdown.splitlines() if line.startswith("| `x.") or line.startswith("| http")]
    assert len(rows) == 3
    for line in rows:  # GitHub's reading: a | escaped as \| is no separator
        assert len(re.split(r"(?<!\\)\|", line.strip().strip("|"))) == (2 if line.startswith("| http") else 4)
    html = render_html(run, markdown)
    assert "<td>|a - b| / b over the requests</td>" in html.replace(' class="text"', "")
    assert "HTTP 400: expected one of a | b" in html and "the engine's own words | as said" in html
    assert "<td>a | b|c</td>" in html.replace(' class="text"', "")
    for tr in re.findall(r"<tr>.*?</tr>", html):
        if "x.spread" in tr or "x.error" in tr:
            assert tr.count("<td") == 4, tr
