package kafkachaos;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;

/**
 * One poll's records as parallel arrays, so Python reads a whole poll in a few
 * crossings instead of five per record (BurstSender.java says why crossings
 * count). Keys and values are each one byte array with end offsets; a null key
 * or value has length -1 in {@code keyLengths} or {@code valueLengths}.
 * Nothing is decoded here: Python decodes both clients' records by one code
 * (workloads/values.py). {@code records} keeps the records, in the same order,
 * for the calls that need them (a share member acknowledges each).
 */
public final class Polled {
  public final int count;
  public final String[] topicNames; // distinct, in order of first appearance
  public final int[] topics; // each record's index into topicNames
  public final int[] partitions;
  public final long[] offsets;
  public final byte[] keys;
  public final int[] keyLengths;
  public final byte[] values;
  public final int[] valueLengths;
  public final List<ConsumerRecord<byte[], byte[]>> records; // the records themselves, in order

  public Polled(ConsumerRecords<byte[], byte[]> records) {
    List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>(records.count());
    for (ConsumerRecord<byte[], byte[]> r : records) {
      all.add(r);
    }
    count = all.size();
    this.records = all;
    topics = new int[count];
    Map<String, Integer> names = new LinkedHashMap<>();
    partitions = new int[count];
    offsets = new long[count];
    keyLengths = new int[count];
    valueLengths = new int[count];
    int keyBytes = 0;
    int valueBytes = 0;
    for (ConsumerRecord<byte[], byte[]> r : all) {
      keyBytes += r.key() == null ? 0 : r.key().length;
      valueBytes += r.value() == null ? 0 : r.value().length;
    }
    keys = new byte[keyBytes];
    values = new byte[valueBytes];
    int k = 0;
    int v = 0;
    for (int i = 0; i < count; i++) {
      ConsumerRecord<byte[], byte[]> r = all.get(i);
      topics[i] = names.computeIfAbsent(r.topic(), t -> names.size());
      partitions[i] = r.partition();
      offsets[i] = r.offset();
      keyLengths[i] = copy(r.key(), keys, k);
      k += Math.max(0, keyLengths[i]);
      valueLengths[i] = copy(r.value(), values, v);
      v += Math.max(0, valueLengths[i]);
    }
    topicNames = names.keySet().toArray(new String[0]);
  }

  private static int copy(byte[] from, byte[] to, int at) {
    if (from == null) {
      return -1;
    }
    System.arraycopy(from, 0, to, at, from.length);
    return from.length;
  }
}
