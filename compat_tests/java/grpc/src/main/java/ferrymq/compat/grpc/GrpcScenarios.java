package ferrymq.compat.grpc;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official gRPC client (rocketmq-client-java) as scenarios printing one JSON object a line.
 *
 * <pre>
 * send -endpoint host:port -t TOPIC -spec FILE [-linger MS]
 * </pre>
 * FILE has one message a line, its fields tab-separated {@code name=value}: {@code body}, {@code tag},
 * {@code keys} (comma-separated), {@code group} (message group), {@code delayMs} (delivery after),
 * {@code txn} ({@code commit} or {@code rollback}: sent in a transaction ended so; {@code open}: left
 * open, for the server's check-back, which the checker answers COMMIT), {@code prop.NAME}. With
 * {@code -linger} the producer stays up that long after its sends (to answer check-backs).
 */
public final class GrpcScenarios {
    private GrpcScenarios() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^-", ""), argv[i + 1]);
        }
        boolean ok;
        switch (argv.length > 0 ? argv[0] : "") {
            case "send":
                ok = send(args);
                break;
            default:
                System.err.println("usage: send -endpoint host:port -t TOPIC -spec FILE");
                ok = false;
        }
        System.exit(ok ? 0 : 1);
    }

    private static boolean send(Map<String, String> args) throws Exception {
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration configuration = ClientConfiguration.newBuilder()
            .setEndpoints(args.get("endpoint"))
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(5))
            .build();
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
                    emit("event", "send_error", "index", i, "error", e.toString());
                }
            }
            if (args.containsKey("linger")) {
                Thread.sleep(Long.parseLong(args.get("linger")));
            }
        }
        return allSent;
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
