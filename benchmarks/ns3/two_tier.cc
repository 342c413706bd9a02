// ns-3 two-tier scenario for benchmarks/sim_vs_ns3_fabric.py: an all-to-all shuffle on a
// leaf-spine fabric with oversubscribed uplinks.
//
//   L leaves x H hosts, one spine; host <-> leaf at hostGbps, leaf <-> spine at uplinkGbps
//   (oversubscription = H * hostGbps / uplinkGbps); every host sends `megabytes` to every other
//   host, all flows starting together (one TCP connection per ordered pair); drop-tail queues of
//   `queue` packets on every port.
//
// Prints one JSON object on stdout: per-flow (src, dst, completion time in s from the common start)
// and the simulator's own wall time.
#include <chrono>
#include <cstdio>
#include <vector>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

struct Flow {
  uint32_t src, dst;
  uint64_t rx = 0;
  double fct = -1;
};
static std::vector<Flow> g_flows;
static uint64_t g_bytes = 0;
static double g_start = 1.0;

static void OnRx(uint32_t flow, Ptr<const Packet> p, const Address &) {
  Flow &f = g_flows[flow];
  f.rx += p->GetSize();
  if (f.fct < 0 && f.rx >= g_bytes) f.fct = Simulator::Now().GetSeconds() - g_start;
}

int main(int argc, char *argv[]) {
  uint32_t leaves = 2, hostsPerLeaf = 4, queue = 200;
  double hostGbps = 1.0, uplinkGbps = 2.0, delayUs = 10, megabytes = 10, stopS = 120;
  std::string cc = "ns3::TcpCubic";
  CommandLine cmd;
  cmd.AddValue("leaves", "leaf switches", leaves);
  cmd.AddValue("hostsPerLeaf", "hosts per leaf", hostsPerLeaf);
  cmd.AddValue("hostGbps", "host <-> leaf rate", hostGbps);
  cmd.AddValue("uplinkGbps", "leaf <-> spine rate", uplinkGbps);
  cmd.AddValue("delayUs", "one-way delay of every link, microseconds", delayUs);
  cmd.AddValue("megabytes", "MB (10^6) per flow", megabytes);
  cmd.AddValue("queue", "drop-tail limit of every port, packets", queue);
  cmd.AddValue("cc", "TCP congestion control TypeId", cc);
  cmd.AddValue("stopS", "virtual seconds after which unfinished flows are reported as -1", stopS);
  cmd.Parse(argc, argv);
  g_bytes = static_cast<uint64_t>(megabytes * 1e6);

  Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(cc)));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(8 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(8 << 20));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));  // Linux's

  uint32_t nHosts = leaves * hostsPerLeaf;
  NodeContainer hosts, leafNodes, spine;
  hosts.Create(nHosts);
  leafNodes.Create(leaves);
  spine.Create(1);
  InternetStackHelper stack;
  stack.InstallAll();

  std::string delay = std::to_string(delayUs) + "us";
  PointToPointHelper hostLink, upLink;
  hostLink.SetDeviceAttribute("DataRate", StringValue(std::to_string(hostGbps * 1000) + "Mbps"));
  hostLink.SetChannelAttribute("Delay", StringValue(delay));
  hostLink.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
  upLink.SetDeviceAttribute("DataRate", StringValue(std::to_string(uplinkGbps * 1000) + "Mbps"));
  upLink.SetChannelAttribute("Delay", StringValue(delay));
  upLink.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
  TrafficControlHelper fifo;
  fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue(std::to_string(queue) + "p"));

  Ipv4AddressHelper ip;
  int subnet = 1;
  std::vector<Ipv4Address> addr(nHosts);
  auto link = [&](PointToPointHelper &h, Ptr<Node> x, Ptr<Node> y) {
    NetDeviceContainer d = h.Install(x, y);
    fifo.Install(d);
    std::string base = "10." + std::to_string(subnet / 250) + "." + std::to_string(subnet % 250) + ".0";
    subnet++;
    ip.SetBase(base.c_str(), "255.255.255.0");
    return ip.Assign(d);
  };
  for (uint32_t h = 0; h < nHosts; h++) {
    Ipv4InterfaceContainer c = link(hostLink, hosts.Get(h), leafNodes.Get(h / hostsPerLeaf));
    addr[h] = c.GetAddress(0);
  }
  for (uint32_t l = 0; l < leaves; l++) link(upLink, leafNodes.Get(l), spine.Get(0));
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  uint16_t port = 5000;
  for (uint32_t s = 0; s < nHosts; s++) {
    for (uint32_t d = 0; d < nHosts; d++) {
      if (s == d) continue;
      uint32_t id = g_flows.size();
      g_flows.push_back(Flow{s, d});
      PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
      ApplicationContainer a = sink.Install(hosts.Get(d));
      a.Start(Seconds(0));
      a.Get(0)->TraceConnectWithoutContext("Rx", MakeBoundCallback(&OnRx, id));
      BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(addr[d], port));
      bulk.SetAttribute("MaxBytes", UintegerValue(g_bytes));
      bulk.SetAttribute("SendSize", UintegerValue(1448 * 16));
      ApplicationContainer b = bulk.Install(hosts.Get(s));
      b.Start(Seconds(g_start));
      port++;
    }
  }

  std::function<void()> check = [&]() {
    for (const Flow &f : g_flows)
      if (f.fct < 0) {
        Simulator::Schedule(MilliSeconds(10), check);
        return;
      }
    Simulator::Stop();
  };
  Simulator::Schedule(Seconds(g_start), check);
  Simulator::Stop(Seconds(g_start + stopS));
  auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"flows\": [");
  for (size_t i = 0; i < g_flows.size(); i++)
    std::printf("%s[%u, %u, %.6f]", i ? ", " : "", g_flows[i].src, g_flows[i].dst, g_flows[i].fct);
  std::printf("], \"wall_s\": %.6f}\n", wall);
  Simulator::Destroy();
  return 0;
}
