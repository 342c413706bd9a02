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
// benchmarks/ns3/two_tier.cc. Defaults: ns-3's own.
//
// Prints one JSON object on stdout: per-flow completion times (s, from the flows' common start),
// per-flow retransmission timeouts, the UDP rate delivered, and the simulator's own wall time.
#include <chrono>
#include <cstdio>
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

static void OnRto(uint32_t flow, Time old, Time now) {
  if (now == old + old) g_rtos[flow]++;
}

static void OnRx(uint32_t flow, Ptr<const Packet> p, const Address &) {
  g_rx[flow] += p->GetSize();
  double now = Simulator::Now().GetSeconds() - g_start;
  g_total += p->GetSize();
  uint64_t all = g_bytes * g_rx.size();
  if (g_t25 < 0 && g_total * 4 >= all) g_t25 = now;
  if (g_t75 < 0 && g_total * 4 >= all * 3) g_t75 = now;
  if (g_fct[flow] < 0 && g_rx[flow] >= g_bytes) {
    g_fct[flow] = Simulator::Now().GetSeconds() - g_start;
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
  bool gentle = false, hardDrop = false;
  double minRtoMs = 200;  // Linux's TCP_RTO_MIN (ns-3's default is 1 s)
  double stopS = 600;     // virtual-time limit: a flow not done by then is reported as -1
  double delAckTimeoutMs = 200;
  uint32_t dctcpFloor = 0;
  CommandLine cmd;
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
  cmd.AddValue("hardDrop", "RED drops (never marks) above maxTh", hardDrop);
  cmd.AddValue("limit", "queue limit, packets", limit);
  cmd.AddValue("minRtoMs", "TCP's minimum retransmission timeout, ms", minRtoMs);
  cmd.AddValue("stopS", "virtual seconds after which unfinished flows are reported as -1", stopS);
  cmd.Parse(argc, argv);
  g_bytes = static_cast<uint64_t>(megabytes * 1e6);
  g_fct.assign(flows, -1.0);
  g_rx.assign(flows, 0);
  g_rtos.assign(flows, 0);

  ConfigureTcpHosts(cc, dctcpFloor, delAckTimeoutMs, minRtoMs);
  Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));

  NodeContainer senders, sinks, routers, udp;
  senders.Create(flows);
  sinks.Create(flows + 1);  // the last one receives the UDP
  routers.Create(2);
  udp.Create(1);
  InternetStackHelper stack;
  stack.InstallAll();

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
                       BooleanValue(hardDrop), "MeanPktSize", UintegerValue(1500));
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

  for (uint32_t i = 0; i < flows; i++) {
    ApplicationContainer b = InstallBulkFlow(senders.Get(i), sinks.Get(i), sinkAddr[i], 5000 + i, g_bytes,
                                             Seconds(g_start), MakeBoundCallback(&OnRx, i));
    // the sender's socket exists once the application has started: hook its RTO trace then
    Ptr<BulkSendApplication> app = DynamicCast<BulkSendApplication>(b.Get(0));
    Simulator::Schedule(Seconds(g_start) + NanoSeconds(1), [app, i]() {
      app->GetSocket()->TraceConnectWithoutContext("RTO", MakeBoundCallback(&OnRto, i));
    });
  }
  ApplicationContainer udpSink;
  if (udpShare > 0) {
    // 1472 B of payload: 1500 B IP packets (+2 B PPP) on the wire
    double bps = udpShare * rateGbps * 1e9 * 1472.0 / 1502.0;
    OnOffHelper onoff("ns3::UdpSocketFactory", InetSocketAddress(sinkAddr[flows], 9));
    onoff.SetConstantRate(DataRate(static_cast<uint64_t>(bps)), 1472);
    ApplicationContainer u = onoff.Install(udp.Get(0));
    u.Start(Seconds(0.5));
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
  std::printf("], \"mid_s\": %.6f, \"udp_rx_bps\": %.1f, \"virtual_end_s\": %.6f, \"wall_s\": %.6f}\n",
              g_t75 - g_t25, udpRx, end, wall);
  Simulator::Destroy();
  return 0;
}
