package org.shufflelab.ndp;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

import com.fasterxml.jackson.databind.JsonNode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * HTTP to the NDP proxy with the JDK's client: WebHDFS listing and whole-file reads (forwarded by
 * the proxy to the NameNode, then straight from the DataNode it redirects to) and pushdowns.
 */
final class ProxyHttp {
  private static final Logger LOG = LoggerFactory.getLogger(ProxyHttp.class);
  static final String ARROW_STREAM = "application/vnd.apache.arrow.stream";
  /** A full proxy (503) is asked again for this long in total, then the task fails with its message. */
  static final long BUSY_BUDGET_MS = 60_000;
  private static final long MAX_BACKOFF_MS = 10_000;
  private static final int MAX_REDIRECTS = 3;

  // One client per JVM: it keeps connections to the proxies alive across partitions. HTTP/1.1:
  // the proxy and Hadoop's servers speak nothing else, and the JDK would otherwise offer an h2c upgrade.
  private static final HttpClient CLIENT = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1)
      .followRedirects(HttpClient.Redirect.NEVER)
      .connectTimeout(Duration.ofSeconds(30))
      .build();

  private ProxyHttp() {}

  record FileStatus(String path, long length) {}

  /** The {@code *.parquet} files in {@code dir} (or {@code dir} itself if it is a file), by path. */
  static List<FileStatus> listParquet(String proxy, String dir, String user, int timeoutS) throws IOException {
    URI uri = uri(proxy, "/webhdfs/v1" + dir, "op=LISTSTATUS&user.name=" + enc(user));
    HttpResponse<InputStream> r = send(HttpRequest.newBuilder(uri).GET(), timeoutS);
    JsonNode doc;
    try (InputStream body = r.body()) {
      if (r.statusCode() != 200) {
        throw new IOException(failure("LISTSTATUS " + dir, proxy, r.statusCode(), body));
      }
      doc = NdpScan.MAPPER.readTree(body);
    }
    List<FileStatus> out = new ArrayList<>();
    for (JsonNode f : doc.path("FileStatuses").path("FileStatus")) {
      String name = f.path("pathSuffix").asText("");
      if (!"FILE".equals(f.path("type").asText())) {
        continue;
      }
      if (name.isEmpty()) { // LISTSTATUS of a file lists the file itself
        out.add(new FileStatus(dir, f.path("length").asLong(-1)));
      } else if (name.endsWith(".parquet")) {
        out.add(new FileStatus(dir.equals("/") ? "/" + name : dir + "/" + name, f.path("length").asLong(-1)));
      }
    }
    out.sort(Comparator.comparing(FileStatus::path));
    return out;
  }

  /** Where a whole-file read came from and how many bytes it was. */
  record Download(long bytes, String datanode) {}

  /**
   * Streams {@code path} into {@code dest}: WebHDFS OPEN through the proxy, whose NameNode answers
   * with a redirect to a DataNode, which then sends the file (plain HTTP, followed only to http).
   */
  static Download download(String proxy, String path, String user, Path dest, int timeoutS) throws IOException {
    URI uri = uri(proxy, "/webhdfs/v1" + path, "op=OPEN&user.name=" + enc(user));
    for (int hop = 0; hop <= MAX_REDIRECTS; hop++) {
      HttpResponse<InputStream> r = send(HttpRequest.newBuilder(uri).GET(), timeoutS);
      try (InputStream body = r.body()) {
        int s = r.statusCode();
        if (s == 301 || s == 302 || s == 303 || s == 307 || s == 308) {
          String loc = r.headers().firstValue("Location").orElse("");
          URI next = uri.resolve(loc);
          if (!"http".equals(next.getScheme()) || next.getHost() == null) {
            throw new IOException("OPEN " + path + " via " + proxy + ": redirected to '" + loc + "', not http");
          }
          uri = next;
          continue;
        }
        if (s != 200) {
          throw new IOException(failure("OPEN " + path, uri.getScheme() + "://" + uri.getRawAuthority(), s, body));
        }
        long n;
        try (OutputStream out = Files.newOutputStream(dest)) {
          n = body.transferTo(out);
        }
        return new Download(n, uri.getRawAuthority());
      }
    }
    throw new IOException("OPEN " + path + " via " + proxy + ": more than " + MAX_REDIRECTS + " redirects");
  }

  /**
   * POSTs a pushdown; returns the 200 answer with its body (an Arrow IPC stream) still to be read.
   * 503 (queue full) is retried after the proxy's Retry-After (bounded, with jitter so that tasks
   * refused together do not return together) for {@link #BUSY_BUDGET_MS} in all.
   */
  static HttpResponse<InputStream> pushdown(String proxy, String path, String body, int timeoutS)
      throws IOException {
    URI uri = uri(proxy, "/ndp/v1" + path, null);
    long deadline = System.currentTimeMillis() + BUSY_BUDGET_MS;
    long backoff = 250;
    while (true) {
      HttpRequest.Builder req = HttpRequest.newBuilder(uri)
          .header("Content-Type", "application/json")
          .header("Accept", ARROW_STREAM)
          .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
      HttpResponse<InputStream> r = send(req, timeoutS);
      int s = r.statusCode();
      if (s == 200) {
        return r;
      }
      String why;
      try (InputStream err = r.body()) {
        why = failure("pushdown " + path, proxy, s, err);
      }
      long left = deadline - System.currentTimeMillis();
      if (s != 503 || left <= 0) {
        throw new IOException(s == 503 ? why + " (still busy after " + BUSY_BUDGET_MS / 1000 + " s of retries)"
            : why);
      }
      long wait = Math.max(backoff, 1000 * retryAfterS(r));
      wait = Math.min(Math.min(wait, MAX_BACKOFF_MS), left);
      wait += ThreadLocalRandom.current().nextLong(wait / 5 + 1);
      LOG.info("shufflelab-ndp: {} busy, retrying {} in {} ms", proxy, path, wait);
      try {
        Thread.sleep(wait);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("pushdown " + path + " interrupted while the proxy was busy", e);
      }
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }

  /** Retry-After in seconds (0 when missing or an HTTP date, which the proxy never sends). */
  private static long retryAfterS(HttpResponse<?> r) {
    try {
      return Math.max(0, Long.parseLong(r.headers().firstValue("Retry-After").orElse("0").strip()));
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  private static HttpResponse<InputStream> send(HttpRequest.Builder req, int timeoutS) throws IOException {
    // the timeout bounds the wait for the response head (a pushdown answers after executing)
    HttpRequest r = req.timeout(Duration.ofSeconds(timeoutS)).build();
    try {
      return CLIENT.send(r, HttpResponse.BodyHandlers.ofInputStream());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(r.method() + " " + r.uri() + " interrupted", e);
    } catch (IOException e) {
      throw new IOException(r.method() + " " + r.uri() + " failed: " + e, e);
    }
  }

  /** The error an answer carries: the proxy's {"error","field"}, WebHDFS's RemoteException or the text. */
  private static String failure(String what, String server, int status, InputStream body) throws IOException {
    byte[] raw = body.readNBytes(8192);
    String text = new String(raw, StandardCharsets.UTF_8).strip();
    String msg = text;
    try {
      JsonNode j = NdpScan.MAPPER.readTree(raw);
      if (j != null && j.hasNonNull("error")) {
        msg = j.get("error").asText() + (j.hasNonNull("field") ? " (field " + j.get("field").asText() + ")" : "");
      } else if (j != null && j.has("RemoteException")) {
        JsonNode e = j.get("RemoteException");
        msg = e.path("exception").asText("") + ": " + e.path("message").asText("");
      }
    } catch (IOException e) {
      // not JSON: the text as it is
    }
    if (msg.length() > 1000) {
      msg = msg.substring(0, 1000) + "...";
    }
    return what + ": " + server + " answered HTTP " + status + (msg.isEmpty() ? "" : ": " + msg);
  }

  /** An http URI on {@code server} with {@code path} percent-encoded where needed (spaces, non-ASCII). */
  private static URI uri(String server, String path, String query) throws IOException {
    try {
      URI base = new URI(server);
      URI u = new URI("http", null, base.getHost(), base.getPort(), path, null, null);
      return query == null ? u : new URI(u.toASCIIString() + "?" + query);
    } catch (URISyntaxException e) {
      throw new IOException("cannot address " + path + " on " + server + ": " + e.getMessage(), e);
    }
  }

  private static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }
}
