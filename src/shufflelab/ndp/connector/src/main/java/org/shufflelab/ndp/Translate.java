package org.shufflelab.ndp;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.expressions.Cast;
import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.GeneralScalarExpression;
import org.apache.spark.sql.connector.expressions.LiteralValue;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.StringStartsWith;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's pushed filters and aggregates as parts of a plan document (shufflelab.ndp.plan, version 1).
 * Anything the plan language cannot say with the same meaning as Spark is not translated (null), so
 * Spark keeps it: the plan only ever narrows what Spark would have computed, never changes it.
 */
final class Translate {
  static final JsonNodeFactory JSON = JsonNodeFactory.instance;
  // the proxy's limits (shufflelab.ndp.plan): beyond them a plan is refused as a whole
  static final int MAX_PREDICATES = 64;
  static final int MAX_IN_ITEMS = 1000;
  static final int MAX_STRING = 1024;
  static final int MAX_EXPR_DEPTH = 8;
  static final int MAX_DECIMAL_PRECISION = 38;

  private Translate() {}

  // -- filters ---------------------------------------------------------------------------------

  /** The predicates one Spark filter became, and whether they say all of it (else Spark re-checks it). */
  record Conjuncts(List<ObjectNode> predicates, boolean complete) {}

  /**
   * A filter as plan predicates. An {@code And} is split into its conjuncts; those that translate
   * are pushed even if the others do not (pushing a conjunct only removes rows the whole filter
   * would remove too), and then the filter is {@code complete=false} so Spark evaluates it again.
   */
  static Conjuncts filter(Filter f, NdpOptions o) {
    if (f instanceof And a) {
      Conjuncts l = filter(a.left(), o);
      Conjuncts r = filter(a.right(), o);
      List<ObjectNode> all = new ArrayList<>(l.predicates());
      all.addAll(r.predicates());
      return new Conjuncts(all, l.complete() && r.complete());
    }
    ObjectNode p = predicate(f, o);
    return p == null ? new Conjuncts(List.of(), false) : new Conjuncts(List.of(p), true);
  }

  private static ObjectNode predicate(Filter f, NdpOptions o) {
    if (f instanceof EqualTo e) {
      return compare(e.attribute(), "=", e.value(), o);
    }
    if (f instanceof Not n && n.child() instanceof EqualTo e) {
      return compare(e.attribute(), "!=", e.value(), o);
    }
    if (f instanceof GreaterThan g) {
      return compare(g.attribute(), ">", g.value(), o);
    }
    if (f instanceof GreaterThanOrEqual g) {
      return compare(g.attribute(), ">=", g.value(), o);
    }
    if (f instanceof LessThan l) {
      return compare(l.attribute(), "<", l.value(), o);
    }
    if (f instanceof LessThanOrEqual l) {
      return compare(l.attribute(), "<=", l.value(), o);
    }
    if (f instanceof StringStartsWith s) {
      return "string".equals(o.planTypes.get(s.attribute())) ? compare(s.attribute(), "starts_with", s.value(), o)
          : null;
    }
    if (f instanceof IsNull n) {
      return nullCheck(n.attribute(), "is_null", o);
    }
    if (f instanceof IsNotNull n) {
      return nullCheck(n.attribute(), "not_null", o);
    }
    if (f instanceof In in) {
      String type = o.planTypes.get(in.attribute());
      Object[] values = in.values();
      if (type == null || values.length == 0 || values.length > MAX_IN_ITEMS) {
        return null;
      }
      ArrayNode vs = JSON.arrayNode();
      for (Object v : values) {
        JsonNode j = value(type, v); // a NULL in the list never matches; Spark keeps such an IN
        if (j == null) {
          return null;
        }
        vs.add(j);
      }
      ObjectNode p = JSON.objectNode().put("column", in.attribute()).put("op", "in");
      p.set("values", vs);
      return p;
    }
    return null; // Or, Not(other), EqualNullSafe, StringContains, StringEndsWith, ...: Spark's
  }

  private static ObjectNode compare(String column, String op, Object value, NdpOptions o) {
    String type = o.planTypes.get(column);
    JsonNode v = type == null ? null : value(type, value);
    if (v == null) {
      return null;
    }
    ObjectNode p = JSON.objectNode().put("column", column).put("op", op);
    p.set("value", v);
    return p;
  }

  private static ObjectNode nullCheck(String column, String op, NdpOptions o) {
    return o.planTypes.containsKey(column) ? JSON.objectNode().put("column", column).put("op", op) : null;
  }

  /** A filter value as the plan's JSON value for a column of plan type {@code type}; null: cannot. */
  static JsonNode value(String type, Object v) {
    switch (type) {
      case "int":
        return integral(v) ? JSON.numberNode(new BigInteger(v.toString())) : null;
      case "float":
        if (integral(v)) {
          return JSON.numberNode(new BigInteger(v.toString()));
        }
        if ((v instanceof Double || v instanceof Float) && Double.isFinite(((Number) v).doubleValue())) {
          return JSON.numberNode(((Number) v).doubleValue());
        }
        return v instanceof BigDecimal d ? number(d) : null;
      case "decimal":
        if (integral(v)) {
          return JSON.numberNode(new BigInteger(v.toString()));
        }
        return v instanceof BigDecimal d ? number(d) : null;
      case "string":
        return v instanceof String s && s.length() <= MAX_STRING ? JSON.textNode(s) : null;
      case "date":
        LocalDate d = v instanceof java.sql.Date sd ? sd.toLocalDate() : v instanceof LocalDate ld ? ld : null;
        // the proxy parses dates with Python's date.fromisoformat: years 1..9999
        return d != null && d.getYear() >= 1 && d.getYear() <= 9999 ? JSON.textNode(d.toString()) : null;
      default:
        return null;
    }
  }

  private static boolean integral(Object v) {
    return v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long
        || v instanceof BigInteger;
  }

  /**
   * A decimal as a JSON number: integral values as integers (the proxy then compares them exactly
   * with decimal columns), others in plain notation (0.05, never 5E-2).
   */
  private static JsonNode number(BigDecimal d) {
    BigDecimal s = d.stripTrailingZeros();
    return s.scale() <= 0 ? JSON.numberNode(s.toBigIntegerExact()) : JSON.numberNode(d);
  }

  // -- partial aggregates ----------------------------------------------------------------------

  /**
   * A pushed aggregation: the plan's {@code group_by} and {@code aggregates}, and the schema of its
   * partial result (group-by columns, then one column per aggregate) as Spark will read it.
   */
  record AggPlan(ArrayNode groupBy, ArrayNode aggregates, StructType schema, String description) {}

  /**
   * Spark's aggregation as a partial-aggregate plan, or null if any part cannot be pushed: group by
   * plain columns only; SUM, COUNT, COUNT(*), MIN, MAX (not DISTINCT) over a column or over + - *
   * of numeric columns and literals. (Spark turns AVG into SUM and COUNT itself when complete
   * pushdown is refused, which {@link NdpScanBuilder#supportCompletePushDown} always does.)
   *
   * <p>The result types: what Spark gets back is the partial result, and Spark re-aggregates it
   * (MIN/MAX of partial MIN/MAX, SUM of partial SUMs and COUNTs) casting where its types differ,
   * so each column only has to hold the partial values exactly: COUNT as BIGINT, MIN/MAX as their
   * argument's type, SUM as BIGINT (integers), DOUBLE, or DECIMAL(38, scale of the argument).
   */
  static AggPlan aggregation(Aggregation agg, NdpOptions o) {
    AggregateFunc[] fns = agg.aggregateExpressions();
    if (fns.length == 0) { // a DISTINCT without aggregates: nothing a plan can express (needs aggregates)
      return null;
    }
    List<StructField> fields = new ArrayList<>();
    ArrayNode groupBy = JSON.arrayNode();
    Set<String> seen = new HashSet<>();
    for (Expression e : agg.groupByExpressions()) {
      String c = column(e, o);
      if (c == null || !seen.add(c)) {
        return null;
      }
      groupBy.add(c);
      fields.add(DataTypes.createStructField(c, o.schema.apply(c).dataType(), true));
    }
    ArrayNode aggregates = JSON.arrayNode();
    for (int i = 0; i < fns.length; i++) {
      String alias = "a" + i;
      while (seen.contains(alias)) {
        alias = "_" + alias;
      }
      ObjectNode a = JSON.objectNode();
      DataType type;
      AggregateFunc f = fns[i];
      if (f instanceof CountStar) {
        a.put("fn", "count");
        type = DataTypes.LongType;
      } else if (f instanceof Count c && !c.isDistinct()) {
        a.put("fn", "count");
        type = argument(a, c.column(), o, true) == null ? null : DataTypes.LongType;
      } else if (f instanceof Sum s && !s.isDistinct()) {
        a.put("fn", "sum");
        type = sumType(argument(a, s.column(), o, false));
      } else if (f instanceof Min m) {
        a.put("fn", "min");
        type = argument(a, m.column(), o, true);
      } else if (f instanceof Max m) {
        a.put("fn", "max");
        type = argument(a, m.column(), o, true);
      } else {
        return null; // AVG (complete pushdown only), DISTINCT, statistical and user-defined functions
      }
      if (type == null) {
        return null;
      }
      a.put("alias", alias);
      seen.add(alias);
      aggregates.add(a);
      fields.add(DataTypes.createStructField(alias, type, true));
    }
    String desc = "group_by=" + groupBy + " aggregates=" + aggregates;
    return new AggPlan(groupBy, aggregates, DataTypes.createStructType(fields), desc);
  }

  private static DataType sumType(DataType t) {
    if (t == null) {
      return null;
    }
    if (t instanceof DecimalType d) {
      return DataTypes.createDecimalType(MAX_DECIMAL_PRECISION, d.scale());
    }
    return t instanceof DoubleType || t instanceof FloatType ? DataTypes.DoubleType : DataTypes.LongType;
  }

  /**
   * Sets the aggregate's argument ({@code column} or {@code expr}) and returns its Spark type, or
   * null if it cannot be pushed. Plain columns of any plan type may be counted, min'ed and max'ed;
   * arithmetic (and SUM) needs numbers.
   */
  private static DataType argument(ObjectNode a, Expression e, NdpOptions o, boolean anyColumn) {
    String c = column(e, o);
    if (c != null) {
      DataType t = o.schema.apply(c).dataType();
      if (!anyColumn && !numeric(t)) {
        return null;
      }
      a.put("column", c);
      return t;
    }
    Typed x = expr(e, o, 1);
    if (x == null) {
      return null;
    }
    a.set("expr", x.node);
    return x.type;
  }

  /** An arithmetic expression node and the type Spark gives it. */
  private record Typed(JsonNode node, DataType type) {}

  /**
   * {@code {"col"} | {"lit"} | {"op", "args"}} for + - * over numeric columns and literals, typed by
   * Spark's rules. Refused: other operators (division has its own zero and rounding rules),
   * narrowing casts, non-integral decimal literals (the plan would carry them as JSON floats, and
   * DuckDB would then compute in DOUBLE where Spark computes exact decimals), and decimal results
   * for which Spark rounds away scale (wider than 38 digits with more than 6 digits of scale).
   */
  private static Typed expr(Expression e, NdpOptions o, int depth) {
    if (depth > MAX_EXPR_DEPTH) {
      return null;
    }
    String c = column(e, o);
    if (c != null) {
      DataType t = o.schema.apply(c).dataType();
      return numeric(t) ? new Typed(JSON.objectNode().put("col", c), t) : null;
    }
    if (e instanceof LiteralValue<?> lit) {
      return literal(lit.value(), lit.dataType());
    }
    if (e instanceof Cast cast) {
      // Spark's implicit casts (int -> decimal(10,0), decimal -> wider decimal, x -> double) do not
      // change values, and DuckDB applies its own implicit ones: the plan carries the operand as is
      Typed in = expr(cast.expression(), o, depth + 1);
      return in != null && widening(in.type, cast.dataType()) ? new Typed(in.node, cast.dataType()) : null;
    }
    if (e instanceof GeneralScalarExpression g && g.children().length == 2
        && (g.name().equals("+") || g.name().equals("-") || g.name().equals("*"))) {
      Typed l = expr(g.children()[0], o, depth + 1);
      Typed r = expr(g.children()[1], o, depth + 1);
      DataType t = l == null || r == null ? null : arithmeticType(g.name(), l.type, r.type);
      if (t == null) {
        return null;
      }
      ObjectNode n = JSON.objectNode().put("op", g.name());
      n.putArray("args").add(l.node).add(r.node);
      return new Typed(n, t);
    }
    return null;
  }

  private static Typed literal(Object v, DataType t) {
    if (v instanceof Decimal d && t instanceof DecimalType) {
      BigDecimal b = d.toJavaBigDecimal().stripTrailingZeros();
      return b.scale() <= 0 ? new Typed(JSON.objectNode().put("lit", b.toBigIntegerExact()), t) : null;
    }
    if ((v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) && numeric(t)) {
      return new Typed(JSON.objectNode().put("lit", ((Number) v).longValue()), t);
    }
    if ((v instanceof Double || v instanceof Float) && Double.isFinite(((Number) v).doubleValue())) {
      return new Typed(JSON.objectNode().put("lit", ((Number) v).doubleValue()), DataTypes.DoubleType);
    }
    return null;
  }

  /** Spark's result type of {@code l op r}; null where Spark's result could differ from DuckDB's. */
  private static DataType arithmeticType(String op, DataType l, DataType r) {
    if (l instanceof DoubleType || r instanceof DoubleType || l instanceof FloatType || r instanceof FloatType) {
      return DataTypes.DoubleType;
    }
    if (integralType(l) && integralType(r)) {
      return DataTypes.LongType;
    }
    if (!(l instanceof DecimalType a) || !(r instanceof DecimalType b)) {
      return null; // Spark casts integers to decimals first; a mix without the cast is not expected
    }
    int p;
    int s;
    if (op.equals("*")) {
      p = a.precision() + b.precision() + 1;
      s = a.scale() + b.scale();
    } else {
      s = Math.max(a.scale(), b.scale());
      p = Math.max(a.precision() - a.scale(), b.precision() - b.scale()) + s + 1;
    }
    if (p <= MAX_DECIMAL_PRECISION) {
      return DataTypes.createDecimalType(p, s);
    }
    // Too wide: Spark caps the precision at 38 and keeps max(38 - integer digits, min(scale, 6))
    // digits of scale (DecimalType.adjustPrecisionScale). If that is the whole scale nothing is
    // rounded (values only have to fit, in Spark as in DuckDB); otherwise Spark rounds and DuckDB
    // would not, so the expression stays with Spark.
    int kept = Math.max(MAX_DECIMAL_PRECISION - (p - s), Math.min(s, 6));
    return kept == s ? DataTypes.createDecimalType(MAX_DECIMAL_PRECISION, s) : null;
  }

  private static boolean widening(DataType from, DataType to) {
    if (to instanceof DoubleType) {
      return numeric(from);
    }
    if (to instanceof LongType) {
      return integralType(from);
    }
    if (to instanceof IntegerType) {
      return from instanceof IntegerType || from instanceof ShortType || from instanceof ByteType;
    }
    if (to instanceof DecimalType d) {
      if (from instanceof DecimalType f) {
        return d.scale() >= f.scale() && d.precision() - d.scale() >= f.precision() - f.scale();
      }
      return integralType(from) && d.precision() - d.scale() >= integralDigits(from);
    }
    return false;
  }

  private static int integralDigits(DataType t) {
    if (t instanceof ByteType) {
      return 3;
    }
    if (t instanceof ShortType) {
      return 5;
    }
    return t instanceof IntegerType ? 10 : 19;
  }

  private static boolean integralType(DataType t) {
    return t instanceof ByteType || t instanceof ShortType || t instanceof IntegerType || t instanceof LongType;
  }

  private static boolean numeric(DataType t) {
    return integralType(t) || t instanceof DoubleType || t instanceof FloatType || t instanceof DecimalType;
  }

  /** The table column a V2 expression names, or null. */
  private static String column(Expression e, NdpOptions o) {
    if (e instanceof NamedReference ref && ref.fieldNames().length == 1
        && o.planTypes.containsKey(ref.fieldNames()[0])) {
      return ref.fieldNames()[0];
    }
    return null;
  }
}
