package eosbench.spark;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.util.GenericOptionsParser;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * A streaming checkpoint on an object store (s3a://): each log entry is written in place and the
 * upload aborted on cancel, as Spark's AbortableStreamBasedCheckpointFileManager (spark-hadoop-cloud)
 * does, instead of written to a temporary object and renamed (on S3 a copy and a delete per entry).
 *
 * Why a class of our own: spark-hadoop-cloud is not published for Spark 4.2 where Maven Central is
 * reachable here, and 4.0's class does not load under 4.2 (the streaming classes moved). It differs
 * from Spark's in two ways, both deliberate:
 * - it is built on Hadoop's FileSystem API, not FileContext: FileContext's create() refuses a path
 *   whose parent folder it cannot see, and an S3 folder with nothing in it yet is visible only
 *   through a marker object, which not every S3 API server lists (S3Proxy's on-disk backend does not);
 * - a failure to close (the upload's completion) is thrown, not logged: a log entry that was never
 *   written must fail the batch, not vanish.
 * Two writers of one batch id (two drivers on one checkpoint) must not both succeed: the second
 * gets Hadoop's FileAlreadyExistsException, which Spark reports as a concurrent update of its log.
 * An existence check before the upload catches a writer that finished first; where S3A can make
 * the upload itself conditional (Hadoop 3.5's conditional create, S3's If-None-Match), the store
 * refuses the second of two uploads that both passed that check.
 * On a file system without abortable streams it falls back to Spark's rename-based write.
 */
public class ObjectStoreCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

    /** Hadoop's create option (and S3A's path capability) for a create that fails if the object exists. */
    static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

    private final boolean abortable;
    private final boolean conditional;

    /** Spark constructs a checkpoint file manager from the checkpoint's path and the Hadoop configuration. */
    public ObjectStoreCheckpointFileManager(Path path, Configuration hadoopConf) throws IOException {
        super(path, hadoopConf);
        this.abortable = fs().hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM);
        this.conditional = fs().hasPathCapability(path, CONDITIONAL_CREATE);
    }

    @Override
    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (!abortable) {
            return super.createAtomic(path, overwriteIfPossible);
        }
        try {
            return new AbortableOutputStream(create(fs(), path, overwriteIfPossible, conditional), path,
                    overwriteIfPossible);
        } catch (IOException e) {
            // Spark's Scala callers catch Hadoop's FileAlreadyExistsException by type (a second writer
            // of one batch id), so it must reach them as itself, not wrapped.
            throw ObjectStoreCheckpointFileManager.<RuntimeException>rethrow(e);
        }
    }

    /** A create that, where asked and able, fails at its upload if the object exists by then. */
    static FSDataOutputStream create(FileSystem fs, Path path, boolean overwrite, boolean conditional) throws IOException {
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(overwrite);
        if (!overwrite && conditional) {
            builder.must(CONDITIONAL_CREATE, true);
        }
        return builder.build();
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E rethrow(Throwable e) throws E {
        throw (E) e;
    }

    /** The object is uploaded at close, whole, or never: cancel aborts the upload. */
    private final class AbortableOutputStream extends CheckpointFileManager.CancellableFSDataOutputStream {
        private final FSDataOutputStream stream;
        private final Path path;
        private final boolean overwriteIfPossible;
        private boolean terminated;

        AbortableOutputStream(FSDataOutputStream stream, Path path, boolean overwriteIfPossible) {
            super(stream);
            this.stream = stream;
            this.path = path;
            this.overwriteIfPossible = overwriteIfPossible;
        }

        @Override
        public synchronized void cancel() {
            if (terminated) {
                return;
            }
            terminated = true;
            try {
                stream.abort();
                stream.close();
            } catch (IOException | RuntimeException e) {
                // Cancel runs on a failure path already; the upload it abandons is never visible.
            }
        }

        @Override
        public synchronized void close() throws IOException {
            if (terminated) {
                return;
            }
            terminated = true;
            // Two writers of one batch id: the second must fail, as HDFSMetadataLog expects of a rename.
            if (!overwriteIfPossible && fs().exists(path)) {
                stream.abort();
                throw new FileAlreadyExistsException("checkpoint entry " + path + " was written by another writer");
            }
            try {
                stream.close();
            } catch (IOException e) {
                // A conditional upload refused (412): the other writer's upload completed after the check above.
                if (!overwriteIfPossible && conditional && fs().exists(path)) {
                    FileAlreadyExistsException refused = new FileAlreadyExistsException(
                            "checkpoint entry " + path + " was written by another writer");
                    refused.initCause(e);
                    throw refused;
                }
                throw e;
            }
        }
    }

    /**
     * Test entry, {@code [-conf FILE] race URI}: two writers of one checkpoint entry that both opened it
     * before either closed, as two drivers of one batch id would (this manager on s3a://, Spark's
     * default elsewhere); {@code [-conf FILE] conditional URI}: a conditional create of an object that
     * exists, on the store itself. Prints one line per writer: {@code written} or {@code refused <class>}.
     */
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        String[] rest = new GenericOptionsParser(conf, args).getRemainingArgs();
        Path path = new Path(rest[1]);
        if (rest[0].equals("race")) {
            path.getFileSystem(conf).mkdirs(path.getParent());  // as Spark's log makes its folder before any entry
            CheckpointFileManager manager = path.toUri().getScheme().equals("s3a")
                    ? new ObjectStoreCheckpointFileManager(path.getParent(), conf)
                    : new FileContextBasedCheckpointFileManager(path.getParent(), conf);
            CheckpointFileManager.CancellableFSDataOutputStream first = manager.createAtomic(path, false);
            CheckpointFileManager.CancellableFSDataOutputStream second = manager.createAtomic(path, false);
            first.write(1);
            second.write(2);
            System.out.println(outcome(first));
            System.out.println(outcome(second));
        } else {
            FileSystem fs = path.getFileSystem(conf);
            FSDataOutputStream stream = create(fs, path, false, fs.hasPathCapability(path, CONDITIONAL_CREATE));
            stream.write(3);
            System.out.println(outcome(stream));
        }
    }

    private static String outcome(java.io.Closeable stream) {
        try {
            stream.close();
            return "written";
        } catch (IOException | RuntimeException e) {
            return "refused " + e.getClass().getSimpleName();
        }
    }
}
