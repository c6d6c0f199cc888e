#!/usr/bin/env python3
"""Reference vectors of `dataplane_common::flow_hash`, computed outside the crate.

`flow_hash` is Bob Jenkins' lookup3 `hashword()` (lookup3.c, May 2006, public domain,
http://burtleburtle.net/bob/c/lookup3.c; the Linux kernel's `jhash2()` in include/linux/jhash.h
is the same function) over the 10 words

    src[0] src[1] src[2] src[3] dst[0] dst[1] dst[2] dst[3] (sport << 16 | dport) proto

with `initval` = the switch's hash seed. Addresses are their big-endian 32-bit words (IPv4: the
address in word 0, words 1-3 zero).

This script re-implements lookup3's `rot`, `mix()`, `final()`, `hashword()` and `hashlittle2()`
from lookup3.c, checks them against the values lookup3.c's `driver5()` publishes, checks that
every vector's `hashword()` equals `hashlittle()` of the words' little-endian bytes (lookup3.c:
"hashword() is identical to hashlittle() on little-endian machines ... except that the length has
to be measured in uint32_ts"), optionally compares every vector with lookup3.c itself compiled (see `cross_check_with_lookup3_c`),
and prints the vectors. Regenerate the checked-in table with

    python3 dataplane-common/tests/vectors/flow_hash.py > dataplane-common/tests/vectors/flow_hash.txt

It uses no code of the crate: the Rust tests compare the crate's function (userspace, and the XDP
program through BPF_PROG_TEST_RUN) with this table.
"""

import ipaddress
import struct
import sys

M = 0xFFFFFFFF


def rot(x, k):
    return ((x << k) | (x >> (32 - k))) & M


def mix(a, b, c):
    a = (a - c) & M; a ^= rot(c, 4); c = (c + b) & M
    b = (b - a) & M; b ^= rot(a, 6); a = (a + c) & M
    c = (c - b) & M; c ^= rot(b, 8); b = (b + a) & M
    a = (a - c) & M; a ^= rot(c, 16); c = (c + b) & M
    b = (b - a) & M; b ^= rot(a, 19); a = (a + c) & M
    c = (c - b) & M; c ^= rot(b, 4); b = (b + a) & M
    return a, b, c


def final(a, b, c):
    c ^= b; c = (c - rot(b, 14)) & M
    a ^= c; a = (a - rot(c, 11)) & M
    b ^= a; b = (b - rot(a, 25)) & M
    c ^= b; c = (c - rot(b, 16)) & M
    a ^= c; a = (a - rot(c, 4)) & M
    b ^= a; b = (b - rot(a, 14)) & M
    c ^= b; c = (c - rot(b, 24)) & M
    return a, b, c


def hashword(k, initval):
    """lookup3.c hashword(): k is a list of uint32, initval a uint32."""
    length = len(k)
    a = b = c = (0xDEADBEEF + ((length << 2) & M) + initval) & M
    i = 0
    while length > 3:
        a = (a + k[i]) & M
        b = (b + k[i + 1]) & M
        c = (c + k[i + 2]) & M
        a, b, c = mix(a, b, c)
        length -= 3
        i += 3
    if length == 0:
        return c
    if length == 3:
        c = (c + k[i + 2]) & M
    if length >= 2:
        b = (b + k[i + 1]) & M
    a = (a + k[i]) & M
    a, b, c = final(a, b, c)
    return c


def hashlittle2(key, pc, pb):
    """lookup3.c hashlittle2(), its byte-at-a-time branch (the one that works on any machine)."""
    length = len(key)
    a = b = c = (0xDEADBEEF + length + pc) & M
    c = (c + pb) & M
    k = 0
    while length > 12:
        a = (a + struct.unpack_from("<I", key, k)[0]) & M
        b = (b + struct.unpack_from("<I", key, k + 4)[0]) & M
        c = (c + struct.unpack_from("<I", key, k + 8)[0]) & M
        a, b, c = mix(a, b, c)
        length -= 12
        k += 12
    if length == 0:
        return c, b
    tail = key[k:] + bytes(12 - length)
    a = (a + struct.unpack_from("<I", tail, 0)[0]) & M
    b = (b + struct.unpack_from("<I", tail, 4)[0]) & M
    c = (c + struct.unpack_from("<I", tail, 8)[0]) & M
    a, b, c = final(a, b, c)
    return c, b


def hashlittle(key, initval):
    return hashlittle2(key, initval, 0)[0]


def self_test():
    """lookup3.c driver5(): 'test the hash against known vectors'."""
    four = b"Four score and seven years ago"
    published = [
        (b"", 0, 0, (0xDEADBEEF, 0xDEADBEEF)),
        (b"", 0, 0xDEADBEEF, (0xBD5B7DDE, 0xDEADBEEF)),
        (b"", 0xDEADBEEF, 0xDEADBEEF, (0x9C093CCD, 0xBD5B7DDE)),
        (four, 0, 0, (0x17770551, 0xCE7226E6)),
        (four, 0, 1, (0xE3607CAE, 0xBD371DE4)),
        (four, 1, 0, (0xCD628161, 0x6CBEA4B3)),
    ]
    for key, pc, pb, want in published:
        got = hashlittle2(key, pc, pb)
        assert got == want, f"hashlittle2({key!r}, {pc:#x}, {pb:#x}) = {got}, lookup3.c says {want}"
    assert hashlittle(four, 0) == 0x17770551
    assert hashlittle(four, 1) == 0xCD628161


def words(addr):
    a = ipaddress.ip_address(addr)
    if a.version == 4:
        return [int(a), 0, 0, 0]
    return list(struct.unpack(">4I", a.packed))


def flow_hash(src, dst, proto, sport, dport, seed):
    k = words(src) + words(dst) + [(sport << 16) | dport, proto]
    h = hashword(k, seed)
    le = struct.pack("<10I", *k)
    assert h == hashlittle(le, seed), "hashword != hashlittle of the little-endian words"
    return h


def vectors():
    """(set, src, dst, proto, sport, dport, seed)."""
    out = []
    # misc: both families, several seeds, edge values.
    seeds = [0, 1, 7, 0x1B5EED, 0xDEADBEEF, 0xFFFFFFFF]
    tuples = [
        ("10.0.1.1", "10.0.2.2", 17, 49152, 4791),
        ("10.0.2.2", "10.0.1.1", 17, 4791, 49152),
        ("192.168.7.7", "10.255.0.1", 6, 443, 65535),
        ("0.0.0.0", "0.0.0.0", 0, 0, 0),
        ("255.255.255.255", "255.255.255.255", 255, 65535, 65535),
        ("fd00::1", "fd00::2", 17, 49152, 4791),
        ("2001:db8:0:3::1", "2001:db8:0:1::42", 17, 50000, 4791),
        # Swapped 32-bit words of the source: an XOR fold of the words maps both to one value.
        ("2001:db8:0:3::1", "fd00::2", 17, 49152, 4791),
        ("0:3:2001:db8::1", "fd00::2", 17, 49152, 4791),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::", 58, 1, 2),
    ]
    for seed in seeds:
        for t in tuples:
            out.append(("misc", *t, seed))
    # xdp_lb: tests/tests/xdp_lb_test_run.rs (SEED 0x1b5eed, SRC 10.0.1.1, DST2 and DST3, dport 4791).
    for dst in ["10.0.2.7", "10.0.3.7"]:
        for sport in range(49152, 49152 + 16):
            out.append(("xdp_lb", "10.0.1.1", dst, 17, sport, 4791, 0x1B5EED))
    # xdp: tests/tests/xdp_test_run.rs (SEED 7, V4_SRC → V4_GROUP1, V6_SRC → V6_GROUP1, dport 4791).
    for src, dst in [("10.0.3.1", "10.0.2.9"), ("2001:db8:0:3::1", "2001:db8:0:1::42")]:
        for sport in range(49152, 49152 + 16):
            out.append(("xdp", src, dst, 17, sport, 4791, 7))
    return out


def cross_check_with_lookup3_c(rows):
    """Optional: lookup3.c itself, compiled, from the PyPI package jenkins-cffi
    (`pip install jenkins-cffi`): its hashlittle() of each vector's little-endian words."""
    try:
        from jenkins_cffi import hashlittle as c_hashlittle
    except ImportError:
        sys.stderr.write("jenkins-cffi not installed: vectors checked against driver5 only\n")
        return
    for s, src, dst, proto, sport, dport, seed, h in rows:
        k = words(src) + words(dst) + [(sport << 16) | dport, proto]
        got = c_hashlittle(struct.pack("<10I", *k), seed)
        assert got == h, f"{s} {src} {dst} {sport}: lookup3.c says {got:#x}, this script {h:#x}"
    sys.stderr.write(f"{len(rows)} vectors equal lookup3.c's hashlittle() (jenkins-cffi)\n")


def main():
    self_test()
    rows = [(*v, flow_hash(*v[1:])) for v in vectors()]
    cross_check_with_lookup3_c(rows)
    w = sys.stdout.write
    w("# flow_hash reference vectors: lookup3 hashword() (= Linux jhash2) over\n")
    w("# [src words, dst words, sport<<16|dport, proto] with initval = seed.\n")
    w("# Generated by dataplane-common/tests/vectors/flow_hash.py (after checking lookup3.c driver5's\n")
    w("# published values); do not edit by hand.\n")
    w("# set src dst proto sport dport seed hash\n")
    for s, src, dst, proto, sport, dport, seed, h in rows:
        w(f"{s} {src} {dst} {proto} {sport} {dport} {seed:#010x} {h:#010x}\n")


if __name__ == "__main__":
    main()
