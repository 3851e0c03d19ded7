"""Reading the load tools' output: lines as Apache's 5.5.0 Producer/BatchProducer and LoadProbe print them."""

import pytest

from benchmarks.sidebyside import parse

PRODUCER_OUT = """\
topic: bench_sync32, threadCount: 32, messageSize: 1024, keyEnable: false, propertySize: 0, tagCount: 0, traceEnable: false
 compressEnable: false, reportInterval: 1000
Current Time: 2026-11-22 00:02:48,763 | Send TPS: 1533 | Max RT(ms): 651 | Average RT(ms):  17.156 | Send Failed: 0 | Response Failed: 0
Current Time: 2026-11-22 00:02:49,759 | Send TPS: 2017 | Max RT(ms): 651 | Average RT(ms):  14.858 | Send Failed: 3 | Response Failed: 1
"""

BATCH_OUT = (
    "Current Time: 2026-11-22 00:03:25,837 | Send TPS: 2854 | Send MPS: 45675 | Max RT(ms): 1520 | Average RT(ms):  11.649 "
    "| Average Message RT(ms):   0.728 | Send Failed: 0 | Send Message Failed: 2\n"
)


def test_producer_lines_oldest_first_and_last_is_steady():
    lines = parse.stats_lines(PRODUCER_OUT)
    assert [line.tps for line in lines] == [1533, 2017]
    last = parse.steady_rate(PRODUCER_OUT, "sync32")
    assert (last.tps, last.mps, last.avg_rt_ms, last.max_rt_ms, last.failed) == (2017, 2017, 14.858, 651, 4)


def test_batch_producer_reports_messages_per_second_apart_from_requests():
    line = parse.steady_rate(BATCH_OUT, "batch")
    assert (line.tps, line.mps, line.failed) == (2854, 45675, 2)


def test_no_report_names_the_cause_and_shows_the_output():
    with pytest.raises(ValueError, match=r"(?s)sync128: the tool printed no 'Send TPS' report.*at least 12 s.*threadCount"):
        parse.steady_rate("topic: x, threadCount: 128\n", "sync128")


def test_result_line_is_json_even_with_control_characters():
    text = 'READY\nRESULT {"tps": 25103.1, "failures": "3x busy\tqueue"}\n'
    assert parse.result(text, "async") == {"tps": 25103.1, "failures": "3x busy\tqueue"}


@pytest.mark.parametrize("line", ["PROBE_TIMEOUT after 764 attempts; last error: No route", "FILL_FAILED sent 3 of 9; last error: x", "LATENCY_FAILED the consumer did not catch up"])
def test_failure_lines_become_the_error(line):
    with pytest.raises(ValueError, match="probe: " + line.split()[0]):
        parse.result(f"READY\n{line}\n", "probe")


def test_missing_result_shows_the_tail():
    with pytest.raises(ValueError, match="(?s)drain: no RESULT line.*Exception in thread"):
        parse.result('Exception in thread "main" java.lang.IllegalStateException\n', "drain")


def test_vm_rss():
    status = "Name:\tjava\nVmPeak:\t 9999 kB\nVmRSS:\t  426300 kB\nRssAnon:\t 1 kB\n"
    assert parse.vm_rss_kib(status) == 426300
    assert parse.status_kib(status, "RssAnon") == 1
    with pytest.raises(ValueError, match="no VmRSS"):
        parse.vm_rss_kib("Name:\tkthreadd\n")


def _producer_reports(rates: list[int]) -> str:
    return "".join(f"Current Time: 2026-11-25 21:00:{i:02d},000 | Send TPS: {r} | Max RT(ms): {100 + i} | Average RT(ms):  2.5 "
                   f"| Send Failed: 0 | Response Failed: {i // 10}\n" for i, r in enumerate(rates))


def test_fresh_figure_tiles_the_run_from_the_first_report():
    """Each report covers the 9 s before it: the first and every ninth after it cover the run once."""
    rates = [1000] * 9 + [4000] * 9 + [7000] * 3  # slow at first, as on a fresh store
    figure, extra = parse.rate_from_start(_producer_reports(rates), "fresh")
    assert figure == 4000.0  # reports 0, 9, 18
    assert extra["seconds_covered"] == 27
    assert extra["tps_per_report"] == rates and extra["median_report_tps"] == 4000
    assert (extra["max_rt_ms"], extra["failed"]) == (120, 2)
    assert parse.rate_from_start(_producer_reports([1500]), "fresh")[0] == 1500.0
    with pytest.raises(ValueError, match="fresh: the tool printed no 'Send TPS' report"):
        parse.rate_from_start("topic: x, threadCount: 32\n", "fresh")
