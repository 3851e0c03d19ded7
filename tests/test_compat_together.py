"""compat_tests/together.py: the client cases of one scenario run at once, and each keeps its own outcome."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import threading, time
import pytest
from compat_tests.together import Together

LOG = []

@pytest.fixture(scope="session")
def together():
    return Together(lambda name: name)

@pytest.fixture(scope="session", params=["java-5.5.0", "java-4.9.8", "go"])
def client(request):
    return request.param

@pytest.mark.parametrize("server", ["apache", "ferrymq"])
def test_scenario(server, client, together, request):
    def scenario(each):
        LOG.append(("start", server, each, request.node.name))
        time.sleep(0.3)
        LOG.append(("end", server, each))
        assert each != "java-4.9.8", f"{each} failed on {server}"
        return each
    assert together.run(request, client, scenario) == client

def test_the_cases_ran_together():
    for server in ("apache", "ferrymq"):
        starts = [e for e in LOG if e[0] == "start" and e[1] == server]
        # every client started on the first case, before any of them ended
        assert len(starts) == 3 and len({e[3] for e in starts}) == 1, LOG
        first_end = next(i for i, e in enumerate(LOG) if e[0] == "end" and e[1] == server)
        assert all(LOG.index(e) < first_end for e in starts), LOG
"""


def test_each_case_keeps_its_own_outcome_and_the_waits_overlap(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "-p", "no:randomly")
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(["*java-4.9.8 failed on apache*", "*java-4.9.8 failed on ferrymq*"])
    failed = {line.split("::")[1].split(" ")[0] for line in result.outlines if line.startswith("FAILED")}
    assert failed == {"test_scenario[java-4.9.8-apache]", "test_scenario[java-4.9.8-ferrymq]"}


def test_a_case_selected_alone_runs_its_own_client_only(pytester: pytest.Pytester):
    pytester.makepyfile(test_suite=SUITE.replace("assert len(starts) == 3", "assert len(starts) == 1"))
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "-p", "no:randomly",
                                          "-k", "(scenario and go) or together")
    result.assert_outcomes(passed=3)
