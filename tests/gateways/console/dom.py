"""Reading a rendered page as a person reads it: the text of each table's cells and each list's fields,
by their ids, from the DOM the browser serialized."""

from __future__ import annotations

from html.parser import HTMLParser


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.fields: dict[str, dict[str, str]] = {}
        self.texts: dict[str, str] = {}
        self.polylines: list[dict[str, str]] = []
        self._table: str | None = None
        self._in_body = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._dl: str | None = None
        self._term: str | None = None
        self._text_of: tuple[str, list[str]] | None = None
        self.title: list[str] = []
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = []
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "dl":
            self._dl = a.get("id")
            self.fields[self._dl] = {}
        elif tag in ("dt", "dd") and self._dl is not None:
            self._cell = []
        elif tag == "polyline":
            self.polylines.append({k: v or "" for k, v in attrs})
        elif tag == "h1":
            self._in_h1 = True
        elif a.get("id") and tag not in ("table", "dl"):
            self._text_of = (a["id"], [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "dt" and self._cell is not None:
            self._term = "".join(self._cell).strip()
            self._cell = None
        elif tag == "dd" and self._cell is not None:
            self.fields[self._dl][self._term] = "".join(self._cell).strip()
            self._cell = None
        elif tag == "dl":
            self._dl = None
        elif tag == "h1":
            self._in_h1 = False
        elif self._text_of is not None:
            ident, parts = self._text_of
            self.texts[ident] = "".join(parts).strip()
            self._text_of = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._text_of is not None:
            self._text_of[1].append(data)
        if self._in_h1:
            self.title.append(data)


class Page:
    """The tables (rows of cell texts, header excluded), definition lists (term -> text), texts of
    elements with an id, the SVG polylines' attributes and the heading of a rendered page."""

    def __init__(self, dom: str):
        reader = _Reader()
        reader.feed(dom)
        self.tables = reader.tables
        self.fields = reader.fields
        self.texts = reader.texts
        self.polylines = reader.polylines
        self.title = "".join(reader.title).strip()
