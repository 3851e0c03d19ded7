"""The TPS plot: an inline SVG of put and get rates over time, a polyline each, drawn on the server."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .sampler import Rate

WIDTH, HEIGHT = 1000, 220
#: room for the axis labels
LEFT, BOTTOM, TOP, RIGHT = 48, 20, 10, 10
#: the lines' colours (the stylesheet's legend uses the same)
PUT_COLOUR = "#d9480f"
GET_COLOUR = "#1971c2"


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten at or above ``value`` (at least 1)."""
    step = 1.0
    while True:
        for m in (1, 2, 5):
            if m * step >= value:
                return m * step
        step *= 10


def _points(values: Sequence[float], times: Sequence[float], t0: float, span: float, top: float) -> str:
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    return " ".join(f"{LEFT + (t - t0) / span * inner_w:.1f},{TOP + inner_h - v / top * inner_h:.1f}"
                    for t, v in zip(times, values))


def tps_svg(rates: Sequence[Rate]) -> str:
    """The plot of ``rates`` (oldest first); a note in its place before two rates are known."""
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    frame = (f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
             f'role="img" aria-label="messages per second, put and get">'
             f'<rect x="{LEFT}" y="{TOP}" width="{inner_w}" height="{inner_h}" class="plot-area"/>')
    if len(rates) < 2:
        return (frame + f'<text x="{LEFT + 10}" y="{TOP + inner_h / 2:.0f}" class="plot-note">sampling: the plot '
                        f'starts with the second rate</text></svg>')
    times = [r.time for r in rates]
    t0, span = times[0], max(times[-1] - times[0], 1e-3)
    top = _nice_ceiling(max(max(r.put_tps, r.get_tps) for r in rates))
    grid = "".join(f'<line x1="{LEFT}" x2="{LEFT + inner_w}" y1="{y:.1f}" y2="{y:.1f}" class="plot-grid"/>'
                   for y in (TOP, TOP + inner_h / 2))
    labels = (f'<text x="{LEFT - 4}" y="{TOP + 4}" class="plot-label" text-anchor="end">{top:g}</text>'
              f'<text x="{LEFT - 4}" y="{TOP + inner_h}" class="plot-label" text-anchor="end">0</text>'
              f'<text x="{LEFT}" y="{HEIGHT - 4}" class="plot-label">{time.strftime("%H:%M:%S", time.localtime(t0))}</text>'
              f'<text x="{LEFT + inner_w}" y="{HEIGHT - 4}" class="plot-label" text-anchor="end">'
              f'{time.strftime("%H:%M:%S", time.localtime(times[-1]))}</text>')
    # get is dashed, over put: where consumers keep up with producers, both lines show
    lines = "".join(
        f'<polyline class="plot-{name}" fill="none" stroke="{colour}" stroke-width="2.5"{dash} '
        f'points="{_points([getattr(r, name + "_tps") for r in rates], times, t0, span, top)}"/>'
        for name, colour, dash in (("put", PUT_COLOUR, ""), ("get", GET_COLOUR, ' stroke-dasharray="8 6"')))
    return frame + grid + labels + lines + "</svg>"
