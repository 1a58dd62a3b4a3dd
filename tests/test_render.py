"""The HTML and PDF report: goldens, escaping, a real browser, print layout and the pictures."""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest

from nsysreport.errors import OptionError
from nsysreport.load import open_trace
from nsysreport.model import Report
from nsysreport.patterns import Patterns
from nsysreport.render import pictures, render_html, write_pdf
from nsysreport.report_builder import build_report
from nsysreport.sections.overview import build_overview
from nsysreport.synth import Kernel, Memcpy, NvtxRange, Scenario, write_trace

from conftest import REPO
from golden_sections import cut_sections

GOLDEN = Path(__file__).parent / "golden"
# A few sample traces, not all: between them every section has something to show, one
# stream per GPU and two (communication on its own stream).
GOLDEN_TRACES = ("llama70b_decode_tp8_nvlink_straggler", "llama70b_prefill_tp8_nvlink_overlap")
GENERATED_AT = "1970-01-01 00:00 UTC"
SECTION_TITLES = (
    "Verdict",
    "Contents",
    "Where each GPU's time goes",
    "What if",
    "Timeline",
    "Steps",
    "Layers",
    "Collectives and stragglers",
    "Communicators",
    "Data path",
    "Stragglers",
    "Idle gaps",
    "Longest gaps",
    "Top kernels by class",
)
# The sections the contents list names; in print each starts a page.
MAIN_SECTIONS = (
    "Where each GPU's time goes",
    "Timeline",
    "Critical path",
    "Steps",
    "Layers",
    "Collectives and stragglers",
    "Communicators",
    "Data path",
    "GPU metrics",
    "Idle gaps",
    "Top kernels by class",
    "Capture",
)
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def sample_report(stem: str) -> Report:
    """A sample trace's report, with the path relative to the repository as a user would type."""
    relative = Path("sample_traces") / f"{stem}.sqlite"
    return build_report(open_trace(REPO / relative), relative)


@pytest.fixture(scope="module")
def decode() -> tuple[Report, str]:
    return golden_report(GOLDEN_TRACES[0])


def _unified_diff(expected: str, actual: str, name: str) -> str:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            f"tests/golden/{name} (expected)",
            f"{name} (rendered now)",
            n=2,
        )
    )
    shown = "".join(lines[:60])
    more = f"\n... {len(lines) - 60} more diff lines" if len(lines) > 60 else ""
    return shown + more


@functools.cache
def golden_report(stem: str) -> tuple[Report, str]:
    """A golden trace's report and its HTML, rendered once for all the tests that read them."""
    report = sample_report(stem)
    return report, render_html(report, GENERATED_AT)


def golden_files(html: str) -> dict[str, str]:
    """File name -> text of the goldens of one report: the page, then one file per section."""
    return {f"{name}.html": text + "\n" for name, text in cut_sections(html).items()}


@pytest.mark.parametrize("stem", GOLDEN_TRACES)
def test_every_section_of_the_html_report_matches_its_golden_file(
    stem: str, update_goldens: bool
) -> None:
    rendered = golden_files(golden_report(stem)[1])
    folder = GOLDEN / stem
    if update_goldens:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in set(p.name for p in folder.glob("*.html")) - set(rendered):
            (folder / stale).unlink()
        for name, text in rendered.items():
            (folder / name).write_text(text, encoding="utf-8")
        return
    stored = {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.html"))}
    if not stored:
        pytest.fail(f"{folder} has no goldens: run `pytest --update-goldens` and review the diff")
    changed = [name for name in rendered if name in stored and stored[name] != rendered[name]]
    new = [name for name in rendered if name not in stored]
    gone = [name for name in stored if name not in rendered]
    if changed or new or gone:
        problems = [f"{name} differs" for name in changed]
        problems += [f"{name} is new (no golden)" for name in new]
        problems += [f"{name} is no longer rendered" for name in gone]
        diffs = [_unified_diff(stored[name], rendered[name], f"{stem}/{name}") for name in changed]
        pytest.fail(
            f"the report of {stem} differs from tests/golden/{stem}/: "
            + "; ".join(problems)
            + ". If the change is intended, run `pytest --update-goldens` and commit the files.\n"
            + "\n".join(diffs),
            pytrace=False,
        )


@pytest.mark.parametrize("stem", GOLDEN_TRACES)
def test_every_picture_of_the_golden_reports_is_drawn(stem: str) -> None:
    """The goldens keep only a digest of each picture: here each is checked to be there whole."""
    report, html = golden_report(stem)
    svg = pictures(report, build_overview(report))
    shown = re.findall(r'<figure class="chart" id="figure-(\w+)">\n<svg', html)
    assert sorted(shown) == sorted(svg) and len(svg) >= 5
    for name, markup in svg.items():
        assert f'id="figure-{name}">\n{markup}\n' in html, f"{name} is not inlined whole"
        root = ElementTree.fromstring(markup)  # well-formed XML, so every element is closed
        assert root.tag == "{http://www.w3.org/2000/svg}svg", name
        x, y, width, height = (float(v) for v in root.attrib["viewBox"].split())
        assert (x, y, width) == (0, 0, 540) and height > 100, (name, root.attrib["viewBox"])
        drawn = root.findall(".//{http://www.w3.org/2000/svg}path")
        labels = root.findall(".//{http://www.w3.org/2000/svg}text")
        assert len(drawn) >= 10 and len(labels) >= 5, (name, len(drawn), len(labels))


def test_the_same_report_renders_to_the_same_bytes_twice(decode: tuple[Report, str]) -> None:
    report, html = decode
    assert render_html(report, GENERATED_AT) == html
    assert str(REPO) not in html  # no absolute paths: the report diffs the same anywhere


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text a reader sees (no script or style)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style", "title"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.text.append(data)

    def visible_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def parse(html: str) -> _Tags:
    tags = _Tags()
    tags.feed(html)
    return tags


def test_the_report_is_one_self_contained_file(decode: tuple[Report, str]) -> None:
    _, html = decode
    tags = parse(html)
    # Nothing is fetched: no link, img, iframe or external script, no URL but in-page anchors.
    names = [tag for tag, _ in tags.tags]
    assert names.count("script") == 1 and names.count("style") == 1 + names.count("svg")
    # matplotlib puts one style rule in each SVG; it only sets how SVG lines join and end.
    assert set(re.findall(r"<svg.*?<style[^>]*>(.*?)</style>", html, re.S)) == {
        "*{stroke-linejoin: round; stroke-linecap: butt}"
    }
    assert not {"link", "img", "iframe", "object", "embed"} & set(names)
    for tag, attrs in tags.tags:
        for key in ("src", "href", "xlink:href"):
            value = attrs.get(key)
            assert value is None or value.startswith("#"), (tag, key, value)
    assert "@import" not in html and "url(http" not in html


def test_the_verdict_and_key_numbers_come_before_the_sections(
    decode: tuple[Report, str],
) -> None:
    report, html = decode
    text = parse(html).visible_text()
    verdict = text.index(report.bottleneck.summary)
    assert verdict < text.index("Contents") < text.index("Where each GPU's time goes", verdict)
    key = text[verdict : text.index("Contents")]
    assert "30.1% of all GPUs' time" in key  # exposed comm over all GPUs
    assert "median step 1.23 ms" in key and "straggler rank 3" in key


def test_every_picture_is_matplotlib_svg_with_a_numbered_caption(
    decode: tuple[Report, str],
) -> None:
    report, html = decode
    svg = pictures(report, build_overview(report))
    assert sorted(svg) == ["breakdown", "gaps", "layers", "steps", "timeline", "what_if"]
    for name, markup in svg.items():
        assert markup.startswith("<svg") and '<g id="figure_1">' in markup, name
        assert f'<figure class="chart" id="figure-{name}">' in html
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html, re.S)
    assert len(captions) == len(svg)
    timeline = " ".join(next(c for c in captions if "steps by length" in c).split())
    assert timeline.startswith("The median of the 4 steps by length, step 3: 1.23 ms")
    assert "most on rank" in timeline and "longest idle gap" in timeline


def test_the_contents_list_links_every_section(decode: tuple[Report, str]) -> None:
    _, html = decode
    tags = parse(html)
    ids = {attrs.get("id") for _, attrs in tags.tags}
    links = re.findall(r'<li><a href="#(\w+)">([^<]+)</a></li>', html)
    assert [title.replace("&#39;", "'") for _, title in links] == list(MAIN_SECTIONS)
    assert all(target in ids for target, _ in links)


def test_tables_sort_by_raw_numbers_but_read_without_the_script(
    decode: tuple[Report, str],
) -> None:
    report, html = decode
    g = report.gpus[0]
    # Each number cell carries its exact value to sort by, and shows the formatted one.
    assert f'<td data-sort="{g.span_ns}">5.04 ms</td>' in html
    assert html.count('sortable"') >= 8


@pytest.fixture
def malicious(tmp_path: Path) -> tuple[Report, str]:
    """Names a trace can carry that would break or script an unescaped page."""
    kernels, nvtx = [], []
    for step in range(2):
        t = 10_000 * (step + 1)
        for i, name in enumerate(
            (
                '<script>alert("kernel")</script>_gemm',
                "void ns::Σ_ユニコード<'q', \"dq\">::kernel<(int)1>(float *, int &)",
                NCCL,
            )
        ):
            launch = (t - 100 + i * 10, t - 99 + i * 10)
            kernels.append(Kernel(t + i * 1000, t + i * 1000 + 900, name, launch=launch))
        nvtx.append(NvtxRange(t - 200, t - 50, f"step {step} <img src=x onerror=alert(1)>"))
        nvtx.append(NvtxRange(t - 150, t - 60, "layers.0 \"q\" <b>bold</b> $x^2$ & 'ünï'"))
    scenario = Scenario(kernels=kernels, nvtx=nvtx, host="<i>host</i>")
    path = write_trace(scenario, tmp_path / "evil<b>.sqlite")
    patterns = Patterns(step=r"^step.*", layer=r"layers.*")
    report = build_report(open_trace(path, patterns=patterns), Path(path.name))
    return report, render_html(report, GENERATED_AT)


def test_names_from_the_trace_are_escaped_everywhere(malicious: tuple[Report, str]) -> None:
    report, html = malicious
    tags = parse(html)
    names = [tag for tag, _ in tags.tags]
    assert names.count("script") == 1  # ours, the table sorter
    assert not {"img", "b", "i"} & set(names)
    assert "&lt;script&gt;alert(&#34;kernel&#34;)&lt;/script&gt;_gemm" in html
    assert "step 0 &lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;i&gt;host&lt;/i&gt;" in html and "evil&lt;b&gt;.sqlite" in html
    # In the pictures too: matplotlib writes text as escaped SVG text, $ stays a dollar.
    layer = report.layers_across[0].layer
    assert layer.startswith('layers.0 "q" <b>bold</b> $x^2$')
    svg = pictures(report, build_overview(report))
    assert "layers.0 \"q\" &lt;b&gt;bold&lt;/b&gt; $x^2$ &amp; 'ünï'</text>" in svg["layers"]
    assert ">step 0 &lt;img src=x onerror=alert(1)&gt;</text>" in svg["steps"]
    text = tags.visible_text()
    assert "Σ_ユニコード" in text and "'ünï'" in text


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium is not installed: the browser test needs Debian's `chromium` package "
            "(`apt-get install chromium`; .ci/run installs it)"
        )
    return found


def _browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
        page.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "the page wrote to the browser console:\n" + "\n".join(console)
    return result


@pytest.mark.parametrize("which", ["decode", "malicious"])
def test_headless_chromium_shows_the_verdict_and_every_section_without_errors(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    report, html = request.getfixturevalue(which)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    shot = tmp_path / "report.png"
    _browse(
        page,
        tmp_path / "profile",
        "--hide-scrollbars",
        "--window-size=1280,2400",
        f"--screenshot={shot}",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    dom = _browse(page, tmp_path / "profile", "--dump-dom").stdout
    text = parse(dom).visible_text()
    assert report.bottleneck.summary in text
    titles = SECTION_TITLES if which == "decode" else MAIN_SECTIONS
    missing = [title for title in titles if title not in text]
    assert not missing, f"not on the page: {missing}"
    # The sorting script ran: it makes every sortable header focusable.
    assert re.search(r'<th tabindex="0"', dom)


def test_clicking_a_header_sorts_the_table_by_its_numbers(
    decode: tuple[Report, str], tmp_path: Path
) -> None:
    report, html = decode
    click = (
        "<script>document.querySelector('table.sortable').tHead.rows[0].cells[3].click()</script>"
    )
    page = tmp_path / "click.html"
    page.write_text(html.replace("</body>", click + "</body>"), encoding="utf-8")
    dom = _browse(page, tmp_path / "profile", "--dump-dom").stdout
    table = dom[dom.index('<table class="numbers sortable">') :]
    table = table[: table.index("</table>")]
    assert 'aria-sort="descending"' in table and "exposed comm" in table
    shown = [int(r) for r in re.findall(r'<th scope="row" data-sort="(\d+)"', table)]
    by_exposed_comm = sorted(report.gpus, key=lambda g: -g.exposed_comm_ns)
    assert shown == [g.rank for g in by_exposed_comm] != sorted(shown)


def _poppler(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.fail(
            f"{tool} is not installed: the PDF tests need poppler-utils (.ci/run installs it)"
        )
    return found


def _pdf_pages(pdf: Path) -> list[str]:
    result = subprocess.run(
        [_poppler("pdftotext"), "-layout", str(pdf), "-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split("\f")[:-1]


def test_the_pdf_has_a_page_per_section_running_headers_and_a_paged_contents_list(
    decode: tuple[Report, str], tmp_path: Path
) -> None:
    _, html = decode
    pdf = tmp_path / "report.pdf"
    write_pdf(html, pdf)
    assert pdf.read_bytes().startswith(b"%PDF-")
    pages = _pdf_pages(pdf)
    assert len(pages) >= len(MAIN_SECTIONS) + 1  # the verdict page, then a page per section
    flat = [" ".join(p.split()) for p in pages]
    assert "GPU-to-GPU communication is the bottleneck" in flat[0]
    for number, page in enumerate(flat, start=1):
        assert f"page {number} of {len(pages)}" in page
        assert "sample_traces/llama70b_decode_tp8_nvlink_straggler.sqlite" in page
    for title in MAIN_SECTIONS:
        listed = re.search(re.escape(title) + r"[ .]+(\d+)\b", flat[0])
        assert listed, f"{title} is not in the contents list with a page number"
        target = int(listed.group(1))
        assert flat[target - 1].count(title) >= 2, f"{title}: header and heading on p. {target}"


def test_the_pdf_prints_on_letter_paper_too(decode: tuple[Report, str], tmp_path: Path) -> None:
    _, html = decode
    pdf = tmp_path / "letter.pdf"
    write_pdf(html, pdf, paper="letter")
    info = subprocess.run(
        [_poppler("pdfinfo"), str(pdf)], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"Page size:\s+612 x 792 pts", info), info
    with pytest.raises(OptionError, match="'A5': expected A4 or letter"):
        write_pdf(html, tmp_path / "a5.pdf", paper="A5")


def test_pictures_do_not_grow_with_the_number_of_kernels(tmp_path: Path) -> None:
    """Without steps the timeline shows a window of a fixed number of activities."""

    def svg_sizes(kernels: int) -> dict[str, int]:
        def gen():  # type: ignore[no-untyped-def]
            for dev in range(2):
                t = 1_000
                for i in range(kernels // 2):
                    name = NCCL if i % 4 == 1 else GEMM
                    yield Kernel(
                        t,
                        t + 5_000,
                        name,
                        device=dev,
                        pid=100 + dev,
                        stream=31 if name is NCCL else 7,
                    )
                    t += 6_000 + (i % 7) * 300

        path = write_trace(
            Scenario(kernels=gen(), memcpys=[Memcpy(500, 900)]), tmp_path / f"k{kernels}.sqlite"
        )
        report = build_report(open_trace(path), Path(path.name))
        return {k: len(v) for k, v in pictures(report, build_overview(report)).items()}

    small, large = svg_sizes(3_000), svg_sizes(24_000)
    assert set(small) == set(large) == {"breakdown", "gaps", "timeline", "what_if"}
    for name in small:
        assert large[name] < 1.25 * small[name], (name, small[name], large[name])


def test_the_golden_cut_names_each_section_and_loses_nothing_but_picture_markup() -> None:
    page = (
        '<html><head><title>t</title></head><body>\n<header class="h">by <b>us</b></header>\n'
        '<main>\n<section id="a"><p>1<br>2</p><figure><svg width="10pt" height="5pt">'
        '<path d="M0"/><path d="M1"/><text x="1">7 ms</text></svg></figure></section>\n</main>\n'
        "<script>if (1 < 2) {}</script>\n</body></html>"
    )
    pieces = cut_sections(page)
    assert list(pieces) == ["_page", "header", "a"]
    assert pieces["_page"] == (
        "<html><head><title>t</title></head><body>\n<!-- section header -->\n<main>\n"
        "<!-- section a -->\n</main>\n<script>if (1 < 2) {}</script>\n</body></html>"
    )
    assert pieces["header"] == '<header class="h">by <b>us</b></header>'
    digest = hashlib.sha256(page[page.index("<svg") : page.index("</figure>")].encode())
    assert pieces["a"] == (
        f'<section id="a"><p>1<br>2</p><figure><svg sha256="{digest.hexdigest()[:12]}" '
        'size="10pt x 5pt" paths="2">\n  <text>7 ms</text>\n</svg></figure></section>'
    )
    with pytest.raises(ValueError, match="line 1: </div> closes p: cannot cut the sections"):
        cut_sections("<body><section id='a'><p>x</div></section></body>")
