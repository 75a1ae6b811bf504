// In kafka-clients' own package, as its SenderTest is: Sender.runOnce() is package-private.
package org.apache.kafka.clients.producer.internals;

import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientRequest;
import org.apache.kafka.clients.MockClient;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.internals.ClusterResourceListeners;
import org.apache.kafka.common.message.InitProducerIdResponseData;
import org.apache.kafka.common.message.ProduceResponseData;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.InitProducerIdRequest;
import org.apache.kafka.common.requests.InitProducerIdResponse;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.requests.ProduceResponse;
import org.apache.kafka.common.requests.RequestTestUtils;
import org.apache.kafka.common.utils.MockTime;

/**
 * Deterministic check of the order in which an idempotent producer's Sender runs the
 * callbacks of two batches of one partition, when the first batch's produce request is
 * answered REQUEST_TIMED_OUT (the broker appended it but gave up waiting for acks=all)
 * and the second, later, batch is answered NONE before the first batch's retry is answered.
 *
 * The real Sender, RecordAccumulator, TransactionManager and ProducerBatch of the
 * kafka-clients jar on the class path run the whole time; only the network (MockClient)
 * and the clock (MockTime) are kafka-clients' own test fixtures. The callbacks are given
 * to RecordAccumulator.append, where KafkaProducer.send puts the user's callback.
 *
 * Exit status: 1 when the later batch's callback runs before the earlier one's (the
 * KafkaProducer.send javadoc promises per-partition callback order), 0 when they run in
 * order, 2 when the check could not run (including a failed control case).
 */
public final class SenderCallbackOrder {

    private static final String TOPIC = "t";
    private static final TopicPartition TP = new TopicPartition(TOPIC, 0);
    private static final int REQUEST_TIMEOUT_MS = 5000;
    private static final long RETRY_BACKOFF_MS = 100;
    private static final int DELIVERY_TIMEOUT_MS = 15000;
    private static final long PRODUCER_ID = 4242L;

    /** One scenario's world: a fresh clock, network, accumulator, transaction manager and sender. */
    private static final class World {
        final MockTime time = new MockTime();
        final Object logContext = Compat.logContext("[repro] ");
        final ProducerMetadata metadata = Compat.construct(ProducerMetadata.class,
                new Object[] {0L, 0L, Long.MAX_VALUE, Long.MAX_VALUE, logContext, new ClusterResourceListeners(), time},
                new Object[] {0L, 0L, Long.MAX_VALUE, Long.MAX_VALUE, logContext, new ClusterResourceListeners()});
        final MockClient client = new MockClient(time, metadata);
        final Metrics metrics = new Metrics(time);
        final TransactionManager txn;
        final RecordAccumulator accumulator;
        final Sender sender;
        final List<String> callbackOrder = new ArrayList<>();

        World() {
            ApiVersions apiVersions = new ApiVersions();
            // transactionalId null: the idempotent (not transactional) producer, as in the evidence
            txn = Compat.construct(TransactionManager.class,
                    new Object[] {logContext, null, 0, RETRY_BACKOFF_MS, apiVersions, false},
                    new Object[] {logContext, null, 0, RETRY_BACKOFF_MS, apiVersions, metadata, false},
                    new Object[] {logContext, null, 0, RETRY_BACKOFF_MS, apiVersions});
            BufferPool pool = new BufferPool(1024 * 1024, 16384, metrics, time, "producer-metrics");
            accumulator = Compat.construct(RecordAccumulator.class,
                    new Object[] {logContext, 16384, Compression.NONE, 0, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS,
                        DELIVERY_TIMEOUT_MS, metrics, "producer-metrics", time, txn, pool},
                    new Object[] {logContext, 16384, Compression.NONE, 0, RETRY_BACKOFF_MS, RETRY_BACKOFF_MS,
                        DELIVERY_TIMEOUT_MS, metrics, "producer-metrics", time, apiVersions, txn, pool});
            // guaranteeMessageOrder=false is what KafkaProducer passes when max.in.flight > 1 (5 here);
            // acks=-1 (all); retries=Integer.MAX_VALUE (the default with idempotence)
            SenderMetricsRegistry registry = new SenderMetricsRegistry(metrics);
            sender = Compat.construct(Sender.class,
                    new Object[] {logContext, client, metadata, accumulator, false, 1024 * 1024, (short) -1,
                        Integer.MAX_VALUE, registry, time, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MS, txn},
                    new Object[] {logContext, client, metadata, accumulator, false, 1024 * 1024, (short) -1,
                        Integer.MAX_VALUE, registry, time, REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MS, txn, apiVersions});
            metadata.add(TOPIC, time.milliseconds());
            client.updateMetadata(RequestTestUtils.metadataUpdateWith(1, Map.of(TOPIC, 1)));
        }

        void initProducerId() {
            InitProducerIdResponseData data = new InitProducerIdResponseData()
                    .setErrorCode(Errors.NONE.code()).setProducerId(PRODUCER_ID).setProducerEpoch((short) 0);
            client.prepareResponse(body -> body instanceof InitProducerIdRequest, new InitProducerIdResponse(data));
            for (int i = 0; i < 10 && !txn.hasProducerId(); i++)
                sender.runOnce();
            if (!txn.hasProducerId())
                throw new IllegalStateException("the idempotent producer got no producer id");
        }

        /** Appends one record as its own batch; its callback records "name@offset". */
        void append(String name) throws InterruptedException {
            RecordAccumulator.AppendCallbacks cb = new RecordAccumulator.AppendCallbacks() {
                @Override public void setPartition(int partition) { }
                @Override public void onCompletion(RecordMetadata md, Exception e) {
                    String what = e == null ? name + "@" + md.offset() : name + "!" + e.getClass().getSimpleName();
                    callbackOrder.add(what);
                    System.out.println("    callback ran: " + what);
                }
            };
            accumulator.append(TOPIC, 0, time.milliseconds(), ("k-" + name).getBytes(), ("v-" + name).getBytes(),
                    null, cb, 1000, time.milliseconds(), metadata.fetch());
        }

        /** Runs the sender once and returns the produce request it put in flight, or fails. */
        ClientRequest sendOne(String what) {
            int before = client.inFlightRequestCount();
            sender.runOnce();
            if (client.inFlightRequestCount() != before + 1)
                throw new IllegalStateException("expected one new produce request for " + what
                        + ", in flight before " + before + " after " + client.inFlightRequestCount());
            ClientRequest req = null;
            for (ClientRequest r : client.requests()) req = r;  // the newest
            if (!(req.requestBuilder().apiKey().equals(org.apache.kafka.common.protocol.ApiKeys.PRODUCE)))
                throw new IllegalStateException("newest request is not a produce request: " + req);
            System.out.printf("  send: %s -> produce request correlation id %d%n", what, req.correlationId());
            return req;
        }

        void answer(ClientRequest req, Errors error, long baseOffset, String note) {
            ProduceResponseData.PartitionProduceResponse p = new ProduceResponseData.PartitionProduceResponse()
                    .setIndex(0).setErrorCode(error.code()).setBaseOffset(baseOffset)
                    .setLogAppendTimeMs(-1L).setLogStartOffset(0);
            ProduceResponseData.TopicProduceResponse t = new ProduceResponseData.TopicProduceResponse().setName(TOPIC);
            t.partitionResponses().add(p);
            ProduceResponseData data = new ProduceResponseData();
            data.responses().add(t);
            System.out.printf("  broker answers correlation id %d: %s%s (%s)%n", req.correlationId(), error,
                    error == Errors.NONE ? " base offset " + baseOffset : "", note);
            client.respondToRequest(req, new ProduceResponse(data));
            sender.runOnce();
        }
    }

    /**
     * The few constructors whose signatures changed between 4.3 and 4.4 (LogContext moved to
     * org.apache.kafka.common.utils.internals; ProducerMetadata lost its Time argument;
     * TransactionManager gained a Metadata argument; 4.0's TransactionManager has no 2PC flag and its
     * RecordAccumulator and Sender take ApiVersions). The first argument list that fits a
     * public constructor of the class on the class path is used.
     */
    static final class Compat {
        static Object logContext(String prefix) {
            for (String name : new String[] {"org.apache.kafka.common.utils.internals.LogContext",
                                             "org.apache.kafka.common.utils.LogContext"}) {
                try {
                    return Class.forName(name).getConstructor(String.class).newInstance(prefix);
                } catch (ClassNotFoundException e) {
                    // try the other package
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException(e);
                }
            }
            throw new IllegalStateException("no LogContext class in this kafka-clients");
        }

        static <T> T construct(Class<T> cls, Object[]... candidates) {
            for (Object[] args : candidates) {
                for (Constructor<?> c : cls.getConstructors()) {
                    if (fits(c.getParameterTypes(), args)) {
                        try {
                            return cls.cast(c.newInstance(args));
                        } catch (ReflectiveOperationException e) {
                            throw new IllegalStateException("constructing " + cls.getSimpleName(), e);
                        }
                    }
                }
            }
            throw new IllegalStateException("no constructor of " + cls.getName() + " takes any of "
                    + Arrays.deepToString(candidates));
        }

        private static boolean fits(Class<?>[] types, Object[] args) {
            if (types.length != args.length) return false;
            for (int i = 0; i < types.length; i++) {
                Class<?> t = types[i];
                Object a = args[i];
                if (a == null) {
                    if (t.isPrimitive()) return false;
                } else if (t.isPrimitive()) {
                    Class<?> boxed = t == int.class ? Integer.class : t == long.class ? Long.class
                            : t == short.class ? Short.class : t == boolean.class ? Boolean.class : null;
                    if (boxed != a.getClass()) return false;
                } else if (!t.isInstance(a)) {
                    return false;
                }
            }
            return true;
        }
    }

    /** Control: both batches answered NONE in send order. Callbacks must come B1, B2. */
    static List<String> control() throws Exception {
        World w = new World();
        w.initProducerId();
        w.append("B1");
        ClientRequest r1 = w.sendOne("batch B1 (sequence 0)");
        w.append("B2");
        ClientRequest r2 = w.sendOne("batch B2 (sequence 1)");
        w.answer(r1, Errors.NONE, 100, "appended and replicated");
        w.answer(r2, Errors.NONE, 101, "appended and replicated");
        return w.callbackOrder;
    }

    /**
     * The evidence's sequence: B1 answered REQUEST_TIMED_OUT (broker-side, no disconnect),
     * B1 re-queued and re-sent; then B2 answered NONE; then B1's retry answered with B1's
     * original offset (NONE, or DUPLICATE_SEQUENCE_NUMBER when the broker no longer holds
     * the batch's metadata).
     */
    static List<String> timedOutFirst(Errors retryAnswer) throws Exception {
        World w = new World();
        w.initProducerId();
        w.append("B1");
        ClientRequest r1 = w.sendOne("batch B1 (sequence 0)");
        w.append("B2");
        ClientRequest r2 = w.sendOne("batch B2 (sequence 1)");
        w.answer(r1, Errors.REQUEST_TIMED_OUT, -1,
                "B1 was appended at offset 100 but the ISR did not acknowledge it within the request timeout");
        System.out.printf("    B1 re-queued: accumulator holds %d batch(es) for %s; callbacks so far %s%n",
                w.accumulator.getDeque(TP).size(), TP, w.callbackOrder);
        w.time.sleep(RETRY_BACKOFF_MS + 1);
        ClientRequest r3 = w.sendOne("B1's retry (sequence 0 again)");
        w.answer(r2, Errors.NONE, 101, "the high watermark has now passed B2");
        w.answer(r3, retryAnswer, retryAnswer == Errors.NONE ? 100 : -1,
                "B1 is a duplicate of what the log already holds at offset 100");
        return w.callbackOrder;
    }

    /** The version of the kafka-clients jar that Sender was loaded from, and that jar's file name. */
    static String clientsVersion() {
        String jar = "?";
        try {
            String path = Sender.class.getProtectionDomain().getCodeSource().getLocation().getPath();
            jar = path.substring(path.lastIndexOf('/') + 1);
        } catch (RuntimeException e) {
            // leave "?"
        }
        java.util.Properties p = new java.util.Properties();
        try (java.io.InputStream in = Sender.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (java.io.IOException e) {
            // leave it unknown
        }
        return p.getProperty("version", "unknown") + " [" + jar + "]";
    }

    public static void main(String[] args) {
        String version = clientsVersion();
        System.out.println("kafka-clients " + version + " under test (its Sender, RecordAccumulator, TransactionManager,"
                + " ProducerBatch); MockClient and MockTime from the kafka-clients "
                + System.getProperty("kafka.test.version", "?") + " test jar");
        System.out.println("idempotent producer, acks=all, max.in.flight 5, retries MAX, request.timeout.ms "
                + REQUEST_TIMEOUT_MS + ", one partition, one record per batch");
        try {
            System.out.println();
            System.out.println("control: B1 and B2 both answered NONE, in send order");
            List<String> c = control();
            System.out.println("  callback order: " + c);
            if (!c.equals(List.of("B1@100", "B2@101"))) {
                System.out.println("RESULT: could not run: the control case did not call back B1@100 then B2@101");
                System.exit(2);
            }
            boolean anomaly = false;
            for (Errors retryAnswer : new Errors[] {Errors.NONE, Errors.DUPLICATE_SEQUENCE_NUMBER}) {
                System.out.println();
                System.out.println("scenario: B1 REQUEST_TIMED_OUT, then B2 NONE, then B1's retry " + retryAnswer);
                List<String> o = timedOutFirst(retryAnswer);
                System.out.println("  callback order: " + o);
                if (o.size() != 2 || o.stream().anyMatch(s -> s.contains("!"))) {
                    System.out.println("RESULT: could not run: expected two successful callbacks, got " + o);
                    System.exit(2);
                }
                boolean b2First = o.get(0).startsWith("B2") && o.get(1).startsWith("B1");
                if (b2First) {
                    anomaly = true;
                    System.out.println("  OUT OF ORDER: B2 (sent second, offset 101) was called back before B1 "
                            + "(sent first, " + (retryAnswer == Errors.NONE ? "offset 100" : "offset unknown to the client") + ")");
                } else {
                    System.out.println("  in order");
                }
            }
            System.out.println();
            if (anomaly) {
                System.out.println("RESULT: anomaly: kafka-clients " + version + " called back one partition's batches out of "
                        + "send/offset order; the KafkaProducer.send javadoc says \"Callbacks for records being sent to the "
                        + "same partition are guaranteed to execute in order.\"");
                System.exit(1);
            }
            System.out.println("RESULT: in order: kafka-clients " + version + " called back B1 before B2 in every scenario");
            System.exit(0);
        } catch (Throwable t) {
            System.out.println("RESULT: could not run: " + t);
            t.printStackTrace(System.out);
            System.exit(2);
        }
    }
}
