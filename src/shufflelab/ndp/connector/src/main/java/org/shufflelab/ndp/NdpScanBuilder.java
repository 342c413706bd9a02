package org.shufflelab.ndp;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;

import org.shufflelab.ndp.NdpOptions.Pushdown;

/**
 * Takes what Spark offers to push, within the {@code pushdown} policy: filters (filter and up),
 * column pruning (filter+project and up), partial aggregates (full). Spark calls pushFilters,
 * then pushAggregation (only if no filter was left to Spark), then pruneColumns (only if no
 * aggregate was pushed), then build.
 */
final class NdpScanBuilder
    implements ScanBuilder, SupportsPushDownFilters, SupportsPushDownRequiredColumns, SupportsPushDownAggregates {
  private final NdpOptions options;
  private final List<ObjectNode> predicates = new ArrayList<>();
  private Filter[] pushed = new Filter[0];
  private boolean everyFilterPushed = true;
  private StructType required; // null: every column
  private Translate.AggPlan aggregate; // null: none pushed

  NdpScanBuilder(NdpOptions options) {
    this.options = options;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    if (!options.pushdown.atLeast(Pushdown.FILTER)) {
      everyFilterPushed = filters.length == 0;
      return filters;
    }
    List<Filter> accepted = new ArrayList<>();
    List<Filter> postScan = new ArrayList<>();
    for (Filter f : filters) {
      Translate.Conjuncts c = Translate.filter(f, options);
      if (predicates.size() + c.predicates().size() > Translate.MAX_PREDICATES) {
        postScan.add(f); // the proxy would refuse the whole plan: leave the rest to Spark
        continue;
      }
      predicates.addAll(c.predicates());
      if (!c.predicates().isEmpty()) {
        accepted.add(f);
      }
      if (!c.complete()) {
        postScan.add(f);
      }
    }
    pushed = accepted.toArray(new Filter[0]);
    everyFilterPushed = postScan.isEmpty();
    return postScan.toArray(new Filter[0]);
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed;
  }

  @Override
  public void pruneColumns(StructType requiredSchema) {
    if (options.pushdown.atLeast(Pushdown.FILTER_PROJECT)) {
      required = requiredSchema;
    } // below filter+project every column is transferred; Spark projects them itself
  }

  /** Never: Spark always re-aggregates the per-file partial results (and rewrites AVG as SUM, COUNT). */
  @Override
  public boolean supportCompletePushDown(Aggregation aggregation) {
    return false;
  }

  @Override
  public boolean pushAggregation(Aggregation aggregation) {
    if (options.pushdown != Pushdown.FULL || !everyFilterPushed) {
      return false; // an aggregate over rows Spark still has to filter would be wrong
    }
    aggregate = Translate.aggregation(aggregation, options);
    return aggregate != null;
  }

  @Override
  public Scan build() {
    return new NdpScan(options, predicates, required, aggregate);
  }
}
