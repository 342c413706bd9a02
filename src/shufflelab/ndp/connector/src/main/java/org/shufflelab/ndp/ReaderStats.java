package org.shufflelab.ndp;

import java.io.FileOutputStream;
import java.io.IOException;
import java.net.http.HttpHeaders;
import java.nio.charset.StandardCharsets;

import com.fasterxml.jackson.databind.node.ObjectNode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one partition reader cost, written as one JSON line to {@code stats_file} when it closes:
 * path, proxy, policy, operators, rows, body_bytes (received over the network), input_bytes,
 * exec_s, read_s, queue_s, datanode, elapsed_s. Pushdowns report the proxy's X-NDP-* headers;
 * whole-file reads the file's size for body_bytes and input_bytes and no operators.
 */
final class ReaderStats {
  private static final Logger LOG = LoggerFactory.getLogger(ReaderStats.class);

  private final String file; // null: not recorded
  private final long start = System.nanoTime();
  private boolean written;
  final ObjectNode line = Translate.JSON.objectNode();

  ReaderStats(NdpOptions options, NdpPartition partition) {
    this.file = options.statsFile;
    line.put("path", partition.path()).put("proxy", partition.proxy()).put("policy", options.pushdown.label)
        .put("operators", "").put("rows", 0L).put("body_bytes", 0L).put("input_bytes", 0L)
        .put("exec_s", 0.0).put("read_s", 0.0).put("queue_s", 0.0).put("datanode", "");
  }

  /** The proxy's statistics headers of a pushdown answer. */
  void headers(HttpHeaders h) {
    line.put("operators", h.firstValue("X-NDP-Operators").orElse(""))
        .put("rows", (long) number(h, "X-NDP-Rows"))
        .put("input_bytes", (long) number(h, "X-NDP-Input-Bytes"))
        .put("exec_s", number(h, "X-NDP-Exec-Seconds"))
        .put("read_s", number(h, "X-NDP-Read-Seconds"))
        .put("queue_s", number(h, "X-NDP-Queue-Seconds"))
        .put("datanode", h.firstValue("X-NDP-Datanode").orElse(""));
  }

  /** A numeric header; -1 when missing or malformed (a statistic, not worth failing the read for). */
  private static double number(HttpHeaders h, String name) {
    try {
      return Double.parseDouble(h.firstValue(name).orElse("-1"));
    } catch (NumberFormatException e) {
      return -1;
    }
  }

  /** A reader that failed to open records nothing (the task fails with the reason). */
  void discard() {
    written = true;
  }

  /**
   * Appends the line once. One write of the whole line to a file opened for appending: readers of
   * several tasks (and executors on one machine) never interleave within a line.
   */
  void write() {
    if (written || file == null) {
      return;
    }
    written = true;
    line.put("elapsed_s", (System.nanoTime() - start) / 1e9);
    byte[] bytes = (line.toString() + "\n").getBytes(StandardCharsets.UTF_8);
    try (FileOutputStream out = new FileOutputStream(file, true)) {
      out.write(bytes);
    } catch (IOException e) { // statistics never fail a query
      LOG.warn("shufflelab-ndp: cannot append to stats_file {}: {}", file, e.toString());
    }
  }
}
