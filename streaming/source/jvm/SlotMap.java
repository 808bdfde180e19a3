package eosbench.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import org.apache.kafka.common.TopicPartition;

/**
 * Slot scope's map, the same function as slot_groups in streaming/sink/slots.py (a test pins both
 * to one table): the slot of each Kafka partition and each slot's executor. The grouped source
 * plans with it, so that its Spark partition k is exactly the sink's slot k.
 */
public final class SlotMap {
    private SlotMap() {
    }

    /**
     * The executor Spark's Kafka source prefers for a partition: floorMod(TopicPartition.hashCode,
     * L) of the executors sorted as Spark sorts them ({@link #sparkOrder}); "" without executors.
     */
    public static String sparkLocation(String topic, int partition, List<String> executorsInSparkOrder) {
        if (executorsInSparkOrder.isEmpty()) {
            return "";
        }
        int index = Math.floorMod(new TopicPartition(topic, partition).hashCode(), executorsInSparkOrder.size());
        return executorsInSparkOrder.get(index);
    }

    /** Executors as Spark's Kafka source sorts them: by host, then executor id, both descending. */
    public static List<String> sparkOrder(List<String[]> hostAndId) {
        List<String[]> sorted = new ArrayList<>(hostAndId);
        sorted.sort((a, b) -> a[0].equals(b[0]) ? b[1].compareTo(a[1]) : b[0].compareTo(a[0]));
        List<String> result = new ArrayList<>();
        for (String[] entry : sorted) {
            result.add("executor_" + entry[0] + "_" + entry[1]);
        }
        return result;
    }

    /**
     * Slot of each partition, given each partition's preferred executor ("" for none); see
     * slot_groups in streaming/sink/slots.py for why the executors own slots k with k mod L = rank.
     */
    public static int[] slotOf(int[] partitions, String[] locations, int slots) {
        TreeSet<String> placeSet = new TreeSet<>();
        for (String location : locations) {
            if (!location.isEmpty()) {
                placeSet.add(location);
            }
        }
        int[] result = new int[partitions.length];
        if (placeSet.isEmpty()) {
            for (int i = 0; i < partitions.length; i++) {
                result[i] = Math.floorMod(partitions[i], slots);
            }
            return result;
        }
        List<String> places = new ArrayList<>(placeSet);
        int l = places.size();
        List<List<Integer>> owned = new ArrayList<>();
        for (int j = 0; j < l; j++) {
            List<Integer> mine = new ArrayList<>();
            for (int k = 0; k < slots; k++) {
                if (k % l == j) {
                    mine.add(k);
                }
            }
            if (mine.isEmpty()) {
                mine.add(j % slots);
            }
            owned.add(mine);
        }
        Map<Integer, Integer> placeOf = new HashMap<>();
        for (int i = 0; i < partitions.length; i++) {
            if (!locations[i].isEmpty()) {
                placeOf.putIfAbsent(partitions[i], places.indexOf(locations[i]));
            }
        }
        for (int i = 0; i < partitions.length; i++) {
            int p = partitions[i];
            List<Integer> mine = owned.get(placeOf.getOrDefault(p, Math.floorMod(p, l)));
            result[i] = mine.get(Math.floorMod(Math.floorDiv(p, l), mine.size()));
        }
        return result;
    }

    /** Each slot's executor ("" for none): slot k is owned by the executor of rank k mod L. */
    public static String[] slotLocations(String[] locations, int slots) {
        TreeSet<String> placeSet = new TreeSet<>();
        for (String location : locations) {
            if (!location.isEmpty()) {
                placeSet.add(location);
            }
        }
        List<String> places = new ArrayList<>(placeSet);
        String[] result = new String[slots];
        for (int k = 0; k < slots; k++) {
            result[k] = places.isEmpty() ? "" : places.get(k % places.size());
        }
        return result;
    }

    /** slotOf as text "p:slot,..." for a check from Python (py4j passes no int arrays cheaply). */
    public static String slotOfText(String partitions, String locations, int slots) {
        String[] ps = partitions.isEmpty() ? new String[0] : partitions.split(",");
        int[] parsed = new int[ps.length];
        for (int i = 0; i < ps.length; i++) {
            parsed[i] = Integer.parseInt(ps[i]);
        }
        String[] locs = locations.isEmpty() && ps.length == 0 ? new String[0] : locations.split("\n", -1);
        int[] slot = slotOf(parsed, locs, slots);
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < slot.length; i++) {
            text.append(i == 0 ? "" : ",").append(slot[i]);
        }
        return text.append(";").append(String.join("\n", slotLocations(locs, slots))).toString();
    }
}
