#!/usr/bin/env python3
"""One ns-3 HPCC run of the rail-spine-400g 7:1 incast -> one JSON row.

Nodes: 0 = rank0 host1:gpu0 (receiver, rail1); 2,4,6 = host2..4:gpu0 (rail1, local);
1,3,5,7 = host1..4:gpu1 (rail2, remote); 8 rail1, 9 rail2, 10 spine1, 11 spine2.
rail1's device 1 faces node 0 (first link of topology.txt).

T1 = the time the last sender received its first CNP (ACK with the CNP flag).
T2 (primary, as the rocefab test's timeline does: bottleneck.utilisation.to_us is the last
sample before the first sender QP completed) = the first flow completion.
T2b (literal "busy period end") = the end of the last data packet serialised by rail1 towards node 0.
Per-sender rate = data bytes arriving at its first switch in [T1, T2] / (T2 - T1).
"""
import json
import os
import struct
import sys

RECORD = struct.Struct("<QHBBIIIHBBBB2x24s")
EV_RECV, EV_ENQU, EV_DEQU, EV_DROP = 0, 1, 2, 3
UDP, ACK, NACK = 0x11, 0xFC, 0xFD
SENDERS = [1, 2, 3, 4, 5, 6, 7]
LOCAL = {2, 4, 6}
RAIL1, BOTTLENECK_INTF = 8, 1
SPINES = {10: "spine1", 11: "spine2"}
HOST_BPS = 400e9


def node_of_ip(ip):
    return (ip >> 8) & 0xFFFF


def read_trace(path):
    with open(path, "rb") as f:
        blob = f.read()
    (count,) = struct.unpack_from("<I", blob, 0)
    off = 4 + count * 11 + 4
    n = (len(blob) - off) // RECORD.size
    return RECORD.iter_unpack(blob[off:off + n * RECORD.size])


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def main(d):
    done = {}
    with open(os.path.join(d, "fct.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 8:
                done[node_of_ip(int(p[0], 16))] = int(p[5]) + int(p[6])
    row = {"run": os.path.basename(d), "complete": all(s in done for s in SENDERS)}
    if not row["complete"]:
        return row
    arrivals = {s: [] for s in SENDERS}  # (arrival ns at the first switch, bytes)
    first_cnp = {}
    cnps = {s: 0 for s in SENDERS}
    marks_bneck = 0
    marks_other = 0
    last_bneck_end = 0
    peak_q = 0
    drops = 0
    via = {}
    for (t, node, intf, qidx, ql, sip, dip, size, l3, ev, ecn, ntype, u) in read_trace(os.path.join(d, "mix.tr")):
        if ev == EV_DROP:
            drops += 1
            continue
        if ntype == 0 and node in arrivals:
            if ev == EV_DEQU and l3 == UDP:
                arrivals[node].append((t + int(size * 8 / HOST_BPS * 1e9), size))
            elif ev == EV_RECV and l3 in (ACK, NACK):
                (flags,) = struct.unpack_from("<H", u, 4)
                if flags & 1:
                    cnps[node] += 1
                    first_cnp.setdefault(node, t)
        elif node == RAIL1 and intf == BOTTLENECK_INTF and l3 == UDP:
            if ev == EV_DEQU:
                if ecn == 3:
                    marks_bneck += 1
                last_bneck_end = max(last_bneck_end, t + int(size * 8 / HOST_BPS * 1e9))
            if ev in (EV_ENQU, EV_DEQU) and qidx == 3:
                peak_q = max(peak_q, ql)
        elif node in SPINES and ev == EV_RECV and l3 == UDP:
            via.setdefault(node_of_ip(sip), SPINES[node])
    if len(first_cnp) < len(SENDERS):
        row["note"] = "a sender got no CNP"
        return row
    t1 = max(first_cnp.values())
    t2 = min(done[s] for s in SENDERS)
    t2b = last_bneck_end

    def rates(a, b):
        return {s: sum(sz for (t, sz) in arrivals[s] if a <= t < b) * 8 / ((b - a) * 1e-9) for s in SENDERS}

    out = {}
    for name, end in (("first_done", t2), ("busy_end", t2b)):
        if end <= t1:
            out[name] = None
            continue
        r = rates(t1, end)
        fast = max(r, key=r.get)
        slow = min(r, key=r.get)
        out[name] = {
            "T2_us": end / 1e3, "min_over_max": min(r.values()) / max(r.values()), "jain": jain(list(r.values())),
            "fastest": fast, "fastest_kind": "local" if fast in LOCAL else "remote",
            "slowest": slow, "slowest_kind": "local" if slow in LOCAL else "remote",
            "rates_gbps": {s: round(r[s] / 1e9, 2) for s in SENDERS},
            "local_mean_gbps": sum(r[s] for s in LOCAL) / len(LOCAL) / 1e9,
            "remote_mean_gbps": sum(r[s] for s in SENDERS if s not in LOCAL) / 4 / 1e9,
        }
    row.update({
        "T1_us": t1 / 1e3, "first_cnp_us": {s: first_cnp[s] / 1e3 for s in SENDERS},
        "jct_us": max(done.values()) / 1e3, "first_done_us": t2 / 1e3, "busy_end_us": t2b / 1e3,
        "done_us": {s: done[s] / 1e3 for s in SENDERS},
        "cnps": cnps, "marks_bottleneck": marks_bneck, "peak_q_bytes": peak_q, "drops": drops,
        "via": via, "windows": out,
    })
    # goodput Jain as the rocefab test computes it (size / completion)
    g = [1.0 / done[s] for s in SENDERS]
    row["goodput_jain"] = jain(g)
    row["goodput_min_over_max"] = min(g) / max(g)
    # PFC frames received by hosts / switches
    ph = ps = 0
    with open(os.path.join(d, "pfc.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and int(p[4]) == 1:
                if int(p[2]) == 0:
                    ph += 1
                else:
                    ps += 1
    row["pause_frames_to_hosts"], row["pause_frames_to_switches"] = ph, ps
    return row


if __name__ == "__main__":
    json.dump(main(sys.argv[1]), sys.stdout)
    sys.stdout.write("\n")
