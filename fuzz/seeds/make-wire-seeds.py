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
