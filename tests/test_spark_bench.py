"""The Spark benchmark's summary over rounds: ratios taken within each round, then their median (no Spark)."""

from benchmarks.spark_bench import Round, summarize, table, verdict


def _round(raw_pull: float, read: float, raw_send: float, write: float) -> Round:
    return Round(["raw_pull", "source_read", "raw_send", "source_write", "stream"],
                 {"raw_pull": raw_pull, "source_read": read, "raw_send": raw_send, "source_write": write,
                  "stream_p50_ms": 400.0, "stream_p99_ms": 900.0})


def test_ratios_are_per_round_medians_and_the_table_says_which_target_is_met():
    rounds = [_round(100, 60, 100, 40), _round(200, 80, 50, 30), _round(100, 55, 100, 45)]
    summary = summarize(rounds)
    assert summary["read_ratio"] == {"median": 0.55, "min": 0.4, "max": 0.6, "rounds": 3}
    assert summary["write_ratio"]["median"] == 0.45
    assert summary["source_read"]["median"] == 60
    assert verdict(summary) == {"read": True, "write": False}
    text = table(summary)
    assert "| source read / raw pull, target ≥ 0.5: met | 0.55 | 0.40–0.60 | 3 |" in text
    assert "| source write / raw batch send, target ≥ 0.5: missed | 0.45 |" in text


def test_a_round_without_a_figure_leaves_it_out():
    summary = summarize([Round(["raw_pull"], {"raw_pull": 10.0})])
    assert summary["source_read"] is None and summary["read_ratio"] is None
    assert verdict(summary) == {"read": None, "write": None}
