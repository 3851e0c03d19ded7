package ferrymq.bench;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The measurements Apache's benchmark tools (rocketmq-example Producer/BatchProducer/Consumer) cannot make,
 * done with the official client so that both brokers see the same traffic:
 *
 * <ul>
 *   <li>{@code probe}: time of the first successful send (start-up and recovery time), then create topics;</li>
 *   <li>{@code async}: async send throughput with a bounded number of requests in flight (Apache's Producer
 *       {@code -y true} bounds only its executor queue, so on a small machine nearly every request times out
 *       or is shed as "broker busy");</li>
 *   <li>{@code sync}: sync send throughput with the percentiles of each send's round trip (Apache's Producer
 *       prints only the average and the maximum); with {@code --pause MS} each sender waits a random time after
 *       every answer, uniform from 0 to twice MS (so the senders do not move in step), for latency below
 *       saturation;</li>
 *   <li>{@code latency}: send-to-push-consumer-receipt percentiles at a fixed offered load (Apache's Consumer
 *       only prints averages and maxima);</li>
 *   <li>{@code fill}: write an exact backlog;</li>
 *   <li>{@code drain}: time to consume an exact backlog (Apache's Consumer never says when it is done).</li>
 * </ul>
 *
 * Each mode prints one line starting {@code RESULT } followed by a JSON object, which the Python harness parses.
 * Producer and consumer share one JVM in {@code latency}, so {@link System#nanoTime()} stamps are comparable.
 */
public final class LoadProbe {

    private LoadProbe() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            usage("missing mode");
        }
        Map<String, String> opts = parse(Arrays.copyOfRange(argv, 1, argv.length));
        switch (argv[0]) {
            case "probe":
                probe(opts);
                break;
            case "latency":
                latency(opts);
                break;
            case "async":
                async(opts);
                break;
            case "sync":
                sync(opts);
                break;
            case "fill":
                fill(opts);
                break;
            case "drain":
                drain(opts);
                break;
            default:
                usage("unknown mode " + argv[0]);
        }
        System.out.flush();
        System.exit(0);
    }

    private static void usage(String why) {
        System.err.println("LoadProbe: " + why + "; usage: LoadProbe probe|sync|async|latency|fill|drain --namesrv HOST:PORT --topic T ...");
        System.exit(64);
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                usage("options are --name value pairs, got " + args[i]);
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        return out;
    }

    private static String req(Map<String, String> o, String key) {
        String v = o.get(key);
        if (v == null) {
            usage("--" + key + " is required");
        }
        return v;
    }

    private static long num(Map<String, String> o, String key, long dflt) {
        String v = o.get(key);
        return v == null ? dflt : Long.parseLong(v);
    }

    private static void result(String json) {
        System.out.println("RESULT " + json);
        System.out.flush();
    }

    private static DefaultMQProducer producer(Map<String, String> o, String group, int timeoutMs) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(group);
        p.setNamesrvAddr(req(o, "namesrv"));
        p.setInstanceName(group + "_" + System.nanoTime());
        p.setSendMsgTimeout(timeoutMs);
        p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        p.setSendLatencyFaultEnable(false);
        p.start();
        return p;
    }

    private static byte[] body(int size) {
        byte[] b = new byte[Math.max(size, 16)];
        for (int i = 16; i < b.length; i++) {
            b[i] = (byte) ('a' + i % 26);
        }
        return b;
    }

    /** Send until one send succeeds; print its wall-clock time; then optionally create topics on the broker. */
    private static void probe(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long deadline = System.currentTimeMillis() + num(o, "timeout-ms", 60000);
        DefaultMQProducer p = producer(o, "bench_probe", 1000);
        p.setRetryTimesWhenSendFailed(0);
        System.out.println("READY");
        System.out.flush();
        String lastError = "no attempt";
        int attempts = 0;
        while (true) {
            attempts++;
            try {
                SendResult r = p.send(new Message(topic, "probe".getBytes()));
                result(String.format(Locale.ROOT, "{\"first_send_epoch_ms\": %d, \"attempts\": %d, \"status\": \"%s\"}",
                    System.currentTimeMillis(), attempts, r.getSendStatus()));
                break;
            } catch (Exception e) {
                lastError = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).split("\n")[0];
            }
            if (System.currentTimeMillis() > deadline) {
                System.out.println("PROBE_TIMEOUT after " + attempts + " attempts; last error: " + lastError);
                System.out.flush();
                System.exit(2);
            }
            Thread.sleep(10);
        }
        p.shutdown();
        String topics = o.get("create-topics");
        if (topics != null && !topics.isEmpty()) {
            createTopics(o, topics.split(","), (int) num(o, "queues", 8));
        }
    }

    private static void createTopics(Map<String, String> o, String[] topics, int queues) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
        admin.setNamesrvAddr(req(o, "namesrv"));
        admin.setInstanceName("bench_admin_" + System.nanoTime());
        admin.start();
        String broker = req(o, "broker-addr");
        for (String t : topics) {
            admin.createAndUpdateTopicConfig(broker, new TopicConfig(t, queues, queues, 6));
        }
        long deadline = System.currentTimeMillis() + 30000;
        for (String t : topics) {
            while (true) {
                try {
                    TopicRouteData route = admin.examineTopicRouteInfo(t);
                    if (route != null && !route.getQueueDatas().isEmpty()) {
                        break;
                    }
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw new IllegalStateException("topic " + t + " has no route 30 s after creation", e);
                    }
                }
                Thread.sleep(50);
            }
        }
        admin.shutdown();
        System.out.println("TOPICS_READY " + String.join(",", topics));
    }

    /** Async sends for --seconds with at most --inflight outstanding; the rate over the last --measure seconds. */
    private static void async(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long seconds = num(o, "seconds", 20);
        long measure = Math.min(num(o, "measure", 9), seconds);
        int inflight = (int) num(o, "inflight", 1024);
        byte[] b = body((int) num(o, "size", 1024));
        DefaultMQProducer p = producer(o, "bench_async_producer", 3000);
        Semaphore window = new Semaphore(inflight);
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        ConcurrentHashMap<String, Long> reasons = new ConcurrentHashMap<>();
        long t0 = System.nanoTime();
        long measureFrom = t0 + (seconds - measure) * 1_000_000_000L;
        long end = t0 + seconds * 1_000_000_000L;
        long[] okAtMeasureFrom = {-1};
        SendCallback cb = new SendCallback() {
            @Override
            public void onSuccess(SendResult r) {
                window.release();
                ok.incrementAndGet();
            }

            @Override
            public void onException(Throwable e) {
                window.release();
                failed.incrementAndGet();
                countReason(reasons, e);
            }
        };
        long now;
        while ((now = System.nanoTime()) < end) {
            if (okAtMeasureFrom[0] < 0 && now >= measureFrom) {
                okAtMeasureFrom[0] = ok.get();
            }
            if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                continue;
            }
            try {
                p.send(new Message(topic, b), cb, 3000);
            } catch (Exception e) {
                cb.onException(e);
            }
        }
        long okMeasured = ok.get() - Math.max(okAtMeasureFrom[0], 0);
        double secs = (System.nanoTime() - measureFrom) / 1e9;
        result(String.format(Locale.ROOT,
            "{\"tps\": %.1f, \"ok\": %d, \"failed\": %d, \"inflight\": %d, \"measured_s\": %.3f, \"failures\": \"%s\"}",
            okMeasured / secs, ok.get(), failed.get(), inflight, secs, topReasons(reasons)));
        p.shutdown();
    }

    /**
     * --threads senders, each sending the next message when the last one is answered, for --seconds; the rate and
     * the round-trip percentiles over the sends started in the last --measure seconds (the time before warms up
     * the JVM and the broker).
     */
    private static void sync(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long seconds = num(o, "seconds", 20);
        long measure = Math.min(num(o, "measure", 9), seconds);
        int threads = (int) num(o, "threads", 64);
        long pause = num(o, "pause", 0);
        byte[] b = body((int) num(o, "size", 1024));
        DefaultMQProducer p = producer(o, "bench_sync_producer", 3000);
        AtomicLong failed = new AtomicLong();
        ConcurrentHashMap<String, Long> reasons = new ConcurrentHashMap<>();
        long t0 = System.nanoTime();
        long measureFrom = t0 + (seconds - measure) * 1_000_000_000L;
        long end = t0 + seconds * 1_000_000_000L;
        long[][] samples = new long[threads][];
        int[] counts = new int[threads];
        Thread[] senders = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int me = t;
            senders[t] = new Thread(() -> {
                long[] mine = new long[1 << 14];
                int n = 0;
                long start;
                while ((start = System.nanoTime()) < end) {
                    try {
                        p.send(new Message(topic, b));
                        if (start >= measureFrom) {
                            if (n == mine.length) {
                                mine = Arrays.copyOf(mine, n * 2);
                            }
                            mine[n++] = System.nanoTime() - start;
                        }
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        countReason(reasons, e);
                    }
                    if (pause > 0) {
                        try {
                            Thread.sleep(ThreadLocalRandom.current().nextLong(2 * pause + 1));
                        } catch (InterruptedException e) {
                            break;
                        }
                    }
                }
                samples[me] = mine;
                counts[me] = n;
            }, "sender-" + t);
            senders[t].start();
        }
        for (Thread s : senders) {
            s.join();
        }
        int total = 0;
        for (int n : counts) {
            total += n;
        }
        long[] sorted = new long[total];
        int at = 0;
        for (int t = 0; t < threads; t++) {
            System.arraycopy(samples[t], 0, sorted, at, counts[t]);
            at += counts[t];
        }
        Arrays.sort(sorted);
        result(String.format(Locale.ROOT,
            "{\"tps\": %.1f, \"ok\": %d, \"failed\": %d, \"threads\": %d, \"measured_s\": %d, \"p50_ms\": %.3f, "
                + "\"p90_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f, \"failures\": \"%s\"}",
            total / (double) measure, total, failed.get(), threads, measure, pct(sorted, 0.50), pct(sorted, 0.90),
            pct(sorted, 0.99), pct(sorted, 0.999), total == 0 ? Double.NaN : sorted[total - 1] / 1e6, topReasons(reasons)));
        p.shutdown();
    }

    /** Offered load of --rate msg/s for --warmup + --seconds; percentiles over messages sent after warm-up. */
    private static void latency(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        int rate = (int) num(o, "rate", 1000);
        long seconds = num(o, "seconds", 10);
        long warmup = num(o, "warmup", 3);
        int size = (int) num(o, "size", 1024);
        int capacity = (int) (rate * seconds * 2 + 1000);
        long[] samples = new long[capacity];
        AtomicInteger received = new AtomicInteger();
        AtomicLong sendErrors = new AtomicLong();
        AtomicLong warmupLatestSent = new AtomicLong(Long.MIN_VALUE);
        ConcurrentHashMap<String, Long> reasons = new ConcurrentHashMap<>();
        long runId = new java.util.Random().nextLong() | 1L;

        DefaultMQPushConsumer c = new DefaultMQPushConsumer(req(o, "group"));
        c.setNamesrvAddr(req(o, "namesrv"));
        c.setInstanceName("bench_lat_" + System.nanoTime());
        c.setConsumeThreadMin((int) num(o, "threads", 20));
        c.setConsumeThreadMax((int) num(o, "threads", 20));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                ByteBuffer b = ByteBuffer.wrap(m.getBody());
                long sent = b.getLong();
                long tag = b.getLong();
                if (tag == runId) {  // sent after warm-up by this run (not an older run's leftovers)
                    int i = received.getAndIncrement();
                    if (i < samples.length) {
                        samples[i] = now - sent;
                    }
                } else if (tag == -runId) {
                    warmupLatestSent.accumulateAndGet(sent, Math::max);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = producer(o, "bench_latency_producer", 3000);

        byte[] template = body(size);
        long period = 1_000_000_000L / rate;
        long t0 = System.nanoTime();
        // Warm-up lasts --warmup seconds and until the consumer has caught up: it has received a warm-up message
        // of this run sent less than 200 ms ago (it may first need a rebalance to be given queues, then work
        // through what was sent meanwhile). Measuring starts only then.
        long warmupMin = t0 + warmup * 1_000_000_000L;
        long warmupMax = warmupMin + 60_000_000_000L;
        long measureFrom = Long.MAX_VALUE;
        long end = Long.MAX_VALUE;
        long measuredSent = 0;
        SendCallback cb = new SendCallback() {
            @Override
            public void onSuccess(SendResult r) {
            }

            @Override
            public void onException(Throwable e) {
                sendErrors.incrementAndGet();
                countReason(reasons, e);
            }
        };
        for (long i = 0; ; i++) {
            long due = t0 + i * period;
            if (due >= end) {
                break;
            }
            long wait = due - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
            }
            byte[] b = template.clone();
            long now = System.nanoTime();
            if (measureFrom == Long.MAX_VALUE && now >= warmupMin && warmupLatestSent.get() > now - 200_000_000L) {
                measureFrom = now;
                end = now + seconds * 1_000_000_000L;
            } else if (measureFrom == Long.MAX_VALUE && now >= warmupMax) {
                System.out.println("LATENCY_FAILED the consumer did not catch up with the warm-up messages within "
                    + (warmup + 60) + " s; send errors: " + sendErrors.get() + " " + topReasons(reasons));
                System.out.flush();
                System.exit(4);
            }
            boolean measured = now >= measureFrom;
            ByteBuffer.wrap(b).putLong(now).putLong(measured ? runId : -runId);
            if (measured) {
                measuredSent++;
            }
            p.send(new Message(topic, b), cb, 3000);
        }
        long waitUntil = System.nanoTime() + 15_000_000_000L;
        while (received.get() < measuredSent && System.nanoTime() < waitUntil) {
            Thread.sleep(20);
        }
        int n = Math.min(received.get(), samples.length);
        long[] sorted = Arrays.copyOf(samples, n);
        Arrays.sort(sorted);
        result(String.format(Locale.ROOT,
            "{\"rate\": %d, \"sent\": %d, \"received\": %d, \"send_errors\": %d, \"p50_ms\": %.3f, \"p90_ms\": %.3f, "
                + "\"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f, \"failures\": \"%s\"}",
            rate, measuredSent, n, sendErrors.get(), pct(sorted, 0.50), pct(sorted, 0.90), pct(sorted, 0.99), pct(sorted, 0.999),
            n == 0 ? Double.NaN : sorted[n - 1] / 1e6, topReasons(reasons)));
        p.shutdown();
        c.shutdown();
    }

    private static void countReason(ConcurrentHashMap<String, Long> reasons, Throwable e) {
        String why = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).split("\n")[0];
        reasons.merge(why.substring(0, Math.min(why.length(), 100)), 1L, Long::sum);
    }

    /** The three commonest failure texts, made safe to embed in a JSON string. */
    private static String topReasons(ConcurrentHashMap<String, Long> reasons) {
        StringBuilder top = new StringBuilder();
        reasons.entrySet().stream().sorted((x, y) -> Long.compare(y.getValue(), x.getValue())).limit(3).forEach(
            en -> top.append(top.length() == 0 ? "" : "; ").append(en.getValue()).append("x ").append(en.getKey()));
        return top.toString().replace("\\", "/").replace("\"", "'");
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return Double.NaN;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(i, sorted.length - 1))] / 1e6;
    }

    /** Write exactly --count messages of --size bytes with --threads senders, --batch messages per request. */
    private static void fill(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long count = num(o, "count", 100000);
        int threads = (int) num(o, "threads", 16);
        int batch = (int) num(o, "batch", 16);
        byte[] b = body((int) num(o, "size", 1024));
        DefaultMQProducer p = producer(o, "bench_fill", 10000);
        AtomicLong tickets = new AtomicLong();
        AtomicLong sent = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        String[] lastErrorText = {""};
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            pool.execute(() -> {
                while (true) {
                    long first = tickets.getAndAdd(batch);
                    if (first >= count) {
                        return;
                    }
                    int n = (int) Math.min(batch, count - first);
                    List<Message> msgs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        msgs.add(new Message(topic, b));
                    }
                    while (true) {
                        try {
                            if (n == 1) {
                                p.send(msgs.get(0));
                            } else {
                                p.send(msgs);
                            }
                            sent.addAndGet(n);
                            break;
                        } catch (Exception e) {
                            lastErrorText[0] = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).split("\n")[0];
                            if (errors.incrementAndGet() > 1000) {
                                return;
                            }
                            LockSupport.parkNanos(50_000_000L);
                        }
                    }
                }
            });
        }
        pool.shutdown();
        pool.awaitTermination(1, TimeUnit.DAYS);
        double secs = (System.nanoTime() - t0) / 1e9;
        p.shutdown();
        if (sent.get() < count) {
            System.out.println("FILL_FAILED sent " + sent.get() + " of " + count + "; last error: " + lastErrorText[0]);
            System.out.flush();
            System.exit(3);
        }
        result(String.format(Locale.ROOT, "{\"sent\": %d, \"errors\": %d, \"seconds\": %.3f, \"tps\": %.1f}",
            sent.get(), errors.get(), secs, sent.get() / secs));
    }

    /** Consume --count messages from the first offset; time from the first receipt to the last. */
    private static void drain(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        long count = num(o, "count", 100000);
        long timeoutMs = num(o, "timeout-ms", 600000);
        AtomicLong got = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(req(o, "group"));
        c.setNamesrvAddr(req(o, "namesrv"));
        c.setInstanceName("bench_drain_" + System.nanoTime());
        c.setConsumeThreadMin((int) num(o, "threads", 20));
        c.setConsumeThreadMax((int) num(o, "threads", 20));
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0L, now);
            if (got.addAndGet(msgs.size()) >= count && last.compareAndSet(0L, now)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long t0 = System.nanoTime();
        c.start();
        boolean finished = done.await(timeoutMs, TimeUnit.MILLISECONDS);
        long end = finished ? last.get() : System.nanoTime();
        double secs = (end - first.get()) / 1e9;
        result(String.format(Locale.ROOT,
            "{\"consumed\": %d, \"complete\": %s, \"seconds\": %.3f, \"tps\": %.1f, \"start_to_first_ms\": %.1f}",
            got.get(), finished, secs, got.get() / secs, first.get() == 0 ? Double.NaN : (first.get() - t0) / 1e6));
        c.shutdown();
    }
}
