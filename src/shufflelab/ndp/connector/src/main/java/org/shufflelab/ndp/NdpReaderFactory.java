package org.shufflelab.ndp;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Makes the executor-side readers: a pushdown (the plan POSTed to the partition's proxy, Arrow
 * batches back) or, with no plan, a whole-file read decoded on the executor. Always columnar:
 * both sources arrive as column vectors, and every column type a table may have is supported.
 */
final class NdpReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final NdpOptions options;
  private final String plan; // null: whole files
  private final StructType readSchema;

  NdpReaderFactory(NdpOptions options, String plan, StructType readSchema) {
    this.options = options;
    this.plan = plan;
    this.readSchema = readSchema;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("shufflelab-ndp reads columnar batches only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    NdpPartition p = (NdpPartition) partition;
    try {
      return plan == null ? new WholeFileReader(options, p, readSchema)
          : new PushdownReader(options, p, plan, readSchema);
    } catch (IOException e) {
      throw new UncheckedIOException("shufflelab-ndp: " + e.getMessage(), e);
    }
  }
}
