"""``java.util.Properties`` text: the body of GET/UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG and config files."""

from __future__ import annotations


class PropertiesError(ValueError):
    """Text that is not properties; the message names the source and the line."""


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse ``java.util.Properties`` text (the subset config files use) into a dict."""
    props: dict[str, str] = {}
    logical: list[str] = []
    lines = text.splitlines()
    for raw in lines:
        line = raw.lstrip() if not logical else raw.strip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical).strip()
        logical = []
        if not entry:
            continue
        sep_at = len(entry)
        for i, ch in enumerate(entry):
            if ch in "=:" or ch.isspace():
                sep_at = i
                break
        name = entry[:sep_at].strip()
        rest = entry[sep_at:].lstrip()
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip()
        if not name:
            raise PropertiesError(f"{source}: line {raw!r} has no key before its separator")
        props[name] = rest
    return props
