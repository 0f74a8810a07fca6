"""report.html opened in a real headless Chromium: what a person sees, checked and kept as screenshots.

For one run of every scenario kind, a rate search's folder, a folder of runs' index.html and a comparison's page
(tests/report_pages.py: the real runs under docs/runs, their reports regenerated from the stored records;
soak and ab built synthetically, as no published run has them), the page is loaded from its file:// URL
through Chromium's DevTools protocol (a small websocket client on aiohttp) at a desktop width and at a
narrow one, every folded section opened. The test fails on any console error or warning, uncaught
exception, failed load or request leaving the file; on a plot the page should draw and does not (each
case's figures by their stable key, `figure.plot[data-plot]`, each with its SVG drawn), on missing
headings or tables, or an acceptance heading that is not the claims' verdict; on a link to a file that
is not there; on a page, table or figure wider than its room (cut off, or hidden in a box to scroll
sideways); on a claim name broken across lines; and on SVG text that leaves its figure or overlaps other
text. A report with errors planted in it shows the net catches each. Full-page screenshots (and the page
itself) are kept in test-artifacts/report-screenshots/ at the repository root (git-ignored), for a person
or CI to look at; chromium.txt there says which Chromium ran and how long installing it took.
scripts/report-screenshots.py photographs the same pages for the docs.

Chromium is Debian's `chromium`; when it is missing the test installs it once with apt-get (root
only) and skips, with one line saying why, only where that is impossible.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.polling import ready_while_running
from tests.report_pages import CASES, COMPARE, INDEX, SEARCH, build

ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = ROOT / "test-artifacts" / "report-screenshots"
WIDE, NARROW = 1280, 600
LOAD_TIMEOUT_S = 20.0

pytestmark = pytest.mark.timeout(300)  # a fresh machine installs chromium first (about 20 s here)

# the plots each page draws, by key, in order (the telemetry panels last, where the run sampled them)
DISTRIBUTIONS = ["ttft-cdf", "ttft-histogram", "itl-cdf", "itl-histogram", "e2el-cdf", "e2el-histogram"]
ENGINE = ["engine-queue", "engine-kv"]
OVER_TIME = ["ttft-over-time", "itl-over-time"]
THROUGHPUT = ["aggregate-throughput", "stream-decode-rate", "tokens-over-time", *OVER_TIME, *DISTRIBUTIONS]
CAPACITY = ["tokens-per-stream", "window-rate-per-stream", "window-gap-per-stream", "cold-ttft-per-stream"]
CAPACITY += [*ENGINE, "ttft-cdf"]
PLOTS = {
    "throughput": THROUGHPUT,
    "throughput-2gpu": THROUGHPUT,
    "load": ["rate-over-time", *OVER_TIME, *ENGINE, *DISTRIBUTIONS],
    "replay": ["rate-over-time", *OVER_TIME, *ENGINE, *DISTRIBUTIONS, "prefix-hits", "prefix-hits-over-trace"],
    "sessions": ["hits-by-turn", "ttft-by-turn", "context-by-turn", *ENGINE, *DISTRIBUTIONS],
    "capacity-pass": CAPACITY,
    "capacity-fail": ["tokens-per-stream", "cold-ttft-per-stream", *ENGINE, "ttft-cdf"],  # no shared window
    "capacity-64-streams": CAPACITY,
    "capacity-search-trial": CAPACITY,
    "capacity-engine-crash": [],  # no stream produced a token
    "capacity-1m-tokens": CAPACITY,
    "prefill": ["ttft-per-repeat", "ttft-cdf"],
    "interference": ["stream-rate", *ENGINE, "ttft-cdf"],
    "quality": ["ttft-cdf"],
    "soak": ["latency-over-time", "memory-over-time", "ttft-cdf"],
    "ab": [
        "decode-cdf-by-arm",
        "ttft-cdf",
        "decode-tokens-per-s-per-round",
        "ttft-s-per-round",
        "output-tokens-per-round",
    ],
    SEARCH: ["attainment-vs-rate", "ttft-vs-rate", "goodput-vs-rate"],
    INDEX: [],
    COMPARE: ["ttft-by-side", "itl-by-side", "tpot-by-side", "e2el-by-side"],
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--remote-debugging-port=0",
]


def headings(case: str) -> list[str]:
    """The h2 headings the case's page must have ("Acceptance" stands for "Acceptance: PASS" or FAIL)."""
    if case == SEARCH:
        return ["Curves", "Every run of the series", "Claims"]
    if case == INDEX:
        return []
    if case == COMPARE:
        return ["Distributions, side by side", "Change against every baseline", "Decision"]
    if case in ("load", "replay", "sessions"):  # no acceptance criteria: figures measured
        return ["Figures", "Latency percentiles", "Claims", "Telemetry"]
    if case.startswith("throughput"):
        return ["Throughput", "Figures", "Claims", "Telemetry"]
    if case == "quality":
        return ["Quality", "Figures", "Claims", "Telemetry"]
    if case == "ab":  # no acceptance criteria: a comparison
        return ["Figures", "Claims", "Telemetry"]
    if case == "capacity-engine-crash":  # no stream produced a token: nothing to draw but telemetry
        return ["Acceptance", "Claims", "Telemetry"]
    return ["Acceptance", "Figures", "Claims", "Telemetry"]


# --- Chromium: found, or installed once -------------------------------------------------------------


def _chromium_binary() -> str | None:
    return shutil.which("chromium")


def _install_chromium() -> str:
    """apt-get install chromium, non-interactive and quiet, once per machine (a lock for parallel runs)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(
            "Chromium is not installed and cannot be installed here (needs root and apt-get): "
            "report.html not opened in a browser"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with open(Path(tempfile.gettempdir()) / "loadproof-chromium-install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _chromium_binary():
            return "installed meanwhile by another test process"
        start = time.monotonic()
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0:  # a fresh machine may have no package lists yet
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, text=True)
            done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not _chromium_binary():
            pytest.fail("apt-get install chromium failed:\n" + (done.stdout + done.stderr)[-3000:])
        return f"installed with apt-get in {time.monotonic() - start:.1f} s"


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A headless Chromium for this module; yields its browser websocket URL."""
    how = "already installed" if _chromium_binary() else _install_chromium()
    version = subprocess.run([_chromium_binary() or "chromium", "--version"], capture_output=True, text=True).stdout
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / "chromium.txt").write_text(f"{version.strip()}: {how}\n")
    print(f"\nchromium: {version.strip()}, {how}", file=sys.stderr)
    profile = tmp_path_factory.mktemp("chromium-profile")
    log = open(profile.parent / "chromium.log", "w")
    proc = subprocess.Popen(
        [_chromium_binary() or "chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"

        def written() -> bool:
            return port_file.exists() and len(port_file.read_text().splitlines()) >= 2

        if not ready_while_running(written, proc, 30, every_s=0.05):
            log.flush()
            pytest.fail("chromium did not start:\n" + (profile.parent / "chromium.log").read_text()[-3000:])
        port, path = port_file.read_text().splitlines()[:2]
        yield f"ws://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()


# --- a small DevTools protocol client ---------------------------------------------------------------


@dataclass
class Page:
    """What a person would see of one page, and everything the browser complained about."""

    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    png: bytes = b""


class DevTools:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        await self.ws.send_str(
            json.dumps(
                {"id": msg_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
            )
        )
        while True:
            msg = await self.receive()
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def receive(self) -> dict[str, Any]:
        msg = await self.ws.receive()
        if msg.type != aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"DevTools connection ended: {msg.type}")
        data = json.loads(msg.data)
        if "method" in data:
            self.events.append(data)
        return data

    async def until(self, method: str) -> None:
        seen = len(self.events)
        while not any(e["method"] == method for e in self.events[seen:]):
            await self.receive()


# JS run in the loaded page: headings, tables, figures, and layout faults a person would notice
INSPECT = r"""
(() => {
  const box = (e) => e.getBoundingClientRect();
  const text = (e) => e.textContent.trim().replace(/\s+/g, " ").slice(0, 80);
  const all = (selector, root = document) => [...root.querySelectorAll(selector)];
  for (const d of all("details")) d.open = true;  // every folded section laid out and checked too
  const out = {h1: all("h1").map(text), h2: all("h2").map(text), tables: all("table").length, svgs: [], faults: [],
               pageWidth: document.documentElement.scrollWidth, viewWidth: window.innerWidth,
               links: all("a[href]").map((a) => a.getAttribute("href")).filter((h) => !h.startsWith("#")),
               plots: all("figure.plot").map((f) => {
                 const svg = f.querySelector("svg"), r = svg ? box(svg) : {width: 0, height: 0};
                 return {key: f.dataset.plot, id: f.id, drawn: !!svg && r.width >= 100 && r.height >= 50,
                         marks: svg ? svg.querySelectorAll("polyline, rect, circle").length : 0};
               })};
  // a claim name (or any code in a table) split over two lines
  for (const c of all("table code"))
    if (c.getClientRects().length > 1) out.faults.push("name broken across lines: " + text(c));
  // a table wider than its column: cut off, or hidden in a box to scroll sideways
  for (const t of all("table")) {
    const holder = t.parentElement;
    if (box(t).right > box(holder).right + 1 || holder.scrollWidth > holder.clientWidth + 1)
      out.faults.push("table wider than its column: " + text(t.rows[0]));
  }
  for (const svg of all("svg")) {
    const frame = box(svg), title = svg.querySelector("title");
    const name = title ? text(title) : text(svg).slice(0, 40);
    out.svgs.push({name, width: frame.width, height: frame.height});
    if (frame.width < 100 || frame.height < 50)
      out.faults.push(`figure too small (${frame.width}x${frame.height}): ${name}`);
    if (frame.right > document.documentElement.clientWidth + 1) out.faults.push("figure cut off at the right: " + name);
    const drawn = svg.viewBox.baseVal, declared = svg.width.baseVal.value;
    if ((!drawn || drawn.width === 0) && frame.width + 1 < declared)
      out.faults.push(`figure shrunk without a viewBox, cut off (${frame.width} of ${declared} px): ${name}`);
    const labels = all("text", svg).map((t) => ({t: text(t), r: box(t)}));
    const outside = (r) => r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1
                           || r.bottom > frame.bottom + 1;
    for (const {t, r} of labels) if (outside(r)) out.faults.push(`text leaves figure "${name}": "${t}"`);
    for (let i = 0; i < labels.length; i++)
      for (let j = i + 1; j < labels.length; j++) {
        const a = labels[i].r, b = labels[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 2 && h > 2) out.faults.push(`overlapping text in "${name}": "${labels[i].t}" / "${labels[j].t}"`);
      }
  }
  return out;
})"""


async def open_page(browser_ws: str, url: str, width: int) -> Page:
    """Load `url` in a fresh tab `width` CSS pixels wide; collect complaints, facts and a full-page PNG."""
    page = Page()
    async with aiohttp.ClientSession() as http, http.ws_connect(browser_ws, max_msg_size=0) as ws:
        dt = DevTools(ws)
        target = (await dt.call("Target.createTarget", url="about:blank"))["targetId"]
        try:
            sid = (await dt.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                await dt.call(f"{domain}.enable", sid)
            await dt.call(
                "Emulation.setDeviceMetricsOverride", sid, width=width, height=900, deviceScaleFactor=1, mobile=False
            )
            seen = len(dt.events)
            nav = await dt.call("Page.navigate", sid, url=url)
            if nav.get("errorText"):
                page.problems.append(f"navigation failed: {nav['errorText']}")
            else:
                await asyncio.wait_for(dt.until("Page.loadEventFired"), LOAD_TIMEOUT_S)
            result = await dt.call("Runtime.evaluate", sid, expression=f"({INSPECT})()", returnByValue=True)
            if "exceptionDetails" in result:
                raise RuntimeError(f"inspection script failed: {result['exceptionDetails']}")
            page.facts = result["result"]["value"]
            size = (await dt.call("Page.getLayoutMetrics", sid))["cssContentSize"]
            shot = await dt.call(
                "Page.captureScreenshot",
                sid,
                format="png",
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": max(size["width"], width), "height": size["height"], "scale": 1},
            )
            page.png = base64.b64decode(shot["data"])
            page.problems += complaints(dt.events[seen:])
        finally:
            await dt.call("Target.closeTarget", targetId=target)
    return page


def complaints(events: list[dict[str, Any]]) -> list[str]:
    """Console errors and warnings, uncaught exceptions, failed loads, and any request leaving file://."""
    out = []
    for e in events:
        method, p = e["method"], e.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            out.append(f"uncaught exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and p["type"] in ("error", "warning", "assert"):
            out.append(
                f"console.{p['type']}: "
                + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
            )
        elif method == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            entry = p["entry"]
            out.append(f"browser log {entry['level']} ({entry['source']}): {entry['text']} {entry.get('url', '')}")
        elif method == "Network.loadingFailed":
            out.append(f"failed load: {p.get('errorText')} ({p.get('type')})")
        elif method == "Network.requestWillBeSent" and not p["request"]["url"].startswith(("file:", "data:")):
            out.append(f"request leaves the file: {p['request']['url'][:120]}")
        elif method == "Network.responseReceived" and p["response"].get("status", 0) >= 400:
            out.append(f"HTTP {p['response']['status']}: {p['response']['url'][:120]}")
    return out


# --- the tests --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artefacts() -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTEFACTS.glob("*"):
        if old.suffix in (".png", ".html"):
            old.unlink()
    return ARTEFACTS


def look(chromium: str, report: Path, width: int, shot: Path) -> Page:
    page = asyncio.run(open_page(chromium, report.as_uri(), width))
    shot.write_bytes(page.png)
    return page


PLANTED = "planted-errors"  # a report with errors planted in it: the net must catch each one


@pytest.mark.parametrize("case", [*CASES, PLANTED])
def test_report_html_in_chromium(case: str, chromium: str, artefacts: Path, tmp_path: Path) -> None:
    if case == PLANTED:
        catches_planted_errors(chromium, tmp_path, artefacts)
        return
    report = build(case, tmp_path)
    path = report.parent
    shutil.copyfile(report, artefacts / f"{case}.html")
    has_telemetry = any(path.glob("telemetry.jsonl*"))  # a published run's is compressed (.zst)
    for width in (WIDE, NARROW):
        shot = artefacts / f"{case}-{width}.png"
        page = look(chromium, report, width, shot)
        where = f"{case} at {width} px (screenshot {shot.relative_to(ROOT)})"
        assert page.problems == [], f"{where}: the browser complained"
        facts = page.facts
        assert facts["h1"] and facts["h1"][0].startswith(
            "loadproof run" if case not in (SEARCH, INDEX, COMPARE) else "loadproof "
        ), where
        drawn = [plot["key"] for plot in facts["plots"] if plot["drawn"] and plot["marks"]]
        expected_plots = PLOTS[case] + (["telemetry"] if has_telemetry and case not in (SEARCH, INDEX, COMPARE) else [])
        assert drawn == expected_plots, f"{where}: plots drawn {drawn}, expected {expected_plots}"
        assert len({plot["id"] for plot in facts["plots"]}) == len(facts["plots"]), f"{where}: two figures, one id"
        missing_links = [h for h in facts["links"] if not (path / h).is_file()]
        assert missing_links == [], f"{where}: links to files that are not there"
        expected = headings(case)
        missing = [h for h in expected if not any(h2 == h or h2.startswith((h + ":", h + " ")) for h2 in facts["h2"])]
        assert missing == [], f"{where}: headings {facts['h2']} lack {missing}"
        if "Acceptance" in expected:  # the verdict the claims hold, in the heading
            claims = json.loads((path / "claims.json").read_text())["claims"]
            verdict = next(c["printed"] for c in claims if c["name"].endswith(".verdict"))
            assert f"Acceptance: {verdict}" in facts["h2"], where
        assert facts["tables"] >= 1, f"{where}: no table"
        if has_telemetry:
            assert facts["svgs"], f"{where}: telemetry but no figure"
        assert facts["faults"] == [], f"{where}: layout faults"
        assert facts["pageWidth"] <= facts["viewWidth"], f"{where}: the page is wider than the window"
        assert len(page.png) > 10_000 and page.png.startswith(b"\x89PNG"), where
    print(f"screenshots: {artefacts.relative_to(ROOT)}/{case}-{{{WIDE},{NARROW}}}.png")


def catches_planted_errors(chromium: str, tmp_path: Path, artefacts: Path) -> None:
    """An uncaught exception, a console error, a missing image and a request off the machine are each reported."""
    path = build("prefill", tmp_path).parent
    html = (path / "report.html").read_text(encoding="utf-8")
    broken = path / "broken.html"
    broken.write_text(
        html.replace(
            "</body>",
            "<script>throw new Error('planted')</script>\n"
            "<script>console.error('planted console error')</script>\n"
            '<img src="missing.png" alt="">\n'
            '<link rel="stylesheet" href="http://127.0.0.1:9/planted.css">\n</body>',
        ),
        encoding="utf-8",
    )
    page = look(chromium, broken, WIDE, artefacts / f"{PLANTED}.png")
    text = "\n".join(page.problems)
    assert "uncaught exception: Error: planted" in text
    assert "console.error: planted console error" in text
    assert "failed load: net::ERR_FILE_NOT_FOUND" in text
    assert "request leaves the file: http://127.0.0.1:9/planted.css" in text
