#!/usr/bin/python3
"""Seed inputs for the wire fuzz targets, built with scapy (an implementation independent of
rocefab's own emitters) and, where scapy has no layer, from the standard's byte layout.

Run from the repository root: /usr/bin/python3 fuzz/seeds/make-wire-seeds.py (writes fuzz/seeds/<target>/).
Each target's input format is in its fuzz_targets/<target>.rs.
"""
import os
import struct

from scapy.all import Ether, IP, UDP, Raw, load_contrib

load_contrib("mac_control")
load_contrib("lldp")
load_contrib("roce")
from scapy.contrib.mac_control import MACControlPause, MACControlClassBasedFlowControl  # noqa: E402
from scapy.contrib.lldp import (  # noqa: E402
    LLDPDUChassisID, LLDPDUPortID, LLDPDUTimeToLive, LLDPDUSystemName,
    LLDPDUGenericOrganisationSpecific, LLDPDUEndOfLLDPDU,
)
from scapy.contrib.roce import BTH, AETH, opcode  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)))
SRC, PFC_DST, LLDP_DST = "02:00:00:00:00:01", "01:80:c2:00:00:01", "01:80:c2:00:00:0e"


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(data))


# --- IEEE 802.1Qaz DCBX TLV information strings (after OUI 00-80-C2 and the subtype) ---
ets_cfg = bytes([0x80 | 8]) + bytes([0x00, 0x03, 0x00, 0x07 << 4]) + bytes([50, 0, 0, 50, 0, 0, 0, 0]) + bytes([2, 2, 2, 2, 2, 2, 2, 0])
ets_rec = bytes([0]) + ets_cfg[1:]
pfc_cfg = bytes([0x80 | 8, 1 << 3])                                # willing, 8 TCs; priority 3
app = bytes([0]) + bytes([(3 << 5) | 3]) + struct.pack(">H", 4791)  # priority 3 for UDP 4791
# CEE (DCBX 1.01): control sub-TLV then the PFC feature sub-TLV (priority 3, 8 TCs).
cee = struct.pack(">H", (1 << 9) | 10) + bytes([0, 0]) + struct.pack(">II", 1, 0)
cee += struct.pack(">H", (3 << 9) | 6) + bytes([0, 0, 0x80, 0, 1 << 3, 8])

# dcbx: the first byte picks the TLV (sel % 5: 0 ETS config, 1 ETS recommendation, 2 PFC,
# 3 application priority, 4 CEE), the rest is the information string.
for sel, name, info in [(0, "ets-config", ets_cfg), (1, "ets-recommendation", ets_rec), (2, "pfc", pfc_cfg),
                        (3, "app-roce", app), (4, "cee-pfc", cee)]:
    write("dcbx", name, bytes([sel]) + info)

# lldp: an LLDPDU (the TLVs after the Ethernet header) with the DCBX TLVs a switch port sends.
lldpdu = (Ether(src=SRC, dst=LLDP_DST) / LLDPDUChassisID(subtype=4, id=SRC) / LLDPDUPortID(subtype=5, id=b"eth1") / LLDPDUTimeToLive(ttl=120)
          / LLDPDUSystemName(system_name=b"rail1")
          / LLDPDUGenericOrganisationSpecific(org_code=0x0080C2, subtype=9, data=ets_cfg)
          / LLDPDUGenericOrganisationSpecific(org_code=0x0080C2, subtype=11, data=pfc_cfg)
          / LLDPDUGenericOrganisationSpecific(org_code=0x0080C2, subtype=12, data=app)
          / LLDPDUEndOfLLDPDU())
write("lldp", "switch-port-dcbx", bytes(lldpdu)[14:])
write("lldp", "cee", bytes(Ether(src=SRC, dst=LLDP_DST) / LLDPDUChassisID(subtype=4, id=SRC) / LLDPDUPortID(subtype=5, id=b"gpu0")
                           / LLDPDUTimeToLive(ttl=120)
                           / LLDPDUGenericOrganisationSpecific(org_code=0x001B21, subtype=2, data=cee)
                           / LLDPDUEndOfLLDPDU())[14:])

# mac_control: whole frames, 802.1Qbb PFC for priority 3 and an 802.3x PAUSE.
pfc = Ether(src=SRC, dst=PFC_DST) / MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0xFFFF)
write("mac_control", "pfc-prio3", bytes(pfc).ljust(60, b"\0"))
pfc_resume = Ether(src=SRC, dst=PFC_DST) / MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0)
write("mac_control", "pfc-prio3-resume", bytes(pfc_resume).ljust(60, b"\0"))
write("mac_control", "pause", bytes(Ether(src=SRC, dst=PFC_DST) / MACControlPause(pause_time=0x1000)).ljust(60, b"\0"))

# roce: the first byte is the capture cut (0: whole frame), then a RoCEv2 frame with its ICRC.
def roce(ib):
    f = Ether(src=SRC, dst="02:00:00:00:00:02") / IP(src="10.0.1.1", dst="10.0.1.2", tos=24 << 2) / UDP(sport=49152, dport=4791) / ib
    return bytes([0]) + bytes(f)

write("roce", "rc-send-only", roce(BTH(opcode=opcode("RC", "SEND_ONLY")[0], dqpn=0x11, psn=5) / Raw(b"\x5a" * 64)))
write("roce", "rc-ack", roce(BTH(opcode=opcode("RC", "ACKNOWLEDGE")[0], dqpn=0x11, psn=5) / AETH(syndrome=0, msn=1)))
write("roce", "cnp", roce(BTH(opcode=0x81, dqpn=0x11) / Raw(b"\0" * 16)))

# --- uet_pds: UET PDS headers (UEC 1.0) from the byte layout the sources share
# (docs/research/uet-wire-formats.md §2-6): prologue = type (5) | next header (4) | flags (7).
def pds_prologue(t, nh, flags):
    return struct.pack(">H", (t << 11) | (nh << 7) | flags)


write("uet_pds", "rud-syn-ar", pds_prologue(2, 3, 0x0C) + struct.pack(">hIHH", -2, 0x00010203, 0x1234, 0x8005))
write("uet_pds", "rod-retx", pds_prologue(3, 1, 0x10) + struct.pack(">hIHH", 300, 0xFFFFFFFE, 7, 8))
write("uet_pds", "ack-m-clear", pds_prologue(7, 0, 0x22) + struct.pack(">hIHH", 7, 0xDEADBEEF, 9, 10))
write("uet_pds", "nack-trimmed", pds_prologue(10, 0, 0x10) + struct.pack(">BBIHHI", 1, 0, 41, 1, 2, 42))
write("uet_pds", "control-ack-req", pds_prologue(11, 1, 0x08) + struct.pack(">HIHHI", 0, 5, 1, 2, 0))

# --- uet_frame and uet_ses: whole UET frames and SES headers, built with the scapy UET layers
# written from the sources' tables (test-support/src/scapy_uet.py; bound to UDP 4793 and IP
# protocol 253 there).
exec(open(os.path.join(OUT, "..", "..", "test-support", "src", "scapy_uet.py")).read())
from scapy.all import IPv6  # noqa: E402


# uet_frame: the UDP port (2 bytes) and IP protocol (1) parse_with is given, then the frame.
def uet_frame(frame, udp_port=4793, proto=253):
    return struct.pack(">HB", udp_port, proto) + bytes(frame)


E = Ether(src=SRC, dst="02:00:00:00:00:02")
std = SesStdReq(opcode=1, som=1, eom=1, hd=1, message_id=7, job_id=0x123456, pid_on_fep=9, resource_index=3,
                buffer_offset=4096, initiator=5, memory_key=0xabc, header_data=0x77, request_length=8192)
write("uet_frame", "udp-rud-std-write", uet_frame(
    E / IP(src="10.0.1.1", dst="10.0.1.2", tos=26 << 2) / UDP(sport=0xc001, dport=4793)
    / RudRodReq(type=2, next_hdr=3, ar=1, psn=10, spdcid=1, dpdcid=2) / std / Raw(b"\x5a" * 64)))
write("uet_frame", "ipv6-native-ackcc-response", uet_frame(
    E / IPv6(src="fd00::1", dst="fd00::2") / UetEntropy(entropy=0xbeef)
    / AckCc(next_hdr=4, cack_psn=9, spdcid=2, dpdcid=1, mpr=16, sack_psn_offset=1, sack_bitmap=0xb,
            service_time=100, restore_cwnd=1, rcv_cwnd_pend=3, rcvd_bytes=4096, ooo_count=1)
    / SesResponse(opcode=1, return_code=1, message_id=7, job_id=0x123456, modified_length=8192)))
write("uet_frame", "native-nack-trimmed", uet_frame(
    E / IP(src="10.0.1.2", dst="10.0.1.1") / UetEntropy(entropy=7)
    / Nack(nack_code=1, retx=1, nack_psn=11, spdcid=2, dpdcid=1, nack_payload=12)))
write("uet_frame", "udp-rod-continuation-other-port", uet_frame(
    E / IP(src="10.0.1.1", dst="10.0.1.2") / UDP(sport=1, dport=4000)
    / RudRodReq(type=3, next_hdr=3, psn=11, spdcid=1, dpdcid=2)
    / SesStdReq(opcode=1, som=0, payload_length=64, message_offset=4096, request_length=8192) / Raw(b"\xa5" * 64),
    udp_port=4000, proto=200))
# A RUDI response with a small response with data, and a RUD request with a small request
# (the small layouts by hand from research file §10-11: scapy has no layer for them here).
small_req = struct.pack(">BBHB", 2, 0x03, 64, 0x77) + (0xabcdef).to_bytes(3, "big") + struct.pack(">HHQ", 0x678, 0x9ab, 4096)
write("uet_frame", "udp-rud-small-read", uet_frame(
    E / IP(src="10.0.1.1", dst="10.0.1.2") / UDP(sport=2, dport=4793)
    / RudRodReq(type=2, next_hdr=1, psn=12, spdcid=1, dpdcid=2) / Raw(small_req)))
small_rsp = struct.pack(">BBHB", 2, 0x01, 64, 0) + (0x123456).to_bytes(3, "big") + struct.pack(">I", 12)
write("uet_frame", "udp-rudi-small-response", uet_frame(
    E / IP(src="10.0.1.2", dst="10.0.1.1") / UDP(sport=3, dport=4793)
    / Raw(pds_prologue(5, 6, 0x20) + struct.pack(">HI", 0, 0x99887766) + small_rsp) / Raw(b"\x11" * 64)))

# uet_ses: the first byte is the next header value (mod 7) naming the SES header, then its bytes.
write("uet_ses", "standard-som", bytes([3]) + bytes(std))
write("uet_ses", "standard-continuation",
      bytes([3]) + bytes(SesStdReq(opcode=1, eom=1, payload_length=0x3fff, message_offset=1, request_length=2)))
write("uet_ses", "response", bytes([4]) + bytes(SesResponse(list=1, opcode=1, return_code=0x17, message_id=1,
                                                            job_id=2, modified_length=3)))
write("uet_ses", "small-request", bytes([1]) + small_req)
medium_req = small_req[:12] + struct.pack(">QIQ", 0x1122334455667788, 5, 0xccbbddeeff009988)
write("uet_ses", "medium-request", bytes([2]) + medium_req)
rsp_data = struct.pack(">BBHB", 0xC2, 0x09, 0x1234, 0) + (0x654321).to_bytes(3, "big") + struct.pack(">HHII", 0x1234, 0x321, 0x87654321, 0x9abcdef)
write("uet_ses", "response-with-data", bytes([5]) + rsp_data)
write("uet_ses", "small-response-with-data", bytes([6]) + small_rsp)
