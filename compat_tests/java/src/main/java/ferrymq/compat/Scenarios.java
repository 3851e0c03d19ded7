package ferrymq.compat;

import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Client scenarios of the official Java client for FerryMQ's compatibility tests, one per subcommand.
 * Results go to stdout as JSON lines (one object per event, last {"event":"done",...}); the exit status is
 * 0 only when the scenario did what it was asked. Source compatible with rocketmq-client 4.9.x and 5.x.
 *
 * <pre>
 *   route   -n ADDR -t TOPIC [-timeout MS]
 *   send    -n ADDR -t TOPIC [-count N] [-tag T] [-keys K] [-body TEXT] [-group G]
 *           [-mode sync|async|oneway|batch] [-interval MILLIS (sync: pause between sends)]
 *   consume -n ADDR -t TOPIC -g GROUP [-count N] [-expr *] [-timeout MILLIS] [-from first|last]
 *           [-model clustering|broadcasting] [-orderly true] [-clientRebalance false]
 *           [-linger MILLIS [-persist true (offsets to the broker every 200 ms while lingering)]]
 * </pre>
 *
 * The clients' own timers are shortened (route poll, heartbeat: 1 s) so that a scenario does not wait
 * 30 s for a change; the rebalance wait is the JVM property rocketmq.client.rebalance.waitInterval,
 * which the pytest side sets on the command line.
 *
 * A scenario calls {@link #finish} with its outcome before shutting its clients down. The clients'
 * shutdown still runs (offsets persisted, UNREGISTER_CLIENT sent and answered), but once it reaches the
 * remoting client's own shutdown, which idles up to 3 s for an event thread, the process leaves with the
 * recorded status.
 */
public final class Scenarios {
    private static final int FAST_INTERVAL_MS = 1000;
    private static volatile Integer exitStatus;

    private Scenarios() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            System.err.println("usage: Scenarios route|send|consume [-flag value]...");
            System.exit(2);
        }
        Map<String, String> args = parse(argv);
        leaveWhenIdleShutdownStarts(Thread.currentThread());
        boolean ok;
        switch (argv[0]) {
            case "route":
                ok = route(args);
                break;
            case "send":
                ok = send(args);
                break;
            case "consume":
                ok = consume(args);
                break;
            case "sqlmatrix":
                ok = Advanced.sqlMatrix(args);
                break;
            case "litepull":
                ok = Advanced.litePull(args);
                break;
            case "txn":
                ok = Advanced.transactions(args);
                break;
            default:
                System.err.println("unknown scenario " + argv[0]);
                System.exit(2);
                return;
        }
        System.out.flush();
        // Client threads (netty, timers) are not all daemons; leave promptly either way.
        System.exit(ok ? 0 : 1);
    }

    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i < argv.length; i++) {
            if (!argv[i].startsWith("-") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected -flag value pairs, got " + argv[i]);
            }
            args.put(argv[i].substring(1), argv[++i]);
        }
        return args;
    }

    private static String need(Map<String, String> args, String key) {
        String v = args.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing -" + key);
        }
        return v;
    }

    /** Record the outcome and print the final "done" event; call before shutting clients down. */
    static void finish(boolean ok, Object... kv) {
        Object[] all = new Object[kv.length + 2];
        all[0] = "event";
        all[1] = "done";
        System.arraycopy(kv, 0, all, 2, kv.length);
        emit(all);
        exitStatus = ok ? 0 : 1;
    }

    private static void leaveWhenIdleShutdownStarts(Thread main) {
        Thread watcher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
                Integer status = exitStatus;
                if (status == null) {
                    continue;
                }
                for (StackTraceElement frame : main.getStackTrace()) {
                    if ("shutdown".equals(frame.getMethodName())
                        && frame.getClassName().equals("org.apache.rocketmq.remoting.netty.NettyRemotingClient")) {
                        System.out.flush();
                        Runtime.getRuntime().halt(status);
                    }
                }
            }
        }, "scenario-exit-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    static synchronized void emit(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        System.out.println(JSON.toJSONString(m));
        System.out.flush();
    }

    private static String instance(String role) {
        return "compat-" + role + "-" + ProcessHandle.current().pid();
    }

    /** GET_ROUTEINFO_BY_TOPIC through the admin client; prints the route as the client decoded it. */
    private static boolean route(Map<String, String> args) throws Exception {
        DefaultMQAdminExt admin = args.containsKey("timeout")
            ? new DefaultMQAdminExt(Long.parseLong(args.get("timeout"))) : new DefaultMQAdminExt();
        admin.setNamesrvAddr(need(args, "n"));
        admin.setInstanceName(instance("admin"));
        admin.start();
        try {
            Object route = admin.examineTopicRouteInfo(need(args, "t"));
            emit("event", "route", "topic", need(args, "t"), "route", JSON.parse(JSON.toJSONString(route)));
            finish(true);
            return true;
        } finally {
            admin.shutdown();
        }
    }

    /** {@code -ak}/{@code -sk}: requests signed by AclClientRPCHook (ACL 2.0); none without {@code -ak}. */
    private static RPCHook credentials(Map<String, String> args) {
        String accessKey = args.get("ak");
        return accessKey == null ? null : new AclClientRPCHook(new SessionCredentials(accessKey, need(args, "sk")));
    }

    /** The innermost cause's text: a broker's refusal (code and remark) under the client's retries. */
    private static String rootCause(Throwable e) {
        while (e.getCause() != null && e.getCause() != e) {
            e = e.getCause();
        }
        return e.toString();
    }

    private static boolean send(Map<String, String> args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(args.getOrDefault("group", "compat_java_producer"),
            credentials(args));
        producer.setNamesrvAddr(need(args, "n"));
        producer.setInstanceName(instance("producer"));
        producer.setPollNameServerInterval(FAST_INTERVAL_MS);
        producer.setHeartbeatBrokerInterval(FAST_INTERVAL_MS);
        producer.setSendMsgTimeout(Integer.parseInt(args.getOrDefault("timeout", "3000")));
        producer.start();
        int count = Integer.parseInt(args.getOrDefault("count", "1"));
        String mode = args.getOrDefault("mode", "sync");
        int sent = 0;
        try {
            List<Message> msgs = new ArrayList<>();
            List<String> shards = new ArrayList<>();
            if (args.containsKey("spec")) {
                msgs = Advanced.messagesFromSpec(need(args, "t"), args.get("spec"), shards);
                count = msgs.size();
            } else {
                for (int i = 0; i < count; i++) {
                    String body = args.getOrDefault("body", "hello from the Java client") + (count > 1 ? " #" + i : "");
                    msgs.add(new Message(need(args, "t"), args.getOrDefault("tag", ""),
                        args.getOrDefault("keys", ""), body.getBytes("UTF-8")));
                }
            }
            if (args.containsKey("delayLevel")) {
                for (Message m : msgs) {
                    m.setDelayTimeLevel(Integer.parseInt(args.get("delayLevel")));
                }
            }
            if (args.containsKey("deliverAfterMs")) {
                long at = System.currentTimeMillis() + Long.parseLong(args.get("deliverAfterMs"));
                for (Message m : msgs) {
                    Advanced.setDeliverTimeMs(m, at);
                }
                emit("event", "deliver_at", "deliverTimeMs", at);
            }
            switch (mode) {
                case "selector":
                    for (int i = 0; i < count; i++) {
                        try {
                            emitSent(i, producer.send(msgs.get(i), Advanced.HASH_SELECTOR, shards.get(i)));
                            sent++;
                        } catch (Exception e) {
                            emit("event", "send_error", "index", i, "error", e.toString());
                        }
                    }
                    break;
                case "sync":
                    long interval = Long.parseLong(args.getOrDefault("interval", "0"));
                    for (int i = 0; i < count; i++) {
                        if (interval > 0 && i > 0) {
                            Thread.sleep(interval);
                        }
                        try {
                            emitSent(i, producer.send(msgs.get(i)));
                            sent++;
                        } catch (Exception e) {
                            emit("event", "send_error", "index", i, "error", e.toString(), "cause", rootCause(e));
                        }
                    }
                    break;
                case "batch":
                    try {
                        emitSent(0, producer.send(msgs));
                        sent = count;
                    } catch (Exception e) {
                        emit("event", "send_error", "index", 0, "error", e.toString());
                    }
                    break;
                case "oneway":
                    for (int i = 0; i < count; i++) {
                        producer.sendOneway(msgs.get(i));
                        emit("event", "sent", "index", i, "status", "ONEWAY");
                        sent++;
                    }
                    break;
                case "async":
                    CountDownLatch answered = new CountDownLatch(count);
                    AtomicInteger ok = new AtomicInteger();
                    for (int i = 0; i < count; i++) {
                        final int index = i;
                        producer.send(msgs.get(i), new SendCallback() {
                            @Override
                            public void onSuccess(SendResult r) {
                                emitSent(index, r);
                                ok.incrementAndGet();
                                answered.countDown();
                            }

                            @Override
                            public void onException(Throwable e) {
                                emit("event", "send_error", "index", index, "error", e.toString());
                                answered.countDown();
                            }
                        });
                    }
                    answered.await(producer.getSendMsgTimeout() * 2L + 1000, TimeUnit.MILLISECONDS);
                    sent = ok.get();
                    break;
                default:
                    throw new IllegalArgumentException("-mode must be sync, async, oneway or batch, not " + mode);
            }
            if (args.containsKey("linger")) {
                emit("event", "lingering");
                Thread.sleep(Long.parseLong(args.get("linger")));
            }
            finish(sent == count, "sent", sent, "requested", count, "mode", mode);
        } finally {
            producer.shutdown();
        }
        return sent == count;
    }

    static void emitSent(int index, SendResult r) {
        emit("event", "sent", "index", index, "sentAt", System.currentTimeMillis(), "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
            "offsetMsgId", r.getOffsetMsgId(), "queueOffset", r.getQueueOffset(),
            "brokerName", r.getMessageQueue().getBrokerName(), "queueId", r.getMessageQueue().getQueueId());
    }

    /** MessageModel moved packages between 4.9 and 5.x; reach it through the setter's parameter type. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void setMessageModel(DefaultMQPushConsumer consumer, String name) throws Exception {
        for (java.lang.reflect.Method m : DefaultMQPushConsumer.class.getMethods()) {
            if (m.getName().equals("setMessageModel") && m.getParameterCount() == 1) {
                m.invoke(consumer, Enum.valueOf((Class) m.getParameterTypes()[0], name));
                return;
            }
        }
        throw new IllegalStateException("DefaultMQPushConsumer has no setMessageModel");
    }

    static void onMessage(MessageExt m, AtomicInteger received, CountDownLatch enough) {
        received.incrementAndGet();
        emit("event", "received", "receivedAt", System.currentTimeMillis(), "bornTimestamp", m.getBornTimestamp(),
            "storeTimestamp", m.getStoreTimestamp(), "msgId", m.getMsgId(), "topic", m.getTopic(), "tags", m.getTags(),
            "keys", m.getKeys(), "body", new String(m.getBody(), java.nio.charset.StandardCharsets.UTF_8),
            "queueId", m.getQueueId(), "brokerName", m.getBrokerName(), "queueOffset", m.getQueueOffset(),
            "reconsumeTimes", m.getReconsumeTimes(), "properties", m.getProperties());
        enough.countDown();
    }

    /**
     * Stays connected for {@code millis} to catch messages that should not come, and commits the offsets once
     * more a moment (200 ms) before it ends. The client's shutdown commits each queue's offset with a one-way
     * write and closes its connections at once, and Apache RocketMQ now and then never records one of those
     * commits (a restarted group got a queue's messages again in
     * test_consumer_restart_resumes_from_committed_offset[apache-java-5.5.0]); the commit a long-running
     * consumer's periodic persisting would have made takes that race out, as the Go harness does. With
     * {@code persist} the consumer commits every 200 ms while it lingers: the client's own persisting starts
     * only 10 s after start, and admin commands observing a lingering group would wait for it.
     */
    private static void linger(DefaultMQPushConsumer consumer, long millis, boolean persist) throws InterruptedException {
        long end = System.currentTimeMillis() + millis;
        for (long left = millis; left > 200; left = end - System.currentTimeMillis()) {
            Thread.sleep(persist ? 200 : left - 200);
            if (persist) {
                consumer.getDefaultMQPushConsumerImpl().persistConsumerOffset();
            }
        }
        consumer.getDefaultMQPushConsumerImpl().persistConsumerOffset();
        Thread.sleep(Math.max(0, end - System.currentTimeMillis()));
    }

    private static boolean consume(Map<String, String> args) throws Exception {
        int count = Integer.parseInt(args.getOrDefault("count", "1"));
        long timeout = Long.parseLong(args.getOrDefault("timeout", "30000"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(need(args, "g"), credentials(args),
            new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(need(args, "n"));
        consumer.setInstanceName(instance("consumer"));
        consumer.setPollNameServerInterval(FAST_INTERVAL_MS);
        consumer.setHeartbeatBrokerInterval(FAST_INTERVAL_MS);
        consumer.setConsumeFromWhere("last".equals(args.get("from"))
            ? ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET : ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        setMessageModel(consumer, "broadcasting".equals(args.get("model")) ? "BROADCASTING" : "CLUSTERING");
        consumer.setPersistConsumerOffsetInterval(FAST_INTERVAL_MS);
        if (args.containsKey("instance")) {
            consumer.setInstanceName(args.get("instance"));
        }
        if (args.containsKey("maxReconsume")) {
            consumer.setMaxReconsumeTimes(Integer.parseInt(args.get("maxReconsume")));
        }
        if ("false".equals(args.get("clientRebalance"))) {
            // 5.x: the broker balances (QUERY_ASSIGNMENT) and may answer POP for the group (setConsumeMode)
            consumer.getClass().getMethod("setClientRebalance", boolean.class).invoke(consumer, false);
        }
        if (args.containsKey("sql")) {
            consumer.subscribe(need(args, "t"), org.apache.rocketmq.client.consumer.MessageSelector.bySql(args.get("sql")));
        } else {
            consumer.subscribe(need(args, "t"), args.getOrDefault("expr", "*"));
        }
        CountDownLatch enough = new CountDownLatch(count);
        AtomicInteger received = new AtomicInteger();
        // -reconsume N: answer RECONSUME_LATER while a message has been re-consumed fewer than N times.
        int reconsume = Integer.parseInt(args.getOrDefault("reconsume", "0"));
        long[] last = {0L};
        if ("true".equals(args.get("orderly"))) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
                msgs.forEach(m -> onMessage(m, received, enough));
                last[0] = System.currentTimeMillis();
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                msgs.forEach(m -> onMessage(m, received, enough));
                last[0] = System.currentTimeMillis();
                for (MessageExt m : msgs) {
                    if (m.getReconsumeTimes() < reconsume) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        try {
            consumer.start();
        } catch (org.apache.rocketmq.client.exception.MQClientException e) {
            emit("event", "start_error", "responseCode", e.getResponseCode(), "error", e.toString());
            finish(false, "received", 0, "expected", count);
            return false;
        }
        emit("event", "started");
        long idle = Long.parseLong(args.getOrDefault("idle", "0"));
        if (idle > 0) {
            // -idle: leave once messages stop arriving (after the first), or at -timeout.
            long end = System.currentTimeMillis() + timeout;
            while (System.currentTimeMillis() < end) {
                Thread.sleep(100);
                if (last[0] > 0 && System.currentTimeMillis() - last[0] > idle) {
                    break;
                }
            }
        } else {
            enough.await(timeout, TimeUnit.MILLISECONDS);
        }
        if (args.containsKey("linger")) {
            linger(consumer, Long.parseLong(args.get("linger")), "true".equals(args.get("persist")));
        }
        int got = received.get();
        finish(got >= count, "received", got, "expected", count);
        consumer.shutdown();
        return got >= count;
    }
}
