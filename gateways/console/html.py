"""HTML building blocks: escaping, the page frame, tables and definition lists, and the stylesheet.

Every value put in a page goes through :func:`esc` unless it is :class:`Raw`: markup built here."""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence
from typing import Any

#: the pages of the navigation bar: (path under /console, title)
NAV = (("/", "Cluster"), ("/topics", "Topics"), ("/groups", "Groups"), ("/messages", "Messages"),
       ("/transactions", "Transactions"))

STYLESHEET = """\
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 24px;display:flex;flex-wrap:wrap;gap:4px 20px;align-items:baseline}
header b{font-size:16px;margin-right:12px}
header a{color:#d0d7de;text-decoration:none}
header a.on{color:#fff;border-bottom:2px solid #f0883e}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:20px;margin:8px 0 12px}
h2{font-size:16px;margin:20px 0 8px}
section>h2:first-child{margin-top:0}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin-bottom:16px;overflow-x:auto}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #eaeef2;overflow-wrap:anywhere}
th{font-weight:600;background:#f6f8fa}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:0}
dt{font-weight:600}
dd{margin:0;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:8px;margin:0}
form{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin-bottom:8px}
label{display:flex;flex-direction:column;font-size:12px;color:#57606a}
input{font:inherit;padding:4px 6px;border:1px solid #d0d7de;border-radius:4px}
button{font:inherit;padding:4px 12px;border:1px solid #1f883d;background:#1f883d;color:#fff;border-radius:4px}
.error{border-color:#cf222e;background:#ffebe9}
.muted{color:#57606a}
.plot{max-width:100%;height:auto}
.plot-area{fill:#fff;stroke:#d0d7de}
.plot-grid{stroke:#eaeef2}
.plot-label,.plot-note{font-size:11px;fill:#57606a}
.legend span{display:inline-block;width:14px;height:3px;vertical-align:middle;margin:0 4px 0 12px}
"""


class Raw(str):
    """Markup made here, put in a page as it is."""


def esc(value: Any) -> str:
    if isinstance(value, Raw):
        return value
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return html.escape(str(value), quote=True)


def link(href: str, text: Any) -> Raw:
    return Raw(f'<a href="{esc(href)}">{esc(text)}</a>')


def when(ms: int | None) -> str:
    """A store or update time in milliseconds, as local time ("" when there is none)."""
    if not ms or ms <= 0:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def table(table_id: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (),
          empty: str = "none") -> Raw:
    """A table whose cells are escaped values; the ``numeric`` columns (by index) right-aligned."""
    numeric = set(numeric)
    cls = [' class="num"' if i in numeric else "" for i in range(len(columns))]
    head = "".join(f"<th{cls[i]}>{esc(c)}</th>" for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(f"<td{cls[i]}>{esc(v)}</td>" for i, v in enumerate(row)) + "</tr>"
                   for row in rows)
    if not body:
        body = f'<tr><td colspan="{len(columns)}" class="muted">{esc(empty)}</td></tr>'
    return Raw(f'<table id="{esc(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def fields(list_id: str, items: Iterable[tuple[str, Any]]) -> Raw:
    return Raw(f'<dl id="{esc(list_id)}">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
               + "</dl>")


def section(title: str | None, *content: Any, cls: str = "") -> Raw:
    heading = f"<h2>{esc(title)}</h2>" if title else ""
    attr = f' class="{esc(cls)}"' if cls else ""
    return Raw(f"<section{attr}>{heading}" + "".join(esc(c) for c in content) + "</section>")


def page(base: str, current: str, title: str, *content: Any) -> str:
    """The whole document: the navigation bar (``current`` is the path of the page it marks), then
    ``content``. ``base`` is where the console is mounted."""
    nav = "".join(f'<a href="{esc(base + path)}"{" class=on" if path == current else ""}>{esc(name)}</a>'
                  for path, name in NAV)
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width,initial-scale=1">'
            f'<title>{esc(title)} · FerryMQ console</title><link rel=stylesheet href="{esc(base)}/console.css">'
            f"</head><body><header><b>FerryMQ</b>{nav}</header><main><h1>{esc(title)}</h1>"
            + "".join(esc(c) for c in content) + "</main></body></html>")
