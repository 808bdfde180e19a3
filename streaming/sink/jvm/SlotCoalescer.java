package eosbench.spark;

import java.io.Serializable;

import org.apache.spark.Partition;
import org.apache.spark.rdd.PartitionCoalescer;
import org.apache.spark.rdd.PartitionGroup;
import org.apache.spark.rdd.RDD;
import scala.Option;

/**
 * Slot scope's coalesce: the batch's Spark partitions go into the slots the driver chose, and each
 * slot prefers the one executor whose Kafka consumer pool holds its partitions' consumers.
 *
 * <p>Spark's default coalescer keeps only the host of a parent's preferred location, so on a host
 * with several executors a slot's task runs on whichever of them is free, and that executor's pool
 * creates a consumer for every partition the other one already held (about a quarter of a second
 * each). A location of the form {@code executor_<host>_<id>}, which is what the Kafka source gives
 * its partitions, is read back by the scheduler as that executor.
 */
public final class SlotCoalescer implements PartitionCoalescer, Serializable {
    private static final long serialVersionUID = 1L;

    private final int[] slotOfParent;
    private final String[] slotLocations;

    /**
     * @param slotOfParent  the slot of each parent partition, in order, comma-separated
     * @param slotLocations each slot's preferred location, newline-separated; empty for none
     */
    public SlotCoalescer(String slotOfParent, String slotLocations) {
        String[] slots = slotOfParent.isEmpty() ? new String[0] : slotOfParent.split(",");
        this.slotOfParent = new int[slots.length];
        for (int i = 0; i < slots.length; i++) {
            this.slotOfParent[i] = Integer.parseInt(slots[i]);
        }
        this.slotLocations = slotLocations.split("\n", -1);
    }

    @Override
    public PartitionGroup[] coalesce(int maxPartitions, RDD<?> parent) {
        Partition[] parents = parent.partitions();
        if (parents.length != slotOfParent.length) {
            // The driver read a different batch: refuse rather than group by a stale map.
            throw new IllegalStateException("slot map for " + slotOfParent.length + " partitions, batch has "
                + parents.length);
        }
        PartitionGroup[] groups = new PartitionGroup[slotLocations.length];
        for (int k = 0; k < groups.length; k++) {
            String location = slotLocations[k];
            groups[k] = new PartitionGroup(location.isEmpty() ? Option.<String>empty() : Option.apply(location));
        }
        for (int i = 0; i < parents.length; i++) {
            groups[slotOfParent[i]].partitions().addOne(parents[i]);
        }
        return groups;
    }
}
