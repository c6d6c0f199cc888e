#!/usr/bin/env python3
"""Reads one ns-3 HPCC run's outputs (fct.txt, pfc.txt and the binary packet trace mix.tr that
scratch/third writes) and prints one results row in the schema of sim/htsim/results.json.

    ns3_results.py RUN_DIR --mode pfc|dcqcn --senders N --size BYTES --gbps R

The run is the single-switch incast of README.md: hosts 0..15 on switch node 16 (link i joins
host i to the switch, so the switch's device i + 1 faces host i), hosts 1..N send to host 0.
Nothing here changes what the simulator did; it only reads what it wrote.
"""
import argparse
import json
import os
import struct
import sys

SWITCH = 16
BOTTLENECK_INTF = 1  # the switch's device facing host 0
RECORD = struct.Struct("<QHBBIIIHBBBB2x24s")  # TraceFormat, trace-format.h (sizeof 56)
assert RECORD.size == 56
EV_RECV, EV_ENQU, EV_DEQU, EV_DROP = 0, 1, 2, 3
UDP, ACK, NACK, PFC = 0x11, 0xFC, 0xFD, 0xFE
WIRE_PER_DATA_PACKET = 4096 + 6 + 8 + 20 + 14  # payload, SeqTs, UDP, IPv4, "PPP" (PppHeader: 14 bytes)


def node_of_ip(ip):
    return (ip >> 8) & 0xFFFF  # third.cc ip_to_node_id


def read_trace(path):
    with open(path, "rb") as f:
        blob = f.read()
    # SimSetting header (sim-setting.h): u32 count, count x (u16 node, u8 intf, u64 bps), u32 win
    (count,) = struct.unpack_from("<I", blob, 0)
    off = 4 + count * 11 + 4
    body = len(blob) - off
    if body % RECORD.size:
        raise SystemExit(f"{path}: {body} bytes of records is not a multiple of {RECORD.size}")
    for i in range(body // RECORD.size):
        yield RECORD.unpack_from(blob, off + i * RECORD.size)


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--mode", required=True)
    ap.add_argument("--senders", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--gbps", type=int, required=True)
    a = ap.parse_args()
    d = a.run_dir
    senders = list(range(1, a.senders + 1))
    row = {
        "simulator": "ns3-hpcc", "mode": a.mode, "senders": a.senders, "hosts": 16,
        "size_bytes": a.size, "line_rate_gbps": a.gbps, "mtu_payload_bytes": 4096,
        "wire_bytes_per_data_packet": WIRE_PER_DATA_PACKET, "link_delay_us": 1,
        "xoff_bytes": 61440, "xon_bytes": 49152,
        "ecn_k_bytes": 102400 if a.mode.startswith("dcqcn") else 0,
    }

    # Flow completions (third.cc qp_finish): sip dip sport dport size start_ns fct_ns standalone_ns
    done = {}
    with open(os.path.join(d, "fct.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) < 8:
                continue
            done[node_of_ip(int(p[0], 16))] = int(p[5]) + int(p[6])
    complete = all(s in done for s in senders)
    row["complete"] = complete
    if not complete:
        row["note"] = f"{len(done)} of {a.senders} flows completed"
        return row
    jct = max(done[s] for s in senders)
    row["jct_ns"] = jct
    row["aggregate_goodput_bps"] = round(a.senders * a.size * 8 / (jct * 1e-9), 1)
    per = [round(a.size * 8 / (done[s] * 1e-9), 1) for s in senders]
    row["jain"] = round(jain(per), 10)
    row["per_sender_goodput_bps"] = per

    # Bottleneck egress queue (switch device 1, towards host 0). Each Enqu/Dequ record carries
    # the bytes left in that priority queue after the operation (qbb-helper.cc
    # GetTraceFromPacket: dev->GetQueue()->GetNBytes(qidx)); the packet on the wire is not in
    # it (QbbNetDevice::DequeueAndTransmit dequeues when transmission starts).
    qlen = {}
    steps = []  # (time, waiting bytes)
    tx = []  # (start, end, bytes) of each packet serialised towards host 0
    enq = deq = marks = drops = 0
    min_gap = None
    last_deq = None
    sent = {}
    retx = 0
    nacks = 0
    cnps = [0] * (a.senders + 1)
    bps = a.gbps * 1e9
    for (t, node, intf, qidx, ql, sip, dip, size, l3, ev, ecn, ntype, u) in read_trace(
            os.path.join(d, "mix.tr")):
        if ev == EV_DROP:
            drops += 1
        if node == SWITCH and intf == BOTTLENECK_INTF and ev in (EV_ENQU, EV_DEQU):
            qlen[qidx] = ql
            steps.append((t, sum(qlen.values())))
            if l3 == UDP:
                if ev == EV_ENQU:
                    enq += 1
                else:
                    deq += 1
                    if ecn == 3:
                        marks += 1
                    # ns-3 serialises in Seconds(DataRate::CalculateTxTime) = whole ns, truncated
                    tx.append((t, t + int(size * 8 / bps * 1e9), size))
                    if last_deq is not None and t > last_deq:
                        min_gap = t - last_deq if min_gap is None else min(min_gap, t - last_deq)
                    last_deq = t
        elif ntype == 0 and node in senders:
            if ev == EV_DEQU and l3 == UDP:
                (seq,) = struct.unpack_from("<I", u, 4)
                key = (node, seq)
                if key in sent:
                    retx += 1
                sent[key] = True
            elif ev == EV_RECV and l3 in (ACK, NACK):
                (flags,) = struct.unpack_from("<H", u, 4)
                if flags & 1:  # qbbHeader::FLAG_CNP
                    cnps[node] += 1
                if l3 == NACK:
                    nacks += 1

    def integrate(points, end):
        """max and time-weighted mean over [0, end] of a step function given as (t, value)."""
        points = sorted(points, key=lambda p: p[0])
        area = 0.0
        peak = 0
        cur, cur_t = 0, 0
        for t, v in points:
            if t > end:
                break
            area += cur * (t - cur_t)
            cur, cur_t = v, t
            peak = max(peak, v)
        area += cur * (end - cur_t)
        return peak, area / end

    peak, avg = integrate(steps, jct)
    row["max_queue_bytes"] = peak
    row["avg_queue_bytes"] = round(avg, 4)
    # The same with the packet being serialised counted until its last bit leaves (as htsim's
    # queue counts the packet in service).
    wait = sorted(steps)
    events = [(t, 0, v) for t, v in wait] + [(s, 1, b) for s, e, b in tx] + [(e, 2, -b) for s, e, b in tx]
    events.sort(key=lambda x: (x[0], x[1]))
    w = inflight = 0
    pts = []
    for t, kind, v in events:
        if kind == 0:
            w = v
        else:
            inflight += v
        pts.append((t, w + inflight))
    peak2, avg2 = integrate(pts, jct)
    row["max_queue_bytes_incl_tx"] = peak2
    row["avg_queue_bytes_incl_tx"] = round(avg2, 4)

    # PFC frames arriving at the senders (third.cc get_pfc: time node nodetype ifindex type,
    # type 1 PAUSE, 0 resume; QbbNetDevice::Receive traces each frame it receives).
    paused = {s: False for s in senders}
    onsets = {s: 0 for s in senders}
    pauses = resumes = 0
    with open(os.path.join(d, "pfc.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) < 5:
                continue
            node, ntype, typ = int(p[1]), int(p[2]), int(p[4])
            if ntype != 0:
                row.setdefault("pfc_frames_to_switch", 0)
                row["pfc_frames_to_switch"] += 1
                continue
            if node not in paused:
                continue
            if typ == 1:
                pauses += 1
                if not paused[node]:
                    onsets[node] += 1
                paused[node] = True
            else:
                resumes += 1
                paused[node] = False
    row["pause_onsets"] = sum(onsets.values())
    row["pfc_frames"] = pauses + resumes
    row["pfc_pause_frames"] = pauses
    row["pfc_resume_frames"] = resumes
    row["per_sender_pause_onsets"] = [onsets[s] for s in senders]
    row["ecn_marks"] = marks
    row["cnps"] = sum(cnps)
    row["retransmitted_packets"] = retx
    row["nacks"] = nacks
    row["drops"] = drops
    row["bottleneck_enqueues"] = enq
    row["bottleneck_dequeues"] = deq
    row["bottleneck_min_dequeue_gap_ns"] = min_gap
    return row


if __name__ == "__main__":
    r = main()
    json.dump(r, sys.stdout)
    sys.stdout.write("\n")
