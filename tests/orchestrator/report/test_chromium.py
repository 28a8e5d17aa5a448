"""The fleet report in a real browser: headless Chromium (Debian's ``chromium`` package).

What a unit test of the HTML string cannot show: that the page renders at all, that every cluster
is in the DOM the browser builds, and that no name is cut off by layout. Checked at 14 clusters
(examples/fleet.yaml with examples/strategy.yaml) and at 1,000 (testkit/fleetgen.py).

Chromium missing is a failure, never a skip: .ci/run installs it, and a silently skipped browser
test is how layout regressions ship.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html import unescape
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app
from testkit.fleetgen import generate_fleet_mapping
from tests.orchestrator.report.dom import parse

ROOT = Path(__file__).parents[3]
WINDOW = (1400, 900)
CSP = "default-src 'none'; style-src 'unsafe-inline'"

# Runs inside the *test copy* of the page only (the report itself has no script): measures every
# element that shows a cluster name and writes the result into the DOM for --dump-dom.
LAYOUT_CHECK = """
<script>
(function () {
  const shown = 'tbody th.name, .names li, li.wave, td.cn';
  const cut = [];
  let checked = 0;
  for (const el of document.querySelectorAll(shown)) {
    checked++;
    if (el.scrollWidth > el.clientWidth + 1) cut.push(el.textContent);
  }
  let ellipsis = 0;
  for (const el of document.querySelectorAll('body *')) {
    if (getComputedStyle(el).textOverflow === 'ellipsis') ellipsis++;
  }
  const width = document.documentElement.scrollWidth;
  const outside = [];
  for (const el of document.querySelectorAll('tbody th.name')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.left < 0 || r.right > width + 1) outside.push(el.textContent);
  }
  const out = document.createElement('pre');
  out.id = 'layout-check';
  out.textContent = JSON.stringify({checked, cut, ellipsis, outside});
  document.body.appendChild(out);
})();
</script>
"""


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "chromium is not installed; the report's browser test needs Debian's chromium "
            "package (apt-get install -y chromium; .ci/run does this)",
            pytrace=False,
        )
    return path


def run_chromium(tmp: Path, *args: str) -> str:
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes) into pixel rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 4 if colour == 6 else 3
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    assert len(raw) == height * (stride + 1)
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [r[i : i + 3] for r in rows[::4] for i in range(0, stride, bpp * 4)]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    """The two reports, written by the real CLI, with the cluster names each must show."""
    tmp = tmp_path_factory.mktemp("report")
    big = tmp / "fleet-1000.yaml"
    mapping = generate_fleet_mapping(1000, 200, seed=7)
    big.write_text(yaml.safe_dump(mapping, sort_keys=False))
    inputs = {
        "14": (
            ROOT / "examples" / "fleet.yaml",
            ["--strategy", str(ROOT / "examples/strategy.yaml")],
        ),
        "1000": (big, []),
    }
    out: dict[str, tuple[Path, list[str]]] = {}
    for key, (snapshot, extra) in inputs.items():
        page = tmp / f"report-{key}.html"
        result = CliRunner().invoke(
            app,
            [
                "report",
                "-s",
                str(snapshot),
                "-t",
                "v1.35.0",
                "-o",
                "html",
                "--output",
                str(page),
                *extra,
            ],
        )
        assert result.exit_code == 0, result.output
        names = [c["name"] for c in yaml.safe_load(snapshot.read_text())["clusters"]]
        out[key] = (page, names)
    assert len(out["1000"][1]) == 1000
    return out


@pytest.mark.parametrize("size", ["14", "1000"])
def test_every_cluster_is_in_the_rendered_dom(
    pages: dict[str, tuple[Path, list[str]]], size: str, tmp_path: Path
) -> None:
    page, names = pages[size]
    dom = run_chromium(tmp_path, "--dump-dom", page.as_uri())
    header, *cells = parse(dom).text[("th", "name")]
    assert header == "Cluster"
    assert sorted(cells) == sorted(names)  # each name, in full, in its own cell


@pytest.mark.parametrize("size", ["14", "1000"])
def test_no_cluster_name_is_cut_off(
    pages: dict[str, tuple[Path, list[str]]], size: str, tmp_path: Path
) -> None:
    page, names = pages[size]
    html = page.read_text()
    assert CSP in html
    probe = tmp_path / "probe.html"
    probe.write_text(
        html.replace(CSP, CSP + "; script-src 'unsafe-inline'").replace(
            "</body>", LAYOUT_CHECK + "</body>"
        )
    )
    dom = run_chromium(
        tmp_path, f"--window-size={WINDOW[0]},{WINDOW[1]}", "--dump-dom", probe.as_uri()
    )
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', dom, re.S)
    assert found, "the layout probe did not run"
    result = json.loads(unescape(found.group(1)))
    assert result["checked"] >= len(names)
    assert result["cut"] == []
    assert result["ellipsis"] == 0
    assert result["outside"] == []


@pytest.mark.parametrize("size", ["14", "1000"])
def test_screenshot_is_a_real_picture(
    pages: dict[str, tuple[Path, list[str]]], size: str, tmp_path: Path
) -> None:
    page, _ = pages[size]
    shot = tmp_path / f"report-{size}.png"
    run_chromium(
        tmp_path, f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}", page.as_uri()
    )
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == WINDOW
    colours = Counter(pixels)
    background, most = colours.most_common(1)[0]
    assert background == b"\xff\xff\xff"  # the page, not a black or error screen
    assert len(colours) > 20  # text, status colours, borders
    assert most < 0.97 * len(pixels)  # something is drawn on it
