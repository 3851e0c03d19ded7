package ferrymq.compat.grpc;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official gRPC client (rocketmq-client-java) as scenarios printing one JSON object a line.
 *
 * <pre>
 * send -endpoint host:port -t TOPIC -spec FILE [-linger MS]
 * simple -endpoint host:port -t TOPIC -g GROUP -count N [-expr TAGS] [-batch N] [-renew BODY] [-timeout MS]
 * push -endpoint host:port -t TOPIC -g GROUP -count N [-fail BODY,...] [-attempts N] [-timeout MS] [-linger MS]
 * SCENARIO ARGS -- SCENARIO ARGS ...
 * </pre>
 * Every scenario also takes {@code -ak KEY -sk SECRET} (signing its calls with a
 * {@link StaticSessionCredentialsProvider}) and {@code -ssl true} (TLS, the server's certificate unchecked, as
 * the client always does; {@code -ssl default}: the builder's default, TLS; without {@code -ssl}: plain). A scenario that fails before its first line ends with an {@code error} line naming
 * the innermost cause (a refusal reads {@code [request-id=..., response-code=40100] reason}).
 * Scenarios separated by {@code --} run at once, each on its own thread, each line saying its
 * {@code scenario} (index).
 * FILE has one message a line, its fields tab-separated {@code name=value}: {@code body}, {@code tag},
 * {@code keys} (comma-separated), {@code group} (message group), {@code delayMs} (delivery after),
 * {@code txn} ({@code commit} or {@code rollback}: sent in a transaction ended so; {@code open}: left
 * open, for the server's check-back, which the checker answers COMMIT), {@code prop.NAME}. With
 * {@code -linger} the producer stays up that long after its sends (to answer check-backs).
 *
 * <p>{@code simple}: a SimpleConsumer receives (up to {@code -batch} a call, invisible 15 s) until it has acked
 * {@code -count} distinct bodies; the first delivery of the {@code -renew} body has its invisible duration
 * changed to 1 s instead of an ack, so it comes back. {@code push}: a PushConsumer answers SUCCESS, or
 * FAILURE for the {@code -fail} bodies, until it has seen {@code -count} distinct bodies and each failing one
 * {@code -attempts} times (its group's attempts), then keeps receiving {@code -linger} ms: the server moves a
 * message out of attempts to the DLQ when it comes back.
 */
public final class GrpcScenarios {
    private GrpcScenarios() {
    }

    public static void main(String[] argv) throws Exception {
        List<List<String>> scenarios = new ArrayList<>();
        scenarios.add(new ArrayList<>());
        for (String arg : argv) {
            if ("--".equals(arg)) {
                scenarios.add(new ArrayList<>());
            } else {
                scenarios.get(scenarios.size() - 1).add(arg);
            }
        }
        boolean ok;
        if (scenarios.size() == 1) {
            try {
                ok = run(scenarios.get(0));
            } catch (Exception e) {
                emit("event", "error", "error", innermost(e).toString());
                ok = false;
            }
        } else {
            List<Thread> threads = new ArrayList<>();
            boolean[] results = new boolean[scenarios.size()];
            for (int i = 0; i < scenarios.size(); i++) {
                final int index = i;
                Thread thread = new Thread(() -> {
                    SCENARIO.set(index);
                    try {
                        results[index] = run(scenarios.get(index));
                    } catch (Exception e) {
                        emit("event", "error", "error", innermost(e).toString());
                    }
                });
                thread.start();
                threads.add(thread);
            }
            for (Thread thread : threads) {
                thread.join();
            }
            ok = true;
            for (boolean result : results) {
                ok &= result;
            }
        }
        System.out.flush();
        // halted, not exited: a PushConsumer's close() would wait out its receive in flight
        Runtime.getRuntime().halt(ok ? 0 : 1);
    }

    /** The scenario each line comes from when several run at once ({@code a -- b}): its index. */
    private static final ThreadLocal<Integer> SCENARIO = new ThreadLocal<>();

    private static boolean run(List<String> argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.size(); i += 2) {
            args.put(argv.get(i).replaceFirst("^-", ""), argv.get(i + 1));
        }
        switch (argv.isEmpty() ? "" : argv.get(0)) {
            case "send":
                return send(args);
            case "simple":
                return simple(args);
            case "push":
                return push(args);
            default:
                System.err.println("usage: send|simple|push ARGS [-- send|simple|push ARGS]...");
                return false;
        }
    }

    private static boolean send(Map<String, String> args) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration configuration = configuration(args);
        String topic = args.get("t");
        List<Map<String, String>> spec = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args.get("spec")), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            Map<String, String> fields = new LinkedHashMap<>();
            for (String field : line.split("\t")) {
                String[] kv = field.split("=", 2);
                fields.put(kv[0], kv[1]);
            }
            spec.add(fields);
        }
        boolean allSent = true;
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(configuration)
            .setTopics(topic).setTransactionChecker(view -> {
                emit("event", "checked", "msgId", view.getMessageId().toString(),
                    "body", StandardCharsets.UTF_8.decode(view.getBody()).toString());
                return TransactionResolution.COMMIT;
            }).build()) {
            emit("event", "started");
            for (int i = 0; i < spec.size(); i++) {
                Map<String, String> fields = spec.get(i);
                Message message = message(provider, fields, topic);
                String txn = fields.get("txn");
                try {
                    long sentAt = System.currentTimeMillis();
                    SendReceipt receipt;
                    if (txn == null) {
                        receipt = producer.send(message);
                    } else {
                        Transaction transaction = producer.beginTransaction();
                        receipt = producer.send(message, transaction);
                        if ("commit".equals(txn)) {
                            transaction.commit();
                        } else if ("rollback".equals(txn)) {
                            transaction.rollback();
                        }
                    }
                    emit("event", "sent", "index", i, "sentAt", sentAt, "msgId", receipt.getMessageId().toString());
                } catch (Exception e) {
                    allSent = false;
                    emit("event", "send_error", "index", i, "error", innermost(e).toString());
                }
            }
            if (args.containsKey("linger")) {
                Thread.sleep(Long.parseLong(args.get("linger")));
            }
        }
        return allSent;
    }

    private static ClientConfiguration configuration(Map<String, String> args) {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(args.get("endpoint"))
            .setRequestTimeout(Duration.ofSeconds(5));
        String ssl = args.getOrDefault("ssl", "false");
        if (!"default".equals(ssl)) {
            builder.enableSsl(Boolean.parseBoolean(ssl));
        }
        if (args.containsKey("ak")) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(args.get("ak"), args.get("sk")));
        }
        return builder.build();
    }

    private static Throwable innermost(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    private static void received(String event, MessageView view) {
        emit("event", event, "body", StandardCharsets.UTF_8.decode(view.getBody()).toString(),
            "msgId", view.getMessageId().toString(), "topic", view.getTopic(), "tag", view.getTag().orElse(""),
            "messageGroup", view.getMessageGroup().orElse(""), "attempt", view.getDeliveryAttempt(),
            "at", System.currentTimeMillis());
    }

    private static boolean simple(Map<String, String> args) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = args.get("t");
        int count = Integer.parseInt(args.get("count"));
        int batch = Integer.parseInt(args.getOrDefault("batch", "16"));
        String renew = args.get("renew");
        long deadline = System.currentTimeMillis() + Long.parseLong(args.getOrDefault("timeout", "30000"));
        FilterExpression expression = new FilterExpression(args.getOrDefault("expr", "*"), FilterExpressionType.TAG);
        Set<String> acked = new HashSet<>();
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration(args))
            .setConsumerGroup(args.get("g"))
            .setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, expression))
            .build()) {
            emit("event", "started");
            while (acked.size() < count && System.currentTimeMillis() < deadline) {
                List<MessageView> views;
                try {
                    views = consumer.receive(batch, Duration.ofSeconds(15));
                } catch (Exception e) {
                    emit("event", "receive_error", "error", e.toString());
                    continue;
                }
                for (MessageView view : views) {
                    received("received", view);
                    String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
                    if (body.equals(renew) && view.getDeliveryAttempt() == 1) {
                        consumer.changeInvisibleDuration(view, Duration.ofSeconds(1));
                        emit("event", "renewed", "body", body);
                    } else {
                        consumer.ack(view);
                        acked.add(body);
                    }
                }
            }
        }
        return acked.size() >= count;
    }

    private static boolean push(Map<String, String> args) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        String topic = args.get("t");
        int count = Integer.parseInt(args.get("count"));
        int attempts = Integer.parseInt(args.getOrDefault("attempts", "1"));
        Set<String> fail = new HashSet<>(Arrays.asList(args.getOrDefault("fail", "").split(",")));
        fail.remove("");
        long timeout = Long.parseLong(args.getOrDefault("timeout", "30000"));
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        CountDownLatch done = new CountDownLatch(1);
        Integer scenario = SCENARIO.get();
        // not closed: close() waits out the receive in flight (the server's long-polling time); the JVM halts
        PushConsumer consumer = provider.newPushConsumerBuilder()
            .setClientConfiguration(configuration(args))
            .setConsumerGroup(args.get("g"))
            .setSubscriptionExpressions(Collections.singletonMap(topic, FilterExpression.SUB_ALL))
            .setMessageListener(view -> {
                SCENARIO.set(scenario);  // the client's own threads run the listener
                received("consumed", view);
                String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
                seen.merge(body, 1, Integer::sum);
                boolean finished = seen.size() >= count && fail.stream().allMatch(b -> seen.getOrDefault(b, 0) >= attempts);
                if (finished) {
                    done.countDown();
                }
                return fail.contains(body) ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
            })
            .build();
        emit("event", "started");
        boolean ok = done.await(timeout, TimeUnit.MILLISECONDS);
        Thread.sleep(Long.parseLong(args.getOrDefault("linger", "500")));  // receiving on, as a live client does
        return ok;
    }

    private static Message message(ClientServiceProvider provider, Map<String, String> fields, String topic) {
        MessageBuilder builder = provider.newMessageBuilder()
            .setTopic(topic)
            .setBody(fields.getOrDefault("body", "grpc").getBytes(StandardCharsets.UTF_8));
        for (Map.Entry<String, String> field : fields.entrySet()) {
            String value = field.getValue();
            switch (field.getKey()) {
                case "tag":
                    builder.setTag(value);
                    break;
                case "keys":
                    builder.setKeys(value.split(","));
                    break;
                case "group":
                    builder.setMessageGroup(value);
                    break;
                case "delayMs":
                    builder.setDeliveryTimestamp(System.currentTimeMillis() + Long.parseLong(value));
                    break;
                default:
                    if (field.getKey().startsWith("prop.")) {
                        builder.addProperty(field.getKey().substring("prop.".length()), value);
                    }
            }
        }
        return builder.build();
    }

    static synchronized void emit(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (SCENARIO.get() != null) {
            m.put("scenario", SCENARIO.get());
        }
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> e : m.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append(quote(e.getKey())).append(':');
            Object v = e.getValue();
            out.append(v instanceof Number ? v.toString() : quote(String.valueOf(v)));
        }
        System.out.println(out.append('}'));
        System.out.flush();
    }

    private static String quote(String s) {
        StringBuilder q = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                q.append('\\').append(c);
            } else if (c < 0x20) {
                q.append(String.format("\\u%04x", (int) c));
            } else {
                q.append(c);
            }
        }
        return q.append('"').toString();
    }
}
