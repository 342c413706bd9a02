package shufflelab;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;

import org.apache.spark.SparkConf;
import org.apache.spark.executor.ShuffleReadMetrics;
import org.apache.spark.executor.ShuffleWriteMetrics;
import org.apache.spark.executor.TaskMetrics;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.TaskInfo;

import scala.Tuple4;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Per-task shuffle flow records for shufflelab, one JSON object per line.
 *
 * Attached with {@code spark.extraListeners=shufflelab.TaskFlowListener}; writes to the file named
 * by {@code spark.shufflelab.listener.path}. Three kinds of line:
 * <ul>
 *   <li>{@code start}: a task was launched (driver clock, executor, host);</li>
 *   <li>{@code progress}: a running task's shuffle-read counters from an executor heartbeat
 *       (remote bytes fetched so far, fetch wait so far) -- the event log has only the final
 *       values, so this is the only place the fetch progress of a task over time is visible;</li>
 *   <li>{@code end}: the task's final timing and shuffle metrics.</li>
 * </ul>
 * Every line is flushed when written, so a run that is killed keeps the tasks that finished.
 */
public class TaskFlowListener extends SparkListener {
  private final BufferedWriter out;

  public TaskFlowListener(SparkConf conf) throws IOException {
    Path path = Paths.get(conf.get("spark.shufflelab.listener.path", "shufflelab-tasks.jsonl"));
    if (path.getParent() != null) {
      Files.createDirectories(path.getParent());
    }
    out = Files.newBufferedWriter(path, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
        StandardOpenOption.APPEND);
  }

  private synchronized void write(String line) {
    try {
      out.write(line);
      out.write('\n');
      out.flush();
    } catch (IOException e) {
      // A full disk must not fail the application; the event log still has the tasks.
    }
  }

  private static String str(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  @Override
  public void onTaskStart(SparkListenerTaskStart e) {
    TaskInfo t = e.taskInfo();
    write("{\"kind\":\"start\",\"t_ms\":" + System.currentTimeMillis() + ",\"task\":" + t.taskId()
        + ",\"stage\":" + e.stageId() + ",\"attempt\":" + e.stageAttemptId() + ",\"index\":" + t.index()
        + ",\"executor\":" + str(t.executorId()) + ",\"host\":" + str(t.host()) + ",\"launch_ms\":"
        + t.launchTime() + "}");
  }

  @Override
  public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate e) {
    long now = System.currentTimeMillis();
    List<Tuple4<Object, Object, Object, scala.collection.immutable.Seq<AccumulableInfo>>> updates =
        CollectionConverters.asJava(e.accumUpdates());
    for (Tuple4<Object, Object, Object, scala.collection.immutable.Seq<AccumulableInfo>> u : updates) {
      long remote = -1;
      long wait = -1;
      long reqs = -1;
      for (AccumulableInfo a : CollectionConverters.asJava(u._4())) {
        if (a.name().isEmpty() || a.update().isEmpty()) {
          continue;
        }
        String name = a.name().get();
        Object v = a.update().get();
        if (!(v instanceof Number)) {
          continue;
        }
        long n = ((Number) v).longValue();
        if (name.equals("internal.metrics.shuffle.read.remoteBytesRead")) {
          remote = n;
        } else if (name.equals("internal.metrics.shuffle.read.fetchWaitTime")) {
          wait = n;
        } else if (name.equals("internal.metrics.shuffle.read.remoteReqsDuration")) {
          reqs = n;
        }
      }
      if (remote >= 0 || wait >= 0) {
        write("{\"kind\":\"progress\",\"t_ms\":" + now + ",\"task\":" + u._1() + ",\"stage\":" + u._2()
            + ",\"executor\":" + str(e.execId()) + ",\"remote_bytes\":" + Math.max(remote, 0)
            + ",\"fetch_wait_ms\":" + Math.max(wait, 0) + ",\"remote_reqs_ms\":" + Math.max(reqs, 0) + "}");
      }
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd e) {
    TaskInfo t = e.taskInfo();
    TaskMetrics m = e.taskMetrics();
    StringBuilder b = new StringBuilder();
    b.append("{\"kind\":\"end\",\"t_ms\":").append(System.currentTimeMillis())
        .append(",\"task\":").append(t.taskId())
        .append(",\"stage\":").append(e.stageId())
        .append(",\"attempt\":").append(e.stageAttemptId())
        .append(",\"index\":").append(t.index())
        .append(",\"executor\":").append(str(t.executorId()))
        .append(",\"host\":").append(str(t.host()))
        .append(",\"launch_ms\":").append(t.launchTime())
        .append(",\"finish_ms\":").append(t.finishTime())
        .append(",\"successful\":").append(t.successful());
    if (m != null) {
      ShuffleReadMetrics r = m.shuffleReadMetrics();
      ShuffleWriteMetrics w = m.shuffleWriteMetrics();
      b.append(",\"run_ms\":").append(m.executorRunTime())
          .append(",\"cpu_ns\":").append(m.executorCpuTime())
          .append(",\"deserialize_ms\":").append(m.executorDeserializeTime())
          .append(",\"gc_ms\":").append(m.jvmGCTime())
          .append(",\"remote_bytes\":").append(r.remoteBytesRead())
          .append(",\"local_bytes\":").append(r.localBytesRead())
          .append(",\"remote_blocks\":").append(r.remoteBlocksFetched())
          .append(",\"local_blocks\":").append(r.localBlocksFetched())
          .append(",\"fetch_wait_ms\":").append(r.fetchWaitTime())
          .append(",\"remote_reqs_ms\":").append(r.remoteReqsDuration())
          .append(",\"records_read\":").append(r.recordsRead())
          .append(",\"write_bytes\":").append(w.bytesWritten())
          .append(",\"write_ns\":").append(w.writeTime())
          .append(",\"records_written\":").append(w.recordsWritten());
    }
    b.append("}");
    write(b.toString());
  }

  @Override
  public void onApplicationEnd(SparkListenerApplicationEnd e) {
    try {
      out.close();
    } catch (IOException ignored) {
      // nothing left to lose
    }
  }
}
