package ferrymq.compat;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The issue-5 scenarios (SQL92 filters, lite pull, transactions) and the message-spec helpers the
 * {@code send} scenario uses. Source compatible with rocketmq-client 4.9.x and 5.x; the one 5.x-only
 * call (Message.setDeliverTimeMs) goes through reflection.
 *
 * <pre>
 *   sqlmatrix -n ADDR -t TOPIC -subs FILE [-timeout MILLIS] [-linger MILLIS]
 *             FILE: [{"group":G,"expr":SQL,"count":N},...]; one push consumer per entry, same JVM
 *   litepull  -n ADDR -t TOPIC -g GROUP [-count N] [-timeout MILLIS]
 *   txn       -n ADDR -t TOPIC -spec FILE [-group G] [-linger MILLIS]
 *             each spec entry's property "txmode": commit | rollback | unknown-commit | unknown
 * </pre>
 */
final class Advanced {
    private static final int FAST_INTERVAL_MS = 1000;

    /** Picks the queue by the Java hash of the sharding key, as the clients' own hash selector does. */
    static final MessageQueueSelector HASH_SELECTOR = (mqs, msg, arg) ->
        mqs.get(Math.abs(arg.hashCode() % mqs.size()));

    private Advanced() {
    }

    /** Messages from a JSON array of {body, tag, keys, props, shard, delayLevel}; shards collected in order. */
    static List<Message> messagesFromSpec(String topic, String file, List<String> shards) throws Exception {
        JSONArray spec = JSON.parseArray(new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.UTF_8));
        List<Message> out = new ArrayList<>();
        for (int i = 0; i < spec.size(); i++) {
            JSONObject e = spec.getJSONObject(i);
            Message m = new Message(topic, e.getString("body").getBytes(StandardCharsets.UTF_8));
            if (e.containsKey("tag")) {
                m.setTags(e.getString("tag"));
            }
            if (e.containsKey("keys")) {
                m.setKeys(e.getString("keys"));
            }
            if (e.containsKey("delayLevel")) {
                m.setDelayTimeLevel(e.getIntValue("delayLevel"));
            }
            JSONObject props = e.getJSONObject("props");
            if (props != null) {
                for (Map.Entry<String, Object> p : props.entrySet()) {
                    m.putUserProperty(p.getKey(), String.valueOf(p.getValue()));
                }
            }
            shards.add(e.getString("shard") == null ? String.valueOf(i) : e.getString("shard"));
            out.add(m);
        }
        return out;
    }

    /** Message.setDeliverTimeMs exists from 5.0 on; a 4.9.x client cannot send timer messages. */
    static void setDeliverTimeMs(Message m, long at) throws Exception {
        try {
            Message.class.getMethod("setDeliverTimeMs", long.class).invoke(m, at);
        } catch (NoSuchMethodException e) {
            throw new UnsupportedOperationException("this client version has no Message.setDeliverTimeMs", e);
        }
    }

    static boolean sqlMatrix(Map<String, String> args) throws Exception {
        String ns = args.get("n");
        String topic = args.get("t");
        long timeout = Long.parseLong(args.getOrDefault("timeout", "30000"));
        JSONArray subs = JSON.parseArray(new String(Files.readAllBytes(Paths.get(args.get("subs"))), StandardCharsets.UTF_8));
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        Map<String, AtomicInteger> got = new ConcurrentHashMap<>();
        Map<String, Integer> want = new ConcurrentHashMap<>();
        boolean started = true;
        for (int i = 0; i < subs.size(); i++) {
            JSONObject s = subs.getJSONObject(i);
            String group = s.getString("group");
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
            c.setNamesrvAddr(ns);
            c.setInstanceName("compat-sql-" + i + "-" + ProcessHandle.current().pid());
            c.setPollNameServerInterval(FAST_INTERVAL_MS);
            c.setHeartbeatBrokerInterval(FAST_INTERVAL_MS);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, MessageSelector.bySql(s.getString("expr")));
            AtomicInteger n = new AtomicInteger();
            got.put(group, n);
            want.put(group, s.getIntValue("count"));
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    n.incrementAndGet();
                    Scenarios.emit("event", "received", "group", group, "msgId", m.getMsgId(),
                        "body", new String(m.getBody(), StandardCharsets.UTF_8), "properties", m.getProperties());
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            try {
                c.start();
                consumers.add(c);
            } catch (org.apache.rocketmq.client.exception.MQClientException e) {
                Scenarios.emit("event", "start_error", "group", group, "responseCode", e.getResponseCode(),
                    "error", e.toString());
                started = false;
            }
        }
        long end = System.currentTimeMillis() + timeout;
        while (System.currentTimeMillis() < end) {
            boolean all = true;
            for (Map.Entry<String, Integer> w : want.entrySet()) {
                all &= got.get(w.getKey()).get() >= w.getValue();
            }
            if (all) {
                break;
            }
            Thread.sleep(100);
        }
        Thread.sleep(Long.parseLong(args.getOrDefault("linger", "2000")));
        boolean ok = started;
        for (Map.Entry<String, Integer> w : want.entrySet()) {
            ok &= got.get(w.getKey()).get() >= w.getValue();
        }
        Scenarios.finish(ok, "consumers", consumers.size());
        for (DefaultMQPushConsumer c : consumers) {
            c.shutdown();
        }
        return ok;
    }

    static boolean litePull(Map<String, String> args) throws Exception {
        int count = Integer.parseInt(args.getOrDefault("count", "1"));
        long timeout = Long.parseLong(args.getOrDefault("timeout", "30000"));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(args.get("g"));
        c.setNamesrvAddr(args.get("n"));
        c.setInstanceName("compat-litepull-" + ProcessHandle.current().pid());
        c.setPollNameServerInterval(FAST_INTERVAL_MS);
        c.setHeartbeatBrokerInterval(FAST_INTERVAL_MS);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setAutoCommit(true);
        c.subscribe(args.get("t"), args.getOrDefault("expr", "*"));
        c.start();
        int got = 0;
        long end = System.currentTimeMillis() + timeout;
        while (got < count && System.currentTimeMillis() < end) {
            for (MessageExt m : c.poll(1000)) {
                got++;
                Scenarios.emit("event", "received", "msgId", m.getMsgId(), "tags", m.getTags(),
                    "body", new String(m.getBody(), StandardCharsets.UTF_8), "queueId", m.getQueueId(),
                    "queueOffset", m.getQueueOffset());
            }
        }
        c.commitSync();
        Scenarios.finish(got >= count, "received", got, "expected", count);
        c.shutdown();
        return got >= count;
    }

    static boolean transactions(Map<String, String> args) throws Exception {
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer(args.getOrDefault("group", "compat_java_tx"));
        p.setNamesrvAddr(args.get("n"));
        p.setInstanceName("compat-tx-" + ProcessHandle.current().pid());
        p.setPollNameServerInterval(FAST_INTERVAL_MS);
        p.setHeartbeatBrokerInterval(FAST_INTERVAL_MS);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String mode = msg.getUserProperty("txmode");
                if ("commit".equals(mode)) {
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
                return "rollback".equals(mode) ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int n = checks.computeIfAbsent(msg.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                String mode = msg.getUserProperty("txmode");
                Scenarios.emit("event", "check", "keys", msg.getKeys(), "txmode", mode, "n", n,
                    "at", System.currentTimeMillis());
                return "unknown-commit".equals(mode) ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.UNKNOW;
            }
        });
        p.start();
        List<String> shards = new ArrayList<>();
        List<Message> msgs = messagesFromSpec(args.get("t"), args.get("spec"), shards);
        boolean ok = true;
        try {
            for (int i = 0; i < msgs.size(); i++) {
                try {
                    SendResult r = p.sendMessageInTransaction(msgs.get(i), null);
                    Scenarios.emit("event", "sent", "index", i, "keys", msgs.get(i).getKeys(), "status",
                        r.getSendStatus().name(), "msgId", r.getMsgId(), "transactionId", r.getTransactionId(),
                        "localState", ((org.apache.rocketmq.client.producer.TransactionSendResult) r)
                            .getLocalTransactionState().name());
                } catch (Exception e) {
                    ok = false;
                    Scenarios.emit("event", "send_error", "index", i, "error", e.toString());
                }
            }
            Thread.sleep(Long.parseLong(args.getOrDefault("linger", "0")));
            Scenarios.finish(ok, "sent", msgs.size(), "at", System.currentTimeMillis());
        } finally {
            p.shutdown();
        }
        return ok;
    }
}
