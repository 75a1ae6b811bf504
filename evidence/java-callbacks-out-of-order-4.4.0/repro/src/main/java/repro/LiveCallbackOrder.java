package repro;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A plain KafkaProducer against a real cluster: does it call back one partition's records in
 * order when the first of two in-flight batches times out on the broker (acks=all, a follower
 * still in the ISR is frozen with SIGSTOP) and the second is acknowledged once the follower
 * resumes?
 *
 * One attempt:
 *   1. wait until the test partition's ISR is full again;
 *   2. SIGSTOP one follower of the partition (it stays in the ISR: it is resumed well inside
 *      replica.lag.time.max.ms and broker.session.timeout.ms);
 *   3. send record A (batch B1); the leader appends it and waits for the frozen follower;
 *   4. GAP ms later send record B (batch B2), a second produce request in flight behind B1's;
 *   5. request.timeout.ms after A, the leader answers B1 REQUEST_TIMED_OUT and the producer
 *      re-queues B1; the leader now reads B2's request, appends B2 and waits;
 *   6. RESUME ms after A (between the two timeouts), SIGCONT the follower: the high watermark
 *      passes B2 while B2's request is still waiting, and B2 is acknowledged;
 *   7. B1's retry is a duplicate of what the log holds and is acknowledged at B1's offset.
 * The callbacks themselves check order: each records its partition's last called-back offset
 * and flags a callback whose offset is lower, on the producer's I/O thread, before anything
 * else sees it.
 *
 * Output: one line per attempt, a summary line "attempts N out-of-order K". Exit 1 when any
 * attempt saw callbacks out of order, 0 when none did, 2 when it could not run.
 */
public final class LiveCallbackOrder {

    static final class Args {
        String bootstrap;
        String topic = "callback-order";
        int attempts = 20;
        int requestTimeoutMs = 2000;
        int gapMs = 1000;
        int resumeAfterMs = -1;          // default requestTimeoutMs + gapMs / 2
        int resumeMaxMs = -1;            // with --resume-uniform LO,HI: drawn uniformly per attempt
        long seed = 1;
        int lingerMs = 0;
        int maxInFlight = 5;
        final Map<Integer, Path> pidFiles = new HashMap<>();
    }

    static Args parse(String[] argv) {
        Args a = new Args();
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            String v = i + 1 < argv.length ? argv[i + 1] : null;
            switch (k) {
                case "--bootstrap": a.bootstrap = v; i++; break;
                case "--topic": a.topic = v; i++; break;
                case "--attempts": a.attempts = Integer.parseInt(v); i++; break;
                case "--request-timeout-ms": a.requestTimeoutMs = Integer.parseInt(v); i++; break;
                case "--gap-ms": a.gapMs = Integer.parseInt(v); i++; break;
                case "--resume-after-ms": a.resumeAfterMs = Integer.parseInt(v); i++; break;
                case "--resume-uniform": {
                    String[] lh = v.split(",", 2);
                    a.resumeAfterMs = Integer.parseInt(lh[0]);
                    a.resumeMaxMs = Integer.parseInt(lh[1]);
                    i++;
                    break;
                }
                case "--seed": a.seed = Long.parseLong(v); i++; break;
                case "--max-in-flight": a.maxInFlight = Integer.parseInt(v); i++; break;
                case "--linger-ms": a.lingerMs = Integer.parseInt(v); i++; break;
                case "--broker-pid-file": {   // ID=PATH, one per broker that may be frozen
                    String[] kv = v.split("=", 2);
                    a.pidFiles.put(Integer.parseInt(kv[0]), Path.of(kv[1]));
                    i++;
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + k);
            }
        }
        if (a.bootstrap == null || a.pidFiles.isEmpty())
            throw new IllegalArgumentException("need --bootstrap HOST:PORT and --broker-pid-file ID=PATH (one per broker)");
        if (a.resumeAfterMs < 0) a.resumeAfterMs = a.requestTimeoutMs + a.gapMs / 2;
        return a;
    }

    /**
     * A broker process, found through its pid file. Signals are only sent when the pid's command
     * line names Kafka's main class and the node directory the pid file lives in (the pid file is
     * NODE_DIR/run/kafka.pid), so a stale pid file cannot make us stop some other process.
     */
    static final class Broker {
        final int id;
        final long pid;
        volatile boolean stopped;

        Broker(int id, Path pidFile) throws Exception {
            this.id = id;
            this.pid = Long.parseLong(Files.readString(pidFile).trim());
            String cmdline = new String(Files.readAllBytes(Path.of("/proc/" + pid + "/cmdline")), StandardCharsets.UTF_8)
                    .replace('\0', ' ');
            Path nodeDir = pidFile.toAbsolutePath().getParent().getParent();
            if (!cmdline.contains("kafka.Kafka") || !cmdline.contains(nodeDir.toString()))
                throw new IllegalStateException("pid " + pid + " from " + pidFile + " is not the Kafka broker of " + nodeDir);
        }

        void signal(String sig) throws Exception {
            Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start();
            if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0)
                throw new IllegalStateException("kill -" + sig + " " + pid + " failed");
            stopped = sig.equals("STOP");
        }
    }

    /** What the callbacks saw; the order check itself runs inside onCompletion. */
    static final class Seen {
        final Map<Integer, Long> lastOffset = new ConcurrentHashMap<>();
        final List<String> order = java.util.Collections.synchronizedList(new ArrayList<>());
        final List<String> violations = java.util.Collections.synchronizedList(new ArrayList<>());
    }

    static String clientsVersion() {
        Properties p = new Properties();
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (java.io.IOException e) {
            // unknown
        }
        return p.getProperty("version", "unknown");
    }

    /** The jar the producer's classes were loaded from: the released one, or a patched one (CLIENT_JAR). */
    static String clientsJar() {
        String path = KafkaProducer.class.getProtectionDomain().getCodeSource().getLocation().getPath();
        return path.substring(path.lastIndexOf('/') + 1);
    }

    static TopicPartitionInfo describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS).get(topic);
        return d.partitions().get(0);
    }

    public static void main(String[] argv) {
        Args a;
        try {
            a = parse(argv);
        } catch (RuntimeException e) {
            System.out.println("could not run: " + e.getMessage());
            System.exit(2);
            return;
        }
        Map<Integer, Broker> brokers = new HashMap<>();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (Broker b : brokers.values()) {
                if (b.stopped) {
                    try { b.signal("CONT"); } catch (Exception e) { System.out.println("SIGCONT failed: " + e); }
                }
            }
        }));
        int outOfOrder = 0;
        int done = 0;
        try {
            for (Map.Entry<Integer, Path> e : a.pidFiles.entrySet())
                brokers.put(e.getKey(), new Broker(e.getKey(), e.getValue()));

            Properties ac = new Properties();
            ac.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.bootstrap);
            try (Admin admin = Admin.create(ac)) {
                Set<String> names = admin.listTopics().names().get(30, TimeUnit.SECONDS);
                if (!names.contains(a.topic)) {
                    NewTopic nt = new NewTopic(a.topic, 1, (short) 3)
                            .configs(Map.of("min.insync.replicas", "2", "unclean.leader.election.enable", "false"));
                    admin.createTopics(List.of(nt)).all().get(30, TimeUnit.SECONDS);
                }
                String controller = "?";
                try {
                    controller = Integer.toString(admin.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS).leaderId());
                } catch (Exception ignored) {
                    // informational only
                }

                Properties pc = new Properties();
                pc.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.bootstrap);
                pc.put(ProducerConfig.ACKS_CONFIG, "all");
                pc.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
                pc.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, Integer.toString(a.maxInFlight));
                pc.put(ProducerConfig.LINGER_MS_CONFIG, Integer.toString(a.lingerMs));
                pc.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Integer.toString(a.requestTimeoutMs));
                pc.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
                pc.put(ProducerConfig.CLIENT_ID_CONFIG, "callback-order");
                pc.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                pc.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

                System.out.printf("kafka-clients %s [%s]; topic %s (1 partition, RF 3, min.insync.replicas 2); acks=all, "
                                + "idempotence on, max.in.flight %d, linger.ms %d, request.timeout.ms %d; gap %d ms; "
                                + "follower resumed %s ms after the first send; active controller %s%n",
                        clientsVersion(), clientsJar(), a.topic, a.maxInFlight, a.lingerMs, a.requestTimeoutMs, a.gapMs,
                        a.resumeMaxMs < 0 ? Integer.toString(a.resumeAfterMs)
                                : "uniformly " + a.resumeAfterMs + "-" + a.resumeMaxMs + " (seed " + a.seed + ")",
                        controller);

                Seen seen = new Seen();
                java.util.Random rnd = new java.util.Random(a.seed);
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(pc)) {
                    // warm up: metadata, producer id, connections
                    producer.send(new ProducerRecord<>(a.topic, 0, "warm", "warm")).get(30, TimeUnit.SECONDS);

                    for (int i = 1; i <= a.attempts; i++) {
                        // 1. the ISR must be full, so the frozen follower is one the leader waits for
                        TopicPartitionInfo p = null;
                        long until = System.currentTimeMillis() + 60_000;
                        while (System.currentTimeMillis() < until) {
                            p = describe(admin, a.topic);
                            if (p.leader() != null && p.isr().size() == 3) break;
                            Thread.sleep(200);
                        }
                        if (p == null || p.leader() == null || p.isr().size() != 3) {
                            System.out.println("attempt " + i + ": ISR not full after 60 s: " + p);
                            break;
                        }
                        int leader = p.leader().id();
                        Broker follower = null;
                        for (Node n : p.isr()) {   // a follower, preferably not the active controller
                            if (n.id() == leader || !brokers.containsKey(n.id())) continue;
                            if (follower == null || Integer.toString(follower.id).equals(controller))
                                follower = brokers.get(n.id());
                        }
                        if (follower == null) {
                            System.out.println("attempt " + i + ": no pid file for a follower of leader " + leader);
                            break;
                        }

                        final String tagA = "first#" + i;
                        final String tagB = "second#" + i;
                        CountDownLatch both = new CountDownLatch(2);
                        List<String> attemptOrder = java.util.Collections.synchronizedList(new ArrayList<>());

                        int resumeAt = a.resumeMaxMs < 0 ? a.resumeAfterMs
                                : a.resumeAfterMs + rnd.nextInt(a.resumeMaxMs - a.resumeAfterMs + 1);
                        // 2. freeze the follower, then give its in-flight fetch a moment to settle
                        follower.signal("STOP");
                        long t0;
                        try {
                            Thread.sleep(300);
                            t0 = System.currentTimeMillis();
                            // 3./4. two records to the same partition, in separate batches and requests
                            for (String tag : new String[] {tagA, tagB}) {
                                if (tag.equals(tagB)) Thread.sleep(a.gapMs);
                                long sentAt = System.currentTimeMillis() - t0;
                                producer.send(new ProducerRecord<>(a.topic, 0, tag, tag), (md, ex) -> {
                                    long at = System.currentTimeMillis() - t0;
                                    if (ex != null) {
                                        attemptOrder.add(tag + "!" + ex.getClass().getSimpleName());
                                    } else {
                                        // the order check, on the producer's I/O thread
                                        Long prev = seen.lastOffset.get(md.partition());
                                        if (prev != null && md.offset() < prev) {
                                            String v = String.format("callback out of order on partition %d: offset %d (%s) "
                                                    + "called back after offset %d", md.partition(), md.offset(), tag, prev);
                                            seen.violations.add(v);
                                            System.out.println("  " + v);
                                        }
                                        seen.lastOffset.merge(md.partition(), md.offset(), Math::max);
                                        attemptOrder.add(tag + "@" + md.offset() + "(+" + at + "ms)");
                                    }
                                    both.countDown();
                                });
                                System.out.printf("  attempt %d: sent %s at +%d ms%n", i, tag, sentAt);
                            }
                            // 6. resume the follower between the two broker-side timeouts
                            long wait = t0 + resumeAt - System.currentTimeMillis();
                            if (wait > 0) Thread.sleep(wait);
                        } finally {
                            follower.signal("CONT");
                        }
                        long resumedAt = System.currentTimeMillis() - t0;
                        boolean finished = both.await(90, TimeUnit.SECONDS);
                        List<String> o = new ArrayList<>(attemptOrder);
                        boolean bad = o.size() == 2 && o.get(0).startsWith(tagB + "@") && o.get(1).startsWith(tagA + "@");
                        if (bad) outOfOrder++;
                        done++;
                        System.out.printf("attempt %d: leader %d, froze follower %d, resume planned +%d ms, done +%d ms; callbacks %s%s -> %s%n",
                                i, leader, follower.id, resumeAt, resumedAt, o, finished ? "" : " (timed out waiting)",
                                bad ? "OUT OF ORDER" : (o.size() == 2 ? "in order" : "incomplete"));
                        Thread.sleep(500);
                    }
                }
                System.out.printf("attempts %d out-of-order %d (in-callback order violations: %d)%n",
                        done, outOfOrder, seen.violations.size());
            }
        } catch (Exception e) {
            System.out.println("could not run: " + e);
            e.printStackTrace(System.out);
            System.exit(done == 0 ? 2 : (outOfOrder > 0 ? 1 : 2));
        }
        System.exit(done == 0 ? 2 : (outOfOrder > 0 ? 1 : 0));
    }
}
