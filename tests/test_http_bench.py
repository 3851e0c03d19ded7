"""The HTTP benchmark's reading of wrk's output and its summary over rounds (no broker, no wrk)."""

import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchmarks.http_bench import Round, summarize, table, verdict, wrk_figures, wrk_script

WRK_OUTPUT = """Running 10s test @ http://127.0.0.1:8080/v1/topics/t/messages
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.50ms    3.00ms  80.00ms   90.00%
  50000 requests in 10.00s, 9.00MB read
  Non-2xx or 3xx responses: 1000
Requests/sec:   5000.00
Transfer/sec:      0.90MB
RESULT {"requests": 50000, "duration_us": 10000000, "connect_errors": 0, "read_errors": 2, "write_errors": 0, "status_errors": 1000, "timeouts": 3, "mean_us": 12500.0, "p50_us": 11800, "p90_us": 15000, "p99_us": 24250, "p999_us": 60000, "max_us": 80000}
"""


def test_wrk_figures_count_only_2xx_answers_and_convert_to_ms():
    f = wrk_figures(WRK_OUTPUT)
    assert f["ok"] == 49000
    assert f["tps"] == 4900.0
    assert f["failed"] == 1005
    assert f["seconds"] == 10.0
    assert (f["p50_ms"], f["p99_ms"], f["max_ms"]) == (11.8, 24.25, 80.0)


def test_wrk_figures_name_the_tool_when_it_printed_no_result():
    with pytest.raises(ValueError, match="wrk: no RESULT line"):
        wrk_figures("unable to connect to 127.0.0.1:8080 Connection refused\n")


def _round(i: int, publish_tps: float, publish_p99: float, remoting_tps: float, remoting_p99: float,
           paced: tuple[float, float] = (3.0, 2.0)) -> Round:
    """A round; ``paced``: the paced phases' p99 (HTTP publish, remoting sync send)."""
    return Round(i, ["remoting", "publish", "paced_remoting", "paced_publish", "consume"],
                 remoting={"tps": remoting_tps, "p50_ms": 2.0, "p99_ms": remoting_p99},
                 publish={"tps": publish_tps, "p50_ms": 10.0, "p99_ms": publish_p99, "tool_cores": 0.2},
                 paced_publish={"tps": 990.0, "p50_ms": 1.0, "p99_ms": paced[0]},
                 paced_remoting={"tps": 995.0, "p50_ms": 0.8, "p99_ms": paced[1]},
                 consume={"tps": 3000.0})


def test_summary_takes_ratio_and_added_p99_within_each_round_then_the_median():
    rounds = [_round(0, 4000, 20.0, 10000, 10.0, (12.0, 2.0)), _round(1, 6000, 14.0, 10000, 12.0, (4.0, 2.0)),
              _round(2, 3000, 30.0, 5000, 28.5, (3.5, 2.0))]
    s = summarize(rounds)
    assert s["publish_tps"] == {"median": 4000, "min": 3000, "max": 6000, "rounds": 3}
    assert s["ratio"]["median"] == pytest.approx(0.6)  # per round 0.4, 0.6, 0.6
    assert s["p99_added_ms"]["median"] == pytest.approx(2.0)  # paced, per round 10, 2, 1.5
    assert s["saturated_p99_added_ms"]["median"] == pytest.approx(2.0)  # per round 10, 2, 1.5
    assert verdict(s) == {"throughput": True, "p99": True}
    assert s["consume_broker_us"] is None  # no round measured it


def test_the_p99_target_is_judged_on_the_paced_phases_not_at_saturation():
    s = summarize([_round(0, 6000, 40.0, 10000, 10.0, (2.5, 1.0)), _round(1, 6000, 40.0, 10000, 10.0, (2.9, 1.0))])
    assert s["saturated_p99_added_ms"]["median"] == pytest.approx(30.0)
    assert s["p99_added_ms"]["median"] == pytest.approx(1.7)
    assert verdict(s)["p99"] is True
    s = summarize([_round(0, 6000, 11.0, 10000, 10.0, (5.0, 1.0))])
    assert verdict(s)["p99"] is False  # 4 ms added below saturation


def test_a_round_without_one_side_counts_for_its_own_figures_only():
    half = Round(3, ["publish", "remoting", "consume"], publish={"tps": 100.0, "p99_ms": 50.0},
                 errors={"remoting": "RuntimeError: no RESULT line", "paced_publish": "RuntimeError: no RESULT line"})
    s = summarize([_round(0, 4000, 20.0, 10000, 19.0), half])
    assert s["publish_tps"]["rounds"] == 2
    assert s["ratio"]["rounds"] == 1
    assert s["p99_added_ms"]["rounds"] == 1
    assert verdict(s) == {"throughput": False, "p99": True}


def test_table_shows_medians_ranges_and_whether_each_target_is_met():
    text = table(summarize([_round(0, 4000, 20.0, 10000, 10.0), _round(1, 4400, 21.0, 11000, 11.0)]))
    assert "| HTTP publish, 64 keep-alive connections (msg/s) | 4,200 | 4,000–4,400 | 2 |" in text
    assert "| HTTP publish / remoting sync send, target ≥ 0.5: missed | 0.40 | 0.40–0.40 | 2 |" in text
    assert "p99 added by the gateway, paced (ms), target ≤ 2 ms: met | 1.00 |" in text
    assert "| p99 difference at saturation (ms) | 10.00 |" in text


NO_WRK = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk)")


def _wrk_against_a_local_server(script_text: str, tmp_path, connections: int, seconds: int,
                                path: str = "/v1/topics/t/messages") -> tuple[str, list[tuple[str, int, str]]]:
    """Run wrk with ``script_text`` against a keep-alive HTTP/1.1 server on the loopback address that answers
    every other POST 400 (the first 200); wrk's output, and each request's path, body size and content type."""
    seen: list[tuple[str, int, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the gateway serves

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, len(body), self.headers["Content-Type"]))
            self.send_response(200 if len(seen) % 2 else 400)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script = tmp_path / "script.lua"
    script.write_text(script_text)
    try:
        out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script),
                              f"http://127.0.0.1:{server.server_address[1]}{path}"],
                             capture_output=True, text=True, timeout=30).stdout
    finally:
        server.shutdown()
    return out, seen


@NO_WRK
def test_wrk_with_the_script_posts_bodies_of_the_size_asked_for_and_prints_its_result(tmp_path):
    out, seen = _wrk_against_a_local_server(wrk_script(1024), tmp_path, connections=1, seconds=1)
    assert seen and set(seen) == {("/v1/topics/t/messages", 1024, "application/octet-stream")}
    f = wrk_figures(out)
    assert f["ok"] + f["failed"] >= len(seen) - 1  # the request in flight at the end is not counted
    assert f["ok"] == pytest.approx(len(seen) / 2, abs=1)
    assert 0 < f["p50_ms"] <= f["p99_ms"] <= f["max_ms"]


@NO_WRK
def test_the_paced_script_waits_its_pause_between_a_connections_requests(tmp_path):
    out, seen = _wrk_against_a_local_server(wrk_script(16, pause_ms=200), tmp_path, connections=2, seconds=2)
    # two connections, 2 s, a pause of 0-400 ms (200 on average) before each request: about 10 requests
    # each (unpaced: thousands)
    assert 4 <= len(seen) <= 40, len(seen)
    assert wrk_figures(out)["ok"] >= 2
