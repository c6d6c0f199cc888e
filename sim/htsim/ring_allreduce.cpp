// rocefab issue 41: the 512-rank 1 MiB ring AllReduce of topologies/multi-pod-512gpu.yaml in htsim
// (UEC htsim, see README.md, "The 512-rank ring AllReduce (issue 41)").
//
// Our own driver, compiled against an htsim tree built separately (its code is not in this
// repository). htsim's FatTree cannot express this fabric (README.md says why), so the driver
// wires it by hand from htsim's own parts, as its topologies do: a FairPriorityQueue per GPU NIC,
// a LosslessOutputQueue per switch egress port, a Pipe per link direction and a
// LosslessInputQueue (PFC ingress accounting) per switch ingress port, and gives every flow a
// source route through them. Each ring connection (rank r -> r+1) is one htsim RoceSrc/RoceSink
// pair carrying the connection's 2(N-1) transfers one after the other; a transfer is handed to
// the source when the previous step's chunk has fully arrived at that rank (dependency-driven,
// as rocefab's collective runs). The driver only adds:
//   - RingSrc: a RoceSrc whose flow grows by one transfer at a time (post()), and that never
//     sends past what was posted (htsim's RoceSrc sends one packet more than its flow size,
//     roce.cpp:277, which here would be the next step's data before it exists);
//   - RingSink: a RoceSink that reports when a transfer's last packet has arrived in order;
//   - Framer, at the head of each route: sets every frame's size to what rocefab puts on the
//     wire (RoCEv2 WRITE First/Middle/Last/Only, ACK) and, for ACKs, passes only those rocefab's
//     responder sends (one per transfer: the AckReq'd last packet; or every 16 packets);
//   - observers: completion times, the bytes each switch holds, PAUSE frames at the NICs.
// Output: one JSON object in the file given by -out.
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "config.h"
#include "eth_pause_packet.h"
#include "eventlist.h"
#include "loggertypes.h"
#include "network.h"
#include "pipe.h"
#include "queue.h"
#include "queue_lossless_input.h"
#include "queue_lossless_output.h"
#include "roce.h"
#include "rocepacket.h"
#include "route.h"

using namespace std;

static EventList g_events;

// rocefab's frame sizes on the wire (bytes): Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 [+ RETH 16]
// + payload + ICRC 4, plus FCS 4, preamble/SFD 8 and inter-frame gap 12
// (gpu-host/src/nic/engine.rs ROCE_IPV4_OVERHEAD; wire/src/ethernet.rs:42-56).
static const int WIRE_OVERHEAD = 4 + 8 + 12;
static const int HDR_WITH_RETH = 14 + 20 + 8 + 12 + 16 + 4 + WIRE_OVERHEAD;  // First, Only: 98
static const int HDR_NO_RETH = 14 + 20 + 8 + 12 + 4 + WIRE_OVERHEAD;         // Middle, Last: 82
static const int ACK_WIRE = 14 + 20 + 8 + 12 + 4 + 4 + WIRE_OVERHEAD;        // ACK (AETH): 86

struct Ring;

// One ring connection's transfers: cumulative packet count at the end of each transfer, and
// each transfer's payload bytes.
struct Conn {
    vector<uint64_t> cum;  // cum[m]: packets of transfers 0..m
    vector<uint32_t> bytes;
    uint64_t first_pkt(size_t m) const { return m ? cum[m - 1] : 0; }
    // transfer index of data packet number s (1-based, as RoceSrc numbers them)
    size_t transfer_of(uint64_t s) const { return lower_bound(cum.begin(), cum.end(), s) - cum.begin(); }
};

// A RoceSrc fed one transfer at a time.
class RingSrc : public RoceSrc {
public:
    RingSrc(linkspeed_bps r, Ring& ring, uint32_t rank) : RoceSrc(NULL, NULL, g_events, r), ring(ring), rank(rank) {}
    Ring& ring;
    uint32_t rank;
    uint64_t posted_pkts = 0;
    size_t posted = 0;
    bool idle = false;  // no event of ours pending (the flow is waiting for data)
    uint64_t pauses = 0, resumes = 0;
    simtime_picosec all_acked_at = 0;

    // Hand the source its next transfer of `pkts` packets.
    void post(uint64_t pkts) {
        posted_pkts += pkts;
        posted++;
        _flow_size = posted_pkts * _mss;
        _done = false;  // RoceSrc ignores every packet once _done (roce.cpp:246)
        if (idle) {
            idle = false;
            eventlist().sourceIsPendingRel(*this, 0);
        }
    }
    void doNextEvent() override {
        if (_flow_started && _highest_sent >= posted_pkts) {
            idle = true;  // everything posted is sent: wait for post()
            return;
        }
        RoceSrc::doNextEvent();
    }
    void processPause(const EthPausePacket& p) override {
        if (p.sleepTime() > 0) pauses++;
        else {
            resumes++;
            idle = false;  // RoceSrc::processPause schedules the source on a resume (roce.cpp:229)
        }
        RoceSrc::processPause(p);
    }
    void receivePacket(Packet& pkt) override;
};

// A RoceSink that reports each transfer whose last packet arrived in order.
class RingSink : public RoceSink {
public:
    RingSink(Ring& ring, uint32_t rank) : ring(ring), rank(rank) {}
    Ring& ring;
    uint32_t rank;  // the receiving rank
    size_t done = 0;
    void receivePacket(Packet& pkt) override;
};

// Head of a route: rocefab's wire size for each frame; for ACKs, only those rocefab sends.
class Framer : public PacketSink {
public:
    Framer(const Conn& c, uint32_t mtu) : c(c), mtu(mtu) {}
    const Conn& c;
    uint32_t mtu;
    uint64_t acks_in = 0, acks_out = 0, last_acked = 0;
    string name = "framer";
    void receivePacket(Packet& pkt) override {
        if (pkt.type() == ROCE) {
            uint64_t s = ((RocePacket&)pkt).seqno();
            size_t m = c.transfer_of(s);
            uint64_t pos = s - c.first_pkt(m) - 1, n = c.cum[m] - c.first_pkt(m);
            uint32_t payload = pos + 1 < n ? mtu : c.bytes[m] - (uint32_t)(n - 1) * mtu;
            pkt.set_size(payload + (pos == 0 ? HDR_WITH_RETH : HDR_NO_RETH));
        } else if (pkt.type() == ROCEACK) {
            // rocefab's responder ACKs the packet that carries AckReq (a transfer's last,
            // segment.rs:121; receiver.rs:461-464) or every 16 packets completed in order
            // (receiver.rs:118). htsim's RoceSink ACKs every packet (roce.cpp:454).
            acks_in++;
            uint64_t a = ((RoceAck&)pkt).ackno();
            size_t m = c.transfer_of(a);
            bool boundary = m < c.cum.size() && c.cum[m] == a;
            if (!boundary && a - last_acked < 16) {
                pkt.free();
                return;
            }
            acks_out++;
            last_acked = a;
            pkt.set_size(ACK_WIRE);
        } else {
            pkt.set_size(ACK_WIRE);  // NAK
        }
        pkt.sendOn();
    }
    const string& nodename() override { return name; }
};

// Bytes held in one switch's egress queues, and their peak; the peak of any one queue.
struct SwitchWatch : public QueueLogger {
    int64_t held = 0, peak = 0;
    mem_b *queue_peak;
    SwitchWatch(mem_b* qp) : queue_peak(qp) {}
    void logQueue(BaseQueue& q, QueueEvent ev, Packet& pkt) override {
        if (ev == PKT_ENQUEUE) held += pkt.size();
        else if (ev == PKT_SERVICE) held -= pkt.size();
        peak = max(peak, held);
        *queue_peak = max(*queue_peak, q.queuesize());
    }
};

struct Ring {
    uint32_t n = 0;
    vector<Conn> conns;  // conns[r]: rank r -> r+1
    vector<RingSrc*> srcs;
    vector<RingSink*> sinks;  // sinks[r]: at rank r+1, from rank r
    vector<simtime_picosec> last_arrival;  // per receiving rank
    uint64_t delivered = 0, total = 0;
    simtime_picosec done_at = 0;
    void arrived(uint32_t at_rank, size_t m) {
        // transfer m of connection (at_rank-1 -> at_rank) is complete at at_rank: its chunk is
        // there, so at_rank's transfer m+1 may go (collective.rs: deps = previous ring step's
        // transfer by the predecessor; reduce.rs:408-451 posts a send once its deps are done)
        delivered++;
        last_arrival[at_rank] = g_events.now();
        RingSrc* s = srcs[at_rank];
        if (m + 1 < conns[at_rank].cum.size()) s->post(conns[at_rank].cum[m + 1] - conns[at_rank].cum[m]);
        check_done();
    }
    void check_done() {
        if (delivered < total) return;
        for (auto s : srcs)
            if (!s->all_acked_at) return;
        done_at = g_events.now();
        // everything arrived and ACKed: let the last frames land, then stop
        g_events.setEndtime(g_events.now() + timeFromUs(1.0));
    }
};

void RingSrc::receivePacket(Packet& pkt) {
    bool ack = pkt.type() == ROCEACK;
    RoceSrc::receivePacket(pkt);  // frees pkt
    if (ack && !all_acked_at && _last_acked >= ring.conns[rank].cum.back()) {
        all_acked_at = g_events.now();
        ring.check_done();
    }
}

void RingSink::receivePacket(Packet& pkt) {
    RoceSink::receivePacket(pkt);  // frees pkt
    const Conn& c = ring.conns[_srcaddr];
    while (done < c.cum.size() && _cumulative_ack >= c.cum[done]) ring.arrived(rank, done++);
}

// The fabric of multi-pod-512gpu.yaml: NIC (= rank) ids 0..R-1, then switches.
struct Fabric {
    uint32_t hosts, gpus, hosts_per_pod, rails_per_switch, spines, supers;
    uint32_t pods, rsw_per_pod;
    uint32_t nics;
    // switch ids
    uint32_t rail_sw(uint32_t pod, uint32_t k) const { return nics + pod * rsw_per_pod + k; }
    uint32_t spine(uint32_t pod, uint32_t j) const { return nics + pods * rsw_per_pod + pod * spines + j; }
    uint32_t super(uint32_t k) const { return nics + pods * rsw_per_pod + pods * spines + k; }
    uint32_t nodes() const { return nics + pods * rsw_per_pod + pods * spines + supers; }
    bool is_switch(uint32_t x) const { return x >= nics; }
    // NIC of rank r: torchrun numbering, rank = host * gpus + gpu (collective.rs RankLayout);
    // GPU g is on rail g+1 (multi-pod-512gpu.yaml), served by the pod's rail switch g / 2.
    uint32_t host_of(uint32_t r) const { return r / gpus; }
    uint32_t gpu_of(uint32_t r) const { return r % gpus; }
    uint32_t pod_of(uint32_t r) const { return host_of(r) / hosts_per_pod; }
    uint32_t rail_sw_of(uint32_t r) const { return rail_sw(pod_of(r), gpu_of(r) / rails_per_switch); }
};

struct Link {
    BaseQueue* q = nullptr;
    Pipe* pipe = nullptr;
    LosslessInputQueue* in = nullptr;  // at the far end, when it is a switch
};

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// The switches a frame from NIC a to NIC b crosses, as rocefab's static routes send it
// (model/src/plan.rs:15-20, 398-472): the rail switch alone when it serves both rails, else up
// to a spine of the pod (ECMP over both), across a super-spine (ECMP over all) when the pods
// differ, and down. `salt` picks the ECMP members (a fixed choice per flow, like a 5-tuple hash).
static vector<uint32_t> path(const Fabric& f, uint32_t a, uint32_t b, uint64_t salt) {
    vector<uint32_t> p{a};
    uint32_t ra = f.rail_sw_of(a), rb = f.rail_sw_of(b);
    uint32_t pa = f.pod_of(a), pb = f.pod_of(b);
    p.push_back(ra);
    if (ra != rb) {
        uint64_t h = mix(salt ^ mix(a * 1000003ULL + b));
        uint32_t s1 = f.spine(pa, h % f.spines);
        p.push_back(s1);
        if (pa != pb) {
            p.push_back(f.super((h >> 16) % f.supers));
            p.push_back(f.spine(pb, (h >> 32) % f.spines));
        }
        p.push_back(rb);
    }
    p.push_back(b);
    return p;
}

static void usage() {
    cerr << "usage: ring_allreduce -out FILE [-size 1048576] [-host_gbps 1] [-fabric_gbps 8]\n"
            "  [-mtu 1024] [-link_ns 0] [-switch_ns 0] [-end_ms 10000] [-note TEXT] [-quiet 1]\n"
            "  [-hosts 64] [-gpus 8] [-hosts_per_pod 8] [-rails_per_switch 2] [-spines 2] [-supers 4]\n";
    exit(2);
}

int main(int argc, char** argv) {
    auto wall0 = chrono::steady_clock::now();
    string out, note;
    uint64_t size = 1 << 20;
    double host_gbps = 1, fabric_gbps = 8, link_ns = 0, switch_ns = 0, end_ms = 10000;
    uint32_t mtu = 1024;
    bool quiet = true;
    Fabric f{64, 8, 8, 2, 2, 4, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        string a = argv[i];
        if (i + 1 >= argc) usage();
        string v = argv[++i];
        if (a == "-out") out = v;
        else if (a == "-size") size = stoull(v);
        else if (a == "-host_gbps") host_gbps = stod(v);
        else if (a == "-fabric_gbps") fabric_gbps = stod(v);
        else if (a == "-mtu") mtu = stoul(v);
        else if (a == "-link_ns") link_ns = stod(v);
        else if (a == "-switch_ns") switch_ns = stod(v);
        else if (a == "-end_ms") end_ms = stod(v);
        else if (a == "-note") note = v;
        else if (a == "-quiet") quiet = v != "0";
        else if (a == "-hosts") f.hosts = stoul(v);
        else if (a == "-gpus") f.gpus = stoul(v);
        else if (a == "-hosts_per_pod") f.hosts_per_pod = stoul(v);
        else if (a == "-rails_per_switch") f.rails_per_switch = stoul(v);
        else if (a == "-spines") f.spines = stoul(v);
        else if (a == "-supers") f.supers = stoul(v);
        else usage();
    }
    if (out.empty() || size == 0 || size % 4 || host_gbps <= 0 || fabric_gbps <= 0 || mtu == 0 ||
        f.hosts % f.hosts_per_pod || f.gpus % f.rails_per_switch)
        usage();
    f.pods = f.hosts / f.hosts_per_pod;
    f.rsw_per_pod = f.gpus / f.rails_per_switch;
    f.nics = f.hosts * f.gpus;
    if (f.pods > 1 && f.supers == 0) usage();

    // htsim prints a line per flow event (roce.cpp:107,208,228): not kept unless -quiet 0
    streambuf* cout_buf = cout.rdbuf();
    if (quiet) cout.rdbuf(nullptr);

    // RoceSrc's MSS is the payload of a full packet: rocefab's path MTU, 1024 at link MTU 1500
    // (engine/setup.rs:75-80). The Framer sets each frame's real wire size.
    Packet::set_packet_size(mtu);
    // rocefab's default PFC thresholds per ingress port (contracts/src/config.rs:282-283)
    LosslessInputQueue::_high_threshold = 3200000;
    LosslessInputQueue::_low_threshold = 120000;
    linkspeed_bps host_rate = speedFromGbps(host_gbps), fabric_rate = speedFromGbps(fabric_gbps);
    mem_b buffer = 16 << 20;  // rocefab's shared buffer per switch (qos.rs:11); never approached here
    g_events.setEndtime(timeFromMs(end_ms));

    // Links: every cable of the yaml, both directions.
    map<pair<uint32_t, uint32_t>, Link> links;
    mem_b queue_peak = 0, host_queue_peak = 0;
    vector<SwitchWatch*> watch(f.nodes(), nullptr);
    for (uint32_t s = f.nics; s < f.nodes(); s++) watch[s] = new SwitchWatch(&queue_peak);
    SwitchWatch host_watch(&host_queue_peak);
    auto delay = [&](uint32_t from) {
        return timeFromNs(link_ns + (f.is_switch(from) ? switch_ns : 0));
    };
    auto cable = [&](uint32_t a, uint32_t b, linkspeed_bps rate) {
        for (int dir = 0; dir < 2; dir++) {
            uint32_t x = dir ? b : a, y = dir ? a : b;
            Link l;
            if (f.is_switch(x)) {
                l.q = new LosslessOutputQueue(rate, buffer, g_events, watch[x]);
            } else {
                auto hq = new FairPriorityQueue(rate, buffer, g_events, &host_watch);
                l.q = hq;
            }
            l.pipe = new Pipe(delay(x), g_events);
            // PFC: the ingress port's bytes in switch y; PAUSE goes back to x's queue
            // (queue_lossless_input.cpp:110-165); no virtual queue at a NIC, as FatTree does
            if (f.is_switch(y)) l.in = new LosslessInputQueue(g_events, l.q);
            links[{x, y}] = l;
        }
    };
    for (uint32_t r = 0; r < f.nics; r++) cable(r, f.rail_sw_of(r), host_rate);
    for (uint32_t p = 0; p < f.pods; p++)
        for (uint32_t k = 0; k < f.rsw_per_pod; k++)
            for (uint32_t j = 0; j < f.spines; j++) cable(f.rail_sw(p, k), f.spine(p, j), fabric_rate);
    if (f.pods > 1)
        for (uint32_t p = 0; p < f.pods; p++)
            for (uint32_t j = 0; j < f.spines; j++)
                for (uint32_t k = 0; k < f.supers; k++) cable(f.spine(p, j), f.super(k), fabric_rate);

    auto route = [&](const vector<uint32_t>& hops, PacketSink* head, PacketSink* end) {
        Route* rt = new Route();
        rt->push_back(head);
        for (size_t i = 0; i + 1 < hops.size(); i++) {
            Link& l = links.at({hops[i], hops[i + 1]});
            rt->push_back(l.q);
            rt->push_back(l.pipe);
            if (l.in) rt->push_back(l.in);
        }
        rt->push_back(end);
        return rt;
    };

    // The schedule (gpu-host/src/collective.rs:215-250): 2(N-1) ring steps; at step k rank r
    // sends chunk (r - k) mod N (ReduceScatter, k < N-1) or (r + 1 - (k - N + 1)) mod N
    // (AllGather) to rank r+1. Chunk c has elems/N u32 elements, the first elems % N one more
    // (collective.rs:104-113).
    Ring ring;
    const uint32_t n = f.nics;
    ring.n = n;
    uint64_t elems = size / 4;
    auto chunk_bytes = [&](uint32_t c) { return 4 * (elems / n + (c < elems % n ? 1 : 0)); };
    ring.conns.resize(n);
    for (uint32_t r = 0; r < n; r++) {
        Conn& c = ring.conns[r];
        uint64_t cum = 0;
        for (uint32_t k = 0; k < 2 * (n - 1); k++) {
            uint32_t ch = k < n - 1 ? (r + n - k % n) % n : (r + 1 + n - (k - (n - 1)) % n) % n;
            uint32_t b = chunk_bytes(ch);
            if (b == 0) {
                cerr << "a chunk of 0 bytes: size below 4 bytes per rank" << endl;
                return 2;
            }
            cum += (b + mtu - 1) / mtu;
            c.cum.push_back(cum);
            c.bytes.push_back(b);
        }
        ring.total += c.cum.size();
    }
    ring.last_arrival.assign(n, 0);

    map<int, int> switches_crossed;  // switches on a data path -> flows
    vector<Framer*> framers;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t d = (r + 1) % n;
        auto src = new RingSrc(host_rate, ring, r);
        auto snk = new RingSink(ring, d);
        src->setName("ring_" + ntoa(r) + "_" + ntoa(d));
        snk->setName("ring_sink_" + ntoa(r) + "_" + ntoa(d));
        src->set_dst(d);
        snk->set_src(r);
        auto fd = new Framer(ring.conns[r], mtu), fa = new Framer(ring.conns[r], mtu);
        framers.push_back(fa);
        vector<uint32_t> out_hops = path(f, r, d, 1), back_hops = path(f, d, r, 2);
        switches_crossed[(int)out_hops.size() - 2]++;
        Route* out = route(out_hops, fd, snk);
        Route* back = route(back_hops, fa, src);
        // the NIC's queue relays PAUSE frames to its senders (queue.cpp:461-466)
        ((HostQueue*)links.at({r, out_hops[1]}).q)->addHostSender(src);
        ring.srcs.push_back(src);
        ring.sinks.push_back(snk);
        src->post(ring.conns[r].cum[0]);  // step 0 needs nothing: every rank starts at t = 0
        src->connect(out, back, *snk, 0);
    }

    auto wall1 = chrono::steady_clock::now();
    uint64_t events = 0;
    while (g_events.doNextEvent()) events++;
    auto wall2 = chrono::steady_clock::now();
    cout.rdbuf(cout_buf);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    double setup_s = chrono::duration<double>(wall1 - wall0).count();
    double run_s = chrono::duration<double>(wall2 - wall1).count();

    bool complete = ring.done_at != 0;
    simtime_picosec last_data = 0, last_ack = 0;
    for (auto t : ring.last_arrival) last_data = max(last_data, t);
    uint64_t data_pkts = 0, rtx = 0, pauses = 0, acks_in = 0, acks_out = 0;
    for (auto s : ring.srcs) {
        last_ack = max(last_ack, s->all_acked_at);
        data_pkts += s->_packets_sent;
        rtx += s->_rtx_packets_sent;
        pauses += s->pauses;
    }
    for (auto fa : framers) {
        acks_in += fa->acks_in;
        acks_out += fa->acks_out;
    }
    int64_t switch_peak = 0;
    for (auto w : watch)
        if (w) switch_peak = max(switch_peak, w->peak);

    ofstream o(out);
    o.precision(10);
    o << "{\"simulator\":\"htsim\",\"scenario\":\"ring-allreduce\",\"ranks\":" << n << ",\"hosts\":" << f.hosts
      << ",\"gpus_per_host\":" << f.gpus << ",\"pods\":" << f.pods << ",\"size_bytes\":" << size
      << ",\"chunk_bytes\":" << chunk_bytes(0) << ",\"path_mtu\":" << mtu
      << ",\"packets_per_step\":" << ring.conns[0].cum[0] << ",\"steps\":" << ring.conns[0].cum.size()
      << ",\"host_gbps\":" << host_gbps << ",\"fabric_gbps\":" << fabric_gbps << ",\"link_ns\":" << link_ns
      << ",\"switch_ns\":" << switch_ns << ",\"complete\":" << (complete ? "true" : "false")
      << ",\"jct_ns\":" << (complete ? ring.done_at : max(last_data, last_ack)) / 1000.0
      << ",\"last_data_arrival_ns\":" << last_data / 1000.0 << ",\"last_ack_ns\":" << last_ack / 1000.0
      << ",\"wall_s\":" << run_s << ",\"setup_wall_s\":" << setup_s << ",\"cpu_s\":" << cpu_s
      << ",\"events\":" << events << ",\"events_per_s\":" << (run_s > 0 ? events / run_s : 0)
      << ",\"transfers_delivered\":" << ring.delivered << ",\"transfers\":" << ring.total
      << ",\"data_packets\":" << data_pkts << ",\"retransmitted_packets\":" << rtx
      << ",\"acks_generated\":" << acks_in << ",\"acks_sent\":" << acks_out
      << ",\"pause_frames_at_nics\":" << pauses << ",\"peak_switch_queue_bytes\":" << queue_peak
      << ",\"peak_switch_held_bytes\":" << switch_peak << ",\"peak_nic_queue_bytes\":" << host_queue_peak
      << ",\"flows_by_switches_crossed\":{";
    bool first = true;
    for (auto& [k, v] : switches_crossed) {
        o << (first ? "" : ",") << "\"" << k << "\":" << v;
        first = false;
    }
    o << "},\"note\":\"";
    for (char ch : note) {
        if (ch == '"' || ch == '\\') o << '\\';
        o << ch;
    }
    o << "\"}\n";
    o.close();
    if (!complete) {
        cerr << "not finished by -end_ms " << end_ms << ": " << ring.delivered << " of " << ring.total
             << " transfers delivered" << endl;
        return 1;
    }
    return 0;
}
