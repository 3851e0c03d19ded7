"""Looking at a screenshot as a person would: something is drawn, the TPS plot's line is there, and
the page fits the window's width."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from .chromium import Seen


def pixels(seen: Seen) -> np.ndarray:
    """The screenshot as rows of RGB pixels."""
    return np.asarray(Image.open(io.BytesIO(seen.png)).convert("RGB")).astype(int)


def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def count_near(image: np.ndarray, colour: str, tolerance: int = 40) -> int:
    """Pixels within ``tolerance`` (per channel) of ``colour`` ("#rrggbb")."""
    return int((np.abs(image - np.array(hex_rgb(colour))).max(axis=2) <= tolerance).sum())


def assert_drawn(image: np.ndarray) -> None:
    """Not a blank page: many colours, and a good share of the window not background."""
    packed = (image[..., 0] << 16) | (image[..., 1] << 8) | image[..., 2]
    colours, counts = np.unique(packed, return_counts=True)
    assert len(colours) > 50, f"only {len(colours)} colours: a blank or unstyled page"
    assert counts.max() / packed.size < 0.95, "the page is almost all one colour"


def assert_fits(seen: Seen, image: np.ndarray, background: str, header_height: int = 60) -> None:
    """Nothing is laid out past the window's right edge: the document is no wider than the window, and
    the strip along the right edge below the header is plain background (content cut off there would
    show in it)."""
    assert seen.scroll_width <= seen.viewport_width, (seen.url, seen.scroll_width, seen.viewport_width)
    strip = image[header_height:, -12:]
    assert count_near(strip, background, tolerance=4) == strip.shape[0] * strip.shape[1], \
        f"{seen.url}: something is drawn along the right edge"
