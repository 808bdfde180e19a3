package eosbench.peers;

import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

/** The peers' command line: {@code key=value} pairs, some taken by name, the rest handed to the engine. */
final class PeerArguments {
    private PeerArguments() {
    }

    /** Every {@code key=value} argument. */
    static Properties parse(String[] args) {
        Properties settings = new Properties();
        for (String argument : args) {
            int equals = argument.indexOf('=');
            if (equals < 1) {
                throw new IllegalArgumentException("expected key=value, got " + argument);
            }
            settings.setProperty(argument.substring(0, equals), argument.substring(equals + 1));
        }
        return settings;
    }

    /** Removes and returns a setting the peer needs. */
    static String take(Properties settings, String name) {
        Object value = settings.remove(name);
        if (value == null) {
            throw new IllegalArgumentException("missing " + name + "=...");
        }
        return (String) value;
    }

    /** The client properties file that {@code command.config} names (TLS, SASL), taken out; empty without one. */
    static Properties commandConfig(Properties settings) throws IOException {
        Properties client = new Properties();
        String path = (String) settings.remove("command.config");
        if (path != null) {
            try (Reader reader = new FileReader(path, StandardCharsets.UTF_8)) {
                client.load(reader);
            }
        }
        return client;
    }
}
