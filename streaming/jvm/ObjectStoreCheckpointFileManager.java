package eosbench.spark;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
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
 * On a file system without abortable streams it falls back to Spark's rename-based write.
 */
public class ObjectStoreCheckpointFileManager extends FileSystemBasedCheckpointFileManager {

    private final boolean abortable;

    /** Spark constructs a checkpoint file manager from the checkpoint's path and the Hadoop configuration. */
    public ObjectStoreCheckpointFileManager(Path path, Configuration hadoopConf) throws IOException {
        super(path, hadoopConf);
        this.abortable = fs().hasPathCapability(path, CommonPathCapabilities.ABORTABLE_STREAM);
    }

    @Override
    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (!abortable) {
            return super.createAtomic(path, overwriteIfPossible);
        }
        try {
            return new AbortableOutputStream(fs().create(path, overwriteIfPossible), path, overwriteIfPossible);
        } catch (IOException e) {
            // Spark's Scala callers catch Hadoop's FileAlreadyExistsException by type (a second writer
            // of one batch id), so it must reach them as itself, not wrapped.
            throw ObjectStoreCheckpointFileManager.<RuntimeException>rethrow(e);
        }
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
            stream.close();
        }
    }
}
