package org.shufflelab.ndp;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.http.HttpResponse;
import java.util.List;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One file read by pushdown: the plan is POSTed to the partition's proxy and its Arrow IPC stream
 * is decoded batch by batch as it arrives (never held whole), each Arrow vector handed to Spark as
 * an {@link ArrowColumnVector}. A batch is valid until the next call to {@link #next()}.
 */
final class PushdownReader implements PartitionReader<ColumnarBatch> {
  private final StructType schema;
  private final ReaderStats stats;
  private final CountingStream body;
  private final VectorAdapter[] adapters;
  private BufferAllocator allocator;
  private ArrowStreamReader reader;
  private ColumnarBatch batch;

  PushdownReader(NdpOptions options, NdpPartition p, String plan, StructType schema) throws IOException {
    this.schema = schema;
    this.stats = new ReaderStats(options, p);
    this.adapters = new VectorAdapter[schema.size()];
    for (int i = 0; i < adapters.length; i++) {
      adapters[i] = new VectorAdapter(schema.fields()[i].name(), schema.fields()[i].dataType());
    }
    String request = "{\"plan\":" + plan + ",\"schema\":" + NdpScan.MAPPER.writeValueAsString(options.planTypes)
        + "}";
    HttpResponse<InputStream> r = ProxyHttp.pushdown(p.proxy(), p.path(), request, options.timeoutS);
    stats.headers(r.headers());
    body = new CountingStream(r.body());
    try {
      allocator = ArrowUtils.rootAllocator().newChildAllocator("shufflelab-ndp " + p.path(), 0, Long.MAX_VALUE);
      reader = new ArrowStreamReader(body, allocator);
      checkSchema(p, reader.getVectorSchemaRoot().getFieldVectors());
    } catch (IOException | RuntimeException e) {
      stats.discard();
      close();
      throw e;
    }
  }

  /** The answer's leading columns must be the ones the scan declared (a count(*) read may carry one more). */
  private void checkSchema(NdpPartition p, List<FieldVector> vectors) throws IOException {
    boolean ok = vectors.size() >= schema.size();
    for (int i = 0; ok && i < schema.size(); i++) {
      ok = vectors.get(i).getName().equals(schema.fields()[i].name());
    }
    if (!ok) {
      throw new IOException("pushdown " + p.path() + " via " + p.proxy() + ": the answer has columns "
          + vectors.stream().map(FieldVector::getName).toList() + ", expected " + List.of(schema.fieldNames()));
    }
  }

  @Override
  public boolean next() throws IOException {
    if (!reader.loadNextBatch()) {
      return false;
    }
    VectorSchemaRoot root = reader.getVectorSchemaRoot();
    int n = root.getRowCount();
    ColumnVector[] cols = new ColumnVector[schema.size()];
    for (int i = 0; i < cols.length; i++) {
      cols[i] = adapters[i].adapt(new ArrowColumnVector(root.getVector(i)), n);
    }
    batch = new ColumnarBatch(cols, n);
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() throws IOException {
    // the Arrow vectors belong to the reader's root: closing the reader frees them (not the batch)
    try {
      for (VectorAdapter a : adapters) {
        if (a != null) {
          a.close();
        }
      }
      if (reader != null) {
        reader.close();
      }
    } finally {
      reader = null;
      body.close(); // an unread rest (Spark stopped early) aborts the connection instead of draining it
      if (allocator != null) {
        allocator.close(); // fails loudly if an Arrow buffer was leaked
        allocator = null;
      }
      stats.line.put("body_bytes", body.count);
      stats.write();
    }
  }

  /** Counts the bytes of the answer body actually received. */
  private static final class CountingStream extends FilterInputStream {
    long count;

    CountingStream(InputStream in) {
      super(in);
    }

    @Override
    public int read() throws IOException {
      int b = super.read();
      if (b >= 0) {
        count++;
      }
      return b;
    }

    @Override
    public int read(byte[] buf, int off, int len) throws IOException {
      int n = super.read(buf, off, len);
      if (n > 0) {
        count += n;
      }
      return n;
    }

    @Override
    public long skip(long n) throws IOException {
      long k = super.skip(n);
      count += Math.max(0, k);
      return k;
    }
  }
}
