// ns-3 two-tier scenario for benchmarks/sim_vs_ns3_fabric.py: an all-to-all shuffle on a
// leaf-spine fabric with oversubscribed uplinks.
//
//   L leaves x H hosts, one spine; host <-> leaf at hostGbps, leaf <-> spine at uplinkGbps
//   (oversubscription = H * hostGbps / uplinkGbps); every host sends `megabytes` to every other
//   host, all flows starting together (one TCP connection per ordered pair); queues of `queue`
//   packets on every port: drop-tail (--queueDisc=droptail) or step marking at K packets on the
//   instantaneous queue (--queueDisc=step --markK=K: RED with MinTh = MaxTh = K, weight 1, marking
//   ECT packets and dropping the others, as benchmarks/ns3/bottleneck.cc; DCTCP's switch setting).
//   --queueBytes=true: the limit and K counted in bytes (queue x 1502 B, K x 1502 B: full segments
//   on the wire), as a switch's buffer and Linux's sch_red count them; without it ns-3's packet
//   mode, where a pure ACK of 66 bytes counts as a whole packet -- on a port that carries one
//   direction's data and the other's ACKs (every port of an all-to-all) many of "K packets" are
//   ACKs, and the data queue that DCTCP keeps is that much shorter.
//   --sendJitter=J: every packet a host sends reaches its leaf U[0, J) of a packet time (1,502 B at
//   hostGbps) after its fixed delay (JitterChannel in hosts.h; J <= 1 keeps a host's packets in order),
//   as a real host's send times wander with its interrupts and NIC, and as the simulator's packet mode
//   moves every arrival. Without it every host is perfectly regular and a full drop-tail port locks to
//   the senders' phases (Floyd and Jacobson, "On traffic phase effects in packet-switched gateways",
//   1992): the same sender's packets keep arriving just after the queue filled, while the others'
//   get in, and its whole window is dropped again and again.
//   --hostFifo=true: a host's own port is a FIFO that neither marks nor drops (a limit of 100,000
//   packets, never reached here) instead of a switch port's queue: a Linux sender's qdisc does not
//   step-mark at K packets (pfifo_fast, fq_codel's 5 ms target) and TCP small queues hold its
//   segments in the socket rather than lose them in the qdisc -- the simulator's applications'
//   packet mode takes a sending host's link so. Without it the host's port marks and drops as the
//   switches' do (in the reducers' loops at 2 x 16 hosts DCTCP's IW bursts took 130,000 marks there).
//   --ackPrio=true (a diagnostic, not a switch's behaviour): on the leaf-spine links, pure ACKs (no
//   payload, no SYN or FIN) wait in a band of their own served before the data (ns3::PrioQueueDisc,
//   a class AckFilter below), so they neither queue behind data nor are dropped there: what the
//   ACK path costs the senders (docs/results/sim-vs-ns3/loops.md).
//   --ackPrioHosts=true (the same diagnostic): the host links' ports, a host's own and its leaf's
//   port to it, serve pure ACKs first too.
//
// A window of one segment: ns-3's receivers ACK every second segment or after DelAckTimeout, 200 ms
// by default, which equals the 200 ms minimum RTO set below, so the ACK of a lone segment loses the
// race against the sender's retransmission timer; after that timeout the window is one segment
// again, and the flow sends one or two segments per 200 ms for ever (DCTCP flows under step marking
// get there often). Linux's delayed-ACK timer starts at 40 ms (TCP_DELACK_MIN): --delAckTimeoutMs=40. DCTCP (--cc=ns3::TcpDctcp): ns-3's TcpDctcp cuts
// ssthresh to (1 - alpha/2) * cwnd with no floor, so a window of one segment is cut below one
// segment; Linux's dctcp_ssthresh keeps at least 2. --dctcpFloor=N (segments) puts that floor on
// ns-3's rule (class TcpDctcpFloor in hosts.h); 0 runs ns-3's TcpDctcp as it is. --dctcpAckNow=true:
// a DCTCP receiver ACKs at once the segment that changes its CE state, as Linux's
// dctcp_ece_ack_update does (ns-3's TcpDctcp ACKs only the earlier segments then, and leaves this
// one to the delayed-ACK rule: next to a window of two segments, a wait for the timer); measured,
// not passed by the benchmark (docs/results/sim-vs-ns3/packet-mode-all.md, "Jittered UDP").
//
// --incastSenders=3,7,10 --incastReceiver=0: instead of the all-to-all, a many-to-one incast: each
// listed host sends `megabytes` to the receiver, all starting together
// (benchmarks/sim_vs_ns3_incast.py).
//
// Prints one JSON object on stdout: per-flow (src, dst, completion time in s from the common start),
// per-flow diagnostics of the senders (retransmission timeouts, congestion windows set below one
// segment, the last segment sent and the longest pause between two, the first slow-start threshold
// set in segments, i.e. where slow start ended, -1: never; ns-3 closes a connection
// silently after --dataRetries timeouts of one segment, 6 by default, so a flow that stopped
// sending long before the end was given up) and the simulator's own wall time.
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <sstream>
#include <vector>

#include "hosts.h"

using namespace ns3;
using namespace shufflelab;

// --ackPrio: on the leaf-spine links, a pure ACK (no payload, no SYN or FIN) goes to band 0, served first
class AckFilter : public PacketFilter {
 public:
  static TypeId GetTypeId() {
    static TypeId tid = TypeId("ns3::AckFilter").SetParent<PacketFilter>().AddConstructor<AckFilter>();
    return tid;
  }

 private:
  bool CheckProtocol(Ptr<QueueDiscItem>) const override { return true; }
  int32_t DoClassify(Ptr<QueueDiscItem> item) const override {
    TcpHeader h;
    if (item->GetPacket()->PeekHeader(h) == 0) return 1;
    bool pure = (h.GetFlags() & (TcpHeader::SYN | TcpHeader::FIN)) == 0 && (h.GetFlags() & TcpHeader::ACK) &&
                item->GetPacket()->GetSize() == h.GetSerializedSize();
    return pure ? 0 : 1;
  }
};
NS_OBJECT_ENSURE_REGISTERED(AckFilter);
static bool g_ackPrio = false;
static bool g_ackPrioHosts = false;

struct Flow {
  uint32_t src, dst;
  double requested = 0;  // when its request left the receiver, s from the common start (--reqsInFlight)
  uint64_t rx = 0;
  double fct = -1;
  uint32_t rtos = 0;     // retransmission timeouts (the timer doubled)
  uint32_t subMss = 0;   // congestion windows set below one segment
  double lastTx = -1;    // the sender's last segment, s from the common start
  double maxTxGap = 0;   // the longest pause between two of its segments, s
  double ssExit = -1;    // the first slow-start threshold set (slow start's end), segments
};
static std::vector<Flow> g_flows;
static uint64_t g_bytes = 0;
static double g_start = 1.0;
static bool g_trace = false;  // --trace: each sender's events on stderr (the JSON on stdout unchanged)

static double Since() { return Simulator::Now().GetSeconds() - g_start; }

// --reqsInFlight=N: each receiver keeps N of its flows going; when one ends it requests the next
// of its list, whose sender starts after the request's one-way propagation (as a shuffle reducer's
// fetch loop: the simulator's `max_reqs_in_flight`)
static std::vector<std::deque<uint32_t>> g_pending;  // per receiver, its flows not requested yet
static std::vector<Ptr<Application>> g_apps;        // per flow, its sender (not yet on its node)
static std::vector<Ptr<Node>> g_hosts;
static std::vector<Time> g_leg;                      // per flow, its request's one-way propagation
static void HookSender(uint32_t id);
static void Request(uint32_t dst) {
  if (g_pending[dst].empty()) return;
  uint32_t id = g_pending[dst].front();
  g_pending[dst].pop_front();
  g_flows[id].requested = Since();
  Ptr<Node> node = g_hosts[g_flows[id].src];
  Ptr<Application> app = g_apps[id];
  Simulator::Schedule(g_leg[id], [node, app]() { node->AddApplication(app); });
  Simulator::Schedule(g_leg[id] + NanoSeconds(1), &HookSender, id);
}

// --trace: "<s since start> <flow> <event> <value>" per line: STATE old->new (0 open, 1 disorder,
// 2 CWR, 3 recovery, 4 loss), CWND (segments), TX / RETX (segment number: first sent / sent again),
// RTO (the timer's new value after a timeout, s), DROP / DROPACK / MARK (below).
static std::vector<uint32_t> g_highTx;
static void TraceTx(uint32_t flow, Ptr<const Packet> p, const TcpHeader &h, Ptr<const TcpSocketBase>) {
  if (p->GetSize() == 0) return;
  uint32_t seq = h.GetSequenceNumber().GetValue();
  bool again = seq < g_highTx[flow];
  if (!again) g_highTx[flow] = seq + p->GetSize();
  std::fprintf(stderr, "%.6f %u %s %u\n", Since(), flow, again ? "RETX" : "TX", (seq - 1) / kSegment);
}
static void TraceState(uint32_t flow, TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to) {
  std::fprintf(stderr, "%.6f %u STATE %d->%d\n", Since(), flow, static_cast<int>(from), static_cast<int>(to));
}
static void TraceCwnd(uint32_t flow, uint32_t, uint32_t now) {
  std::fprintf(stderr, "%.6f %u CWND %.2f\n", Since(), flow, static_cast<double>(now) / kSegment);
}
static void TraceRto(uint32_t flow, Time old, Time now) {
  if (now == old + old) std::fprintf(stderr, "%.6f %u RTO %.3f\n", Since(), flow, now.GetSeconds());
}
// DROP (segment number) or DROPACK (the ACK number's segment) with the port that dropped it, e.g.
// "leaf0->host0", "spine->leaf0", "host4->leaf0"; flows are told apart by their port (5000 + flow).
static void TraceDrop(std::string where, Ptr<const QueueDiscItem> item) {
  TcpHeader h;
  if (item->GetPacket()->PeekHeader(h) == 0) return;
  bool data = h.GetDestinationPort() < 49152;  // to the sink's port, not to a sender's ephemeral one
  uint32_t flow = (data ? h.GetDestinationPort() : h.GetSourcePort()) - 5000;
  uint32_t seg = ((data ? h.GetSequenceNumber() : h.GetAckNumber()).GetValue() - 1) / kSegment;
  std::fprintf(stderr, "%.6f %u %s %u %s\n", Since(), flow, data ? "DROP" : "DROPACK", seg, where.c_str());
}
// MARK (segment number) with the port that set CE on it, as DROP.
static void TraceMark(std::string where, Ptr<const QueueDiscItem> item, const char *) {
  TcpHeader h;
  if (item->GetPacket()->PeekHeader(h) == 0) return;
  uint32_t flow = h.GetDestinationPort() - 5000;
  uint32_t seg = (h.GetSequenceNumber().GetValue() - 1) / kSegment;
  std::fprintf(stderr, "%.6f %u MARK %u %s\n", Since(), flow, seg, where.c_str());
}

static void OnRx(uint32_t flow, Ptr<const Packet> p, const Address &) {
  Flow &f = g_flows[flow];
  f.rx += p->GetSize();
  if (f.fct < 0 && f.rx >= g_bytes) {
    f.fct = Simulator::Now().GetSeconds() - g_start;
    if (!g_pending.empty()) Request(f.dst);
  }
}

static void OnRto(uint32_t flow, Time old, Time now) {
  if (now == old + old || (now == Seconds(60) && now < old + old)) g_flows[flow].rtos++;
}

static void OnTx(uint32_t flow, Ptr<const Packet>, const TcpHeader &, Ptr<const TcpSocketBase>) {
  Flow &f = g_flows[flow];
  double now = Simulator::Now().GetSeconds() - g_start;
  if (f.lastTx >= 0) f.maxTxGap = std::max(f.maxTxGap, now - f.lastTx);
  f.lastTx = now;
}

static void OnSsThresh(uint32_t flow, uint32_t, uint32_t now) {
  Flow &f = g_flows[flow];
  // the first finite threshold (the socket starts at UINT32_MAX, "none")
  if (f.ssExit < 0 && now < UINT32_MAX) f.ssExit = static_cast<double>(now) / kSegment;
}

static void OnCwnd(uint32_t flow, uint32_t, uint32_t now) {
  if (now < kSegment) g_flows[flow].subMss++;
}

static void HookSender(uint32_t id) {
  Ptr<Socket> sock = DynamicCast<BulkSendApplication>(g_apps[id])->GetSocket();
  sock->TraceConnectWithoutContext("RTO", MakeBoundCallback(&OnRto, id));
  sock->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&OnCwnd, id));
  sock->TraceConnectWithoutContext("Tx", MakeBoundCallback(&OnTx, id));
  sock->TraceConnectWithoutContext("SlowStartThreshold", MakeBoundCallback(&OnSsThresh, id));
  if (g_trace) {
    sock->TraceConnectWithoutContext("Tx", MakeBoundCallback(&TraceTx, id));
    sock->TraceConnectWithoutContext("CongState", MakeBoundCallback(&TraceState, id));
    sock->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&TraceCwnd, id));
    sock->TraceConnectWithoutContext("RTO", MakeBoundCallback(&TraceRto, id));
  }
}

int main(int argc, char *argv[]) {
  uint32_t leaves = 2, hostsPerLeaf = 4, queue = 200, markK = 20, dctcpFloor = 0, dataRetries = 6, delAckCount = 2;
  double hostGbps = 1.0, uplinkGbps = 2.0, delayUs = 10, megabytes = 10, stopS = 120, delAckTimeoutMs = 200;
  std::string cc = "ns3::TcpCubic", queueDisc = "droptail", incastSenders;
  uint32_t incastReceiver = 0;
  bool dctcpAckNow = false, queueBytes = false, hostFifo = false;
  double sendJitter = 0;
  LinuxHostOptions hostOptions;
  double startJitterUs = 0;
  uint32_t run = 1;
  uint32_t blocks = 1, reqsInFlight = 0, orderSeed = 1;
  CommandLine cmd;
  cmd.AddValue("blocks", "flows of --megabytes per ordered pair of hosts (all-to-all)", blocks);
  cmd.AddValue("reqsInFlight", "flows each receiver keeps going, the next requested when one ends (0: all at once)",
               reqsInFlight);
  cmd.AddValue("orderSeed", "seed of each receiver's random order of its flows (--reqsInFlight)", orderSeed);
  cmd.AddValue("startJitterUs", "each flow (without --reqsInFlight) starts U[0, this) us after the common start",
               startJitterUs);
  cmd.AddValue("run", "ns-3's run number (RngSeedManager::SetRun): the start jitter's draws", run);
  hostOptions.AddTo(cmd);
  cmd.AddValue("dctcpAckNow", "DCTCP receivers ACK a segment that changes the CE state at once (Linux)", dctcpAckNow);
  cmd.AddValue("leaves", "leaf switches", leaves);
  cmd.AddValue("hostsPerLeaf", "hosts per leaf", hostsPerLeaf);
  cmd.AddValue("hostGbps", "host <-> leaf rate", hostGbps);
  cmd.AddValue("uplinkGbps", "leaf <-> spine rate", uplinkGbps);
  cmd.AddValue("delayUs", "one-way delay of every link, microseconds", delayUs);
  cmd.AddValue("megabytes", "MB (10^6) per flow", megabytes);
  cmd.AddValue("queue", "limit of every port, packets", queue);
  cmd.AddValue("queueDisc", "droptail | step (mark ECT, drop the rest, at markK packets)", queueDisc);
  cmd.AddValue("markK", "step marking threshold K, packets", markK);
  cmd.AddValue("sendJitter", "what a host sends reaches its leaf U[0, this x a packet time of its link) late (0..1)",
               sendJitter);
  cmd.AddValue("queueBytes", "--queue and --markK in bytes of full segments (1502 B each), as a switch counts",
               queueBytes);
  cmd.AddValue("ackPrio", "the leaf-spine links serve pure ACKs in a band of their own before data (a diagnostic)", g_ackPrio);
  cmd.AddValue("ackPrioHosts", "the host links' ports (a host's own and its leaf's) do the same (a diagnostic)",
               g_ackPrioHosts);
  cmd.AddValue("hostFifo", "a host's own port a FIFO that neither marks nor drops (a Linux sender's qdisc)",
               hostFifo);
  cmd.AddValue("cc", "TCP congestion control TypeId", cc);
  cmd.AddValue("dctcpFloor", "ns3::TcpDctcp: floor of its ssthresh in segments (Linux: 2; 0: ns-3's rule)",
               dctcpFloor);
  cmd.AddValue("delAckCount", "segments a receiver waits for before it ACKs (ns-3: 2)", delAckCount);
  cmd.AddValue("delAckTimeoutMs", "the receiver's delayed-ACK timer, ms (ns-3: 200; Linux's minimum: 40)",
               delAckTimeoutMs);
  cmd.AddValue("dataRetries", "retransmission timeouts of one segment before ns-3 closes the connection",
               dataRetries);
  cmd.AddValue("incastSenders", "comma-separated sender hosts of a many-to-one incast (empty: all-to-all)",
               incastSenders);
  cmd.AddValue("incastReceiver", "the incast's receiving host", incastReceiver);
  cmd.AddValue("stopS", "virtual seconds after which unfinished flows are reported as -1", stopS);
  cmd.AddValue("trace", "each sender's congestion state, window, transmissions and timeouts on stderr", g_trace);
  cmd.Parse(argc, argv);
  RngSeedManager::SetRun(run);
  g_bytes = static_cast<uint64_t>(megabytes * 1e6);
  if (queueDisc != "droptail" && queueDisc != "step") {
    std::fprintf(stderr, "--queueDisc must be droptail or step, not %s\n", queueDisc.c_str());
    return 2;
  }
  if (!(sendJitter >= 0 && sendJitter <= 1)) {
    std::fprintf(stderr, "--sendJitter must be in [0, 1] (of a host link's packet time), not %g\n", sendJitter);
    return 2;
  }
  ConfigureTcpHosts(cc, dctcpFloor, delAckTimeoutMs, 200, dctcpAckNow, hostOptions);  // Linux's minimum RTO
  Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(dataRetries));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(delAckCount));

  uint32_t nHosts = leaves * hostsPerLeaf;
  NodeContainer hosts, leafNodes, spine;
  hosts.Create(nHosts);
  leafNodes.Create(leaves);
  spine.Create(1);
  InternetStackHelper stack;
  stack.InstallAll();
  if (hostOptions.linuxAcks) UseLinuxAcks(NodeContainer::GetGlobal());

  std::string delay = std::to_string(delayUs) + "us";
  PointToPointHelper hostLink, upLink;
  hostLink.SetDeviceAttribute("DataRate", StringValue(std::to_string(hostGbps * 1000) + "Mbps"));
  hostLink.SetChannelAttribute("Delay", StringValue(delay));
  hostLink.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
  upLink.SetDeviceAttribute("DataRate", StringValue(std::to_string(uplinkGbps * 1000) + "Mbps"));
  upLink.SetChannelAttribute("Delay", StringValue(delay));
  upLink.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
  // RED's thresholds are in the unit of its MaxSize: packets, or bytes with --queueBytes
  const uint32_t unit = queueBytes ? 1502 : 1;  // a full segment on the wire (1448 + 32 + 20 + 2)
  const std::string limit = std::to_string(queue * unit) + (queueBytes ? "B" : "p");
  auto portQueue = [&](double gbps) {
    TrafficControlHelper tc;
    if (queueDisc == "droptail") {
      tc.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue(limit));
    } else {  // step: RED on the instantaneous queue (weight 1) with MinTh = MaxTh = K
      tc.SetRootQueueDisc("ns3::RedQueueDisc", "UseEcn", BooleanValue(true), "LinkBandwidth",
                          StringValue(std::to_string(gbps * 1000) + "Mbps"), "LinkDelay", StringValue(delay),
                          "MinTh", DoubleValue(double(markK) * unit), "MaxTh", DoubleValue(double(markK) * unit),
                          "MaxSize", StringValue(limit), "QW", DoubleValue(1.0), "LInterm",
                          DoubleValue(1.0), "Gentle", BooleanValue(false), "UseHardDrop", BooleanValue(false),
                          "MeanPktSize", UintegerValue(1500));
    }
    return tc;
  };
  TrafficControlHelper hostPort = portQueue(hostGbps), upPort = portQueue(uplinkGbps);
  // --ackPrio / --ackPrioHosts: band 0 pure ACKs (unbounded), band 1 the port as above
  auto prioPort = [&](double gbps) {
    TrafficControlHelper tc;
    uint16_t handle = tc.SetRootQueueDisc("ns3::PrioQueueDisc");
    TrafficControlHelper::ClassIdList cid = tc.AddQueueDiscClasses(handle, 2, "ns3::QueueDiscClass");
    tc.AddChildQueueDisc(handle, cid[0], "ns3::FifoQueueDisc", "MaxSize", StringValue("100000p"));
    if (queueDisc == "droptail") {
      tc.AddChildQueueDisc(handle, cid[1], "ns3::FifoQueueDisc", "MaxSize", StringValue(limit));
    } else {
      tc.AddChildQueueDisc(handle, cid[1], "ns3::RedQueueDisc", "UseEcn", BooleanValue(true), "LinkBandwidth",
                           StringValue(std::to_string(gbps * 1000) + "Mbps"), "LinkDelay", StringValue(delay),
                           "MinTh", DoubleValue(double(markK) * unit), "MaxTh", DoubleValue(double(markK) * unit),
                           "MaxSize", StringValue(limit), "QW", DoubleValue(1.0), "LInterm", DoubleValue(1.0),
                           "Gentle", BooleanValue(false), "UseHardDrop", BooleanValue(false), "MeanPktSize",
                           UintegerValue(1500));
    }
    tc.AddPacketFilter(handle, "ns3::AckFilter");
    return tc;
  };
  if (g_ackPrio) upPort = prioPort(uplinkGbps);
  if (g_ackPrioHosts) hostPort = prioPort(hostGbps);

  Links links;
  std::vector<Ipv4Address> addr(nHosts);
  for (uint32_t h = 0; h < nHosts; h++) {
    Ipv4InterfaceContainer c = links.Add(hostLink, hosts.Get(h), leafNodes.Get(h / hostsPerLeaf), hostPort,
                                         NanoSeconds(int64_t(sendJitter * 1502 * 8 / hostGbps)));
    addr[h] = c.GetAddress(0);
    if (hostFifo) {
      Ptr<NetDevice> dev = hosts.Get(h)->GetDevice(1);
      hostPort.Uninstall(dev);
      TrafficControlHelper fifo;
      fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("100000p"));
      fifo.Install(dev);
    }
  }
  for (uint32_t l = 0; l < leaves; l++) links.Add(upLink, leafNodes.Get(l), spine.Get(0), upPort);
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  if (g_trace) {  // every port's drops (device 0 of a node is its loopback)
    auto hook = [](Ptr<Node> node, uint32_t dev, std::string where) {
      Ptr<QueueDisc> qd = node->GetObject<TrafficControlLayer>()->GetRootQueueDiscOnDevice(node->GetDevice(dev));
      qd->TraceConnectWithoutContext("Drop", MakeBoundCallback(&TraceDrop, where));
      qd->TraceConnectWithoutContext("Mark", MakeBoundCallback(&TraceMark, where));
    };
    for (uint32_t h = 0; h < nHosts; h++)
      hook(hosts.Get(h), 1, "host" + std::to_string(h) + "->leaf" + std::to_string(h / hostsPerLeaf));
    for (uint32_t l = 0; l < leaves; l++) {
      for (uint32_t i = 0; i < hostsPerLeaf; i++)
        hook(leafNodes.Get(l), 1 + i, "leaf" + std::to_string(l) + "->host" + std::to_string(l * hostsPerLeaf + i));
      hook(leafNodes.Get(l), 1 + hostsPerLeaf, "leaf" + std::to_string(l) + "->spine");
      hook(spine.Get(0), 1 + l, "spine->leaf" + std::to_string(l));
    }
  }

  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  if (incastSenders.empty()) {
    for (uint32_t s = 0; s < nHosts; s++)
      for (uint32_t d = 0; d < nHosts; d++)
        for (uint32_t b = 0; b < (s != d ? blocks : 0); b++) pairs.emplace_back(s, d);
  } else {
    std::stringstream list(incastSenders);
    std::string item;
    while (std::getline(list, item, ',')) {
      uint32_t s = static_cast<uint32_t>(std::stoul(item));
      if (s >= nHosts || s == incastReceiver || incastReceiver >= nHosts) {
        std::fprintf(stderr, "--incastSenders: host %u is not a sender in [0, %u) other than the receiver\n", s,
                     nHosts);
        return 2;
      }
      pairs.emplace_back(s, incastReceiver);
    }
  }

  uint16_t port = 5000;
  Ptr<UniformRandomVariable> jitter = CreateObject<UniformRandomVariable>();
  for (uint32_t h = 0; h < nHosts; h++) g_hosts.push_back(hosts.Get(h));
  for (auto [s, d] : pairs) {
    uint32_t id = g_flows.size();
    g_flows.push_back(Flow{s, d});
    g_highTx.push_back(0);
    if (reqsInFlight == 0) {
      Time start = Seconds(g_start) + MicroSeconds(jitter->GetValue(0, startJitterUs));
      ApplicationContainer b =
          InstallBulkFlow(hosts.Get(s), hosts.Get(d), addr[d], port, g_bytes, start, MakeBoundCallback(&OnRx, id));
      g_apps.push_back(b.Get(0));
      // the sender's socket exists once the application has started: hook its traces then
      Simulator::Schedule(start + NanoSeconds(1), &HookSender, id);
    } else {  // the sender made now, put on its node when its request arrives
      PacketSinkHelper sink(g_sinkFactory, InetSocketAddress(Ipv4Address::GetAny(), port));
      ApplicationContainer k = sink.Install(hosts.Get(d));
      k.Start(Seconds(0));
      k.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, id));
      ObjectFactory f;
      f.SetTypeId("ns3::BulkSendApplication");
      // the senders' socket type as InstallBulkFlow's (hosts.h: Linux's recovery from CWR and RACK)
      f.Set("Protocol", TypeIdValue(g_cwrRecovery || g_rack || g_tlp ? TypeId::LookupByName(g_sinkFactory)
                                                            : TcpSocketFactory::GetTypeId()));
      f.Set("Remote", AddressValue(InetSocketAddress(addr[d], port)));
      f.Set("MaxBytes", UintegerValue(g_bytes));
      f.Set("SendSize", UintegerValue(kSegment * 16));
      Ptr<Application> app = f.Create<Application>();
      app->SetStartTime(Seconds(0));
      g_apps.push_back(app);
      uint32_t hops = s / hostsPerLeaf == d / hostsPerLeaf ? 2 : 4;
      g_leg.push_back(MicroSeconds(1) * (hops * delayUs));
    }
    port++;
  }
  if (reqsInFlight > 0) {  // each receiver's flows in a random order; the first N requested at the start
    g_pending.resize(nHosts);
    for (uint32_t id = 0; id < g_flows.size(); id++) g_pending[g_flows[id].dst].push_back(id);
    for (uint32_t d = 0; d < nHosts; d++) {
      std::mt19937 rng(orderSeed * 1000003u + d);
      std::shuffle(g_pending[d].begin(), g_pending[d].end(), rng);
      for (uint32_t k = 0; k < reqsInFlight; k++)
        Simulator::Schedule(Seconds(g_start), &Request, d);
    }
  }

  StopWhenDone(Seconds(g_start),
               [] { return std::none_of(g_flows.begin(), g_flows.end(), [](const Flow &f) { return f.fct < 0; }); });
  Simulator::Stop(Seconds(g_start + stopS));
  auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"flows\": [");
  for (size_t i = 0; i < g_flows.size(); i++)
    std::printf("%s[%u, %u, %.6f]", i ? ", " : "", g_flows[i].src, g_flows[i].dst, g_flows[i].fct);
  std::printf("], \"requested_s\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%.6f", i ? ", " : "", g_flows[i].requested);
  std::printf("], \"rtos\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%u", i ? ", " : "", g_flows[i].rtos);
  std::printf("], \"sub_mss_cwnd\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%u", i ? ", " : "", g_flows[i].subMss);
  std::printf("], \"last_tx_s\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%.6f", i ? ", " : "", g_flows[i].lastTx);
  std::printf("], \"max_tx_gap_s\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%.6f", i ? ", " : "", g_flows[i].maxTxGap);
  std::printf("], \"ss_exit_segments\": [");
  for (size_t i = 0; i < g_flows.size(); i++) std::printf("%s%.2f", i ? ", " : "", g_flows[i].ssExit);
  std::printf("], \"loss_probes\": %lu, \"wall_s\": %.6f}\n", static_cast<unsigned long>(g_lossProbes), wall);
  Simulator::Destroy();
  return 0;
}
