#!/usr/bin/env python3
"""Regenerates docs/img/report-<scenario>.png: the top of each kind of report page, as a reader sees it.

Each page is built as the Chromium test builds it (tests/report_pages.py: a published run under docs/runs
with its report regenerated from its records, or a synthetic run where none is published), opened in
headless Chromium 1200 CSS pixels wide, cut to its top 1600 pixels (less where the page is shorter), and
stored as a PNG of at most 256 colours so that each stays under 200 KB.

usage: scripts/in-venv python scripts/report-screenshots.py [NAME ...]   (default: every page)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageOps  # noqa: E402 (after the repository root is on the path, for tests.report_pages)

from tests.report_pages import DOC_IMAGES, build  # noqa: E402 (likewise)

WIDTH, HEIGHT = 1200, 1600
LIMIT = 200_000
OUT = ROOT / "docs" / "img"


def shoot(page: Path, png: Path, profile: Path) -> None:
    """A screenshot of `page`'s top, WIDTH x HEIGHT, by headless Chromium."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{HEIGHT}",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def shrink(png: Path) -> int:
    """The PNG without the blank below a short page, as 256 colours (or fewer, while it stays over LIMIT);
    returns its size."""
    image = Image.open(png).convert("RGB")
    inked = ImageOps.invert(image).getbbox()  # the box of everything not white
    if inked is not None and inked[3] + 40 < image.height:
        image = image.crop((0, 0, image.width, inked[3] + 40))
    for colours in (256, 128, 64):
        image.quantize(colours, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)
        if png.stat().st_size < LIMIT:
            break
    return png.stat().st_size


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(DOC_IMAGES):
            page = build(DOC_IMAGES[name], Path(tmp) / name)
            png = OUT / f"report-{name}.png"
            shoot(page, png, Path(tmp) / f"profile-{name}")
            print(f"{png.relative_to(ROOT)}: {shrink(png):,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
