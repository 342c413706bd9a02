package org.shufflelab.ndp;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("shufflelab-ndp")}: Parquet files in HDFS read through shufflelab's NDP
 * proxies, with a chosen prefix of filter / project / partial aggregate executed next to the data.
 *
 * <pre>
 *   spark.read.format("shufflelab-ndp")
 *       .option("proxies", "http://10.0.0.2:9880,http://10.0.0.3:9880")
 *       .option("path", "/tpch/lineitem")
 *       .option("schema", "l_quantity DECIMAL(15,2), l_shipdate DATE, ...")
 *       .option("pushdown", "full")
 *       .load()
 * </pre>
 *
 * See {@link NdpOptions} for every option.
 */
public final class NdpDataSource implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "shufflelab-ndp";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return NdpOptions.schemaOption(options);
  }

  /** A schema given with {@code .schema(...)} is taken as it is (then the schema option may be left out). */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    if (partitioning.length > 0) {
      throw new IllegalArgumentException("shufflelab-ndp: tables are not partitioned");
    }
    return new NdpTable(NdpOptions.parse(new CaseInsensitiveStringMap(properties), schema));
  }
}
