package ferrymq.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.utility.DockerImageName;

/**
 * FerryMQ's image as a testcontainers-java {@code GenericContainer}, configured as docs/testing.md shows
 * (host-network variant), then one message sent and pulled back with the official client through it.
 *
 * <p>Usage: {@code ContainerCheck IMAGE NAMESRV_PORT BROKER_PORT TOPIC}. Prints one JSON line
 * {@code {"event":"roundtrip",...}} and exits 0, or exits 1 with the reason on stderr.
 */
public final class ContainerCheck {

    public static void main(String[] argv) throws Exception {
        String image = argv[0];
        int namesrvPort = Integer.parseInt(argv[1]);
        int brokerPort = Integer.parseInt(argv[2]);
        String topic = argv[3];

        try (GenericContainer<?> ferrymq = new GenericContainer<>(DockerImageName.parse(image))
                .withNetworkMode("host")
                .withEnv("FERRYMQ_namesrvListenPort", String.valueOf(namesrvPort))
                .withEnv("FERRYMQ_listenPort", String.valueOf(brokerPort))
                .withEnv("FERRYMQ_brokerIP1", "127.0.0.1")
                .withEnv("FERRYMQ_mappedFileSizeCommitLog", String.valueOf(64 * 1024 * 1024))
                .waitingFor(Wait.forLogMessage(".*broker registered: .* at 127\\.0\\.0\\.1:" + brokerPort + " .*", 1)
                        .withStartupTimeout(Duration.ofSeconds(60)))) {
            ferrymq.start();
            String namesrvAddr = ferrymq.getHost() + ":" + namesrvPort;

            DefaultMQProducer producer = new DefaultMQProducer("tc_java_producer");
            producer.setNamesrvAddr(namesrvAddr);
            producer.start();
            SendResult sent;
            try {
                sent = producer.send(new Message(topic, "from testcontainers-java".getBytes(StandardCharsets.UTF_8)));
            } finally {
                producer.shutdown();
            }

            DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("tc_java_consumer");
            consumer.setNamesrvAddr(namesrvAddr);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "*");
            consumer.start();
            String body = null;
            try {
                long deadline = System.currentTimeMillis() + 30_000;
                while (body == null && System.currentTimeMillis() < deadline) {
                    List<MessageExt> got = consumer.poll(1000);
                    if (!got.isEmpty()) {
                        body = new String(got.get(0).getBody(), StandardCharsets.UTF_8);
                    }
                }
            } finally {
                consumer.shutdown();
            }
            if (body == null) {
                System.err.println("the message sent through the container was not pulled back within 30 s");
                System.exit(1);
            }
            System.out.printf("{\"event\":\"roundtrip\",\"namesrv\":\"%s\",\"status\":\"%s\",\"brokerName\":\"%s\",\"body\":\"%s\"}%n",
                    namesrvAddr, sent.getSendStatus(), sent.getMessageQueue().getBrokerName(), body);
        }
        System.exit(0);
    }
}
