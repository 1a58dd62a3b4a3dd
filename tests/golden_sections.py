"""Cut a rendered HTML report into the pieces its goldens store: the page and one per section.

A section is an element directly inside <body> or <main> (the header, the verdict, the contents,
each section of report.html.j2, the footer), named by its id, or by its tag when it has none.
The page keeps everything else (head and CSS, the sorting script) with a marker where each
section was, so the pieces put back together are the whole report. Each inline SVG picture is
replaced by a digest of its markup, its size and number of paths, and its text labels one a
line: a changed number in a picture's label reads as a one-line diff, any other change to the
picture as a changed digest.
"""

from __future__ import annotations

import hashlib
import re
from html.parser import HTMLParser

PAGE = "_page"
# Elements whose children are the report's sections; <main> itself and the script are not.
_CONTAINERS = ("body", "main")
_NOT_SECTIONS = ("main", "script")
# HTML elements that have no end tag.
_VOID = frozenset(
    (
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    )
)
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def marker(name: str) -> str:
    """What the page holds where section `name` was cut out."""
    return f"<!-- section {name} -->"


class _Outline(HTMLParser):
    """The name and character span of every element directly inside <body> or <main>."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=False)
        self._html = html
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", html)]
        self._open: list[str] = []
        self._start = 0
        self._name = ""
        self.sections: list[tuple[str, int, int]] = []

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        inside = self._open[-1] if self._open else None
        if inside in _CONTAINERS and tag not in _NOT_SECTIONS:
            self._start = self._offset()
            self._name = dict(attrs).get("id") or tag
        if tag not in _VOID:
            self._open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """A self-closed SVG element (<path ... />) opens nothing."""

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1] != tag:
            line, _ = self.getpos()
            expected = self._open[-1] if self._open else "nothing"
            raise ValueError(f"line {line}: </{tag}> closes {expected}: cannot cut the sections")
        self._open.pop()
        if len(self._open) >= 1 and self._open[-1] in _CONTAINERS and tag not in _NOT_SECTIONS:
            end = self._html.index(">", self._offset()) + 1
            self.sections.append((self._name, self._start, end))


def _digest_picture(match: re.Match[str]) -> str:
    svg = match.group(0)
    head = svg[: svg.index(">")]
    width = re.search(r'\bwidth="([^"]+)"', head)
    height = re.search(r'\bheight="([^"]+)"', head)
    size = f"{width.group(1) if width else '?'} x {height.group(1) if height else '?'}"
    digest = hashlib.sha256(svg.encode("utf-8")).hexdigest()[:12]
    paths = len(re.findall(r"<path\b", svg))
    labels = [" ".join(t.split()) for t in re.findall(r"<text\b[^>]*>(.*?)</text>", svg, re.S)]
    lines = [f'<svg sha256="{digest}" size="{size}" paths="{paths}">']
    lines += [f"  <text>{label}</text>" for label in labels]
    return "\n".join([*lines, "</svg>"])


def digest_pictures(html: str) -> str:
    """`html` with every inline SVG replaced by its digest, size, paths and text labels."""
    return _SVG.sub(_digest_picture, html)


def cut_sections(html: str) -> dict[str, str]:
    """The report cut into its pieces, in page order: PAGE first, then each section by name."""
    outline = _Outline(html)
    outline.feed(html)
    outline.close()
    page, pieces, done = [], {}, 0
    for name, start, end in outline.sections:
        if name in pieces or name == PAGE:
            raise ValueError(f"two sections are named {name}: cannot tell their goldens apart")
        page += [html[done:start], marker(name)]
        pieces[name] = html[start:end]
        done = end
    page.append(html[done:])
    whole = "".join(page)
    for name, piece in pieces.items():  # the pieces put back together are the whole report
        whole = whole.replace(marker(name), piece, 1)
    assert whole == html, "cutting the report lost some of it"
    return {PAGE: "".join(page)} | {name: digest_pictures(p) for name, p in pieces.items()}
