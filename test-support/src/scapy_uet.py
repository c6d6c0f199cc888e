# scapy layers of the UET headers, written from the public sources' layouts as
# docs/research/uet-wire-formats.md tabulates them (xdp2 src/include/uet/pds.h and ses.h
# big-endian bitfields, Wireshark packet-uet.c field masks, uet-ref-prov uet_pkt_hdr.h), NOT
# from rocefab's code: the independent side of rocefab's UET oracle tests. The 16-bit PDS
# prologue is type (5) | next header (4) | flags (7), the flags split per type as the sources
# name them (xdp2 pds.h struct uet_pds_rud_rod_request, uet_pds_ack, uet_pds_nack).
import json, sys
from scapy.all import Packet, BitField, ByteField, ShortField, SignedShortField, IntField, LongField, raw
from scapy.all import ThreeBytesField, ConditionalField, conf

def every_field(p):
    """Every field the layer has on the wire (a ConditionalField only when its condition holds)."""
    return {f.name: p.getfieldval(f.name) for f in p.fields_desc
            if not isinstance(f, ConditionalField) or f._evalcond(p)}

class RudRodReq(Packet):
    name = "UET PDS RUD/ROD request"
    fields_desc = [BitField("type", 2, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 2),
                   BitField("retx", 0, 1), BitField("ar", 0, 1), BitField("syn", 0, 1), BitField("rsvd2", 0, 2),
                   SignedShortField("clear_psn_offset", 0), IntField("psn", 0), ShortField("spdcid", 0),
                   ShortField("dpdcid", 0)]

class Ack(Packet):
    name = "UET PDS ACK"
    fields_desc = [BitField("type", 7, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 1),
                   BitField("m", 0, 1), BitField("retx", 0, 1), BitField("p", 0, 1), BitField("req", 0, 2),
                   BitField("rsvd2", 0, 1), SignedShortField("ack_psn_offset", 0), IntField("cack_psn", 0),
                   ShortField("spdcid", 0), ShortField("dpdcid", 0)]

class Nack(Packet):
    name = "UET PDS NACK"
    fields_desc = [BitField("type", 10, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 1),
                   BitField("m", 0, 1), BitField("retx", 0, 1), BitField("nt", 0, 1), BitField("rsvd2", 0, 3),
                   ByteField("nack_code", 0), ByteField("vendor_code", 0), IntField("nack_psn", 0),
                   ShortField("spdcid", 0), ShortField("dpdcid", 0), IntField("nack_payload", 0)]

# ACK_CC (research file §4-5): the ACK's 12 bytes (xdp2 pds.h X-P:320-330: cc_type, cc_flags,
# mpr, sack_psn_offset, sack_bitmap), then 8 bytes of CC state. NSCC (cc_type 0, X-P:336-340;
# Wireshark's offsets, restore_cwnd/rcv_cwnd_pend at byte 26 as xdp2 has them, D6): service_time
# (16) | restore_cwnd (1) | rcv_cwnd_pend (7) | rcvd_bytes (24) | ooo_count (16). The PSN offsets
# are signed (D4: uet-ref-prov int16_t RP:190, 213). Other cc_types: the 8 state bytes raw.
class AckCc(Packet):
    name = "UET PDS ACK_CC"
    fields_desc = [BitField("type", 8, 5), BitField("next_hdr", 0, 4), BitField("rsvd1", 0, 1),
                   BitField("m", 0, 1), BitField("retx", 0, 1), BitField("p", 0, 1), BitField("req", 0, 2),
                   BitField("rsvd2", 0, 1), SignedShortField("ack_psn_offset", 0), IntField("cack_psn", 0),
                   ShortField("spdcid", 0), ShortField("dpdcid", 0),
                   BitField("cc_type", 0, 4), BitField("cc_flags", 0, 4), ByteField("mpr", 0),
                   SignedShortField("sack_psn_offset", 0), LongField("sack_bitmap", 0),
                   ConditionalField(ShortField("service_time", 0), lambda p: p.cc_type == 0),
                   ConditionalField(BitField("restore_cwnd", 0, 1), lambda p: p.cc_type == 0),
                   ConditionalField(BitField("rcv_cwnd_pend", 0, 7), lambda p: p.cc_type == 0),
                   ConditionalField(ThreeBytesField("rcvd_bytes", 0), lambda p: p.cc_type == 0),
                   ConditionalField(ShortField("ooo_count", 0), lambda p: p.cc_type == 0),
                   ConditionalField(LongField("cc_state", 0), lambda p: p.cc_type != 0)]

# SES standard request, 44 bytes (research file §9; xdp2 ses.h X-S:682-731 + X-S:784-812,
# Wireshark dissect_ses_std_req, uet-ref-prov uet_ses_req_cmn/uet_ses_req_std): SOM selects
# bytes 32-39: header_data (SOM=1), or reserved (18) | payload_length (14) | message_offset (32).
class SesStdReq(Packet):
    name = "UET SES standard request"
    fields_desc = [BitField("rsvd1", 0, 2), BitField("opcode", 0, 6), BitField("version", 0, 2),
                   BitField("dc", 0, 1), BitField("ie", 0, 1), BitField("rel", 0, 1), BitField("hd", 0, 1),
                   BitField("eom", 0, 1), BitField("som", 0, 1), ShortField("message_id", 0),
                   ByteField("ri_generation", 0), ThreeBytesField("job_id", 0),
                   BitField("rsvd2", 0, 4), BitField("pid_on_fep", 0, 12),
                   BitField("rsvd3", 0, 4), BitField("resource_index", 0, 12),
                   LongField("buffer_offset", 0), IntField("initiator", 0), LongField("memory_key", 0),
                   ConditionalField(LongField("header_data", 0), lambda p: p.som == 1),
                   ConditionalField(BitField("rsvd4", 0, 18), lambda p: p.som == 0),
                   ConditionalField(BitField("payload_length", 0, 14), lambda p: p.som == 0),
                   ConditionalField(IntField("message_offset", 0), lambda p: p.som == 0),
                   IntField("request_length", 0)]

# SES response without data, 12 bytes (research file §11a; xdp2 X-S:930-958, Wireshark
# dissect_ses_resp, uet-ref-prov uet_ses_rsp_cmn/uet_ses_rsp): list (2) | opcode (6) |
# version (2) | return_code (6) | message_id (16) | ri_generation (8) | job_id (24) |
# modified_length (32).
class SesResponse(Packet):
    name = "UET SES response"
    fields_desc = [BitField("list", 0, 2), BitField("opcode", 0, 6), BitField("version", 0, 2),
                   BitField("return_code", 0, 6), ShortField("message_id", 0), ByteField("ri_generation", 0),
                   ThreeBytesField("job_id", 0), IntField("modified_length", 0)]

# What follows a request's or ACK's PDS header is chosen by next_hdr (research file §2: 3
# standard request, 4 response); a NACK's is not an SES header here.
def _ses_after(self, payload):
    return {3: SesStdReq, 4: SesResponse}.get(self.next_hdr, conf.raw_layer)
for _c in (RudRodReq, Ack, AckCc):
    _c.guess_payload_class = _ses_after

# The PDS header by its 5-bit type (research file §2 type table).
class Pds(Packet):
    name = "UET PDS (by type)"
    @classmethod
    def dispatch_hook(cls, _pkt=None, *args, **kargs):
        if _pkt:
            return {2: RudRodReq, 3: RudRodReq, 7: Ack, 8: AckCc, 10: Nack}.get(_pkt[0] >> 3, conf.raw_layer)
        return cls

# The native encapsulation's entropy header (research file §1: xdp2 X-P:38-41, Wireshark
# uet.pds.entropy, uet-ref-prov RP:77-80): entropy (16) | reserved (16), after IP protocol 253
# (uet-ref-prov RP:29, D2). Over UDP, destination port 4793 (D1) and no entropy header.
class UetEntropy(Packet):
    name = "UET entropy header"
    fields_desc = [ShortField("entropy", 0), ShortField("rsvd", 0)]

from scapy.all import bind_layers, UDP, IP, IPv6, Ether, Raw, Padding
bind_layers(UDP, Pds, dport=4793)
bind_layers(IP, UetEntropy, proto=253)
bind_layers(IPv6, UetEntropy, nh=253)
bind_layers(UetEntropy, Pds)
