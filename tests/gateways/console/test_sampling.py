"""The TPS the console shows, from samples of the cluster's totals and topics' offsets, and its plot."""

from __future__ import annotations

import re

import pytest

from ferrymq.gateways.console.plot import HEIGHT, LEFT, TOP, WIDTH, tps_svg
from ferrymq.gateways.console.sampler import Rate, Sample, Sampler


def _sampler(*samples: Sample) -> Sampler:
    sampler = Sampler(lambda: None, 5.0)
    sampler.samples.extend(samples)
    return sampler


def test_rates_are_differences_between_samples_and_a_restart_is_no_negative_rate():
    sampler = _sampler(Sample(100.0, 1000, 50), Sample(105.0, 1500, 80), Sample(110.0, 20, 5), Sample(112.0, 40, 5))
    assert [(r.time, r.put_tps, r.get_tps) for r in sampler.rates()] == [
        (105.0, 100.0, 6.0), (110.0, 0.0, 0.0), (112.0, 10.0, 0.0)]


def test_a_topics_tps_needs_it_in_the_two_newest_samples():
    sampler = _sampler(Sample(0.0, 0, 0, {"T": 10}), Sample(4.0, 0, 0, {"T": 30, "U": 7}))
    assert sampler.topic_tps("T") == 5.0
    assert sampler.topic_tps("U") is None
    sampler.samples.append(Sample(8.0, 0, 0))  # nobody looked at the console: topics were not sampled
    assert sampler.topic_tps("T") is None
    assert _sampler(Sample(0.0, 0, 0, {"T": 1})).topic_tps("T") is None


def _points(svg: str, name: str) -> list[tuple[float, float]]:
    points = re.search(rf'class="plot-{name}"[^>]* points="([^"]*)"', svg).group(1)
    return [tuple(map(float, p.split(","))) for p in points.split()]


def test_the_plot_spans_the_area_and_scales_to_a_round_maximum():
    svg = tps_svg([Rate(0.0, 0.0, 10.0), Rate(5.0, 70.0, 35.0), Rate(10.0, 140.0, 0.0)])
    put, get = _points(svg, "put"), _points(svg, "get")
    bottom = HEIGHT - 20
    assert [x for x, _ in put] == [LEFT, (LEFT + WIDTH - 10) / 2, WIDTH - 10]
    # 140 rounds up to 200 at the top; points are drawn to a tenth of a pixel
    assert [y for _, y in put] == pytest.approx([bottom, bottom - 70 / 200 * (bottom - TOP), bottom - 140 / 200 * (bottom - TOP)], abs=0.06)
    assert [y for _, y in get] == pytest.approx([bottom - 10 / 200 * (bottom - TOP), bottom - 35 / 200 * (bottom - TOP), bottom], abs=0.06)
    assert ">200<" in svg


def test_before_two_rates_the_plot_says_it_is_sampling():
    for rates in ([], [Rate(0.0, 1.0, 1.0)]):
        svg = tps_svg(rates)
        assert "<polyline" not in svg and "sampling" in svg
