"""The ``ferrymq`` pytest plugin as a user's suite meets it: each test here writes a small suite and runs it
in a pytest process of its own, which loads the plugin from the installed package's entry point."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

#: helpers of the user suites: a send with ferrymq.sdk and a pull of everything one queue holds
CLIENT_HELPERS = """
import time

import pytest
from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message


def send(server, topic, *bodies, **props):
    with BlockingProducer("user_pg", server.namesrv_addr) as producer:
        for body in bodies:
            msg = Message(topic, body.encode())
            for key, value in props.items():
                msg.put_user_property(key, value)
            producer.send(msg)


def pull(server, topic, expression="*", expression_type="TAG"):
    with BlockingPullConsumer("user_cg", server.namesrv_addr) as consumer:
        (mq,) = consumer.fetch_subscribe_queues(topic)
        result = consumer.pull(mq, expression, 0, max_nums=32, expression_type=expression_type)
        return [m.body.decode() for m in result.messages or ()], mq
"""


#: plugins of this environment that a user's suite need not have and the ``ferrymq`` plugin has nothing to do
#: with: importing hypothesis and schemathesis is most of a pytest start (1.5 s of 2)
UNRELATED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:schemathesis")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *UNRELATED_PLUGINS, "-s", *args, timeout=180)


def addresses(result: pytest.RunResult) -> list[str]:
    """The name-server addresses the user tests printed, in order."""
    return re.findall(r"NAMESRV (\S+)", result.stdout.str())


def test_a_users_test_sends_and_pulls_through_the_fixture(pytester):
    pytester.makepyfile(helpers=CLIENT_HELPERS, test_user="""
        from helpers import pull, send

        def test_send_and_pull(ferrymq):
            topic = ferrymq.create_topic("UserTopic", queues=1)
            assert ferrymq.create_group("user_cg", retry_max_times=3) == "user_cg"
            send(ferrymq, topic, "m0", "m1", "m2")
            bodies, mq = pull(ferrymq, topic)
            assert bodies == ["m0", "m1", "m2"]
            assert mq.broker_name == ferrymq.broker_name

        def test_two_servers_from_the_factory(ferrymq_factory):
            one = ferrymq_factory(brokerName="one")
            two = ferrymq_factory(brokerName="two")
            assert one.namesrv_addr != two.namesrv_addr
            for server in (one, two):
                send(server, server.create_topic("Both", queues=1), server.broker_name)
                assert pull(server, "Both")[0] == [server.broker_name]
    """)
    run(pytester).assert_outcomes(passed=2)


SCOPE_SUITE = """
    def test_one(ferrymq):
        print("NAMESRV", ferrymq.namesrv_addr)

    def test_two(ferrymq):
        print("NAMESRV", ferrymq.namesrv_addr)
"""


def test_the_scope_option_shares_one_server(pytester):
    pytester.makepyfile(test_a=SCOPE_SUITE, test_b=SCOPE_SUITE)
    fresh = addresses(run(pytester))
    assert len(fresh) == 4 and len(set(fresh)) == 4
    session = addresses(run(pytester, "--ferrymq-scope=session"))
    assert len(session) == 4 and len(set(session)) == 1
    pytester.makeini("[pytest]\nferrymq_scope = module\n")
    per_module = addresses(run(pytester))
    assert per_module[0] == per_module[1] != per_module[2] == per_module[3]


SQL92_SUITE = """
    import pytest
    from helpers import pull, send

    def sql_pull(server):
        topic = server.create_topic("Sql", queues=1)
        send(server, topic, "one", a="1")
        send(server, topic, "two", a="2")
        return pull(server, topic, "a > 1", "SQL92")[0]

    @pytest.mark.ferrymq(enablePropertyFilter=True)
    def test_marked(ferrymq):
        assert sql_pull(ferrymq) == ["two"]

    def test_unmarked(ferrymq):
        with pytest.raises(Exception, match="does not support"):
            sql_pull(ferrymq)
"""


def test_the_marker_and_the_command_line_set_broker_keys(pytester):
    pytester.makepyfile(helpers=CLIENT_HELPERS, test_sql=SQL92_SUITE)
    run(pytester).assert_outcomes(passed=2)
    # the option turns SQL92 on for every server: the unmarked test's refusal no longer comes
    run(pytester, "--ferrymq-enable-property-filter=true").assert_outcomes(passed=1, failed=1)


def test_ini_options_set_broker_keys(pytester):
    """ferrymq_broker_conf names the broker; ferrymq_message_delay_level makes level 2 a 1 s delay
    (Apache's default is 5 s)."""
    pytester.makeini("[pytest]\nferrymq_message_delay_level = 1s 1s 1s\nferrymq_broker_conf =\n"
                     "    brokerName=ini-broker\n    brokerClusterName=IniCluster\n")
    pytester.makepyfile(helpers=CLIENT_HELPERS, test_ini="""
        import time
        from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message
        from helpers import pull

        def test_delay_and_name(ferrymq):
            topic = ferrymq.create_topic("Later", queues=1)
            with BlockingProducer("user_pg", ferrymq.namesrv_addr) as producer:
                producer.send(Message(topic, b"later", delay_level=2))
            sent = time.monotonic()
            while not pull(ferrymq, topic)[0]:
                assert time.monotonic() - sent < 4, "level 2 is not 1 s"
                time.sleep(0.1)
            assert pull(ferrymq, topic)[1].broker_name == "ini-broker"
            assert ferrymq.cluster == "IniCluster"
    """)
    run(pytester).assert_outcomes(passed=1)


def test_a_failed_test_reports_the_log_its_server_wrote_meanwhile(pytester):
    pytester.makepyfile(test_fails="""
        def test_passes(ferrymq):
            ferrymq.create_topic("FirstTopic")

        def test_fails(ferrymq):
            ferrymq.create_topic("SecondTopic")
            assert False, "the user's assertion"
    """)
    result = run(pytester, "--ferrymq-scope=session")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    section = re.search(r"-+ ferrymq server log \(127\.0\.0\.1:\d+, call\) -+\n(.*?)\n=+ short test summary",
                        out, re.DOTALL)
    assert section, out
    assert "new topic registered: SecondTopic" in section.group(1)
    assert "FirstTopic" not in section.group(1)  # logged during the test before
    assert "ferrymq server log" not in out[:out.index("the user's assertion")]  # only the failure's report


def test_a_marker_a_shared_server_cannot_honour_is_refused(pytester):
    pytester.makepyfile(test_shared="""
        import pytest

        pytestmark = pytest.mark.ferrymq(brokerName="module-broker")

        def test_module_marker_applies(ferrymq):
            assert ferrymq.broker_name == "module-broker"

        @pytest.mark.ferrymq(enablePropertyFilter=True)
        def test_own_marker(ferrymq):
            pass
    """)
    result = run(pytester, "--ferrymq-scope=module")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.ferrymq on *test_own_marker cannot change the server shared per module*"])


def test_a_server_that_cannot_start_fails_the_test_with_its_log(pytester):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.ferrymq(flushDiskType="SOMETIMES")
        def test_bad_conf(ferrymq):
            pass
    """)
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ServerStartError: ferrymq standalone exited with status 2*",
                                 "*flushDiskType*SOMETIMES*"])
