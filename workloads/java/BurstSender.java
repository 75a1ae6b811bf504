package kafkachaos;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands a burst of records to Kafka's producer in one call from Python, and gives
 * back their completions in arrays, many at a time.
 *
 * <p>Why: through JPype every crossing between Python and Java costs microseconds,
 * and a record sent one by one crosses four times (record, key, value, callback),
 * its callback a fifth, into Python on the client's I/O thread. Here each burst
 * crosses once and each drain once. Every record is still its own
 * {@code Producer.send} with its own callback: nothing about the client's
 * behaviour changes, only how Python talks to it (workloads/java/producer.py).
 */
public final class BurstSender {
  private final Producer<byte[], byte[]> producer;
  private final String topic;
  private final byte[][] keys; // the route table: a value's key and partition by route
  private final int[] partitions;
  private final ConcurrentLinkedQueue<Done> done = new ConcurrentLinkedQueue<>();
  private static final Logger LOG = LoggerFactory.getLogger(BurstSender.class);
  // Per partition: the highest acknowledged offset so far, and its value.
  private final Map<Integer, long[]> lastAcked = new HashMap<>();
  private int outOfOrder;
  private RuntimeException thrown;
  private int lastErrors; // completions with an error in the last drain

  private static final class Done {
    final long value;
    final int partition;
    final long offset; // -1: none
    final Exception error;

    Done(long value, RecordMetadata md, Exception error) {
      this.value = value;
      this.partition = md == null ? -1 : md.partition();
      this.offset = md == null || !md.hasOffset() ? -1 : md.offset();
      this.error = error;
    }
  }

  public BurstSender(Producer<byte[], byte[]> producer, String topic, byte[][] keys, int[] partitions) {
    this.producer = producer;
    this.topic = topic;
    this.keys = keys;
    this.partitions = partitions;
  }

  /**
   * Sends {@code values[i]} with payload {@code blob[ends[i-1]..ends[i])} on route
   * {@code routes[i]}, in order. Returns how many were handed to the producer: fewer
   * than all when {@code send} threw ({@link #thrown} says what); those records
   * never reached the producer's buffer.
   */
  public int send(long[] values, int[] routes, byte[] blob, int[] ends) {
    int start = 0;
    for (int i = 0; i < values.length; i++) {
      byte[] payload = java.util.Arrays.copyOfRange(blob, start, ends[i]);
      start = ends[i];
      final long value = values[i];
      int route = routes[i];
      try {
        producer.send(
            new ProducerRecord<>(topic, partitions[route], keys[route], payload),
            (md, ex) -> {
              if (ex == null && md != null && md.hasOffset()) {
                checkOrder(md.partition(), md.offset(), value);
              }
              done.add(new Done(value, md, ex));
            });
      } catch (RuntimeException e) {
        thrown = e;
        return i;
      }
    }
    return values.length;
  }

  /**
   * The client promises that callbacks for one partition run in send order, so
   * their offsets rise. Checked here, as the client calls back and before any
   * record reaches Python, so a violation logged by this line (in the run's
   * java-client.log) is the client's, not the harness's. Public for its test.
   */
  public synchronized void checkOrder(int partition, long offset, long value) {
    long[] last = lastAcked.get(partition);
    if (last != null && offset < last[0]) {
      outOfOrder++;
      LOG.warn(
          "callback out of order on partition {}: offset {} (value {}) called back after"
              + " offset {} (value {})",
          partition, offset, value, last[0], last[1]);
      return;
    }
    lastAcked.put(partition, new long[] {offset, value});
  }

  /** How many callbacks arrived with a lower offset than an earlier one of their partition. */
  public synchronized int outOfOrder() {
    return outOfOrder;
  }

  public RuntimeException thrown() {
    return thrown;
  }

  /**
   * Moves up to {@code max} completions into the arrays (value, partition, offset,
   * error or null) and returns how many. Safe beside the I/O thread's callbacks.
   */
  public int drain(long[] values, int[] partitionsOut, long[] offsets, Exception[] errors) {
    int n = 0;
    int failed = 0;
    Done d;
    while (n < values.length && (d = done.poll()) != null) {
      values[n] = d.value;
      partitionsOut[n] = d.partition;
      offsets[n] = d.offset;
      errors[n] = d.error;
      if (d.error != null) {
        failed++;
      }
      n++;
    }
    lastErrors = failed;
    return n;
  }

  /** How many completions of the last drain carry an error (Python skips the array at 0). */
  public int lastErrors() {
    return lastErrors;
  }
}
