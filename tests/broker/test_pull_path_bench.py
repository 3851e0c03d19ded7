"""The pull path benchmark drains exactly the backlog it wrote (so its per-pull figure means something)."""

from benchmarks import pull_path_bench


def test_pull_path_bench_drains_the_whole_backlog(capsys):
    result = pull_path_bench.main(["--messages", "640", "--queues", "4", "--batch", "8", "--rounds", "1"])
    assert result["messages"] == 640 and result["pulls"] == 4 * 5
    assert result["us_per_pull"] > 0 and "us/pull" in capsys.readouterr().out
