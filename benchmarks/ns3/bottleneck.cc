// ns-3 micro-scenario for benchmarks/sim_vs_ns3.py:
// N TCP flows of B bytes each through one RED/ECN bottleneck, optionally next to constant-rate UDP.
// The bottleneck is RED on the average queue (--queue=red: minTh/maxTh/maxP/qw, optionally gentle
// and hard drop above maxTh) or step marking on the instantaneous queue (--queue=step: mark ECT,
// drop the rest, at K = minTh packets, DCTCP's recommended switch setting).
//
//   senders s0..sN-1, udp source u  --10G-->  router a  --bottleneck (RED, ECN)-->  router b  --10G-->  sinks
//
// Hosts like Linux (benchmarks/sim_vs_ns3_incast.py): --delAckTimeoutMs=40 (Linux's minimum
// delayed-ACK timer; ns-3's 200 ms races the 200 ms minimum RTO) and --dctcpFloor=2 (Linux's
// dctcp_ssthresh keeps ssthresh at 2 segments or more; ns-3's TcpDctcp has no floor), as
// benchmarks/ns3/two_tier.cc. --dctcpAckNow=true, a DCTCP receiver ACKing the segment that changes
// its CE state at once as Linux's dctcp_ece_ack_update does (ns-3's waits for a second segment or
// the timer), was measured and is not passed by the benchmark (docs/results/sim-vs-ns3/
// packet-mode-all.md, "Jittered UDP"). Defaults: ns-3's own.
//
// Prints one JSON object on stdout: per-flow completion times (s, from the flows' common start),
// per-flow retransmission timeouts, the UDP rate delivered, and the simulator's own wall time.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include "hosts.h"

using namespace ns3;
using namespace shufflelab;

static std::vector<double> g_fct;
static double g_t25 = -1, g_t75 = -1;  // when all flows together had 25 % / 75 % of their bytes
static uint64_t g_total = 0;
static std::vector<uint64_t> g_rx;
static uint64_t g_bytes = 0;
static double g_start = 1.0;
static std::vector<uint32_t> g_rtos;  // per flow: retransmission timeouts (the timer doubled)

// --udpJitter=J: the UDP source sends its packets at its constant rate's instants, each moved later by
// U[0, J) of a bottleneck packet time (a real sender's interrupts and NIC; J <= 1 keeps their order
// up to 100 %), from ns-3's random stream of --run; 0 (the default): ns3::OnOffApplication, exactly
// periodic, so that at a rate whose period is a whole number of packet times (50 %, 100 %) its
// arrivals meet the bottleneck's departures on the same nanosecond and ns-3's event order decides
struct JitteredUdp {
  Ptr<Socket> socket;
  Ptr<UniformRandomVariable> u;
  double startNs = 0, gapNs = 0, jitterNs = 0;
  uint64_t sent = 0;
};
static void SendJittered(JitteredUdp *j) {
  j->socket->Send(Create<Packet>(1472));
  j->sent++;
  double at = j->startNs + static_cast<double>(j->sent) * j->gapNs + j->u->GetValue(0, j->jitterNs);
  int64_t now = Simulator::Now().GetNanoSeconds();
  Simulator::Schedule(NanoSeconds(std::max<int64_t>(std::llround(at), now) - now), &SendJittered, j);
}

static void OnRto(uint32_t flow, Time old, Time now) {
  if (now == old + old) g_rtos[flow]++;
}

// --trace: on stderr, per flow its entries into each congestion state (1 disorder, 2 CWR: an echoed
// mark, 3 recovery, 4 loss: a timeout), segments sent and sent again, the time-weighted mean window
// after the first half second, and the ACKs that echo a mark (ECE) with those among them that do
// not advance the cumulative ACK, and DCTCP's time-weighted mean α (ns3::TcpDctcp's
// CongestionEstimate); each entry into recovery or loss with its time; then the bottleneck's queue
// length sampled every 100 µs (mean, share of samples at or above RED's thresholds and the limit)
// and its RED statistics (marks and drops, forced ones above maxTh apart). --seriesMs=M adds every
// M ms of virtual time a line "TS t q <queued> drops <n> marks <n> | <cwnd> <MB received> ..." per
// flow. The JSON on stdout is unchanged.
static bool g_trace = false;
struct FlowTrace {
  uint32_t states[5] = {0, 0, 0, 0, 0};
  uint64_t tx = 0, retx = 0, highTx = 0;
  uint64_t ece = 0, eceStill = 0, highAck = 0;  // ACKs echoing a mark; of them, not advancing the ACK
  double cwnd = 0, cwndAt = -1, cwndArea = 0, cwndTime = 0;
  double alpha = -1, alphaAt = -1, alphaArea = 0, alphaTime = 0;  // DCTCP's α, the mean after 0.5 s
};
static std::vector<FlowTrace> g_ft;
static double g_detailFrom = -1;  // --detailFrom=T: flow 0's every event for 10 ms from T s after the start
static bool Detail(uint32_t flow, double t) {
  return flow == 0 && g_detailFrom >= 0 && t >= g_detailFrom && t < g_detailFrom + 0.01;
}
static void TraceState(uint32_t flow, TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t to) {
  if (static_cast<int>(to) < 5) g_ft[flow].states[static_cast<int>(to)]++;
  double t = Simulator::Now().GetSeconds() - g_start;
  if (to == TcpSocketState::CA_RECOVERY || to == TcpSocketState::CA_LOSS) {
    std::fprintf(stderr, "%.6f flow %u enters %s, cwnd %.1f\n", t, flow,
                 to == TcpSocketState::CA_LOSS ? "loss" : "recovery", g_ft[flow].cwnd);
  }
  if (Detail(flow, t)) std::fprintf(stderr, "%.6f STATE %d\n", t, static_cast<int>(to));
}
static void TraceTx(uint32_t flow, Ptr<const Packet> p, const TcpHeader &h, Ptr<const TcpSocketBase>) {
  if (p->GetSize() == 0) return;
  FlowTrace &f = g_ft[flow];
  uint64_t seq = h.GetSequenceNumber().GetValue();
  double t = Simulator::Now().GetSeconds() - g_start;
  if (Detail(flow, t)) {
    std::fprintf(stderr, "%.6f %s %lu%s\n", t, seq < f.highTx ? "RETX" : "TX",
                 static_cast<unsigned long>((seq - 1) / kSegment), (h.GetFlags() & TcpHeader::CWR) ? " CWR" : "");
  }
  if (seq < f.highTx) {
    f.retx++;
  } else {
    f.tx++;
    f.highTx = seq + p->GetSize();
  }
}
static void TraceRx(uint32_t flow, Ptr<const Packet>, const TcpHeader &h, Ptr<const TcpSocketBase>) {
  if (!(h.GetFlags() & TcpHeader::ACK)) return;
  FlowTrace &f = g_ft[flow];
  uint64_t ack = h.GetAckNumber().GetValue();
  if (h.GetFlags() & TcpHeader::ECE) {
    f.ece++;
    f.eceStill += ack <= f.highAck;
  }
  f.highAck = std::max(f.highAck, ack);
}
static void TraceCwnd(uint32_t flow, uint32_t, uint32_t now) {
  FlowTrace &f = g_ft[flow];
  double t = Simulator::Now().GetSeconds() - g_start;
  double from = std::max(f.cwndAt, 0.5);  // the mean leaves out the first half second
  if (g_fct[flow] < 0 && f.cwndAt >= 0 && t > from) {
    f.cwndArea += f.cwnd * (t - from);
    f.cwndTime += t - from;
  }
  f.cwnd = static_cast<double>(now) / kSegment;
  f.cwndAt = t;
  if (Detail(flow, t)) std::fprintf(stderr, "%.6f CWND %.2f\n", t, f.cwnd);
}
static void TraceAlpha(uint32_t flow, uint32_t, uint32_t, double alpha) {
  FlowTrace &f = g_ft[flow];
  double t = Simulator::Now().GetSeconds() - g_start;
  double from = std::max(f.alphaAt, 0.5);
  if (g_fct[flow] < 0 && f.alphaAt >= 0 && t > from) {
    f.alphaArea += f.alpha * (t - from);
    f.alphaTime += t - from;
  }
  f.alpha = alpha;
  f.alphaAt = t;
}
static uint64_t g_qSamples = 0, g_qSum = 0, g_qMin = 0, g_qMax = 0, g_qLimit = 0;
static void SampleQueue(Ptr<QueueDisc> qd, uint32_t minTh, uint32_t maxTh, uint32_t limit) {
  uint32_t n = qd->GetNPackets();
  g_qSamples++;
  g_qSum += n;
  g_qMin += n >= minTh;
  g_qMax += n >= maxTh;
  g_qLimit += n + 1 >= limit;
  Simulator::Schedule(MicroSeconds(100), &SampleQueue, qd, minTh, maxTh, limit);
}

static void Series(Ptr<QueueDisc> qd, Time every) {
  QueueDisc::Stats st = qd->GetStats();
  std::fprintf(stderr, "TS %.3f q %u drops %u marks %u", Simulator::Now().GetSeconds() - g_start, qd->GetNPackets(),
               st.nTotalDroppedPackets, st.nTotalMarkedPackets);
  for (size_t i = 0; i < g_rx.size(); i++) std::fprintf(stderr, " | %.1f %.2f", g_ft[i].cwnd, g_rx[i] / 1e6);
  std::fprintf(stderr, "\n");
  Simulator::Schedule(every, &Series, qd, every);
}

// --startJitterUs=J: flow i starts g_flowDelay[i] ~ U[0, J) us after the common start; its FCT counts
// from its own start.
static std::vector<double> g_flowDelay;
static void OnRx(uint32_t flow, Ptr<const Packet> p, const Address &) {
  g_rx[flow] += p->GetSize();
  double now = Simulator::Now().GetSeconds() - g_start;
  g_total += p->GetSize();
  uint64_t all = g_bytes * g_rx.size();
  if (g_t25 < 0 && g_total * 4 >= all) g_t25 = now;
  if (g_t75 < 0 && g_total * 4 >= all * 3) g_t75 = now;
  if (g_fct[flow] < 0 && g_rx[flow] >= g_bytes) {
    g_fct[flow] = Simulator::Now().GetSeconds() - g_start - g_flowDelay[flow];
  }
}

int main(int argc, char *argv[]) {
  uint32_t flows = 4;
  double megabytes = 100;
  double rateGbps = 1.0;
  double udpShare = 0.0;
  double delayUs = 50;  // one-way per link
  std::string cc = "ns3::TcpCubic";
  std::string queue = "red";
  double minTh = 60, maxTh = 180, maxP = 0.02, qw = 0.002;
  uint32_t limit = 600;
  bool gentle = false, hardDrop = false, wait = true;
  double minRtoMs = 200;  // Linux's TCP_RTO_MIN (ns-3's default is 1 s)
  double stopS = 600;     // virtual-time limit: a flow not done by then is reported as -1
  double delAckTimeoutMs = 200;
  uint32_t dctcpFloor = 0, delAckCount = 2;
  double seriesMs = 0;
  bool dctcpAckNow = false;
  LinuxHostOptions hostOptions;
  double udpJitter = 0, startJitterUs = 0;
  uint32_t run = 1;
  CommandLine cmd;
  cmd.AddValue("udpJitter",
               "UDP send-time jitter: each packet U[0, J) bottleneck packet times after its constant-rate "
               "instant (0: exactly periodic, ns3::OnOffApplication)",
               udpJitter);
  hostOptions.AddTo(cmd);
  cmd.AddValue("dctcpAckNow",
               "ns3::TcpDctcp's receivers ACK a segment that changes the CE state at once, as Linux's "
               "dctcp_ece_ack_update (ns-3: only the earlier segments' delayed ACK)",
               dctcpAckNow);
  cmd.AddValue("startJitterUs", "each flow starts U[0, this) us after the common start (its FCT from its own)",
               startJitterUs);
  cmd.AddValue("run", "ns-3's run number (RngSeedManager::SetRun): RED's, the UDP jitter's and the starts' draws",
               run);
  cmd.AddValue("delAckCount", "segments a receiver waits for before it ACKs (ns-3: 2)", delAckCount);
  cmd.AddValue("delAckTimeoutMs", "the receiver's delayed-ACK timer, ms (ns-3: 200; Linux's minimum: 40)",
               delAckTimeoutMs);
  cmd.AddValue("dctcpFloor", "ns3::TcpDctcp: floor of its ssthresh in segments (Linux: 2; 0: ns-3's rule)",
               dctcpFloor);
  cmd.AddValue("flows", "TCP flows", flows);
  cmd.AddValue("megabytes", "MB (10^6) per flow", megabytes);
  cmd.AddValue("rateGbps", "bottleneck rate", rateGbps);
  cmd.AddValue("udpShare", "UDP rate as a share of the bottleneck (0..1)", udpShare);
  cmd.AddValue("delayUs", "one-way delay of every link, microseconds", delayUs);
  cmd.AddValue("cc", "TCP congestion control TypeId", cc);
  cmd.AddValue("queue", "red | step", queue);
  cmd.AddValue("minTh", "RED min threshold, packets (step: K)", minTh);
  cmd.AddValue("maxTh", "RED max threshold, packets", maxTh);
  cmd.AddValue("maxP", "RED marking probability at maxTh", maxP);
  cmd.AddValue("qw", "RED EWMA weight of the average queue", qw);
  cmd.AddValue("gentle", "RED gentle mode (probability ramps to 1 at 2 maxTh)", gentle);
  cmd.AddValue("wait",
               "RED waits between marks (ns-3's default: 1.5/p packets apart on average); false: Linux's and "
               "Floyd's uniform spacing (1/(2p) apart)",
               wait);
  cmd.AddValue("hardDrop", "RED drops (never marks) above maxTh", hardDrop);
  cmd.AddValue("limit", "queue limit, packets", limit);
  cmd.AddValue("minRtoMs", "TCP's minimum retransmission timeout, ms", minRtoMs);
  cmd.AddValue("trace", "per-flow state entries, (re)transmissions and the queue's statistics on stderr", g_trace);
  cmd.AddValue("seriesMs", "with --trace: the queue and every flow's window and bytes every this many ms",
               seriesMs);
  cmd.AddValue("detailFrom", "with --trace: flow 0's events for 10 ms from this many s after the start", g_detailFrom);
  cmd.AddValue("stopS", "virtual seconds after which unfinished flows are reported as -1", stopS);
  cmd.Parse(argc, argv);
  if (udpJitter < 0 || udpJitter > 1) {
    std::fprintf(stderr, "--udpJitter must be in [0, 1], not %g\n", udpJitter);
    return 2;
  }
  RngSeedManager::SetRun(run);
  g_bytes = static_cast<uint64_t>(megabytes * 1e6);
  g_fct.assign(flows, -1.0);
  g_rx.assign(flows, 0);
  g_rtos.assign(flows, 0);
  g_ft.assign(flows, FlowTrace());

  ConfigureTcpHosts(cc, dctcpFloor, delAckTimeoutMs, minRtoMs, dctcpAckNow, hostOptions);
  Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));

  NodeContainer senders, sinks, routers, udp;
  senders.Create(flows);
  sinks.Create(flows + 1);  // the last one receives the UDP
  routers.Create(2);
  udp.Create(1);
  InternetStackHelper stack;
  stack.InstallAll();
  if (hostOptions.linuxAcks) UseLinuxAcks(NodeContainer::GetGlobal());

  std::string rate = std::to_string(rateGbps * 1000) + "Mbps";
  std::string delay = std::to_string(delayUs) + "us";
  PointToPointHelper access;
  access.SetDeviceAttribute("DataRate", StringValue("10Gbps"));
  access.SetChannelAttribute("Delay", StringValue(delay));
  PointToPointHelper bottleneck;
  bottleneck.SetDeviceAttribute("DataRate", StringValue(rate));
  bottleneck.SetChannelAttribute("Delay", StringValue(delay));
  bottleneck.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));

  TrafficControlHelper red;
  if (queue == "step") {
    maxTh = minTh;
    qw = 1.0;
    gentle = false;
    hardDrop = false;
  } else if (queue != "red") {
    std::fprintf(stderr, "--queue must be red or step, not %s\n", queue.c_str());
    return 2;
  }
  red.SetRootQueueDisc("ns3::RedQueueDisc", "UseEcn", BooleanValue(true), "LinkBandwidth",
                       StringValue(rate), "LinkDelay", StringValue(delay), "MinTh", DoubleValue(minTh),
                       "MaxTh", DoubleValue(maxTh), "MaxSize",
                       StringValue(std::to_string(limit) + "p"), "QW", DoubleValue(qw), "LInterm",
                       DoubleValue(1.0 / maxP), "Gentle", BooleanValue(gentle), "UseHardDrop",
                       BooleanValue(hardDrop), "MeanPktSize", UintegerValue(1500), "Wait", BooleanValue(wait));
  TrafficControlHelper fifo;  // access links: plain and never the bottleneck
  fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("10000p"));

  Links links;
  for (uint32_t i = 0; i < flows; i++) links.Add(access, senders.Get(i), routers.Get(0), fifo);
  links.Add(access, udp.Get(0), routers.Get(0), fifo);
  links.Add(bottleneck, routers.Get(0), routers.Get(1), red);
  std::vector<Ipv4Address> sinkAddr;
  for (uint32_t i = 0; i < flows + 1; i++) {
    Ipv4InterfaceContainer c = links.Add(access, routers.Get(1), sinks.Get(i), fifo);
    sinkAddr.push_back(c.GetAddress(1));
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  Ptr<QueueDisc> bottleneckQd;
  {
    Ptr<TrafficControlLayer> tcl = routers.Get(0)->GetObject<TrafficControlLayer>();
    for (uint32_t d = 0; d < routers.Get(0)->GetNDevices(); d++) {
      Ptr<QueueDisc> qd = tcl->GetRootQueueDiscOnDevice(routers.Get(0)->GetDevice(d));
      if (DynamicCast<RedQueueDisc>(qd)) bottleneckQd = qd;
    }
  }
  if (g_trace && bottleneckQd && seriesMs > 0) {
    Simulator::Schedule(Seconds(g_start), &Series, bottleneckQd, MicroSeconds(static_cast<int64_t>(seriesMs * 1000)));
  }
  if (g_trace && bottleneckQd) {
    Simulator::Schedule(Seconds(g_start), &SampleQueue, bottleneckQd, static_cast<uint32_t>(minTh),
                        static_cast<uint32_t>(maxTh), limit);
  }

  // made only with --startJitterUs, so that the other random variables keep their streams (and
  // the runs without it their draws)
  Ptr<UniformRandomVariable> startDraw = startJitterUs > 0 ? CreateObject<UniformRandomVariable>() : nullptr;
  g_flowDelay.assign(flows, 0.0);
  for (uint32_t i = 0; i < flows; i++) {
    if (startDraw) g_flowDelay[i] = startDraw->GetValue(0, startJitterUs) * 1e-6;
    Time start = Seconds(g_start + g_flowDelay[i]);
    ApplicationContainer b = InstallBulkFlow(senders.Get(i), sinks.Get(i), sinkAddr[i], 5000 + i, g_bytes, start,
                                             MakeBoundCallback(&OnRx, i));
    // the sender's socket exists once the application has started: hook its RTO trace then
    Ptr<BulkSendApplication> app = DynamicCast<BulkSendApplication>(b.Get(0));
    Simulator::Schedule(start + NanoSeconds(1), [app, i]() {
      app->GetSocket()->TraceConnectWithoutContext("RTO", MakeBoundCallback(&OnRto, i));
      if (g_trace) {
        Ptr<Socket> sock = app->GetSocket();
        sock->TraceConnectWithoutContext("CongState", MakeBoundCallback(&TraceState, i));
        sock->TraceConnectWithoutContext("Tx", MakeBoundCallback(&TraceTx, i));
        sock->TraceConnectWithoutContext("Rx", MakeBoundCallback(&TraceRx, i));
        sock->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&TraceCwnd, i));
        PointerValue ops;  // DCTCP's α (other controls have no such trace)
        sock->GetAttribute("CongestionOps", ops);
        if (Ptr<TcpDctcp> dctcp = DynamicCast<TcpDctcp>(ops.Get<Object>())) {
          dctcp->TraceConnectWithoutContext("CongestionEstimate", MakeBoundCallback(&TraceAlpha, i));
        }
      }
    });
  }
  ApplicationContainer udpSink;
  if (udpShare > 0) {
    // 1472 B of payload: 1500 B IP packets (+2 B PPP) on the wire
    double bps = udpShare * rateGbps * 1e9 * 1472.0 / 1502.0;
    if (udpJitter > 0) {
      static JitteredUdp j;
      j.socket = Socket::CreateSocket(udp.Get(0), UdpSocketFactory::GetTypeId());
      j.socket->Connect(InetSocketAddress(sinkAddr[flows], 9));
      j.u = CreateObject<UniformRandomVariable>();
      double packetNs = 1502.0 * 8 / rateGbps;  // a 1502 B wire packet's time at the bottleneck
      j.startNs = 0.5e9;
      j.gapNs = packetNs / udpShare;
      j.jitterNs = udpJitter * packetNs;
      Simulator::Schedule(NanoSeconds(std::llround(j.startNs + j.u->GetValue(0, j.jitterNs))), &SendJittered, &j);
    } else {
      OnOffHelper onoff("ns3::UdpSocketFactory", InetSocketAddress(sinkAddr[flows], 9));
      onoff.SetConstantRate(DataRate(static_cast<uint64_t>(bps)), 1472);
      ApplicationContainer u = onoff.Install(udp.Get(0));
      u.Start(Seconds(0.5));
    }
    PacketSinkHelper us("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 9));
    udpSink = us.Install(sinks.Get(flows));
    udpSink.Start(Seconds(0));
  }

  // Stop once every flow is done (checked every 10 ms of virtual time), at the latest after stopS.
  StopWhenDone(Seconds(g_start),
               [] { return std::none_of(g_fct.begin(), g_fct.end(), [](double f) { return f < 0; }); });
  Simulator::Stop(Seconds(g_start + stopS));
  auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double end = Simulator::Now().GetSeconds();
  double udpRx = 0;
  if (udpShare > 0) {
    udpRx = DynamicCast<PacketSink>(udpSink.Get(0))->GetTotalRx() * 8.0 / (end - 0.5);
  }
  std::printf("{\"fct_s\": [");
  for (uint32_t i = 0; i < flows; i++) std::printf("%s%.6f", i ? ", " : "", g_fct[i]);
  std::printf("], \"rtos\": [");
  for (uint32_t i = 0; i < flows; i++) std::printf("%s%u", i ? ", " : "", g_rtos[i]);
  std::printf("], \"mid_s\": %.6f, \"udp_rx_bps\": %.1f, \"virtual_end_s\": %.6f, \"loss_probes\": %lu, "
              "\"wall_s\": %.6f}\n",
              g_t75 - g_t25, udpRx, end, static_cast<unsigned long>(g_lossProbes), wall);
  if (g_trace) {
    for (uint32_t i = 0; i < flows; i++) {
      const FlowTrace &f = g_ft[i];
      std::fprintf(stderr,
                   "flow %u: fct %.4f rto %u entries disorder %u cwr %u recovery %u loss %u tx %lu retx %lu "
                   "mean cwnd %.2f ece acks %lu (not advancing the ACK %lu) mean alpha %.3f\n",
                   i, g_fct[i], g_rtos[i], f.states[1], f.states[2], f.states[3], f.states[4],
                   static_cast<unsigned long>(f.tx), static_cast<unsigned long>(f.retx),
                   f.cwndTime > 0 ? f.cwndArea / f.cwndTime : 0.0, static_cast<unsigned long>(f.ece),
                   static_cast<unsigned long>(f.eceStill), f.alphaTime > 0 ? f.alphaArea / f.alphaTime : -1.0);
    }
    double n = g_qSamples ? static_cast<double>(g_qSamples) : 1.0;
    std::fprintf(stderr, "queue: mean %.1f packets, >= minTh %.3f, >= maxTh %.3f, at the limit %.3f (%lu samples)\n",
                 g_qSum / n, g_qMin / n, g_qMax / n, g_qLimit / n, static_cast<unsigned long>(g_qSamples));
    if (bottleneckQd) std::cerr << bottleneckQd->GetStats() << std::endl;
  }
  Simulator::Destroy();
  return 0;
}
