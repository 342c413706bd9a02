package org.shufflelab.ndp;

import java.io.Serializable;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The reader options, checked once on the driver (every mistake is reported with the option's
 * name) and shipped to the executors inside the scan.
 *
 * <pre>
 *   proxies    http://ip:port,...  the NDP proxies; file i (sorted by path) goes to proxy i mod n
 *   path       /hdfs/dir           its *.parquet files are the table, one input partition each
 *   schema     Spark DDL           column types; each maps to a plan type (int|float|decimal|string|date)
 *   pushdown   none|filter|filter+project|full   (default full) the operator prefix allowed
 *   user       HDFS user.name      (default root)
 *   timeout_s  per HTTP request    (default 600)
 *   stats_file JSON lines          (optional) one line per partition reader
 * </pre>
 */
final class NdpOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Pattern NAME = Pattern.compile("[a-z_][a-z0-9_]{0,63}");

  /** How much of filter, project, aggregate the connector may push; each includes the previous. */
  enum Pushdown {
    NONE("none"), FILTER("filter"), FILTER_PROJECT("filter+project"), FULL("full");

    final String label;

    Pushdown(String label) {
      this.label = label;
    }

    boolean atLeast(Pushdown other) {
      return compareTo(other) >= 0;
    }

    static Pushdown parse(String s) {
      for (Pushdown p : values()) {
        if (p.label.equals(s.trim().toLowerCase(Locale.ROOT))) {
          return p;
        }
      }
      throw new IllegalArgumentException(
          "shufflelab-ndp: option pushdown=" + s + " is not one of none, filter, filter+project, full");
    }
  }

  final List<String> proxies;
  final String path;
  final StructType schema;
  /** column -> plan type, in schema order: the "schema" object of every pushdown request. */
  final LinkedHashMap<String, String> planTypes;
  final Pushdown pushdown;
  final String user;
  final int timeoutS;
  final String statsFile; // null: no statistics

  private NdpOptions(List<String> proxies, String path, StructType schema, Pushdown pushdown, String user,
      int timeoutS, String statsFile) {
    this.proxies = proxies;
    this.path = path;
    this.schema = schema;
    this.planTypes = planTypes(schema);
    this.pushdown = pushdown;
    this.user = user;
    this.timeoutS = timeoutS;
    this.statsFile = statsFile;
  }

  /** Options from a case-insensitive map; {@code schema} is the table's (from the option or the user). */
  static NdpOptions parse(Map<String, String> options, StructType schema) {
    String proxiesText = required(options, "proxies");
    List<String> proxies = new ArrayList<>();
    for (String p : proxiesText.split(",")) {
      if (!p.isBlank()) {
        proxies.add(proxyUrl(p.trim()));
      }
    }
    if (proxies.isEmpty()) {
      throw new IllegalArgumentException("shufflelab-ndp: option proxies names no proxy");
    }
    String path = hdfsPath(required(options, "path"));
    Pushdown pushdown = Pushdown.parse(options.getOrDefault("pushdown", "full"));
    String user = options.getOrDefault("user", "root");
    if (user.isBlank()) {
      throw new IllegalArgumentException("shufflelab-ndp: option user is empty");
    }
    int timeoutS;
    try {
      timeoutS = (int) Math.ceil(Double.parseDouble(options.getOrDefault("timeout_s", "600")));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("shufflelab-ndp: option timeout_s=" + options.get("timeout_s")
          + " is not a number of seconds");
    }
    if (timeoutS <= 0) {
      throw new IllegalArgumentException("shufflelab-ndp: option timeout_s must be positive");
    }
    String stats = options.get("stats_file");
    return new NdpOptions(Collections.unmodifiableList(proxies), path, schema, pushdown, user, timeoutS,
        stats == null || stats.isBlank() ? null : stats);
  }

  /** The table schema from the {@code schema} option (Spark DDL). */
  static StructType schemaOption(Map<String, String> options) {
    String ddl = required(options, "schema");
    try {
      return StructType.fromDDL(ddl);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("shufflelab-ndp: option schema is not a Spark DDL column list ("
          + e.getMessage() + ")", e);
    }
  }

  /**
   * The plan type of each column. The proxy checks the Parquet file against these, and plan values
   * are typed by them, so a column the plan language cannot describe is refused here, by name.
   */
  static LinkedHashMap<String, String> planTypes(StructType schema) {
    LinkedHashMap<String, String> out = new LinkedHashMap<>();
    for (StructField f : schema.fields()) {
      if (!NAME.matcher(f.name()).matches()) {
        throw new IllegalArgumentException("shufflelab-ndp: column '" + f.name()
            + "' is not a plan column name (lowercase letters, digits and _, not starting with a digit, "
            + "at most 64 characters)");
      }
      String t = planType(f.dataType());
      if (t == null) {
        throw new IllegalArgumentException("shufflelab-ndp: column '" + f.name() + "' has type "
            + f.dataType().sql() + ", which a pushdown plan cannot describe (use BYTE/SHORT/INT/BIGINT, "
            + "FLOAT/DOUBLE, DECIMAL, STRING or DATE)");
      }
      if (out.put(f.name(), t) != null) {
        throw new IllegalArgumentException("shufflelab-ndp: column '" + f.name() + "' appears twice");
      }
    }
    if (out.isEmpty()) {
      throw new IllegalArgumentException("shufflelab-ndp: the schema has no column");
    }
    return out;
  }

  static String planType(DataType t) {
    if (t instanceof ByteType || t instanceof ShortType || t instanceof IntegerType || t instanceof LongType) {
      return "int";
    }
    if (t instanceof FloatType || t instanceof DoubleType) {
      return "float";
    }
    if (t instanceof DecimalType) {
      return "decimal";
    }
    // a collated string compares differently from DuckDB's bytewise order: not a plan string
    if (t instanceof StringType && ((StringType) t).isUTF8BinaryCollation()) {
      return "string";
    }
    if (t instanceof DateType) {
      return "date";
    }
    return null;
  }

  String proxyFor(int fileIndex) {
    return proxies.get(fileIndex % proxies.size());
  }

  private static String required(Map<String, String> options, String key) {
    String v = options.get(key);
    if (v == null || v.isBlank()) {
      throw new IllegalArgumentException("shufflelab-ndp: option " + key + " is required");
    }
    return v;
  }

  private static String proxyUrl(String text) {
    try {
      URI u = new URI(text);
      boolean ok = "http".equals(u.getScheme()) && u.getHost() != null && u.getPort() > 0
          && (u.getRawPath() == null || u.getRawPath().isEmpty() || u.getRawPath().equals("/"))
          && u.getRawQuery() == null && u.getRawUserInfo() == null;
      if (ok) {
        return "http://" + u.getRawAuthority();
      }
    } catch (URISyntaxException e) {
      // reported below
    }
    throw new IllegalArgumentException("shufflelab-ndp: proxy '" + text + "' is not http://<address>:<port>");
  }

  private static String hdfsPath(String text) {
    String p = text.trim();
    while (p.length() > 1 && p.endsWith("/")) {
      p = p.substring(0, p.length() - 1);
    }
    if (!p.startsWith("/")) {
      throw new IllegalArgumentException("shufflelab-ndp: option path=" + text + " must be an absolute HDFS path");
    }
    for (String seg : p.substring(1).split("/", -1)) {
      if (p.length() > 1 && (seg.isEmpty() || seg.equals(".") || seg.equals(".."))) {
        throw new IllegalArgumentException("shufflelab-ndp: option path=" + text
            + " has an empty, '.' or '..' segment");
      }
    }
    return p;
  }
}
