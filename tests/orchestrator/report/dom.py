"""A small HTML reader for the report tests: element text by (tag, class), attribute values."""

from __future__ import annotations

from html.parser import HTMLParser


class Cells(HTMLParser):
    """Collects the text of elements by tag + class, and every attribute value."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.text: dict[tuple[str, str], list[str]] = {}
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(v or "" for _, v in attrs)
        if tag in ("meta", "br"):
            return
        cls = dict(attrs).get("class") or ""
        self.stack.append((tag, cls))
        self.text.setdefault((tag, cls), []).append("")

    def handle_endtag(self, tag: str) -> None:
        if self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for key in self.stack:  # an element's text includes its children's
            self.text[key][-1] += data


def parse(page: str) -> Cells:
    cells = Cells()
    cells.feed(page)
    return cells
