// Host set-up shared by the ns-3 reference programs (bottleneck.cc, two_tier.cc): TCP's defaults
// on every host, point-to-point links numbered one /24 each, bulk-send flows into packet sinks, and
// stopping once every flow is done. Included by the programs; compiled with them by
// benchmarks/sim_vs_ns3.py's compile_ns3 (whose cache key covers this header).
#pragma once

#include <algorithm>
#include <functional>
#include <list>
#include <optional>
#include <string>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

namespace shufflelab {

using namespace ns3;

// TCP segment payload of every flow (as the simulator's MSS), bytes.
constexpr uint32_t kSegment = 1448;

// Linux's additive increase (tcp_cong_avoid_ai) on a counter that a window reduction clears, as
// Linux's tcp_init_cwnd_reduction and tcp_enter_loss clear snd_cwnd_cnt (--cwndCntReset=true).
// ns-3.44's TcpLinuxReno (and TcpDctcp, which is one) keeps its private count across a reduction,
// so the first ACK after an ECN or loss response can add a segment at once: with windows of 2-4
// segments (Reno at the bottleneck's 90 % UDP) that is about one segment per cut. The reduction
// is where ns-3 asks the congestion control for ssthresh (GetSsThresh), so the count clears there.
struct LinuxCwndCount {
  uint32_t cnt = 0;
  void Add(Ptr<TcpSocketState> tcb, uint32_t acked) {
    uint32_t w = std::max<uint32_t>(tcb->m_cWnd / tcb->m_segmentSize, 1);
    if (cnt >= w) {  // credit earned at a larger window: one segment now
      cnt = 0;
      tcb->m_cWnd += tcb->m_segmentSize;
    }
    cnt += acked;
    if (cnt >= w) {
      uint32_t d = cnt / w;
      cnt -= d * w;
      tcb->m_cWnd += d * tcb->m_segmentSize;
    }
  }
};

// ns-3's TcpDctcp with Linux's floor on the ECN-driven ssthresh (dctcp_ssthresh: at least 2 segments)
// and, with AckNow, Linux's receiver rule on a change of CE state: dctcp_ece_ack_update sends the
// delayed ACK of the earlier segments (as ns-3's TcpDctcp does) and then ACKs this segment at once
// (ICSK_ACK_NOW), where ns-3 leaves it to the delayed-ACK rule (a second segment or the timer).
class TcpDctcpFloor : public TcpDctcp {
 public:
  static TypeId GetTypeId() {
    static TypeId tid = TypeId("ns3::TcpDctcpFloor")
                            .SetParent<TcpDctcp>()
                            .AddConstructor<TcpDctcpFloor>()
                            .AddAttribute("MinSegments", "floor of ssthresh, segments", UintegerValue(2),
                                          MakeUintegerAccessor(&TcpDctcpFloor::m_minSegments),
                                          MakeUintegerChecker<uint32_t>())
                            .AddAttribute("AckNow", "ACK a segment whose CE state differs from the last one's at once",
                                          BooleanValue(false), MakeBooleanAccessor(&TcpDctcpFloor::m_ackNow),
                                          MakeBooleanChecker())
                            .AddAttribute("CountReset", "clear the additive increase's count at a reduction (Linux)",
                                          BooleanValue(false), MakeBooleanAccessor(&TcpDctcpFloor::m_countReset),
                                          MakeBooleanChecker())
                            .AddAttribute("LossHalves", "answer a loss by halving the window, as Linux's DCTCP",
                                          BooleanValue(false), MakeBooleanAccessor(&TcpDctcpFloor::m_lossHalves),
                                          MakeBooleanChecker());
    return tid;
  }
  TcpDctcpFloor() = default;
  TcpDctcpFloor(const TcpDctcpFloor &sock)
      : TcpDctcp(sock),
        m_minSegments(sock.m_minSegments),
        m_ackNow(sock.m_ackNow),
        m_countReset(sock.m_countReset),
        m_lossHalves(sock.m_lossHalves),
        m_ce(sock.m_ce),
        m_count(sock.m_count) {}
  void CwndEvent(Ptr<TcpSocketState> tcb, const TcpSocketState::TcpCAEvent_t event) override {
    if (m_lossHalves && event == TcpSocketState::CA_EVENT_LOSS) {
      // a retransmission timeout: ns-3 asked GetSsThresh before (in the old state); Linux's
      // dctcp_cwnd_event(CA_EVENT_LOSS) halves
      tcb->m_ssThresh = Halved(tcb);
    }
    bool ce = event == TcpSocketState::CA_EVENT_ECN_IS_CE;
    if (m_ackNow && (ce || event == TcpSocketState::CA_EVENT_ECN_NO_CE)) {
      m_changed = m_changed || ce != m_ce;
      m_ce = ce;
    }
    TcpDctcp::CwndEvent(tcb, event);
    if (event == TcpSocketState::CA_EVENT_NON_DELAYED_ACK) {
      m_changed = false;  // this segment is ACKed now anyway
    } else if (event == TcpSocketState::CA_EVENT_DELAYED_ACK && m_changed) {
      // the segment that changed the CE state would wait for the delayed ACK: ACK it now, echoing
      // the mark as the socket would -- once the socket has handled the segment (ScheduleNow), so
      // that the ACK also cancels the delayed-ACK timer and count the socket sets after this event
      m_changed = false;
      Simulator::ScheduleNow([tcb]() {
        bool echo =
            tcb->m_ecnState == TcpSocketState::ECN_CE_RCVD || tcb->m_ecnState == TcpSocketState::ECN_SENDING_ECE;
        tcb->m_sendEmptyPacketCallback(echo ? (TcpHeader::ACK | TcpHeader::ECE) : TcpHeader::ACK);
        if (echo) tcb->m_ecnState = TcpSocketState::ECN_SENDING_ECE;
      });
    }
  }
  std::string GetName() const override { return "TcpDctcpFloor"; }
  uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override {
    m_count.cnt = 0;
    // a fast recovery (ns-3's EnterRecovery sets the state first): Linux's dctcp_state halves
    if (m_lossHalves && tcb->m_congState == TcpSocketState::CA_RECOVERY) return Halved(tcb);
    return std::max(TcpDctcp::GetSsThresh(tcb, bytesInFlight), m_minSegments * tcb->m_segmentSize);
  }
  Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpDctcpFloor>(this); }

 protected:
  void CongestionAvoidance(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override {
    // (TcpDctcp grows whether or not the window limits the flow, as ns-3's does)
    if (m_countReset) {
      m_count.Add(tcb, segmentsAcked);
    } else {
      TcpDctcp::CongestionAvoidance(tcb, segmentsAcked);
    }
  }

 private:
  // Linux's dctcp_react_to_loss: max(cwnd / 2, 2 segments)
  static uint32_t Halved(Ptr<const TcpSocketState> tcb) {
    return std::max<uint32_t>(tcb->m_cWnd / tcb->m_segmentSize / 2, 2) * tcb->m_segmentSize;
  }
  uint32_t m_minSegments = 2;
  bool m_ackNow = false;
  bool m_countReset = false;
  bool m_lossHalves = false;
  bool m_ce = false;       // the CE state of the last data segment received
  bool m_changed = false;  // it changed, and that segment is not ACKed yet
  LinuxCwndCount m_count;
};
NS_OBJECT_ENSURE_REGISTERED(TcpDctcpFloor);

// ns-3's TcpLinuxReno whose additive increase clears its count at a reduction (LinuxCwndCount).
class TcpLinuxRenoCount : public TcpLinuxReno {
 public:
  static TypeId GetTypeId() {
    static TypeId tid =
        TypeId("ns3::TcpLinuxRenoCount").SetParent<TcpLinuxReno>().AddConstructor<TcpLinuxRenoCount>();
    return tid;
  }
  TcpLinuxRenoCount() = default;
  TcpLinuxRenoCount(const TcpLinuxRenoCount &sock) : TcpLinuxReno(sock), m_count(sock.m_count) {}
  std::string GetName() const override { return "TcpLinuxRenoCount"; }
  uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override {
    m_count.cnt = 0;
    return TcpLinuxReno::GetSsThresh(tcb, bytesInFlight);
  }
  Ptr<TcpCongestionOps> Fork() override { return CopyObject<TcpLinuxRenoCount>(this); }

 protected:
  void CongestionAvoidance(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override {
    if (tcb->m_isCwndLimited) m_count.Add(tcb, segmentsAcked);  // tcp_reno_cong_avoid's test
  }

 private:
  LinuxCwndCount m_count;
};
NS_OBJECT_ENSURE_REGISTERED(TcpLinuxRenoCount);

// ns-3.44's TcpPrrRecovery with the fix of ns-3 issue 1350 (made after 3.44): with SACK (on in these
// programs, as in Linux) the DeliveredData of an ACK is what it newly acknowledged or SACKed. 3.44
// adds a segment per duplicate ACK on top of that, so a loss recovery sends about twice its
// proportional share (RFC 6937) -- Linux's tcp_cwnd_reduction does not -- and a queue that dropped
// a window's segments stays full and drops their retransmissions too. Otherwise as 3.44's: the
// recovery's flight is the pipe at its start, the fast retransmit goes at once, PRR-SSRB once the
// pipe is at ssthresh, one more segment when a retransmission is acknowledged.
class TcpPrrSackFix : public TcpClassicRecovery {
 public:
  static TypeId GetTypeId() {
    static TypeId tid =
        TypeId("ns3::TcpPrrSackFix").SetParent<TcpClassicRecovery>().AddConstructor<TcpPrrSackFix>();
    return tid;
  }
  TcpPrrSackFix() = default;
  TcpPrrSackFix(const TcpPrrSackFix &other) = default;
  std::string GetName() const override { return "TcpPrrSackFix"; }
  void EnterRecovery(Ptr<TcpSocketState> tcb, uint32_t, uint32_t, uint32_t deliveredBytes) override {
    m_out = 0;
    m_delivered = 0;
    m_flight = std::max<int64_t>(tcb->m_bytesInFlight.Get(), 1);
    DoRecovery(tcb, deliveredBytes, true);
  }
  void DoRecovery(Ptr<TcpSocketState> tcb, uint32_t deliveredBytes, bool) override {
    if (deliveredBytes == 0) return;  // (3.44: a duplicate ACK counts a segment here)
    m_delivered += deliveredBytes;
    int64_t ssthresh = tcb->m_ssThresh.Get(), inFlight = tcb->m_bytesInFlight.Get(), seg = tcb->m_segmentSize;
    int64_t send;
    if (inFlight > ssthresh) {
      send = (m_delivered * ssthresh + m_flight - 1) / m_flight - m_out;
    } else {
      int64_t limit = std::max<int64_t>(m_delivered - m_out, deliveredBytes);
      if (tcb->m_isRetransDataAcked) limit += seg;
      send = std::min(limit, ssthresh - inFlight);
    }
    send = std::max<int64_t>(send, m_out > 0 ? 0 : seg);  // the fast retransmit, at once
    tcb->m_cWnd = static_cast<uint32_t>(inFlight + std::max<int64_t>(send, 0));
    tcb->m_cWndInfl = tcb->m_cWnd;
  }
  void ExitRecovery(Ptr<TcpSocketState> tcb) override { tcb->m_cWndInfl = tcb->m_cWnd; }
  void UpdateBytesSent(uint32_t bytesSent) override { m_out += bytesSent; }
  Ptr<TcpRecoveryOps> Fork() override { return CopyObject<TcpPrrSackFix>(this); }

 private:
  int64_t m_flight = 1;
  int64_t m_delivered = 0;
  int64_t m_out = 0;
};
NS_OBJECT_ENSURE_REGISTERED(TcpPrrSackFix);

// Receivers that ACK as Linux's (tcp_input.c: __tcp_ack_snd_check, tcp_event_data_recv; --linuxAcks=true):
// on top of ns-3's rule (an ACK per DelAckCount segments, at once on a gap or a filled gap, else after
// DelAckTimeout), a segment is ACKed at once in quick-ACK mode (the first kQuickAcks segments of a
// connection, whose receive window is 10 segments; kIdleQuickAcks after a silence longer than the
// RTO), when it carries CWR (tcp_ecn_accept_cwr: "the sender's cwnd may be very low"), when it is
// CE-marked under classic ECN (Linux stops delaying while it owes an echo), and under DCTCP when its
// CE state differs from the last segment's (dctcp_ece_ack_update: ns-3's TcpDctcp sends the held
// ACK with the old state, this one follows). ACKs only what the socket still holds, so it never
// sends a duplicate. The same rules as the simulator's `tcp.delayed_ack` (crates/simcore/src/linksim.rs).
constexpr uint32_t kQuickAcks = 5, kIdleQuickAcks = 16;
// With g_cwrRecovery (--cwrRecovery=true; the senders then use this socket too): a sender in CWR (an
// ECN reduction) that finds a loss enters fast recovery, as Linux's tcp_fastretrans_alert does from
// CWR as from Open and Disorder. ns-3.44 only counts the duplicate ACK there (its ProcessAck: "TODO:
// need to check behavior if marking is compounded by loss"), so a DCTCP sender whose first window
// lost segments stays in CWR, its flight at the ECN cut, until the retransmission timer.
inline bool g_cwrRecovery = false;
// With g_rack (--rackLoss=true; the senders then use this socket too): a segment is lost once a
// segment sent after it (by more than a quarter of the minimum round trip) has been delivered, as
// Linux's RACK (tcp_rack_detect_loss, RFC 8985) finds it; a lost retransmission is found the same
// way and sent again. ns-3.44 finds a loss only from three segments SACKed above it (RFC 6675), so
// a sender whose window's last segments, or a retransmission, were dropped waits for its timer.
inline bool g_rack = false;
// With g_rackPrr too (--rackPrr=true): in a recovery, what RACK finds lost leaves the window with
// it, so that only what proportional rate reduction allows is sent, as Linux's (it marks the losses,
// then tcp_cwnd_reduction sets the window to the flight that is left plus PRR's count, at least one
// segment while that flight is under ssthresh). Without it
// ns-3's window, set by PRR before the losses were marked, sends every lost segment it finds again at
// once: a burst of retransmissions that can keep a RED queue's average above its maximum, where a
// retransmission, not ECN-capable, is dropped. (RACK here still marks only below the highest SACKed
// segment, as ns-3's scoreboard counts: marked above it, ns-3.44's TcpTxBuffer::Update crashes on a
// later SACK.)
inline bool g_rackPrr = false;
// With g_rackReo too (--rackReo=true): RACK's reordering as Linux's. Its timer
// (tcp_rack_reo_timeout): a segment sent before the newest delivered one but within the reordering
// window of it is not lost yet; Linux arms a timer for when it will be (its send time + the
// delivered segment's round trip + the window) and marks it then; in a recovery the window stays
// as it is (no PRR cut: what the timer finds lost goes again as far as it allows). Its window
// (tcp_rack_reo_wnd, no reordering seen): none in a recovery or once three segments are SACKed,
// a quarter of the minimum round trip before. Without it ns-3's RACK keeps a quarter round trip
// throughout and looks again only at the next ACK; where none comes (a window's last segments,
// sent together, one of them dropped, a later one delivered) the sender waits for its
// retransmission timer.
inline bool g_rackReo = false;
// With g_tlp (--lossProbe=true; the senders then use this socket too): Linux's tail loss probe
// (tcp_schedule_loss_probe, tcp_send_loss_probe; net.ipv4.tcp_early_retrans = 3, its default). In the
// Open or CWR state with data in flight, after new data is sent or an ACK moves the cumulative ACK,
// a probe is due 2 SRTT + 2 ms later (+ the minimum RTO with one segment in flight), unless the
// retransmission timer comes first; it sends one new segment past the window, or else sends the
// last one again, once per episode (until the cumulative ACK passes what was sent then, or a
// recovery or the timer begins), and restarts the retransmission timer. ns-3.44 has no probe: a
// window whose last segments, or whose last ACK, were dropped waits for the timer. Not done: the
// window reduction Linux makes when the probe alone repaired a loss (it tells that from a D-SACK,
// which ns-3's receivers do not send).
inline bool g_tlp = false;
inline uint64_t g_lossProbes = 0;  // probes sent, all sockets
// TcpTxBuffer keeps its sent list and counts private and offers no way to mark a segment lost:
// the explicit instantiations below name them (access is not checked there).
template <typename Tag, typename Tag::type M>
struct Grant {
  friend typename Tag::type Get(Tag) { return M; }
};
struct SentListOf {
  using type = std::list<TcpTxItem *> TcpTxBuffer::*;
  friend type Get(SentListOf);
};
struct LostOutOf {
  using type = uint32_t TcpTxBuffer::*;
  friend type Get(LostOutOf);
};
struct RetransOutOf {
  using type = uint32_t TcpTxBuffer::*;
  friend type Get(RetransOutOf);
};
struct HighestSackOf {
  using type = std::pair<std::list<TcpTxItem *>::const_iterator, SequenceNumber32> TcpTxBuffer::*;
  friend type Get(HighestSackOf);
};
struct ItemLostOf {
  using type = bool TcpTxItem::*;
  friend type Get(ItemLostOf);
};
template struct Grant<SentListOf, &TcpTxBuffer::m_sentList>;
template struct Grant<LostOutOf, &TcpTxBuffer::m_lostOut>;
template struct Grant<RetransOutOf, &TcpTxBuffer::m_retrans>;
template struct Grant<HighestSackOf, &TcpTxBuffer::m_highestSack>;
template struct Grant<ItemLostOf, &TcpTxItem::m_lost>;
class TcpSocketLinuxAcks : public TcpSocketBase {
 public:
  static TypeId GetTypeId() {
    static TypeId tid =
        TypeId("ns3::TcpSocketLinuxAcks").SetParent<TcpSocketBase>().AddConstructor<TcpSocketLinuxAcks>();
    return tid;
  }
  TcpSocketLinuxAcks() = default;
  TcpSocketLinuxAcks(const TcpSocketLinuxAcks &sock) : TcpSocketBase(sock) {}

 protected:
  Ptr<TcpSocketBase> Fork() override { return CopyObject<TcpSocketLinuxAcks>(this); }
  void ProcessAck(const SequenceNumber32 &ackNumber, bool scoreboardUpdated, uint32_t currentDelivered,
                  const SequenceNumber32 &oldHeadSequence, bool receivedData) override {
    bool dupack = m_sackEnabled ? scoreboardUpdated
                                : (ackNumber == oldHeadSequence && ackNumber < m_tcb->m_highTxMark && !receivedData);
    if (g_cwrRecovery && dupack && m_tcb->m_congState == TcpSocketState::CA_CWR &&
        (m_dupAckCount + 1 >= m_retxThresh || m_txBuffer->IsLost(m_txBuffer->HeadSequence()))) {
      // hand the loss to DupAck as Disorder's: the duplicate ACK it counts reaches the threshold
      m_tcb->m_congState = TcpSocketState::CA_DISORDER;
      m_dupAckCount = m_retxThresh - 1;
    }
    if (g_rack) {  // the newest send time this ACK delivers: what it acknowledges or SACKs
      SequenceNumber32 seq = m_txBuffer->HeadSequence();
      for (TcpTxItem *item : (*m_txBuffer).*Get(SentListOf{})) {
        SequenceNumber32 end = seq + item->GetSeqSize();
        if (end <= ackNumber || item->IsSacked()) {
          // the newest by send time, then by sequence (Linux's tcp_rack_sent_after)
          if (item->GetLastSent() > m_rackXmit || (item->GetLastSent() == m_rackXmit && end > m_rackEnd)) {
            m_rackXmit = item->GetLastSent();
            m_rackEnd = end;
          }
        }
        seq = end;
      }
    }
    TcpSocketBase::ProcessAck(ackNumber, scoreboardUpdated, currentDelivered, oldHeadSequence, receivedData);
    if (g_rack && m_txBuffer->Size() > 0) {
      m_rackRtt = Simulator::Now() - m_rackXmit;
      RackDetectLoss(currentDelivered, false);
    }
    if (g_tlp) {
      auto state = m_tcb->m_congState.Get();
      if (m_tlpHigh && (ackNumber >= *m_tlpHigh || state == TcpSocketState::CA_RECOVERY ||
                        state == TcpSocketState::CA_LOSS)) {
        m_tlpHigh.reset();
      }
      if (ackNumber > oldHeadSequence) ScheduleLossProbe(m_rto.Get());
    }
  }
  uint32_t SendDataPacket(SequenceNumber32 seq, uint32_t maxSize, bool withAck) override {
    bool fresh = seq >= m_tcb->m_highTxMark;
    uint32_t sz = TcpSocketBase::SendDataPacket(seq, maxSize, withAck);
    if (g_tlp && fresh && !m_probing) {
      ScheduleLossProbe(m_retxEvent.IsPending() ? Simulator::GetDelayLeft(m_retxEvent) : m_rto.Get());
    }
    return sz;
  }
  void ReTxTimeout() override {
    m_tlpEvent.Cancel();
    m_reoEvent.Cancel();
    m_tlpHigh.reset();
    TcpSocketBase::ReTxTimeout();
  }
  // Arms the probe (tcp_schedule_loss_probe) unless the retransmission timer, due in `rtoLeft`, comes first.
  void ScheduleLossProbe(Time rtoLeft) {
    m_tlpEvent.Cancel();
    auto state = m_tcb->m_congState.Get();
    uint32_t out = m_tcb->m_highTxMark.Get() - m_txBuffer->HeadSequence();
    if (out == 0 || m_tcb->m_srtt.Get().IsZero() ||
        (state != TcpSocketState::CA_OPEN && state != TcpSocketState::CA_CWR)) {
      return;
    }
    Time pto = m_tcb->m_srtt.Get() * 2 + (out <= m_tcb->m_segmentSize ? m_minRto : MilliSeconds(2));
    if (pto < rtoLeft) m_tlpEvent = Simulator::Schedule(pto, &TcpSocketLinuxAcks::SendLossProbe, this);
  }
  // The probe (tcp_send_loss_probe): a new segment if there is one and the peer's window takes it,
  // else the last one sent again.
  void SendLossProbe() {
    auto state = m_tcb->m_congState.Get();
    SequenceNumber32 head = m_txBuffer->HeadSequence(), high = m_tcb->m_highTxMark.Get();
    if (m_tlpHigh || high <= head || (state != TcpSocketState::CA_OPEN && state != TcpSocketState::CA_CWR)) {
      return;
    }
    uint32_t mss = m_tcb->m_segmentSize;
    auto &sent = (*m_txBuffer).*Get(SentListOf{});
    bool fresh = m_tcb->m_nextTxSequence == high && m_txBuffer->SizeFromSequence(high) > 0 &&
                 m_highRxAckMark + SequenceNumber32(m_rWnd) >= high + SequenceNumber32(mss);
    // the last segment already SACKed: nothing to probe with (RACK finds what is below it)
    if (!fresh && (sent.empty() || sent.back()->IsSacked())) return;
    m_probing = true;
    if (fresh) {
      m_tcb->m_nextTxSequence += SendDataPacket(high, mss, true);
    } else {
      SendDataPacket(high - sent.back()->GetSeqSize(), sent.back()->GetSeqSize(), true);
    }
    m_probing = false;
    g_lossProbes++;
    m_tlpHigh = m_tcb->m_highTxMark.Get();
    m_retxEvent.Cancel();  // the timer starts again from the probe, as Linux's tcp_rearm_rto
    m_retxEvent = Simulator::Schedule(m_rto, &TcpSocketLinuxAcks::ReTxTimeout, this);
  }
  // RACK's reordering timer fired (g_rackReo): what it was armed for is lost now.
  void RackReoTimeout() {
    if (m_txBuffer->Size() > 0) RackDetectLoss(m_tcb->m_segmentSize, true);
  }
  // Marks lost every segment sent before the newest delivered one by more than the reordering
  // window (a quarter of the minimum round trip; with g_rackReo none in a recovery or once three
  // segments are SACKed), not SACKed, not marked yet; a retransmission so
  // found is marked to be sent again. Then recovers as ns-3 does from three duplicate ACKs. With
  // g_rackReo, one sent before it within the window arms the reordering timer (`timer`: it fired,
  // and a segment is lost once its send time + that round trip + the window has passed).
  void RackDetectLoss(uint32_t currentDelivered, bool timer) {
    TcpTxBuffer &buf = *m_txBuffer;
    auto state = m_tcb->m_congState.Get();
    bool dupthresh = buf.GetSacked() >= m_retxThresh * m_tcb->m_segmentSize;
    Time reo = m_tcb->m_minRtt == Time::Max() ||
                       (g_rackReo && (state == TcpSocketState::CA_RECOVERY || state == TcpSocketState::CA_LOSS || dupthresh))
                   ? Time(0)
                   : m_tcb->m_minRtt / 4;
    auto highest = (buf.*Get(HighestSackOf{})).second;
    SequenceNumber32 seq = buf.HeadSequence();
    bool found = false;
    uint32_t pipe = BytesInFlight();
    Time now = Simulator::Now(), wake = Time::Max();
    for (TcpTxItem *item : buf.*Get(SentListOf{})) {
      bool &lost = item->*Get(ItemLostOf{});
      bool open = !item->IsSacked() && seq < highest && (!lost || item->m_retrans);
      // with g_rackReo as Linux's tcp_rack_detect_loss: sent before the newest delivered segment
      // (by time, then sequence: one sent in the same instant after it is not) and its round
      // trip plus the window past
      Time sent = item->GetLastSent();
      bool before = sent < m_rackXmit || (sent == m_rackXmit && seq + item->GetSeqSize() < m_rackEnd);
      bool due = g_rackReo ? before && sent + m_rackRtt + reo <= now
                 : timer   ? sent <= m_rackXmit && sent + m_rackRtt + reo <= now
                           : sent + reo < m_rackXmit;
      if (g_rackReo && open && !due && before) {
        wake = std::min(wake, sent + m_rackRtt + reo);
      }
      if (open && due) {
        if (!lost) buf.*Get(LostOutOf{}) += item->GetSeqSize();
        lost = true;
        if (item->m_retrans) {
          item->m_retrans = false;
          buf.*Get(RetransOutOf{}) -= item->GetSeqSize();
        }
        found = true;
      }
      seq += item->GetSeqSize();
    }
    if (wake != Time::Max()) {
      m_reoEvent.Cancel();
      m_reoEvent = Simulator::Schedule(std::max(wake - now, Time(0)), &TcpSocketLinuxAcks::RackReoTimeout, this);
    }
    if (!found) return;
    if (state == TcpSocketState::CA_OPEN || state == TcpSocketState::CA_DISORDER ||
        (g_cwrRecovery && state == TcpSocketState::CA_CWR)) {
      if (state == TcpSocketState::CA_CWR) m_tcb->m_congState = TcpSocketState::CA_DISORDER;
      EnterRecovery(currentDelivered);
    } else {
      uint32_t left = BytesInFlight();
      if (g_rackPrr && state == TcpSocketState::CA_RECOVERY && pipe > left && !(g_rackReo && timer)) {
        // below ssthresh PRR sends at least one segment (Linux's tcp_cwnd_reduction counts the
        // ACK's newly delivered segments there), so a window whose flight RACK emptied is not
        // left waiting for the retransmission timer
        uint32_t cwnd = m_tcb->m_cWnd.Get(), ssthresh = m_tcb->m_ssThresh.Get();
        uint32_t floor = left < ssthresh ? left + std::min(ssthresh - left, m_tcb->m_segmentSize) : left;
        m_tcb->m_cWnd = std::max(cwnd > pipe - left ? cwnd - (pipe - left) : 0u, floor);
        m_tcb->m_cWndInfl = m_tcb->m_cWnd;
      }
      SendPendingData(m_connected);
    }
  }
  void ReceivedData(Ptr<Packet> packet, const TcpHeader &header) override {
    Time now = Simulator::Now();
    if (!m_seen) {
      m_seen = true;
      m_quick = kQuickAcks;
    } else if (now - m_lastRx > m_rto.Get()) {
      m_quick = std::max(m_quick, kIdleQuickAcks);
    }
    m_lastRx = now;
    bool ecn = m_tcb->m_ecnState != TcpSocketState::ECN_DISABLED;
    bool ce = ecn && m_ecnCESeq.Get() == header.GetSequenceNumber();
    bool dctcp = m_congestionControl->GetName().rfind("TcpDctcp", 0) == 0;
    bool ackNow = m_quick > 0 || (header.GetFlags() & TcpHeader::CWR) || (dctcp ? ce != m_ce : ce);
    m_ce = ce;
    if (m_quick > 0) m_quick--;
    TcpSocketBase::ReceivedData(packet, header);
    if (ackNow && m_delAckCount > 0) {  // the socket holds this segment's ACK: send it now
      m_congestionControl->CwndEvent(m_tcb, TcpSocketState::CA_EVENT_NON_DELAYED_ACK);
      if (m_tcb->m_ecnState == TcpSocketState::ECN_CE_RCVD || m_tcb->m_ecnState == TcpSocketState::ECN_SENDING_ECE) {
        SendEmptyPacket(TcpHeader::ACK | TcpHeader::ECE);
        m_tcb->m_ecnState = TcpSocketState::ECN_SENDING_ECE;
      } else {
        SendEmptyPacket(TcpHeader::ACK);
      }
    }
  }

 private:
  bool m_seen = false;  // a data segment came
  Time m_lastRx;        // when the last one came
  uint32_t m_quick = 0;  // segments still to ACK at once (quick-ACK mode)
  Time m_rackXmit{0};    // RACK: the newest send time among the segments delivered
  SequenceNumber32 m_rackEnd{0};  // RACK: the end of the newest delivered segment sent then
  Time m_rackRtt{0};     // RACK: that segment's round trip
  EventId m_reoEvent;    // RACK's reordering timer (g_rackReo)
  EventId m_tlpEvent;    // the tail loss probe's timer
  std::optional<SequenceNumber32> m_tlpHigh;  // a probe is out: what was sent when it left
  bool m_probing = false;  // sending the probe (it does not arm another)
  bool m_ce = false;     // the last segment's CE mark
};
NS_OBJECT_ENSURE_REGISTERED(TcpSocketLinuxAcks);

// A socket factory making TcpSocketLinuxAcks as TcpL4Protocol makes its sockets (its RTT estimator,
// congestion control and recovery types), aggregated to every node by UseLinuxAcks.
class TcpSocketFactoryLinuxAcks : public SocketFactory {
 public:
  static TypeId GetTypeId() {
    static TypeId tid = TypeId("ns3::TcpSocketFactoryLinuxAcks")
                            .SetParent<SocketFactory>()
                            .AddConstructor<TcpSocketFactoryLinuxAcks>();
    return tid;
  }
  Ptr<Socket> CreateSocket() override {
    Ptr<Node> node = GetObject<Node>();
    Ptr<TcpL4Protocol> tcp = node->GetObject<TcpL4Protocol>();
    TypeIdValue rtt, cc, recovery;
    tcp->GetAttribute("RttEstimatorType", rtt);
    tcp->GetAttribute("SocketType", cc);
    tcp->GetAttribute("RecoveryType", recovery);
    ObjectFactory f;
    Ptr<TcpSocketLinuxAcks> socket = CreateObject<TcpSocketLinuxAcks>();
    socket->SetNode(node);
    socket->SetTcp(tcp);
    f.SetTypeId(rtt.Get());
    socket->SetRtt(f.Create<RttEstimator>());
    f.SetTypeId(cc.Get());
    socket->SetCongestionControlAlgorithm(f.Create<TcpCongestionOps>());
    f.SetTypeId(recovery.Get());
    socket->SetRecoveryAlgorithm(f.Create<TcpRecoveryOps>());
    tcp->AddSocket(socket);
    return socket;
  }
};
NS_OBJECT_ENSURE_REGISTERED(TcpSocketFactoryLinuxAcks);

// The socket factory of the flows' receivers: ns-3's, or with UseLinuxAcks the Linux-like one above.
inline std::string g_sinkFactory = "ns3::TcpSocketFactory";

// Every node's receivers ACK as Linux's (after the internet stack is installed on them).
inline void UseLinuxAcks(NodeContainer nodes) {
  for (uint32_t i = 0; i < nodes.GetN(); i++) nodes.Get(i)->AggregateObject(CreateObject<TcpSocketFactoryLinuxAcks>());
  g_sinkFactory = "ns3::TcpSocketFactoryLinuxAcks";
}

// TCP's defaults on every host: congestion control `cc` (ns3::TcpDctcp with dctcpFloor > 0: the
// floored TcpDctcpFloor above), the receiver's delayed-ACK timer, the minimum retransmission
// timeout, segments of kSegment bytes and 8 MiB socket buffers; with prrSackFix, TcpPrrSackFix above
// instead of ns-3's TcpPrrRecovery.
// The Linux-like host options both programs take on their command lines (ConfigureTcpHosts and
// UseLinuxAcks apply them; --cwrRecovery sets g_cwrRecovery).
struct LinuxHostOptions {
  bool linuxAcks = false, prrSackFix = false, cwndCntReset = false, dctcpLossHalves = false;
  void AddTo(CommandLine &cmd) {
    cmd.AddValue("linuxAcks", "receivers ACK as Linux's (quick ACKs, CWR, CE; TcpSocketLinuxAcks in hosts.h)",
                 linuxAcks);
    cmd.AddValue("prrSackFix", "PRR without ns-3.44's extra segment per duplicate ACK (TcpPrrSackFix in hosts.h)",
                 prrSackFix);
    cmd.AddValue("cwndCntReset",
                 "Reno's and DCTCP's additive-increase count cleared at a reduction, as Linux's (LinuxCwndCount "
                 "in hosts.h)",
                 cwndCntReset);
    cmd.AddValue("dctcpLossHalves", "DCTCP answers a loss by halving its window, as Linux's (TcpDctcpFloor in hosts.h)",
                 dctcpLossHalves);
    cmd.AddValue("rackLoss",
                 "with --linuxAcks: a loss found from a segment sent after it being delivered, as Linux's RACK "
                 "(TcpSocketLinuxAcks in hosts.h)",
                 g_rack);
    cmd.AddValue("rackReo",
                 "with --rackLoss: RACK's reordering timer, as Linux's: a segment sent within the reordering window "
                 "before a delivered one is marked lost when the window has passed (TcpSocketLinuxAcks in hosts.h)",
                 g_rackReo);
    cmd.AddValue("rackPrr",
                 "with --rackLoss: in a recovery what RACK finds lost is sent again only as PRR allows, as Linux's "
                 "(TcpSocketLinuxAcks in hosts.h)",
                 g_rackPrr);
    cmd.AddValue("cwrRecovery",
                 "with --linuxAcks: a sender in CWR that finds a loss enters fast recovery, as Linux's "
                 "(TcpSocketLinuxAcks in hosts.h)",
                 g_cwrRecovery);
    cmd.AddValue("lossProbe",
                 "with --linuxAcks: Linux's tail loss probe 2 SRTT after the last send or ACK (TcpSocketLinuxAcks in "
                 "hosts.h)",
                 g_tlp);
  }
};

inline void ConfigureTcpHosts(std::string cc, uint32_t dctcpFloor, double delAckTimeoutMs, double minRtoMs,
                              bool dctcpAckNow, const LinuxHostOptions &o) {
  bool prrSackFix = o.prrSackFix, cwndCntReset = o.cwndCntReset, dctcpLossHalves = o.dctcpLossHalves;
  if (prrSackFix) Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TcpPrrSackFix::GetTypeId()));
  if (cc == "ns3::TcpDctcp" && (dctcpFloor > 0 || dctcpAckNow || cwndCntReset || dctcpLossHalves)) {
    cc = "ns3::TcpDctcpFloor";
    Config::SetDefault("ns3::TcpDctcpFloor::MinSegments", UintegerValue(dctcpFloor));
    Config::SetDefault("ns3::TcpDctcpFloor::AckNow", BooleanValue(dctcpAckNow));
    Config::SetDefault("ns3::TcpDctcpFloor::CountReset", BooleanValue(cwndCntReset));
    Config::SetDefault("ns3::TcpDctcpFloor::LossHalves", BooleanValue(dctcpLossHalves));
  }
  if (cc == "ns3::TcpLinuxReno" && cwndCntReset) cc = "ns3::TcpLinuxRenoCount";
  Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(cc)));
  Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(Seconds(delAckTimeoutMs / 1000.0)));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(kSegment));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(8 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(8 << 20));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(minRtoMs)));
}

// Point-to-point links, each its own subnet 10.x.y.0/24 in the order they are made.
// A point-to-point channel whose packets from one end (`from`) reach the other U[0, `jitter`) after the
// fixed delay, as a host's send times wander with its interrupts and NIC; from the other end it is the
// plain channel. Never before the packet sent ahead of it, as a NIC sends its queue in order: a pure
// ACK or SYN takes a fraction of a full segment's time on the wire, and with the wander alone it
// could overtake the segment before it; such reordering made ns-3.44 crash (SIGSEGV in
// TcpTxBuffer::Update) in some runs of the reducers' loops and every Cubic run at 2 x 16 hosts.
class JitterChannel : public PointToPointChannel {
 public:
  JitterChannel(Ptr<PointToPointNetDevice> from, Time jitter) : m_from(from), m_jitter(jitter) {
    m_rng = CreateObject<UniformRandomVariable>();
  }
  bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override {
    if (src != m_from) return PointToPointChannel::TransmitStart(p, src, txTime);
    Ptr<PointToPointNetDevice> dst = GetPointToPointDevice(src == GetPointToPointDevice(0) ? 1 : 0);
    Time wander = NanoSeconds(m_rng->GetInteger(0, std::max<int64_t>(m_jitter.GetNanoSeconds(), 1) - 1));
    Time at = std::max(Simulator::Now() + txTime + GetDelay() + wander, m_last);
    m_last = at;
    Simulator::ScheduleWithContext(dst->GetNode()->GetId(), at - Simulator::Now(), &PointToPointNetDevice::Receive,
                                   dst, p->Copy());
    return true;
  }

 private:
  Ptr<PointToPointNetDevice> m_from;
  Time m_jitter;
  Time m_last;  // the arrival of the packet sent last
  Ptr<UniformRandomVariable> m_rng;
};

class Links {
 public:
  // With `jitter` > 0 what `x` sends wanders by up to it (JitterChannel).
  Ipv4InterfaceContainer Add(PointToPointHelper &h, Ptr<Node> x, Ptr<Node> y, TrafficControlHelper &tc,
                             Time jitter = Time(0)) {
    NetDeviceContainer d = h.Install(x, y);
    if (jitter.IsStrictlyPositive()) {
      auto a = DynamicCast<PointToPointNetDevice>(d.Get(0)), b = DynamicCast<PointToPointNetDevice>(d.Get(1));
      auto ch = CreateObject<JitterChannel>(a, jitter);
      TimeValue delay;
      a->GetChannel()->GetAttribute("Delay", delay);
      ch->SetAttribute("Delay", delay);
      a->Attach(ch);
      b->Attach(ch);
    }
    tc.Install(d);
    std::string base = "10." + std::to_string(m_subnet / 250) + "." + std::to_string(m_subnet % 250) + ".0";
    m_subnet++;
    m_ip.SetBase(base.c_str(), "255.255.255.0");
    return m_ip.Assign(d);
  }

 private:
  Ipv4AddressHelper m_ip;
  int m_subnet = 1;
};

// One TCP flow of `bytes` from `src` to `dst` (at `dstAddr`, `port`): a packet sink on `dst` from
// time 0 whose received packets go to `onRx`, and a bulk sender on `src` from `start`. Returns the
// sender.
inline ApplicationContainer InstallBulkFlow(Ptr<Node> src, Ptr<Node> dst, Ipv4Address dstAddr, uint16_t port,
                                            uint64_t bytes, Time start,
                                            Callback<void, Ptr<const Packet>, const Address &> onRx) {
  PacketSinkHelper sink(g_sinkFactory, InetSocketAddress(Ipv4Address::GetAny(), port));
  ApplicationContainer s = sink.Install(dst);
  s.Start(Seconds(0));
  s.Get(0)->TraceConnectWithoutContext("Rx", onRx);
  BulkSendHelper bulk(g_cwrRecovery || g_rack || g_tlp ? g_sinkFactory : "ns3::TcpSocketFactory", InetSocketAddress(dstAddr, port));
  bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
  bulk.SetAttribute("SendSize", UintegerValue(kSegment * 16));
  ApplicationContainer b = bulk.Install(src);
  b.Start(start);
  return b;
}

// Stops the simulation once `done` holds, checked every 10 ms of virtual time.
inline void StopOnceDone(std::function<bool()> done) {
  if (!done()) {
    Simulator::Schedule(MilliSeconds(10), &StopOnceDone, done);
    return;
  }
  Simulator::Stop();
}

// From `from` on, stops the simulation once `done` holds (checked every 10 ms of virtual time).
inline void StopWhenDone(Time from, std::function<bool()> done) { Simulator::Schedule(from, &StopOnceDone, done); }

}  // namespace shufflelab
