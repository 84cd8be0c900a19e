// The Kafka Streams peer: the shop's transform as a Kafka Streams topology with
// processing.guarantee=exactly_once_v2 (KIP-447: one transactional producer per stream thread commits
// the outputs and the group's offsets together every commit.interval.ms), over the bench's purchases
// from the group's start, stopped once the purchases the spec names are processed (a bounded backfill).
//
//   java -cp <kafka-streams bundle>:<classes> ShopStreams SPEC.properties RESULT.json
//
// The transform is eos_etl_lab.bench.peers.shop_python's, line for line (which is Spark's, byte for
// byte, on the bench's purchases: scripts/peer_parity.py), so every peer writes the same records.
// What the pipeline names (topics, fields, record types, lineage headers) comes in the spec.

import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileInputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

public final class ShopStreams {
    // Spark's rlike is Java's find() with these anchored patterns: the same semantics, `$` included.
    static final Pattern ID = Pattern.compile("^[A-Za-z0-9._:@-]{1,128}$");
    static final Pattern INT = Pattern.compile("^-?[0-9]{1,9}$");
    static final Pattern PRICE = Pattern.compile("^-?[0-9]{1,12}(\\.[0-9]{1,2})?$");
    static final Pattern CURRENCY = Pattern.compile("^[A-Z]{3}$");
    static final Pattern TIME = Pattern.compile("\\s*(\\d{4})-(\\d{1,2})-(\\d{1,2})(?:[T ](\\d{1,2}):(\\d{1,2})"
            + "(?::(\\d{1,2})(?:\\.(\\d{1,9}))?)?)?\\s*(Z|UTC|[+-]\\d{1,2}(?::?\\d{2})?)?\\s*");
    static final DateTimeFormatter OUT_TIME = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'");
    // Spark's JSON options that differ from Jackson's defaults: single quotes and NaN/Infinity accepted.
    static final ObjectMapper JSON = JsonMapper.builder().enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS).build();

    static final class Contract {
        String inputTopic, invoices, shipments, deadLetters, runId, topicId, pipeline;
        String[] required, address, invoiceFields, shipmentFields, recordTypes, lineage;
        int maxPayloadBytes, deadLetterMaxBytes;
    }

    record Out(String sink, byte[] key, byte[] value, List<String[]> headers) {}

    static String[] list(Properties p, String k) {
        return p.getProperty(k).split(",");
    }

    static ObjectNode oneObject(String text) {
        try {
            JsonNode node = JSON.readTree(text);
            return node instanceof ObjectNode o ? o : null;
        } catch (Exception e) {
            return null;
        }
    }

    static String asText(JsonNode node) {
        if (node == null || node.isNull()) return null;
        return node.isTextual() ? node.textValue() : node.toString();
    }

    static boolean blank(String s) {
        if (s == null) return true;
        for (int i = 0; i < s.length(); i++) if (s.charAt(i) != ' ') return false;
        return true;
    }

    static boolean rlike(Pattern p, String s) {
        return p.matcher(s).find();
    }

    static LocalDateTime timestamp(String text) {
        Matcher m = TIME.matcher(text);
        if (!m.matches()) return null;
        try {
            String frac = m.group(7) == null ? "" : m.group(7);
            int micros = Integer.parseInt((frac + "000000").substring(0, 6));
            LocalDateTime t = LocalDateTime.of(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)),
                    Integer.parseInt(m.group(3)), m.group(4) == null ? 0 : Integer.parseInt(m.group(4)),
                    m.group(5) == null ? 0 : Integer.parseInt(m.group(5)),
                    m.group(6) == null ? 0 : Integer.parseInt(m.group(6)), micros * 1000);
            String zone = m.group(8);
            if (zone != null && !zone.equals("Z") && !zone.equals("UTC")) {
                int sign = zone.charAt(0) == '-' ? -1 : 1;
                String digits = zone.substring(1).replace(":", "");
                int hours = digits.length() > 2 ? Integer.parseInt(digits.substring(0, digits.length() - 2))
                        : Integer.parseInt(digits);
                int minutes = digits.length() > 2 ? Integer.parseInt(digits.substring(digits.length() - 2)) : 0;
                t = t.minusHours(sign * hours).minusMinutes(sign * minutes);
            }
            return t;
        } catch (RuntimeException e) {
            return null;
        }
    }

    static void escape(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\b' -> b.append("\\b");
                case '\t' -> b.append("\\t");
                case '\n' -> b.append("\\n");
                case '\f' -> b.append("\\f");
                case '\r' -> b.append("\\r");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04X", (int) c));
                    else b.append(c);
                }
            }
        }
        b.append('"');
    }

    // to_json of a struct: fields in order, nulls left out; values are strings, ints or nested maps.
    @SuppressWarnings("unchecked")
    static void render(StringBuilder b, Map<String, Object> object, String[] order) {
        b.append('{');
        boolean first = true;
        for (String name : order) {
            Object v = object.get(name);
            if (v == null) continue;
            if (!first) b.append(',');
            first = false;
            escape(b, name);
            b.append(':');
            if (v instanceof String s) escape(b, s);
            else if (v instanceof Map<?, ?> m) render(b, (Map<String, Object>) m, ((Map<String, Object>) m).keySet().toArray(new String[0]));
            else b.append(v);
        }
        b.append('}');
    }

    static byte[] json(Map<String, Object> object, String[] order) {
        StringBuilder b = new StringBuilder(384);
        render(b, object, order);
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    static String sha(String prefix, String text) throws Exception {
        byte[] d = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        StringBuilder b = new StringBuilder(prefix);
        for (int i = 0; i < 16; i++) b.append(String.format("%02x", d[i]));
        return b.toString();
    }

    static Out deadLetter(Contract c, byte[] key, byte[] value, String reason, String field) {
        int keyLen = key == null ? 0 : key.length, valueLen = value == null ? 0 : value.length;
        List<String[]> h = new ArrayList<>(List.of(new String[] {"record_type", c.recordTypes[2]},
                new String[] {"dlq_reason", reason}, new String[] {"dlq_field", field}));
        if (keyLen + valueLen <= c.deadLetterMaxBytes) return new Out("dlq", key, value, h);
        int keyBudget = Math.min(keyLen, c.deadLetterMaxBytes / 2);
        byte[] k = key == null ? null : java.util.Arrays.copyOf(key, keyBudget);
        byte[] v = value == null ? null : java.util.Arrays.copyOf(value, Math.min(valueLen, c.deadLetterMaxBytes - keyBudget));
        h.add(new String[] {"dlq_original_bytes", keyLen + ":" + valueLen});
        return new Out("dlq", k, v, h);
    }

    static List<Out> outputs(Contract c, byte[] key, byte[] value, int partition, long offset, long timestampMs)
            throws Exception {
        if (value == null) return List.of(deadLetter(c, key, value, "null_value", ""));
        if (value.length > c.maxPayloadBytes) return List.of(deadLetter(c, key, value, "oversized", ""));
        ObjectNode raw = oneObject(new String(value, StandardCharsets.UTF_8));
        if (raw == null) return List.of(deadLetter(c, key, value, "malformed_json", ""));
        Map<String, String> f = new LinkedHashMap<>();
        for (String name : c.required) f.put(name, asText(raw.get(name)));
        for (String name : c.required) if (blank(f.get(name))) return List.of(deadLetter(c, key, value, "missing_field", name));
        for (String name : new String[] {"purchase_id", "user_id", "product_id"})
            if (!rlike(ID, f.get(name))) return List.of(deadLetter(c, key, value, "invalid_type", name));
        if (f.get("user_full_name").codePointCount(0, f.get("user_full_name").length()) > 256)
            return List.of(deadLetter(c, key, value, "invalid_type", "user_full_name"));
        if (!rlike(INT, f.get("quantity"))) return List.of(deadLetter(c, key, value, "invalid_type", "quantity"));
        if (!rlike(PRICE, f.get("unit_price"))) return List.of(deadLetter(c, key, value, "invalid_type", "unit_price"));
        LocalDateTime time = timestamp(f.get("purchase_time"));
        if (time == null) return List.of(deadLetter(c, key, value, "invalid_type", "purchase_time"));
        ObjectNode addressObject = oneObject(f.get("shipping_address"));
        if (addressObject == null) return List.of(deadLetter(c, key, value, "invalid_type", "shipping_address"));
        Map<String, Object> address = new LinkedHashMap<>();
        for (String name : c.address) address.put(name, asText(addressObject.get(name)));
        for (String name : c.address)
            if (blank((String) address.get(name)))
                return List.of(deadLetter(c, key, value, "missing_field", "shipping_address." + name));
        int quantity = Integer.parseInt(f.get("quantity"));
        if (quantity <= 0) return List.of(deadLetter(c, key, value, "non_positive_quantity", "quantity"));
        BigDecimal price = new BigDecimal(f.get("unit_price")).setScale(2, RoundingMode.DOWN);
        if (price.signum() < 0) return List.of(deadLetter(c, key, value, "negative_price", "unit_price"));
        if (!rlike(CURRENCY, f.get("currency"))) return List.of(deadLetter(c, key, value, "invalid_currency", "currency"));
        String source = c.inputTopic + ":" + partition + ":" + offset;
        String invoiceId = sha("inv_", "invoice:" + source), shipmentId = sha("shp_", "shipment:" + source);
        Map<String, Object> invoice = new LinkedHashMap<>();
        invoice.put("invoice_id", invoiceId);
        invoice.put("purchase_id", f.get("purchase_id"));
        invoice.put("user_id", f.get("user_id"));
        invoice.put("user_full_name", f.get("user_full_name"));
        invoice.put("product_id", f.get("product_id"));
        invoice.put("quantity", quantity);
        invoice.put("unit_price", price.toPlainString());
        invoice.put("total", price.multiply(BigDecimal.valueOf(quantity)).setScale(2).toPlainString());
        invoice.put("currency", f.get("currency"));
        invoice.put("purchase_time", OUT_TIME.format(time));
        invoice.put("issued_at", OUT_TIME.format(LocalDateTime.ofInstant(Instant.ofEpochMilli(timestampMs), ZoneOffset.UTC)));
        Map<String, Object> shipment = new LinkedHashMap<>();
        shipment.put("shipment_id", shipmentId);
        shipment.put("invoice_id", invoiceId);
        shipment.put("purchase_id", f.get("purchase_id"));
        shipment.put("product_id", f.get("product_id"));
        shipment.put("recipient_name", f.get("user_full_name"));
        shipment.put("address", address);
        shipment.put("quantity", quantity);
        byte[] purchaseKey = f.get("purchase_id").getBytes(StandardCharsets.UTF_8);
        return List.of(
                new Out("invoices", purchaseKey, json(invoice, c.invoiceFields),
                        List.<String[]>of(new String[] {"record_type", c.recordTypes[0]})),
                new Out("shipments", purchaseKey, json(shipment, c.shipmentFields),
                        List.<String[]>of(new String[] {"record_type", c.recordTypes[1]})));
    }

    static final class Shop implements Processor<byte[], byte[], byte[], byte[]> {
        private final Contract c;
        private final AtomicLong seen, written;
        private final long expected;
        private final CountDownLatch done;
        private ProcessorContext<byte[], byte[]> context;

        Shop(Contract c, AtomicLong seen, AtomicLong written, long expected, CountDownLatch done) {
            this.c = c;
            this.seen = seen;
            this.written = written;
            this.expected = expected;
            this.done = done;
        }

        @Override
        public void init(ProcessorContext<byte[], byte[]> context) {
            this.context = context;
        }

        @Override
        public void process(Record<byte[], byte[]> record) {
            var meta = context.recordMetadata().orElseThrow();
            List<Out> outs;
            try {
                outs = outputs(c, record.key(), record.value(), meta.partition(), meta.offset(), record.timestamp());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            for (Out o : outs) {
                RecordHeaders h = new RecordHeaders();
                String[] lineage = {c.inputTopic, Integer.toString(meta.partition()), Long.toString(meta.offset()),
                        c.runId, c.topicId, c.pipeline};
                for (int i = 0; i < lineage.length; i++) h.add(c.lineage[i], lineage[i].getBytes(StandardCharsets.UTF_8));
                for (String[] kv : o.headers()) h.add(kv[0], kv[1].getBytes(StandardCharsets.UTF_8));
                context.forward(new Record<>(o.key(), o.value(), record.timestamp(), h), o.sink());
            }
            written.addAndGet(outs.size());
            if (seen.incrementAndGet() == expected) done.countDown();
        }
    }

    static byte[] readBytes(java.io.DataInputStream in) throws java.io.IOException {
        int n = in.readInt();
        return n < 0 ? null : in.readNBytes(n);
    }

    static void writeBytes(java.io.DataOutputStream out, byte[] b) throws java.io.IOException {
        out.writeInt(b == null ? -1 : b.length);
        if (b != null) out.write(b);
    }

    // `parity SPEC IN OUT`: the transform alone over purchases in a file (scripts/peer_parity.py writes them:
    // partition, offset, timestamp, key, value each), its outputs to another, no broker.
    static void parity(Contract c, String inPath, String outPath) throws Exception {
        try (var in = new java.io.DataInputStream(new java.io.BufferedInputStream(new FileInputStream(inPath)));
             var out = new java.io.DataOutputStream(new java.io.BufferedOutputStream(
                     new java.io.FileOutputStream(outPath)))) {
            int n = in.readInt();
            out.writeInt(n);
            for (int i = 0; i < n; i++) {
                int partition = in.readInt();
                long offset = in.readLong(), timestamp = in.readLong();
                byte[] key = readBytes(in), value = readBytes(in);
                List<Out> outs = outputs(c, key, value, partition, offset, timestamp);
                out.writeInt(outs.size());
                for (Out o : outs) {
                    out.writeUTF(o.sink().equals("invoices") ? c.invoices : o.sink().equals("shipments") ? c.shipments
                            : c.deadLetters);
                    writeBytes(out, o.key());
                    writeBytes(out, o.value());
                    out.writeInt(o.headers().size());
                    for (String[] kv : o.headers()) {
                        out.writeUTF(kv[0]);
                        writeBytes(out, kv[1].getBytes(StandardCharsets.UTF_8));
                    }
                }
            }
        }
    }

    public static void main(String[] args) throws Exception {
        boolean parity = args[0].equals("parity");
        if (parity) args = java.util.Arrays.copyOfRange(args, 1, args.length);
        Properties spec = new Properties();
        try (var in = new FileInputStream(args[0])) {
            spec.load(in);
        }
        Contract c = new Contract();
        c.inputTopic = spec.getProperty("input_topic");
        String[] topics = list(spec, "topics");
        c.invoices = topics[0];
        c.shipments = topics[1];
        c.deadLetters = topics[2];
        c.required = list(spec, "required");
        c.address = list(spec, "address");
        c.invoiceFields = list(spec, "invoice_fields");
        c.shipmentFields = list(spec, "shipment_fields");
        c.recordTypes = list(spec, "record_types");
        c.lineage = list(spec, "lineage_headers");
        c.maxPayloadBytes = Integer.parseInt(spec.getProperty("max_payload_bytes"));
        c.deadLetterMaxBytes = Integer.parseInt(spec.getProperty("dead_letter_max_bytes"));
        c.runId = spec.getProperty("run_id");
        c.topicId = spec.getProperty("topic_id");
        c.pipeline = spec.getProperty("group");
        if (parity) {
            parity(c, args[1], args[2]);
            return;
        }
        long expected = Long.parseLong(spec.getProperty("expected_purchases"));

        Properties props = new Properties();
        for (String name : spec.stringPropertyNames())
            if (name.startsWith("kafka.")) props.put(name.substring(6), spec.getProperty(name));
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, c.pipeline);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, spec.getProperty("threads"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, spec.getProperty("state_dir"));
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        AtomicLong seen = new AtomicLong(), written = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        Topology topology = new Topology();
        topology.addSource("purchases", Serdes.ByteArray().deserializer(), Serdes.ByteArray().deserializer(), c.inputTopic);
        topology.addProcessor("shop", () -> new Shop(c, seen, written, expected, done), "purchases");
        topology.addSink("invoices", c.invoices, Serdes.ByteArray().serializer(), Serdes.ByteArray().serializer(), "shop");
        topology.addSink("shipments", c.shipments, Serdes.ByteArray().serializer(), Serdes.ByteArray().serializer(), "shop");
        topology.addSink("dlq", c.deadLetters, Serdes.ByteArray().serializer(), Serdes.ByteArray().serializer(), "shop");

        KafkaStreams streams = new KafkaStreams(topology, props);
        String[] failure = {null};
        streams.setUncaughtExceptionHandler(e -> {
            failure[0] = String.valueOf(e);
            done.countDown();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        long t0 = System.nanoTime();
        streams.start();
        boolean reached = done.await(Long.parseLong(spec.getProperty("timeout_s", "3600")), TimeUnit.SECONDS);
        streams.close();  // a clean close commits what each thread processed (its open transaction)
        double job = (System.nanoTime() - t0) / 1e9;
        Files.writeString(Path.of(args[1]), String.format(
                "{\"job_s\": %.4f, \"purchases\": %d, \"outputs\": %d, \"reached\": %b, \"failure\": %s, "
                        + "\"commit_interval_ms\": %s, \"threads\": %s}",
                job, seen.get(), written.get(), reached, failure[0] == null ? "null" : JSON.writeValueAsString(failure[0]),
                new StreamsConfig(props).getLong(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG), spec.getProperty("threads")));
        System.exit(reached && failure[0] == null ? 0 : 1);
    }
}
