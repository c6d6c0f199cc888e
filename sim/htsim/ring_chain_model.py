#!/usr/bin/env python3
"""No-contention model of the dependency-driven 512-rank ring AllReduce (issue 41; README.md).

Rank r's step k starts when step k-1's chunk from rank r-1 has arrived, so the job's end is the
longest chain of 2(N-1) consecutive ring hops, each the time from a chunk's arrival at rank i to
the arrival of the next chunk's last packet at rank i+1, when no other traffic is in the way.
A hop starts with the ACK (86 B on the wire) the arrival triggers, then the WRITE First (1122 B)
and Last (1106 B) of the 2 KiB chunk, all from the NIC at its line rate. Two semantics:

- store-and-forward (htsim; rocefab on links with a delay, switch-model/src/delay.rs:66-72): a
  frame is at the next hop when its last bit is, so every link on the path adds a serialisation.
- first-bit (rocefab with no delay anywhere, as multi-pod-512gpu.yaml has: a switch hands a frame
  on when its egress shaper lets it start, dataplane-user/src/dataplane.rs:1264, 1344-1361): the
  Last is at the receiver when the NIC starts it, whatever the path.

usage: ring_chain_model.py HOST_GBPS FABRIC_GBPS [LINK_NS]   (e.g. 1 8, or 400 3200; LINK_NS: a
delay on every link, 0 by default as in the yaml)
"""
import sys

HOSTS, GPUS, HOSTS_PER_POD, RAILS_PER_SWITCH = 64, 8, 8, 2
N = HOSTS * GPUS
FIRST, LAST, ACK = 1122, 1106, 86  # wire bytes (ring_allreduce.cpp, README.md)


def fabric_links(r):
    """8 Gbit/s links (rail-spine, spine-super-spine) on the path rank r -> r+1."""
    a, b = r, (r + 1) % N
    pa, pb = a // GPUS // HOSTS_PER_POD, b // GPUS // HOSTS_PER_POD
    sa, sb = a % GPUS // RAILS_PER_SWITCH, b % GPUS // RAILS_PER_SWITCH
    if pa == pb and sa == sb:
        return 0  # both rails on one rail switch
    return 2 if pa == pb else 4  # via a spine; via spine, super-spine, spine


def main():
    host, fabric = float(sys.argv[1]), float(sys.argv[2])
    link_ns = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    ser = lambda b, gbps: b * 8 / gbps  # ns

    def hop_store_and_forward(r):
        first = ser(ACK, host) + ser(FIRST, host)  # when each frame has left the NIC
        last = first + ser(LAST, host)
        first += link_ns
        last += link_ns
        for g in [fabric] * fabric_links(r) + [host]:
            first += ser(FIRST, g) + link_ns
            last = max(last, first - link_ns) + ser(LAST, g) + link_ns
        return last

    def hop_first_bit(r):
        return ser(ACK, host) + ser(FIRST, host)

    # with a delay on the links rocefab stores and forwards too: the first-bit line is for none
    models = [("store-and-forward", hop_store_and_forward)] + ([("first-bit", hop_first_bit)] if link_ns == 0 else [])
    for name, hop in models:
        h = [hop(r) for r in range(N)]
        chain = max(sum(h[(end - 1 - i) % N] for i in range(2 * (N - 1))) for end in range(N))
        print(f"{name}: longest chain {chain / 1e3:.3f} us, mean hop {sum(h) / N:.3f} ns")


if __name__ == "__main__":
    main()
