// rocefab issue 23: the canonical single-switch N->1 incast in htsim (UEC htsim, see README.md).
//
// Our own driver, compiled against an htsim tree built separately (its code is not in this
// repository). It uses htsim's own RoCE/DCQCN sources and sinks, FatTree switch, lossless input
// (PFC) and output (ECN) queues unchanged, and only observes them:
//   - the bottleneck (switch -> receiver) queue through a QueueLogger (every enqueue/dequeue),
//     for its peak, its time-weighted average and the ECN marks htsim sets at dequeue;
//   - PFC frames where they arrive: each sender's source object sees every PAUSE/RESUME its
//     host queue relays (htsim's FairPriorityQueue copies them to the host's senders);
//   - completion through each source's end trigger (fired when the last ACK arrives);
//   - CNPs through DCQCNSrc::_cnps_received.
// Output: one JSON object in the file given by -out.
#include <math.h>
#include <string.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "config.h"
#include "dcqcn.h"
#include "eth_pause_packet.h"
#include "eventlist.h"
#include "fat_tree_switch.h"
#include "fat_tree_topology.h"
#include "loggertypes.h"
#include "network.h"
#include "queue_lossless_input.h"
#include "queue_lossless_output.h"
#include "roce.h"
#include "trigger.h"

using namespace std;

static EventList g_events;

// What a sender observes of PFC: frames, and onsets (not paused -> paused).
struct PfcSeen {
    uint64_t frames = 0, pauses = 0, resumes = 0, onsets = 0;
    bool paused = false;
    void frame(const Packet& p) {
        const EthPausePacket& e = (const EthPausePacket&)p;
        frames++;
        if (e.sleepTime() > 0) {
            pauses++;
            if (!paused) onsets++;
            paused = true;
        } else {
            resumes++;
            paused = false;
        }
    }
};

// htsim's sources with PFC frames counted on arrival (then handled by htsim as usual).
class SeenRoceSrc : public RoceSrc {
public:
    SeenRoceSrc(linkspeed_bps r) : RoceSrc(NULL, NULL, g_events, r) {}
    PfcSeen pfc;
    void receivePacket(Packet& pkt) override {
        if (pkt.type() == ETH_PAUSE) pfc.frame(pkt);
        RoceSrc::receivePacket(pkt);
    }
};
class SeenDcqcnSrc : public DCQCNSrc {
public:
    SeenDcqcnSrc(linkspeed_bps r) : DCQCNSrc(NULL, NULL, g_events, r) {}
    PfcSeen pfc;
    void receivePacket(Packet& pkt) override {
        if (pkt.type() == ETH_PAUSE) pfc.frame(pkt);
        DCQCNSrc::receivePacket(pkt);
    }
};

// Peak, time integral and ECN marks of one queue, event by event.
class QueueWatch : public QueueLogger {
public:
    mem_b peak = 0, last = 0;
    simtime_picosec last_t = 0;
    double integral_byte_ps = 0;  // of queue bytes over time, up to last_t
    uint64_t enq = 0, deq = 0, ce = 0;
    void advance(simtime_picosec now) {
        integral_byte_ps += (double)last * (double)(now - last_t);
        last_t = now;
    }
    void logQueue(BaseQueue& q, QueueEvent ev, Packet& pkt) override {
        advance(g_events.now());
        if (ev == PKT_ENQUEUE) enq++;
        if (ev == PKT_SERVICE) {
            deq++;
            if (pkt.flags() & ECN_CE) ce++;
        }
        last = q.queuesize();
        if (last > peak) peak = last;
    }
};

// Completion of every flow: htsim's end trigger, fired at the last ACK.
struct Done {
    Done(size_t n) : at(n, 0), left(n) {}
    vector<simtime_picosec> at;
    size_t left;
};
class DoneOne : public Trigger {
public:
    DoneOne(Done& d, size_t i) : Trigger(g_events, 2 + i), d(d), i(i) {}
    Done& d;
    size_t i;
    void activate() override {
        if (d.at[i] == 0) {
            d.at[i] = g_events.now();
            if (--d.left == 0) {
                // everything ACKed: let frames in flight land, then stop
                g_events.setEndtime(g_events.now() + timeFromUs(50.0));
            }
        }
    }
};

static void usage() {
    cerr << "usage: fidelity_incast -out FILE -senders N -size BYTES -gbps R -mode pfc|dcqcn\n"
            "  [-hosts 16] [-mtu 4096] [-xoff 15] [-xon 12] [-ecn_k 25] [-link_us 1] [-end_us 200000]\n";
    exit(2);
}

int main(int argc, char** argv) {
    string out;
    uint32_t hosts = 16, senders = 0, mtu = 4096, xoff = 15, xon = 12, ecn_k = 25;
    uint64_t size = 0;
    double gbps = 0, link_us = 1.0, end_us = 200000;
    string mode;
    for (int i = 1; i < argc; i++) {
        string a = argv[i];
        if (i + 1 >= argc) usage();
        string v = argv[++i];
        if (a == "-out") out = v;
        else if (a == "-senders") senders = stoul(v);
        else if (a == "-hosts") hosts = stoul(v);
        else if (a == "-size") size = stoull(v);
        else if (a == "-gbps") gbps = stod(v);
        else if (a == "-mode") mode = v;
        else if (a == "-mtu") mtu = stoul(v);
        else if (a == "-xoff") xoff = stoul(v);
        else if (a == "-xon") xon = stoul(v);
        else if (a == "-ecn_k") ecn_k = stoul(v);
        else if (a == "-link_us") link_us = stod(v);
        else if (a == "-end_us") end_us = stod(v);
        else usage();
    }
    if (out.empty() || senders == 0 || senders >= hosts || size == 0 || gbps <= 0 ||
        (mode != "pfc" && mode != "dcqcn"))
        usage();
    bool dcqcn = mode == "dcqcn";
    linkspeed_bps rate = speedFromGbps(gbps);

    // htsim's main_roce.cpp sets these the same way (-mtu, -pfc_thresholds, -dcqcn K).
    Packet::set_packet_size(mtu);
    LosslessInputQueue::_high_threshold = (uint64_t)Packet::data_packet_size() * xoff;
    LosslessInputQueue::_low_threshold = (uint64_t)Packet::data_packet_size() * xon;
    if (dcqcn) {
        LosslessOutputQueue::_ecn_enabled = true;
        LosslessOutputQueue::_K = ecn_k * Packet::data_packet_size();
    }
    FatTreeSwitch::set_strategy(FatTreeSwitch::ECMP);
    FatTreeSwitch::_ar_sticky = FatTreeSwitch::PER_FLOWLET;
    FatTreeSwitch::_sticky_delta = timeFromUs(10.0);
    g_events.setEndtime(timeFromUs(end_us));

    // One ToR with every host on it (the tier-1 switches exist but carry nothing).
    long lat_ns = lround(link_us * 1000);
    long g = lround(gbps);
    mem_b queuesize = memFromPkt(2000);  // large: PFC, not the buffer, bounds the queues
    stringstream topo;
    topo << "Nodes " << hosts << "\nTiers 2\nPodsize " << hosts << "\n\n"
         << "Tier 0\nDownlink_speed_Gbps " << g << "\nRadix_Down " << hosts << "\nRadix_Up " << hosts
         << "\nDownlink_Latency_ns " << lat_ns
         << "\nSwitch_Latency_ns 0\nOversubscribed 1\n\n"
         << "Tier 1\nDownlink_speed_Gbps " << g << "\nRadix_Down 1\nDownlink_Latency_ns " << lat_ns << "\nSwitch_Latency_ns 0\n";
    FatTreeTopologyCfg cfg(topo, queuesize, LOSSLESS_INPUT, FAIR_PRIO);
    cfg.set_queue_sizes(queuesize);  // the istream constructor leaves them 0 (as main_uec.cpp sets them)
    FatTreeTopology top(&cfg, NULL, &g_events, NULL);
    const uint32_t tor = cfg.HOST_POD_SWITCH(0);
    for (uint32_t h = 0; h < hosts; h++) {
        if (cfg.HOST_POD_SWITCH(h) != tor) {
            cerr << "host " << h << " is not on switch " << tor << endl;
            return 1;
        }
    }

    const uint32_t dst = 0;
    QueueWatch watch;
    BaseQueue* bottleneck = top.queues_nlp_ns[tor][dst][0];
    bottleneck->setLogger(&watch);

    Done done(senders);
    vector<RoceSrc*> srcs;
    vector<PfcSeen*> seen;
    vector<DoneOne*> triggers;
    for (uint32_t k = 0; k < senders; k++) {
        uint32_t src = k + 1;
        RoceSrc* s;
        PfcSeen* p;
        RoceSink* snk;
        if (dcqcn) {
            auto d = new SeenDcqcnSrc(rate);
            s = d;
            p = &d->pfc;
            snk = new DCQCNSink(g_events);
        } else {
            auto r = new SeenRoceSrc(rate);
            s = r;
            p = &r->pfc;
            snk = new RoceSink();
        }
        s->set_dst(dst);
        s->set_flowsize(size);
        auto t = new DoneOne(done, k);
        s->set_end_trigger(*t);
        s->setName("Roce_" + ntoa(src) + "_" + ntoa(dst));
        snk->set_src(src);
        snk->setName("Roce_sink_" + ntoa(src) + "_" + ntoa(dst));
        ((HostQueue*)top.queues_ns_nlp[src][tor][0])->addHostSender(s);
        // as main_roce.cpp's ECMP_FIB branch: host -> ToR, then the switches' FIBs
        Route* out = new Route();
        out->push_back(top.queues_ns_nlp[src][tor][0]);
        out->push_back(top.pipes_ns_nlp[src][tor][0]);
        out->push_back(top.queues_ns_nlp[src][tor][0]->getRemoteEndpoint());
        Route* back = new Route();
        back->push_back(top.queues_ns_nlp[dst][tor][0]);
        back->push_back(top.pipes_ns_nlp[dst][tor][0]);
        back->push_back(top.queues_ns_nlp[dst][tor][0]->getRemoteEndpoint());
        s->connect(out, back, *snk, 0);
        top.switches_lp[tor]->addHostPort(src, s->flow_id(), s);
        top.switches_lp[tor]->addHostPort(dst, s->flow_id(), snk);
        srcs.push_back(s);
        seen.push_back(p);
        triggers.push_back(t);
    }

    while (g_events.doNextEvent()) {
    }

    bool complete = done.left == 0;
    simtime_picosec jct = 0;
    for (auto t : done.at) jct = max(jct, t);
    // the integral up to the JCT: the queue is empty from the last dequeue on
    if (watch.last_t < jct) watch.advance(jct);
    double jct_s = timeAsSec(jct);
    vector<double> gp;
    double sum = 0, sum2 = 0;
    for (auto t : done.at) {
        double x = t ? (double)size * 8.0 / timeAsSec(t) : 0.0;
        gp.push_back(x);
        sum += x;
        sum2 += x * x;
    }
    double jain = sum2 > 0 ? sum * sum / (gp.size() * sum2) : 0.0;
    uint64_t frames = 0, onsets = 0, pauses = 0, resumes = 0, cnps = 0, rtx = 0;
    for (auto p : seen) {
        frames += p->frames;
        onsets += p->onsets;
        pauses += p->pauses;
        resumes += p->resumes;
    }
    for (auto s : srcs) {
        rtx += s->_rtx_packets_sent;
        if (dcqcn) cnps += ((DCQCNSrc*)s)->_cnps_received;
    }

    ofstream o(out);
    o.precision(10);
    o << "{\"simulator\":\"htsim\",\"mode\":\"" << mode << "\",\"senders\":" << senders
      << ",\"hosts\":" << hosts << ",\"size_bytes\":" << size << ",\"line_rate_gbps\":" << gbps
      << ",\"mtu_payload_bytes\":" << Packet::data_packet_size()
      << ",\"wire_bytes_per_data_packet\":" << Packet::data_packet_size() + RocePacket::ACKSIZE
      << ",\"link_delay_us\":" << link_us << ",\"xoff_bytes\":" << LosslessInputQueue::_high_threshold
      << ",\"xon_bytes\":" << LosslessInputQueue::_low_threshold
      << ",\"ecn_k_bytes\":" << (dcqcn ? LosslessOutputQueue::_K : 0) << ",\"complete\":" << (complete ? "true" : "false")
      << ",\"jct_ns\":" << jct / 1000 << ",\"aggregate_goodput_bps\":"
      << (jct_s > 0 ? (double)size * senders * 8.0 / jct_s : 0.0) << ",\"jain\":" << jain
      << ",\"per_sender_goodput_bps\":[";
    for (size_t i = 0; i < gp.size(); i++) o << (i ? "," : "") << gp[i];
    o << "],\"max_queue_bytes\":" << watch.peak << ",\"avg_queue_bytes\":"
      << (jct > 0 ? watch.integral_byte_ps / (double)jct : 0.0) << ",\"pause_onsets\":" << onsets
      << ",\"pfc_frames\":" << frames << ",\"pfc_pause_frames\":" << pauses
      << ",\"pfc_resume_frames\":" << resumes << ",\"per_sender_pause_onsets\":[";
    for (size_t i = 0; i < seen.size(); i++) o << (i ? "," : "") << seen[i]->onsets;
    o << "],\"ecn_marks\":" << watch.ce << ",\"cnps\":" << cnps << ",\"retransmitted_packets\":" << rtx << ",\"bottleneck_enqueues\":" << watch.enq
      << ",\"bottleneck_dequeues\":" << watch.deq << "}\n";
    o.close();
    if (!complete) {
        cerr << "not every flow finished by -end_us " << end_us << endl;
        return 1;
    }
    return 0;
}
