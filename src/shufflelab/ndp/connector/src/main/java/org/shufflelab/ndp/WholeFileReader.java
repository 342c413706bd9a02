package org.shufflelab.ndp;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.datasources.parquet.VectorizedParquetRecordReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Policy {@code none}: the whole file crosses the network (WebHDFS OPEN via the proxy, then from
 * the DataNode), lands in a temporary file under java.io.tmpdir and is decoded here with Spark's
 * own vectorized Parquet reader, exactly what a plain Spark job over HDFS would transfer and do.
 * The temporary file is removed when the reader closes, and at once if opening fails.
 */
final class WholeFileReader implements PartitionReader<ColumnarBatch> {
  private static final int BATCH_ROWS = 4096; // Spark's default columnar batch size

  private final StructType schema;
  private final ReaderStats stats;
  private final VectorAdapter[] adapters;
  private Path tmp;
  private VectorizedParquetRecordReader reader;
  private ColumnarBatch decoded; // the reader's own batch, refilled by each nextBatch()
  private ColumnarBatch batch;
  private long rows;

  WholeFileReader(NdpOptions options, NdpPartition p, StructType schema) throws IOException {
    this.schema = schema;
    this.stats = new ReaderStats(options, p);
    this.adapters = new VectorAdapter[schema.size()];
    for (int i = 0; i < adapters.length; i++) {
      adapters[i] = new VectorAdapter(schema.fields()[i].name(), schema.fields()[i].dataType());
    }
    try {
      tmp = Files.createTempFile(Path.of(System.getProperty("java.io.tmpdir")), "shufflelab-ndp-", ".parquet");
      ProxyHttp.Download d = ProxyHttp.download(p.proxy(), p.path(), options.user, tmp, options.timeoutS);
      if (p.length() >= 0 && d.bytes() != p.length()) {
        throw new IOException("OPEN " + p.path() + ": received " + d.bytes() + " bytes, the listing says "
            + p.length());
      }
      stats.line.put("body_bytes", d.bytes()).put("input_bytes", d.bytes()).put("datanode", d.datanode());
      reader = new VectorizedParquetRecordReader(false, BATCH_ROWS);
      // the declared columns, in the declared order (the file may hold more)
      reader.initialize(tmp.toString(), List.of(schema.fieldNames()));
      decoded = reader.resultBatch(); // allocates the reader's vectors: before the first nextBatch()
    } catch (IOException | RuntimeException e) {
      stats.discard();
      close();
      throw new IOException("whole-file read of " + p.path() + " via " + p.proxy() + ": " + e.getMessage(), e);
    }
  }

  @Override
  public boolean next() throws IOException {
    if (!reader.nextBatch()) {
      return false;
    }
    int n = decoded.numRows();
    ColumnVector[] cols = new ColumnVector[schema.size()];
    for (int i = 0; i < cols.length; i++) {
      cols[i] = adapters[i].adapt(decoded.column(i), n);
    }
    batch = new ColumnarBatch(cols, n);
    rows += n;
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() throws IOException {
    try {
      for (VectorAdapter a : adapters) {
        a.close();
      }
      if (reader != null) {
        reader.close();
        reader = null;
      }
    } finally {
      if (tmp != null) {
        Files.deleteIfExists(tmp);
        tmp = null;
      }
      stats.line.put("rows", rows);
      stats.write();
    }
  }
}
