package org.shufflelab.ndp;

import java.util.EnumSet;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** One HDFS directory of Parquet files behind the NDP proxies; read-only, batch only. */
final class NdpTable implements SupportsRead {
  private final NdpOptions options;

  NdpTable(NdpOptions options) {
    this.options = options;
  }

  @Override
  public String name() {
    return "shufflelab-ndp:" + options.path;
  }

  // Deprecated in favour of columns(), whose default is built from schema(): still the way for a
  // source whose schema is a StructType
  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return options.schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
    // the options the table was created with are the ones checked; a scan does not change them
    return new NdpScanBuilder(options);
  }
}
