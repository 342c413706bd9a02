package shufflelab;

import java.io.BufferedWriter;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Map;

import org.apache.spark.TaskContext;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * Per-task user-mode CPU time, measured in the executor (attached with
 * {@code spark.plugins=shufflelab.TaskCpuPlugin}).
 *
 * <p>Spark's executorCpuTime is the task thread's total CPU time. On a kernel without IRQ time
 * accounting that total also holds the interrupt work (packet forwarding, timers) the kernel did
 * while the thread happened to be on the CPU, so cross traffic makes tasks look CPU-hungrier than
 * they are. The JVM's per-thread user time excludes it: interrupt ticks count as system time.
 * Each executor writes one JSON line per finished task to {@code shufflelab-task-cpu.jsonl} in
 * its working directory (collected with the executor logs): task id, stage, and the thread's user
 * and total CPU nanoseconds between the task's start and its end hooks.
 */
public class TaskCpuPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    return null;
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new Exec();
  }

  static final class Exec implements ExecutorPlugin {
    private final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    private final ThreadLocal<long[]> started = new ThreadLocal<>();
    private BufferedWriter out;

    @Override
    public void init(PluginContext ctx, Map<String, String> extraConf) {
      try {
        out = Files.newBufferedWriter(Paths.get("shufflelab-task-cpu.jsonl"), StandardCharsets.UTF_8,
            StandardOpenOption.CREATE, StandardOpenOption.APPEND);
      } catch (IOException e) {
        out = null; // no file, no measurement: the task itself must not fail
      }
    }

    @Override
    public void onTaskStart() {
      TaskContext tc = TaskContext.get();
      long task = tc == null ? -1 : tc.taskAttemptId();
      long stage = tc == null ? -1 : tc.stageId();
      started.set(new long[] {task, stage, mx.getCurrentThreadUserTime(), mx.getCurrentThreadCpuTime()});
    }

    private synchronized void write(String line) {
      if (out == null) {
        return;
      }
      try {
        out.write(line);
        out.write('\n');
        out.flush();
      } catch (IOException e) {
        out = null;
      }
    }

    private void end(boolean ok) {
      long[] s = started.get();
      if (s == null) {
        return;
      }
      started.remove();
      long user = mx.getCurrentThreadUserTime() - s[2];
      long cpu = mx.getCurrentThreadCpuTime() - s[3];
      write("{\"task\":" + s[0] + ",\"stage\":" + s[1] + ",\"user_ns\":" + user + ",\"cpu_ns\":" + cpu
          + ",\"ok\":" + ok + "}");
    }

    @Override
    public void onTaskSucceeded() {
      end(true);
    }

    @Override
    public void onTaskFailed(TaskFailedReason reason) {
      end(false);
    }

    @Override
    public void shutdown() {
      if (out != null) {
        try {
          out.close();
        } catch (IOException ignored) {
          // nothing left to lose
        }
      }
    }
  }
}
