//! Oracle: scapy builds IP/UDP frames, `switch_model::trim::trim_frame` cuts them, and scapy
//! dissects what is left: the frame's length, the IP and UDP lengths, the IPv4 header checksum
//! and the IPv6 UDP checksum as scapy computes them, the DSCP and the ECN bits, and the bytes
//! that stay. Needs /usr/bin/python3 with scapy (Debian python3-scapy); without it the test fails.
use serde_json::Value;

use rocefab_test_support::scapy::run_python;
use switch_model::trim::trim_frame;

/// Builds the frames: JSON lines of {hex, size, dscp} (the trim to apply).
const BUILD: &str = r#"
import json
from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, raw
pay = lambda n: bytes((i * 13 + 5) & 0xff for i in range(n))
e = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
cases = [
  (e / IP(src="10.0.1.1", dst="10.0.2.1", tos=0 << 2 | 2) / UDP(sport=40000, dport=4791) / pay(1472), 128, 48),
  (e / IP(src="10.0.1.1", dst="10.0.2.1", tos=24 << 2 | 3, id=77, flags="DF") / UDP(sport=1, dport=4793) / pay(1000), 128, 46),
  (e / IP(src="10.0.1.1", dst="10.0.2.1", tos=10 << 2 | 1, options=b"\x01\x01\x01\x00") / UDP(sport=9, dport=9) / pay(300), 64, 0),
  (e / Dot1Q(vlan=5, prio=3) / IP(src="10.0.1.1", dst="10.0.2.1", tos=2) / UDP(sport=7, dport=4791) / pay(8000), 256, 63),
  (e / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=26 << 2 | 2, fl=0x12345) / UDP(sport=40001, dport=4791) / pay(4000), 128, 48),
  (e / IPv6(src="2001:db8::1", dst="2001:db8::2", tc=1) / UDP(sport=5, dport=6) / pay(200), 200, 7),
]
for p, size, dscp in cases:
    print(json.dumps({"hex": raw(p).hex(), "size": size, "dscp": dscp}))
"#;

/// Dissects each trimmed frame (stdin: JSON lines of {hex, orig}); prints what it finds.
const CHECK: &str = r#"
import json, sys
from scapy.all import Ether, IP, IPv6, UDP, raw
for line in sys.stdin:
    c = json.loads(line)
    b, orig = bytes.fromhex(c["hex"]), Ether(bytes.fromhex(c["orig"]))
    p = Ether(b)
    out = {"len": len(b)}
    if IP in p:
        ip, oip = p[IP], orig[IP]
        q = IP(raw(ip)[: ip.ihl * 4])
        del q.chksum
        out.update(ip_len=ip.len, l3=len(b) - len(raw(ip)), ip_chksum_ok=IP(raw(q)).chksum == ip.chksum,
                   dscp=ip.tos >> 2, ecn=ip.tos & 3, orig_ecn=oip.tos & 3,
                   same=[ip.src == oip.src, ip.dst == oip.dst, ip.ttl == oip.ttl, ip.id == oip.id,
                         ip.flags == oip.flags, ip.options == oip.options])
        u, ou = p[UDP], orig[UDP]
        out.update(udp_len=u.len, udp_chksum=u.chksum)
    else:
        ip, oip = p[IPv6], orig[IPv6]
        out.update(ip_len=ip.plen + 40, l3=len(b) - len(raw(ip)), dscp=ip.tc >> 2, ecn=ip.tc & 3,
                   orig_ecn=oip.tc & 3, same=[ip.src == oip.src, ip.dst == oip.dst, ip.fl == oip.fl, ip.hlim == oip.hlim])
        u, ou = p[UDP], orig[UDP]
        v = UDP(raw(u))
        del v.chksum
        ref = IPv6(src=ip.src, dst=ip.dst, tc=ip.tc, fl=ip.fl, hlim=ip.hlim) / v
        out.update(udp_len=u.len, udp_chksum=u.chksum, udp_chksum_ok=UDP(raw(ref)[40:]).chksum == u.chksum)
    out["same"] += [u.sport == ou.sport, u.dport == ou.dport, p.src == orig.src, p.dst == orig.dst]
    out["payload_prefix"] = raw(u.payload) == raw(ou.payload)[: len(raw(u.payload))]
    out["payload_len"] = len(raw(u.payload))
    print(json.dumps(out))
"#;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn trimmed_frames_dissect_with_lengths_checksums_and_dscp_fixed_in_scapy() {
    let cases: Vec<Value> = run_python(BUILD, "").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(cases.len(), 6);
    let mut input = String::new();
    let mut want = Vec::new();
    for c in &cases {
        let orig = hex(c["hex"].as_str().unwrap());
        let (size, dscp) = (c["size"].as_u64().unwrap() as usize, c["dscp"].as_u64().unwrap() as u8);
        let mut f = orig.clone();
        let len = f.len();
        let t = trim_frame(&mut f, len, size, dscp).unwrap_or_else(|e| panic!("{c}: {e}"));
        assert_eq!(t.removed, len - size);
        f.truncate(size);
        input += &format!("{}\n", serde_json::json!({"hex": to_hex(&f), "orig": to_hex(&orig)}));
        want.push((size, dscp, orig[12..14] == [0x86, 0xdd]));
    }
    let got: Vec<Value> = run_python(CHECK, &input).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), want.len());
    for (g, &(size, dscp, v6)) in got.iter().zip(&want) {
        let n = |k: &str| g[k].as_u64().unwrap_or_else(|| panic!("{k} in {g}")) as usize;
        assert_eq!(n("len"), size, "the frame is the trim size, Ethernet header included: {g}");
        let l3 = n("l3");
        assert_eq!(n("ip_len"), size - l3, "IP length covers what is left: {g}");
        let l4 = l3 + n("ip_len") - n("udp_len");
        assert_eq!(n("udp_len"), size - l4, "UDP length covers what is left: {g}");
        assert_eq!(n("payload_len"), size - l4 - 8, "{g}");
        assert_eq!(n("dscp"), usize::from(dscp), "remarked to the trim DSCP: {g}");
        assert_eq!(n("ecn"), n("orig_ecn"), "ECN bits kept: {g}");
        assert!(g["same"].as_array().unwrap().iter().all(|b| b == true), "other header fields kept: {g}");
        assert_eq!(g["payload_prefix"], true, "the payload's first bytes kept: {g}");
        if v6 {
            assert_eq!(g["udp_chksum_ok"], true, "IPv6 UDP checksum recomputed: {g}");
            assert_ne!(n("udp_chksum"), 0, "{g}");
        } else {
            assert_eq!(g["ip_chksum_ok"], true, "IPv4 header checksum valid: {g}");
            assert_eq!(n("udp_chksum"), 0, "IPv4 UDP checksum 0 (none): {g}");
        }
    }
}
