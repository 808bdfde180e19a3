package eosbench.spark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.zip.CRC32;

/**
 * streaming/process.py in Java, for the real-time writer, which transforms records in the
 * executor's JVM: the verifier recomputes each output value in Python, so both must write the same
 * bytes (tests/unit/test_realtime.py runs {@link #main} against the Python transforms). The peer
 * engines (peers/jvm/) compile it too, so that they write the same bytes.
 */
public final class RecordProcess {
    static final byte[] POISON_PREFIX = "POISON".getBytes(StandardCharsets.US_ASCII);

    private RecordProcess() {
    }

    /** streaming/process.py's poison test: a value that starts with POISON goes to the dead-letter topic. */
    public static boolean isPoison(byte[] value) {
        return value != null && value.length >= POISON_PREFIX.length
            && Arrays.equals(value, 0, POISON_PREFIX.length, POISON_PREFIX, 0, POISON_PREFIX.length);
    }

    /** streaming/process.py's transform of a record that is not poison (a tombstone stays one). */
    public static byte[] transform(String process, byte[] key, byte[] value) {
        if (value == null || process.equals("passthrough")) {
            return value;
        }
        if (process.equals("checksum")) {
            CRC32 crc = new CRC32();
            crc.update(value);
            byte[] suffix = String.format("|%08x", crc.getValue()).getBytes(StandardCharsets.US_ASCII);
            byte[] out = Arrays.copyOf(value, value.length + suffix.length);
            System.arraycopy(suffix, 0, out, value.length, suffix.length);
            return out;
        }
        try {
            byte[] digest = MessageDigest.getInstance("SHA-256").digest(value);
            StringBuilder hex = new StringBuilder();
            for (int i = 0; i < 8; i++) {
                hex.append(String.format("%02x", digest[i]));
            }
            byte[] head = "{\"key\":\"".getBytes(StandardCharsets.US_ASCII);
            byte[] tail = ("\",\"len\":" + value.length + ",\"sha256_16\":\"" + hex + "\"}").getBytes(StandardCharsets.US_ASCII);
            byte[] keyBytes = key == null ? new byte[0] : key;
            byte[] out = Arrays.copyOf(head, head.length + keyBytes.length + tail.length);
            System.arraycopy(keyBytes, 0, out, head.length, keyBytes.length);
            System.arraycopy(tail, 0, out, head.length + keyBytes.length, tail.length);
            return out;
        } catch (NoSuchAlgorithmException missing) {
            throw new IllegalStateException(missing);
        }
    }

    /** Test entry: stdin lines {@code <process> <key hex|-> <value hex|->}, stdout the transform's hex (or -). */
    public static void main(String[] args) throws java.io.IOException {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.US_ASCII));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] fields = line.split(" ");
            byte[] value = fromHex(fields[2]);
            System.out.println(isPoison(value) ? "POISON" : toHex(transform(fields[0], fromHex(fields[1]), value)));
        }
    }

    private static byte[] fromHex(String text) {
        if (text.equals("-")) {
            return null;
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String toHex(byte[] bytes) {
        if (bytes == null) {
            return "-";
        }
        StringBuilder hex = new StringBuilder();
        for (byte b : bytes) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }
}
