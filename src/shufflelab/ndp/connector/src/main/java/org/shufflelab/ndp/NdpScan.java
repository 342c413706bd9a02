package org.shufflelab.ndp;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import org.shufflelab.ndp.NdpOptions.Pushdown;

/**
 * The scan after pushdown: the plan document every file is read with (none under policy
 * {@code none}: whole files), the schema the readers produce, and one partition per file.
 */
final class NdpScan implements Scan, Batch {
  static final ObjectMapper MAPPER = new ObjectMapper()
      .setNodeFactory(Translate.JSON)
      .enable(JsonGenerator.Feature.WRITE_BIGDECIMAL_AS_PLAIN);

  private final NdpOptions options;
  private final String plan; // JSON, null: whole-file transfer
  private final StructType readSchema;
  private final String pushedText;
  private InputPartition[] partitions; // listed once per scan

  NdpScan(NdpOptions options, List<ObjectNode> predicates, StructType required, Translate.AggPlan aggregate) {
    this.options = options;
    if (options.pushdown == Pushdown.NONE) {
      plan = null;
      readSchema = options.schema;
      pushedText = "nothing (whole files)";
      return;
    }
    ObjectNode p = Translate.JSON.objectNode().put("version", 1);
    ArrayNode filters = p.putArray("filters");
    predicates.forEach(filters::add);
    if (aggregate != null) {
      p.set("group_by", aggregate.groupBy());
      p.set("aggregates", aggregate.aggregates());
      readSchema = aggregate.schema();
    } else if (required != null) {
      ArrayNode project = p.putArray("project");
      for (StructField f : required.fields()) {
        project.add(f.name());
      }
      if (required.fields().length == 0) {
        // nothing needed but the row count (count(*)): the proxy takes [] as "every column", so ask
        // for one and let the readers drop it
        project.add(options.schema.fields()[0].name());
      }
      readSchema = required;
    } else {
      readSchema = options.schema; // filter only: the plan has no project, the proxy returns all columns
    }
    try {
      plan = MAPPER.writeValueAsString(p);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException(e);
    }
    pushedText = plan;
  }

  @Override
  public StructType readSchema() {
    return readSchema;
  }

  @Override
  public String description() {
    return "shufflelab-ndp " + options.path + " pushdown=" + options.pushdown.label + " plan=" + pushedText;
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  /** The directory's *.parquet files (WebHDFS LISTSTATUS via the first proxy), sorted, one partition each. */
  @Override
  public InputPartition[] planInputPartitions() {
    if (partitions == null) {
      List<ProxyHttp.FileStatus> files;
      try {
        files = ProxyHttp.listParquet(options.proxies.get(0), options.path, options.user, options.timeoutS);
      } catch (IOException e) {
        throw new UncheckedIOException("shufflelab-ndp: cannot list " + options.path + ": " + e.getMessage(), e);
      }
      partitions = new InputPartition[files.size()];
      for (int i = 0; i < files.size(); i++) {
        partitions[i] = new NdpPartition(files.get(i).path(), files.get(i).length(), options.proxyFor(i));
      }
    }
    return partitions;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new NdpReaderFactory(options, plan, readSchema);
  }
}
