//! rocefab decodes the UET sample captures xdp2's generators write (`make_uet_pds.py`,
//! `make_uet_ses.py` at xdp2-dev/xdp2@34a53b77; wire/tests/data/xdp2/README.md has the
//! provenance and the command). Every packet is parsed with `ParsedUetFrame::parse` and
//! compared, field by field, with the values the generator script passes for it, transcribed
//! here from the script (the `Make*` calls, in order). Where the generator follows a reading
//! rocefab does not (docs/research/uet-wire-formats.md D-numbers), the packet's expectation
//! says so and states what rocefab reads instead, from the same bytes.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use rocefab_wire::uet::frame::{Encap, ParsedUetFrame, Ses};
use rocefab_wire::uet::ses::{
    flags, MediumRequest, Opcode, Response, ResponseOpcode, ResponseWithData, ReturnCode, ShortCommon, SmallRequest,
    SmallResponseWithData, StandardRequest, StdTail,
};
use rocefab_wire::uet::{
    ack_flags, control_flags, nack_flags, next_header as nh, request_flags, rudi_flags, ControlType, NackCode,
    NsccState, PdsType, Repr,
};

fn capture(name: &str) -> Vec<Vec<u8>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/xdp2").join(name);
    rocefab_wire::pcap::read_all(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .into_iter()
        .map(|f| {
            assert_eq!(f.linktype, 1, "Ethernet");
            assert_eq!(f.orig_len as usize, f.data.len(), "not cut by a snap length");
            f.data
        })
        .collect()
}

/// What one packet must decode to.
struct Want {
    what: &'static str,
    pds: Repr,
    ses: Ses,
    /// Bytes after the headers rocefab lays out (extension headers, trailing bytes).
    payload_len: usize,
}

// `UetSesReturnCode.UET_SES_RETURN_CODE_AT_PERM` (research file §11d: 0x09).
const AT_PERM: u8 = 0x09;

/// `MakeRudRequest(next_hdr, retrans = 1, ackreq = 0, clear_psn_offset = 0x1234,
/// psn = 0x98765432, spdcid = 0x3456, dpdcid = 0x9abc)`, and its ROD twin.
fn request(ordered: bool, next_header: u8) -> Repr {
    Repr::Request {
        ordered,
        next_header,
        flags: request_flags::RETX,
        clear_psn_offset: 0x1234,
        psn: 0x9876_5432,
        spdcid: 0x3456,
        dpdcid: 0x9abc,
    }
}

/// `Make*RequestSyn(..., use_rsv_pdc = 1, psn_offset = 0x876)`: SYN set, and bytes 10-11 are
/// use_rsv_pdc at 0x8000 (xdp2's and Wireshark's position; uet-ref-prov has 0x1000, D3) and
/// psn_offset, which rocefab keeps as the raw 16 bits (`syn_pdc_info` 0x8, `syn_psn_offset`).
const SYN_DPDCID: u16 = 0x8000 | 0x876;

fn request_syn(ordered: bool) -> Repr {
    Repr::Request {
        ordered,
        next_header: nh::STANDARD_REQUEST,
        flags: request_flags::RETX | request_flags::SYN,
        clear_psn_offset: 0x1234,
        psn: 0x9876_5432,
        spdcid: 0x3456,
        dpdcid: SYN_DPDCID,
    }
}

/// `Make*RequestCc(..., ccc_id = 0x77, credit_target = 0x887766)`.
fn request_cc(ordered: bool, syn: bool) -> Repr {
    Repr::RequestCc {
        ordered,
        next_header: nh::STANDARD_REQUEST,
        flags: request_flags::RETX | if syn { request_flags::SYN } else { 0 },
        clear_psn_offset: 0x1234,
        psn: 0x9876_5432,
        spdcid: 0x3456,
        dpdcid: if syn { SYN_DPDCID } else { 0x9abc },
        ccc_id: 0x77,
        credit_target: 0x88_7766,
    }
}

/// `MakeRequestSomHdrStd(opcode, delivery_complete = 1, initiator_error = 0,
/// relative_addressing = 1, hdr_data_present = 0, end_of_msg = 1, message_id = 0x1234,
/// ri_generation = 0x77, job_id = 0xabcdef, pid_on_fep = 0x678, resource_index = 0x9ab,
/// buffer_offset = 0xfedcba9876543210, initiator = 0xfedcba98,
/// memory_key_match_bits = 0x1122334455667788, header_data = 0xaabbddddeeff0011,
/// request_length = 0x99887766)`; the SOM class sets SOM.
fn std_som(opcode: Opcode) -> StandardRequest {
    StandardRequest {
        opcode,
        version: 0,
        flags: flags::DC | flags::REL | flags::EOM | flags::SOM,
        message_id: 0x1234,
        ri_generation: 0x77,
        job_id: 0xab_cdef,
        pid_on_fep: 0x678,
        resource_index: 0x9ab,
        buffer_offset: 0xfedc_ba98_7654_3210,
        initiator: 0xfedc_ba98,
        memory_key: 0x1122_3344_5566_7788,
        tail: StdTail::HeaderData(0xaabb_dddd_eeff_0011),
        request_length: 0x9988_7766,
    }
}

/// `MakeRequestNoSomHdrStd(...)`: the same fields without SOM, and `payload_length = 0x345,
/// message_offset = 0x77665544` in bytes 32-39.
fn std_no_som(opcode: Opcode) -> StandardRequest {
    StandardRequest {
        flags: flags::DC | flags::REL | flags::EOM,
        tail: StdTail::Continuation { payload_length: 0x345, message_offset: 0x7766_5544 },
        ..std_som(opcode)
    }
}

/// `MakeHdrResponse(list = 3, opcode, return_code = AT_PERM, message_id = 0x1234,
/// ri_generation = 0x99, job_id = 0x654321, modified_length = 0x9abcdef)`.
fn response(opcode: ResponseOpcode) -> Response {
    Response {
        list: 3,
        opcode,
        version: 0,
        return_code: ReturnCode::from(AT_PERM),
        message_id: 0x1234,
        ri_generation: 0x99,
        job_id: 0x65_4321,
        modified_length: 0x09ab_cdef,
    }
}

/// The ACKs' common arguments: `next_hdr = RESPONSE, ecn_marked = 1, retrans = 1, probe = 0,
/// request = 1, cack_psn = 0x2468ace0, spdcid = 0x3456, dpdcid = 0x789a`.
const ACK_FLAGS: u8 = ack_flags::M | ack_flags::RETX | (1 << ack_flags::REQ_SHIFT);

/// `ack_psn_offset_probe_opaque`, as the generator writes its 16 bits; rocefab reads the offset
/// as signed (D4: uet-ref-prov's int16_t, Wireshark's signed read).
fn offset(v: u16) -> i16 {
    i16::from_be_bytes(v.to_be_bytes())
}

fn ack_cc(ack_psn_offset: u16, cc_type: u8, sack_psn_offset: u16, cc_state: u64) -> Repr {
    Repr::AckCc {
        next_header: nh::RESPONSE,
        flags: ACK_FLAGS,
        ack_psn_offset: offset(ack_psn_offset),
        cack_psn: 0x2468_ace0,
        spdcid: 0x3456,
        dpdcid: 0x789a,
        cc_type,
        cc_flags: 0xf,
        mpr: 0x87,
        sack_psn_offset: offset(sack_psn_offset),
        sack_bitmap: 0x1234_5678_9abc_def0,
        cc_state,
    }
}

/// `MakeRequestHdrMedium(opcode, delivery_complete = 1, initiator_error = 0,
/// relative_addressing = 1, hdr_data_present = 0, start_of_msg = 1, end_of_msg = 1,
/// message_id = 0x1234, ri_generation = 0x77, job_id = 0xabcdef, pid_on_fep = 0x678,
/// resource_index = 0x9ab, ...)`: bytes 0-11 of the small and medium requests. The generator
/// writes message_id 0x1234 in bytes 2-3 (xdp2 reuses its common header there); rocefab,
/// following Wireshark and uet-ref-prov (D13), reads reserved (2) | request_length (14) there,
/// so it reports request_length 0x1234 for these packets.
fn short_common(opcode: Opcode) -> ShortCommon {
    ShortCommon {
        opcode,
        version: 0,
        flags: flags::DC | flags::REL | flags::EOM | flags::SOM,
        request_length: 0x1234,
        ri_generation: 0x77,
        job_id: 0xab_cdef,
        pid_on_fep: 0x678,
        resource_index: 0x9ab,
    }
}

/// `... header_data = 0x9876543298765432, initiator = 0x87654321, memory_key =
/// 0xccbbddeeff009988)`; with HD clear rocefab names bytes 12-19 the buffer offset or header
/// data alike (`header_data_or_offset`).
fn medium(opcode: Opcode) -> MediumRequest {
    MediumRequest {
        common: short_common(opcode),
        header_data_or_offset: 0x9876_5432_9876_5432,
        initiator: 0x8765_4321,
        memory_key: 0xccbb_ddee_ff00_9988,
    }
}

/// `MakeRequestHdrSmall(..., buffer_offset = 0x9876543298765432)`.
fn small(opcode: Opcode) -> SmallRequest {
    SmallRequest { common: short_common(opcode), buffer_offset: 0x9876_5432_9876_5432 }
}

/// `MakeRudiResponse(next_hdr, ecn_marked = 1, retrans = 0, pkt_id = 0x99887766)`.
fn rudi_response(next_header: u8) -> Repr {
    Repr::Rudi { response: true, next_header, flags: rudi_flags::M, pkt_id: 0x9988_7766 }
}

/// make_uet_pds.py's packets, in the order of its `MakePacket` calls.
fn pds_capture() -> Vec<Want> {
    let read = Ses::Request(std_som(Opcode::Read));
    let resp = Ses::Response(response(ResponseOpcode::Response));
    let w = |what, pds, ses, payload_len| Want { what, pds, ses, payload_len };
    vec![
        w("RUD request", request(false, nh::STANDARD_REQUEST), read, 0),
        w("RUD request with SYN", request_syn(false), read, 0),
        w("RUD_CC request", request_cc(false, false), read, 0),
        w("RUD_CC request with SYN", request_cc(false, true), read, 0),
        w("ROD request", request(true, nh::STANDARD_REQUEST), read, 0),
        w("ROD request with SYN", request_syn(true), read, 0),
        w("ROD_CC request", request_cc(true, false), read, 0),
        // The script's comment says "RUD", its call is MakeRodRequestSynCc.
        w("ROD_CC request with SYN", request_cc(true, true), read, 0),
        w(
            "ACK",
            Repr::Ack {
                next_header: nh::RESPONSE,
                flags: ACK_FLAGS,
                ack_psn_offset: offset(0x8642),
                cack_psn: 0x2468_ace0,
                spdcid: 0x3456,
                dpdcid: 0x789a,
            },
            resp,
            0,
        ),
        // cc_type 0 (NSCC): service_time 0x99aa, restore_cwnd 1, rcv_cwnd_pend 0x7f,
        // rcvd_bytes 0x887766, ooo_count 0x8765 (checked through NsccState below).
        w("ACK_CC NSCC", ack_cc(0x2121, 0, 0x6789, 0x99aa_ff88_7766_8765), resp, 0),
        // cc_type 1 (credit): credit 0x123456 in bytes 24-26, ooo_count 0x8765 in 30-31
        // (research file §5); rocefab keeps the credit variant's 8 bytes raw.
        w("ACK_CC credit", ack_cc(0x9876, 1, 0x9988, 0x1234_5600_0000_8765), resp, 0),
        // ACK_CCX: 8 bytes of CCX state in xdp2 (32-byte header), 16 in Wireshark and
        // uet-ref-prov (D7). rocefab does not lay ACK_CCX out: it reads the prologue
        // (ccx_type 0xe ... stay in the payload) and no SES header; the 30 bytes after the
        // prologue and the generator's 12-byte SES response are payload.
        w(
            "ACK_CCX",
            Repr::Other { pds_type: PdsType::AckCcx, next_header: nh::RESPONSE, flags: ACK_FLAGS },
            Ses::None,
            30 + 12,
        ),
        // nak_type RUDI (NT), nak_code PDC_MODE_MISMATCH (0x16), vendor_code 0x87,
        // nak_psn_pkt_id 0x99887766, payload 0x56789abc, next_hdr RESPONSE. rocefab reads no
        // SES header after a NACK: the generator's 12-byte response stays payload.
        w(
            "NACK",
            Repr::Nack {
                next_header: nh::RESPONSE,
                flags: nack_flags::M | nack_flags::RETX | nack_flags::NT,
                code: NackCode::from(0x16),
                vendor_code: 0x87,
                psn: 0x9988_7766,
                spdcid: 0x3456,
                dpdcid: 0x789a,
                payload: 0x5678_9abc,
            },
            Ses::None,
            12,
        ),
        // NACK_CCX: 8 bytes of CCX state in xdp2 (24-byte header), 16 in Wireshark and
        // uet-ref-prov (D8); not laid out in rocefab: prologue only (retrans 1, RUD/ROD).
        w(
            "NACK_CCX",
            Repr::Other { pds_type: PdsType::NackCcx, next_header: nh::RESPONSE, flags: nack_flags::RETX },
            Ses::None,
            22 + 12,
        ),
        // MakeControlPkt(CREDIT_REQ, rsvd_isrod = 1, retrans = 1, ack_req = 0,
        // probe_opaque = 0x9876, psn = 0xcdef0123, spdcid = 0xcdef, dpdcid = 0xfedc). The
        // generator's UetPdsControlPkt is 12 bytes: it has no payload word, which pds.h
        // (X-P:473), Wireshark and uet-ref-prov put in bytes 12-15 (research file §7). rocefab
        // reads the 16-byte layout, so its payload is the first 4 bytes of the response the
        // generator appends (list 3 / RESPONSE = 0xc1, AT_PERM = 0x09, message_id 0x1234), and
        // the remaining 8 bytes are payload.
        w(
            "CONTROL CREDIT_REQ",
            Repr::Control {
                ctl_type: ControlType::CreditReq,
                flags: control_flags::ISROD | control_flags::RETX,
                probe_opaque: 0x9876,
                psn: 0xcdef_0123,
                spdcid: 0xcdef,
                dpdcid: 0xfedc,
                payload: 0xc109_1234,
            },
            Ses::None,
            8,
        ),
        // MakeControlPktSyn(NEGOTIATION, rsvd_isrod = 0, retrans = 1, probe_opaque = 0x1234,
        // spdcid = 0xcdef, psn = 0xcdef0123, use_rsv_pdc = 1, psn_offset = 0x876); the same
        // 12-byte caveat.
        w(
            "CONTROL NEGOTIATION with SYN",
            Repr::Control {
                ctl_type: ControlType::Negotiation,
                flags: control_flags::RETX | control_flags::SYN,
                probe_opaque: 0x1234,
                psn: 0xcdef_0123,
                spdcid: 0xcdef,
                dpdcid: SYN_DPDCID,
                payload: 0xc109_1234,
            },
            Ses::None,
            8,
        ),
        w("UUD request", Repr::Uud { next_header: nh::STANDARD_REQUEST, flags: 0 }, read, 0),
        w(
            "RUDI request",
            Repr::Rudi {
                response: false,
                next_header: nh::STANDARD_REQUEST,
                flags: rudi_flags::M,
                pkt_id: 0x9988_7766,
            },
            read,
            0,
        ),
        w("RUDI response", rudi_response(nh::RESPONSE), resp, 0),
    ]
}

/// make_uet_ses.py's packets, in the order of its `MakePacket` / `MakePacket3` calls.
fn ses_capture() -> Vec<Want> {
    let rud = |next| request(false, next);
    let w = |what, pds, ses, payload_len| Want { what, pds, ses, payload_len };
    // MakeDeferSendHdrStd / MakeReadyToRestartHdrStd pass header_data = 0xfedcba9876543210
    // with start_of_msg = 0, in bytes 32-39. All three sources (research file §9) choose the
    // layout of bytes 32-39 by SOM, so rocefab reads them as reserved | payload_length |
    // message_offset: payload_length = 0xba98 & 0x3fff, message_offset = 0x76543210.
    let defer_tail = StdTail::Continuation { payload_length: 0xba98 & 0x3fff, message_offset: 0x7654_3210 };
    vec![
        w("standard request, SOM, READ", rud(nh::STANDARD_REQUEST), Ses::Request(std_som(Opcode::Read)), 0),
        w("standard request, no SOM, WRITE", rud(nh::STANDARD_REQUEST), Ses::Request(std_no_som(Opcode::Write)), 0),
        // initiator_restart_token 0x87654321, target_restart_token 0x12345678 in bytes 12-19
        // (the buffer offset's place), match_bits 0x1122334455667788.
        w(
            "DEFERRABLE_SEND",
            rud(nh::STANDARD_REQUEST),
            Ses::Request(StandardRequest {
                buffer_offset: 0x8765_4321_1234_5678,
                tail: defer_tail,
                ..std_no_som(Opcode::DeferrableSend)
            }),
            0,
        ),
        // buffer_offset 0x8899aabbccddeeff; the restart tokens in bytes 24-31 (the memory
        // key's place).
        w(
            "DEFERRABLE_RTR (ready to restart)",
            rud(nh::STANDARD_REQUEST),
            Ses::Request(StandardRequest {
                buffer_offset: 0x8899_aabb_ccdd_eeff,
                memory_key: 0x8765_4321_1234_5678,
                tail: defer_tail,
                ..std_no_som(Opcode::DeferrableRtr)
            }),
            0,
        ),
        // The atomic extension header (4 bytes) and the compare-and-swap one (36) are not laid
        // out in rocefab: they are the payload.
        w("standard ATOMIC + atomic extension", rud(nh::STANDARD_REQUEST), Ses::Request(std_no_som(Opcode::Atomic)), 4),
        w(
            "standard ATOMIC + compare-and-swap",
            rud(nh::STANDARD_REQUEST),
            Ses::Request(std_no_som(Opcode::Atomic)),
            36,
        ),
        w("medium WRITE", rud(nh::MEDIUM_REQUEST), Ses::MediumRequest(medium(Opcode::Write)), 0),
        w("medium ATOMIC + atomic extension", rud(nh::MEDIUM_REQUEST), Ses::MediumRequest(medium(Opcode::Atomic)), 4),
        w("medium ATOMIC + compare-and-swap", rud(nh::MEDIUM_REQUEST), Ses::MediumRequest(medium(Opcode::Atomic)), 36),
        w("small READ", rud(nh::SMALL_REQUEST), Ses::SmallRequest(small(Opcode::Read)), 0),
        w("small ATOMIC + atomic extension", rud(nh::SMALL_REQUEST), Ses::SmallRequest(small(Opcode::Atomic)), 4),
        w("small ATOMIC + compare-and-swap", rud(nh::SMALL_REQUEST), Ses::SmallRequest(small(Opcode::Atomic)), 36),
        // next_hdr RESPONSE (4) with the response opcode RESPONSE_W_DATA: the generator's own
        // mismatch (Wireshark flags it); rocefab decodes the header next_hdr names.
        w(
            "response (no data) with opcode RESPONSE_W_DATA",
            rudi_response(nh::RESPONSE),
            Ses::Response(response(ResponseOpcode::ResponseWithData)),
            0,
        ),
        // MakeWithDataHdrResponse(list = 3, RESPONSE_W_DATA, AT_PERM, message_id = 0x1234,
        // job_id = 0x654321, read_request_message_id = 0x1234, payload_length = 0x321,
        // modified_length = 0x87654321, message_offset = 0x9abcdef). The generator's class has
        // no ri_generation (byte 4 zero, reserved in Wireshark and uet-ref-prov, D16) and a
        // 12-bit payload_length (D17); 0x321 reads the same as rocefab's 14 bits.
        w(
            "response with data",
            rudi_response(nh::RESPONSE_WITH_DATA),
            Ses::ResponseWithData(ResponseWithData {
                list: 3,
                opcode: ResponseOpcode::ResponseWithData,
                version: 0,
                return_code: ReturnCode::from(AT_PERM),
                message_id: 0x1234,
                byte4: 0,
                job_id: 0x65_4321,
                read_request_message_id: 0x1234,
                payload_length: 0x321,
                modified_length: 0x8765_4321,
                message_offset: 0x09ab_cdef,
            }),
            0,
        ),
        // MakeWithDataHdrSmallResponse(list = 3, RESPONSE_W_DATA, AT_PERM, job_id = 223344,
        // payload_length = 0x3456, original_request_psn = 0x1234).
        w(
            "small response with data",
            rudi_response(nh::SMALL_RESPONSE_WITH_DATA),
            Ses::SmallResponseWithData(SmallResponseWithData {
                list: 3,
                opcode: ResponseOpcode::ResponseWithData,
                version: 0,
                return_code: ReturnCode::from(AT_PERM),
                payload_length: 0x3456,
                job_id: 223_344,
                original_request_psn: 0x1234,
            }),
            0,
        ),
        // RENDEZVOUS_TSEND without the rendezvous extension header (its length differs
        // between the sources, D19); nothing follows the standard header.
        w("standard RENDEZVOUS_TSEND", rud(nh::STANDARD_REQUEST), Ses::Request(std_som(Opcode::RendezvousTsend)), 0),
        w("medium NO_OP", rud(nh::MEDIUM_REQUEST), Ses::MediumRequest(medium(Opcode::NoOp)), 0),
    ]
}

fn check(name: &str, src_ip: Ipv4Addr, src_port: u16, wants: &[Want]) {
    let frames = capture(name);
    assert_eq!(frames.len(), wants.len(), "{name}: packets");
    for (i, (f, w)) in frames.iter().zip(wants).enumerate() {
        let at = format!("{name} #{} ({})", i + 1, w.what);
        let p = ParsedUetFrame::parse(f).unwrap_or_else(|e| panic!("{at}: {e}"));
        // Ether(src = "00:11:22:33:44:55", dst = "AA:BB:CC:DD:EE:FF") / IP / UDP(dport = 4793).
        assert_eq!(p.src_mac, [0x00, 0x11, 0x22, 0x33, 0x44, 0x55], "{at}");
        assert_eq!(p.dst_mac, [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff], "{at}");
        assert_eq!((p.src_ip, p.dst_ip), (IpAddr::V4(src_ip), IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2))), "{at}");
        assert_eq!(p.encap, Encap::Udp { src_port, dst_port: 4793 }, "{at}");
        assert_eq!(p.pds, w.pds, "{at}");
        assert_eq!(p.ses, w.ses, "{at}");
        assert_eq!(p.payload.len(), w.payload_len, "{at}: bytes after the headers");
    }
}

#[test]
fn xdp2_pds_capture_decodes_as_the_generator_wrote_it() {
    // make_uet_pds.py: IP(src = "192.168.1.2", dst = "192.168.1.2"), UDP(sport = 35433).
    check("uet_pds.pcap", Ipv4Addr::new(192, 168, 1, 2), 35433, &pds_capture());
    // The NSCC state of packet 10 through rocefab's field view, and the SYN request's
    // pdc_info / psn_offset split.
    let frames = capture("uet_pds.pcap");
    let p = ParsedUetFrame::parse(&frames[9]).unwrap();
    let Repr::AckCc { cc_state, .. } = p.pds else { panic!("{:?}", p.pds) };
    assert_eq!(
        NsccState::from_u64(cc_state),
        NsccState {
            service_time: 0x99aa,
            restore_cwnd: true,
            rcv_cwnd_pend: 0x7f,
            rcvd_bytes: 0x88_7766,
            ooo_count: 0x8765
        }
    );
    let syn = &frames[1][42..];
    let v = rocefab_wire::uet::Packet::new_checked(syn).unwrap();
    assert_eq!((v.syn_pdc_info(), v.syn_psn_offset()), (0x8, 0x876), "use_rsv_pdc = 1 at 0x8 of pdc_info (D3)");
    let Repr::Nack { code, .. } = ParsedUetFrame::parse(&frames[12]).unwrap().pds else { panic!() };
    assert_eq!((code, code.name()), (NackCode::PdcModeMismatch, "PDC_MODE_MISMATCH"));
}

#[test]
fn xdp2_ses_capture_decodes_as_the_generator_wrote_it() {
    // make_uet_ses.py: IP(src = "192.168.1.1", dst = "192.168.1.2"), UDP(sport = 8675).
    check("uet_ses.pcap", Ipv4Addr::new(192, 168, 1, 1), 8675, &ses_capture());
}
