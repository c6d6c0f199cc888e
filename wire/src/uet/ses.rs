//! The UET Semantic Sublayer (SES) headers: the standard request (44 bytes) a WRITE carries in
//! every packet, the small (20) and medium (32) requests of single-packet messages, the
//! response without data (12 bytes) an ACK carries, and the responses with data (20, and 12
//! for the small one).
//!
//! Layouts from docs/research/uet-wire-formats.md §9-§11 (xdp2 `ses.h` X-S:682-812,
//! X-S:908-1036, Wireshark `dissect_ses_*`, uet-ref-prov `uet_ses_req_*` / `uet_ses_rsp*`).
//! The three agree on the standard request and the response without data. Where they
//! disagree this module follows Wireshark and uet-ref-prov, which agree: bytes 2-3 of the
//! small and medium requests are reserved (2) | request_length (14), not xdp2's message_id
//! (D13); byte 4 of a response with data is reserved, not xdp2's ri_generation (D16: kept raw);
//! its payload_length is 14 bits, not xdp2's 12 (D17); the small response with data is 12
//! bytes, as in xdp2 and uet-ref-prov (D18). Extension headers (atomic, compare-and-swap,
//! rendezvous) are not laid out here: they stay in the payload.
//!
//! ```text
//! standard request (44):
//!  0: rsvd (2) | opcode (6)          1: version (2) | DC IE REL HD EOM SOM
//!  2: message_id (16)                4: ri_generation (8) | job_id (24)
//!  8: rsvd (4) | pid_on_fep (12)    10: rsvd (4) | resource_index (12)
//! 12: buffer_offset (64)            20: initiator (32)
//! 24: memory_key / match_bits (64)
//! 32: SOM=1: header_data (64); SOM=0: rsvd (18) | payload_length (14) | message_offset (32)
//! 40: request_length (32)
//! response (12):
//!  0: list (2) | opcode (6)          1: version (2) | return_code (6)
//!  2: message_id (16)                4: ri_generation (8) | job_id (24)
//!  8: modified_length (32)
//! ```

/// Why an SES header does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("UET SES {what} truncated: need {needed} bytes, have {available}")]
    Truncated { what: &'static str, needed: usize, available: usize },
}

named_values! {
    /// SES request opcode (6 bits; research file §9: the sources agree on 0x00-0x0F).
    Opcode, 0x3f, Other {
        NoOp = 0x00, "NO_OP";
        Write = 0x01, "WRITE";
        Read = 0x02, "READ";
        Atomic = 0x03, "ATOMIC";
        FetchingAtomic = 0x04, "FETCHING_ATOMIC";
        Send = 0x05, "SEND";
        RendezvousSend = 0x06, "RENDEZVOUS_SEND";
        DatagramSend = 0x07, "DATAGRAM_SEND";
        DeferrableSend = 0x08, "DEFERRABLE_SEND";
        TaggedSend = 0x09, "TAGGED_SEND";
        RendezvousTsend = 0x0a, "RENDEZVOUS_TSEND";
        DeferrableTsend = 0x0b, "DEFERRABLE_TSEND";
        DeferrableRtr = 0x0c, "DEFERRABLE_RTR";
        TsendAtomic = 0x0d, "TSEND_ATOMIC";
        TsendFetchAtomic = 0x0e, "TSEND_FETCH_ATOMIC";
        MsgError = 0x0f, "MSG_ERROR";
    }
}

named_values! {
    /// SES response opcode (6 bits; §11d).
    ResponseOpcode, 0x3f, Other {
        Default = 0, "DEFAULT_RESPONSE";
        Response = 1, "RESPONSE";
        ResponseWithData = 2, "RESPONSE_W_DATA";
        NoResponse = 3, "NO_RESPONSE";
    }
}

named_values! {
    /// SES return code (6 bits; §11d: the sources agree on 0x00-0x24).
    ReturnCode, 0x3f, Other {
        Null = 0x00, "NULL";
        Ok = 0x01, "OK";
        BadGeneration = 0x02, "BAD_GENERATION";
        Disabled = 0x03, "DISABLED";
        DisabledGen = 0x04, "DISABLED_GEN";
        NoMatch = 0x05, "NO_MATCH";
        UnsupportedOp = 0x06, "UNSUPPORTED_OP";
        UnsupportedSize = 0x07, "UNSUPPORTED_SIZE";
        AtInvalid = 0x08, "AT_INVALID";
        AtPerm = 0x09, "AT_PERM";
        AtAtsError = 0x0a, "AT_ATS_ERROR";
        AtNoTrans = 0x0b, "AT_NO_TRANS";
        AtOutOfRange = 0x0c, "AT_OUT_OF_RANGE";
        HostPoisoned = 0x0d, "HOST_POISONED";
        HostUnsuccessCmpl = 0x0e, "HOST_UNSUCCESS_CMPL";
        AmoUnsupportedOp = 0x0f, "AMO_UNSUPPORTED_OP";
        AmoUnsupportedDt = 0x10, "AMO_UNSUPPORTED_DT";
        AmoUnsupportedSize = 0x11, "AMO_UNSUPPORTED_SIZE";
        AmoUnaligned = 0x12, "AMO_UNALIGNED";
        AmoFpNan = 0x13, "AMO_FP_NAN";
        AmoFpUnderflow = 0x14, "AMO_FP_UNDERFLOW";
        AmoFpOverflow = 0x15, "AMO_FP_OVERFLOW";
        AmoFpInexact = 0x16, "AMO_FP_INEXACT";
        PermViolation = 0x17, "PERM_VIOLATION";
        OpViolation = 0x18, "OP_VIOLATION";
        BadIndex = 0x19, "BAD_INDEX";
        BadPid = 0x1a, "BAD_PID";
        BadJobId = 0x1b, "BAD_JOB_ID";
        BadMkey = 0x1c, "BAD_MKEY";
        BadAddr = 0x1d, "BAD_ADDR";
        Cancelled = 0x1e, "CANCELLED";
        Undeliverable = 0x1f, "UNDELIVERABLE";
        Uncor = 0x20, "UNCOR";
        UncorTrnsnt = 0x21, "UNCOR_TRNSNT";
        TooLong = 0x22, "TOO_LONG";
        InitiatorErr = 0x23, "INITIATOR_ERR";
        Dropped = 0x24, "DROPPED";
    }
}

/// Request flags (byte 1's low 6 bits).
pub mod flags {
    /// Delivery complete.
    pub const DC: u8 = 0x20;
    /// Initiator error.
    pub const IE: u8 = 0x10;
    /// Relative addressing.
    pub const REL: u8 = 0x08;
    /// Header data present.
    pub const HD: u8 = 0x04;
    /// End of message.
    pub const EOM: u8 = 0x02;
    /// Start of message.
    pub const SOM: u8 = 0x01;
}

/// Length of the standard request header.
pub const STANDARD_REQUEST_LEN: usize = 44;
/// Length of the response without data.
pub const RESPONSE_LEN: usize = 12;
/// Length of the small request header.
pub const SMALL_REQUEST_LEN: usize = 20;
/// Length of the medium request header.
pub const MEDIUM_REQUEST_LEN: usize = 32;
/// Length of the response with data.
pub const RESPONSE_WITH_DATA_LEN: usize = 20;
/// Length of the small response with data.
pub const SMALL_RESPONSE_WITH_DATA_LEN: usize = 12;

fn check(b: &[u8], what: &'static str, needed: usize) -> Result<(), Error> {
    if b.len() < needed {
        return Err(Error::Truncated { what, needed, available: b.len() });
    }
    Ok(())
}

fn be<const N: usize>(b: &[u8], at: usize) -> u64 {
    b[at..at + N].iter().fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

fn put(b: &mut [u8], at: usize, n: usize, v: u64) {
    for i in 0..n {
        b[at + i] = (v >> (8 * (n - 1 - i))) as u8;
    }
}

/// Bytes 32-39 of a standard request: chosen by SOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StdTail {
    /// SOM=1: header data (meaningful when HD is set).
    HeaderData(u64),
    /// SOM=0: this packet's payload length (14 bits) and its offset in the message.
    Continuation { payload_length: u16, message_offset: u32 },
}

/// The standard request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StandardRequest {
    pub opcode: Opcode,
    /// 2 bits.
    pub version: u8,
    /// [`flags`]: 6 bits.
    pub flags: u8,
    pub message_id: u16,
    pub ri_generation: u8,
    /// 24 bits.
    pub job_id: u32,
    /// 12 bits.
    pub pid_on_fep: u16,
    /// 12 bits.
    pub resource_index: u16,
    pub buffer_offset: u64,
    pub initiator: u32,
    pub memory_key: u64,
    /// SOM selects the layout; [`StandardRequest::emit`] writes the variant given.
    pub tail: StdTail,
    pub request_length: u32,
}

impl StandardRequest {
    /// Parses the first [`STANDARD_REQUEST_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<StandardRequest, Error> {
        if b.len() < STANDARD_REQUEST_LEN {
            return Err(Error::Truncated {
                what: "standard request",
                needed: STANDARD_REQUEST_LEN,
                available: b.len(),
            });
        }
        let f = b[1] & 0x3f;
        let tail = if f & flags::SOM != 0 {
            StdTail::HeaderData(be::<8>(b, 32))
        } else {
            StdTail::Continuation {
                payload_length: (be::<2>(b, 34) & 0x3fff) as u16,
                message_offset: be::<4>(b, 36) as u32,
            }
        };
        Ok(StandardRequest {
            opcode: Opcode::from(b[0]),
            version: b[1] >> 6,
            flags: f,
            message_id: be::<2>(b, 2) as u16,
            ri_generation: b[4],
            job_id: be::<3>(b, 5) as u32,
            pid_on_fep: (be::<2>(b, 8) & 0x0fff) as u16,
            resource_index: (be::<2>(b, 10) & 0x0fff) as u16,
            buffer_offset: be::<8>(b, 12),
            initiator: be::<4>(b, 20) as u32,
            memory_key: be::<8>(b, 24),
            tail,
            request_length: be::<4>(b, 40) as u32,
        })
    }

    /// Writes the header into the first [`STANDARD_REQUEST_LEN`] bytes of `b` (reserved bits
    /// zero; wider values masked).
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..STANDARD_REQUEST_LEN];
        b[0] = u8::from(self.opcode) & 0x3f;
        b[1] = (self.version << 6) | (self.flags & 0x3f);
        put(b, 2, 2, u64::from(self.message_id));
        b[4] = self.ri_generation;
        put(b, 5, 3, u64::from(self.job_id & 0xff_ffff));
        put(b, 8, 2, u64::from(self.pid_on_fep & 0x0fff));
        put(b, 10, 2, u64::from(self.resource_index & 0x0fff));
        put(b, 12, 8, self.buffer_offset);
        put(b, 20, 4, u64::from(self.initiator));
        put(b, 24, 8, self.memory_key);
        match self.tail {
            StdTail::HeaderData(v) => put(b, 32, 8, v),
            StdTail::Continuation { payload_length, message_offset } => {
                put(b, 32, 4, u64::from(payload_length & 0x3fff));
                put(b, 36, 4, u64::from(message_offset));
            }
        }
        put(b, 40, 4, u64::from(self.request_length));
    }
}

/// The response without data (`next_header` 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Response {
    /// 2 bits: 0 expected list, 1 overflow list.
    pub list: u8,
    pub opcode: ResponseOpcode,
    /// 2 bits.
    pub version: u8,
    pub return_code: ReturnCode,
    pub message_id: u16,
    pub ri_generation: u8,
    /// 24 bits.
    pub job_id: u32,
    pub modified_length: u32,
}

impl Response {
    /// Parses the first [`RESPONSE_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<Response, Error> {
        if b.len() < RESPONSE_LEN {
            return Err(Error::Truncated { what: "response", needed: RESPONSE_LEN, available: b.len() });
        }
        Ok(Response {
            list: b[0] >> 6,
            opcode: ResponseOpcode::from(b[0]),
            version: b[1] >> 6,
            return_code: ReturnCode::from(b[1]),
            message_id: be::<2>(b, 2) as u16,
            ri_generation: b[4],
            job_id: be::<3>(b, 5) as u32,
            modified_length: be::<4>(b, 8) as u32,
        })
    }

    /// Writes the header into the first [`RESPONSE_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..RESPONSE_LEN];
        b[0] = (self.list << 6) | (u8::from(self.opcode) & 0x3f);
        b[1] = (self.version << 6) | (u8::from(self.return_code) & 0x3f);
        put(b, 2, 2, u64::from(self.message_id));
        b[4] = self.ri_generation;
        put(b, 5, 3, u64::from(self.job_id & 0xff_ffff));
        put(b, 8, 4, u64::from(self.modified_length));
    }
}

/// Bytes 0-11 of the small and medium requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortCommon {
    pub opcode: Opcode,
    /// 2 bits.
    pub version: u8,
    /// [`flags`]: 6 bits (the sources say SOM and EOM are both set).
    pub flags: u8,
    /// 14 bits (D13: xdp2 writes a message_id here).
    pub request_length: u16,
    pub ri_generation: u8,
    /// 24 bits.
    pub job_id: u32,
    /// 12 bits.
    pub pid_on_fep: u16,
    /// 12 bits.
    pub resource_index: u16,
}

impl ShortCommon {
    fn parse(b: &[u8]) -> ShortCommon {
        ShortCommon {
            opcode: Opcode::from(b[0]),
            version: b[1] >> 6,
            flags: b[1] & 0x3f,
            request_length: (be::<2>(b, 2) & 0x3fff) as u16,
            ri_generation: b[4],
            job_id: be::<3>(b, 5) as u32,
            pid_on_fep: (be::<2>(b, 8) & 0x0fff) as u16,
            resource_index: (be::<2>(b, 10) & 0x0fff) as u16,
        }
    }

    fn emit(&self, b: &mut [u8]) {
        b[0] = u8::from(self.opcode) & 0x3f;
        b[1] = (self.version << 6) | (self.flags & 0x3f);
        put(b, 2, 2, u64::from(self.request_length & 0x3fff));
        b[4] = self.ri_generation;
        put(b, 5, 3, u64::from(self.job_id & 0xff_ffff));
        put(b, 8, 2, u64::from(self.pid_on_fep & 0x0fff));
        put(b, 10, 2, u64::from(self.resource_index & 0x0fff));
    }
}

/// The small request (`next_header` 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmallRequest {
    pub common: ShortCommon,
    pub buffer_offset: u64,
}

impl SmallRequest {
    /// Parses the first [`SMALL_REQUEST_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<SmallRequest, Error> {
        check(b, "small request", SMALL_REQUEST_LEN)?;
        Ok(SmallRequest { common: ShortCommon::parse(b), buffer_offset: be::<8>(b, 12) })
    }

    /// Writes the header into the first [`SMALL_REQUEST_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..SMALL_REQUEST_LEN];
        self.common.emit(b);
        put(b, 12, 8, self.buffer_offset);
    }
}

/// The medium request (`next_header` 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MediumRequest {
    pub common: ShortCommon,
    /// Header data when the HD flag is set, otherwise the buffer offset.
    pub header_data_or_offset: u64,
    pub initiator: u32,
    pub memory_key: u64,
}

impl MediumRequest {
    /// Parses the first [`MEDIUM_REQUEST_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<MediumRequest, Error> {
        check(b, "medium request", MEDIUM_REQUEST_LEN)?;
        Ok(MediumRequest {
            common: ShortCommon::parse(b),
            header_data_or_offset: be::<8>(b, 12),
            initiator: be::<4>(b, 20) as u32,
            memory_key: be::<8>(b, 24),
        })
    }

    /// Writes the header into the first [`MEDIUM_REQUEST_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..MEDIUM_REQUEST_LEN];
        self.common.emit(b);
        put(b, 12, 8, self.header_data_or_offset);
        put(b, 20, 4, u64::from(self.initiator));
        put(b, 24, 8, self.memory_key);
    }
}

/// The response with data (`next_header` 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseWithData {
    /// 2 bits.
    pub list: u8,
    pub opcode: ResponseOpcode,
    /// 2 bits.
    pub version: u8,
    pub return_code: ReturnCode,
    pub message_id: u16,
    /// Byte 4: reserved in Wireshark and uet-ref-prov, ri_generation in xdp2 (D16); kept raw.
    pub byte4: u8,
    /// 24 bits.
    pub job_id: u32,
    pub read_request_message_id: u16,
    /// 14 bits (D17: 12 in xdp2).
    pub payload_length: u16,
    pub modified_length: u32,
    pub message_offset: u32,
}

impl ResponseWithData {
    /// Parses the first [`RESPONSE_WITH_DATA_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<ResponseWithData, Error> {
        check(b, "response with data", RESPONSE_WITH_DATA_LEN)?;
        Ok(ResponseWithData {
            list: b[0] >> 6,
            opcode: ResponseOpcode::from(b[0]),
            version: b[1] >> 6,
            return_code: ReturnCode::from(b[1]),
            message_id: be::<2>(b, 2) as u16,
            byte4: b[4],
            job_id: be::<3>(b, 5) as u32,
            read_request_message_id: be::<2>(b, 8) as u16,
            payload_length: (be::<2>(b, 10) & 0x3fff) as u16,
            modified_length: be::<4>(b, 12) as u32,
            message_offset: be::<4>(b, 16) as u32,
        })
    }

    /// Writes the header into the first [`RESPONSE_WITH_DATA_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..RESPONSE_WITH_DATA_LEN];
        b[0] = (self.list << 6) | (u8::from(self.opcode) & 0x3f);
        b[1] = (self.version << 6) | (u8::from(self.return_code) & 0x3f);
        put(b, 2, 2, u64::from(self.message_id));
        b[4] = self.byte4;
        put(b, 5, 3, u64::from(self.job_id & 0xff_ffff));
        put(b, 8, 2, u64::from(self.read_request_message_id));
        put(b, 10, 2, u64::from(self.payload_length & 0x3fff));
        put(b, 12, 4, u64::from(self.modified_length));
        put(b, 16, 4, u64::from(self.message_offset));
    }
}

/// The small response with data (`next_header` 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmallResponseWithData {
    /// 2 bits.
    pub list: u8,
    pub opcode: ResponseOpcode,
    /// 2 bits.
    pub version: u8,
    pub return_code: ReturnCode,
    /// 14 bits.
    pub payload_length: u16,
    /// 24 bits.
    pub job_id: u32,
    pub original_request_psn: u32,
}

impl SmallResponseWithData {
    /// Parses the first [`SMALL_RESPONSE_WITH_DATA_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<SmallResponseWithData, Error> {
        check(b, "small response with data", SMALL_RESPONSE_WITH_DATA_LEN)?;
        Ok(SmallResponseWithData {
            list: b[0] >> 6,
            opcode: ResponseOpcode::from(b[0]),
            version: b[1] >> 6,
            return_code: ReturnCode::from(b[1]),
            payload_length: (be::<2>(b, 2) & 0x3fff) as u16,
            job_id: be::<3>(b, 5) as u32,
            original_request_psn: be::<4>(b, 8) as u32,
        })
    }

    /// Writes the header into the first [`SMALL_RESPONSE_WITH_DATA_LEN`] bytes of `b` (reserved
    /// bits zero).
    pub fn emit(&self, b: &mut [u8]) {
        let b = &mut b[..SMALL_RESPONSE_WITH_DATA_LEN];
        b[0] = (self.list << 6) | (u8::from(self.opcode) & 0x3f);
        b[1] = (self.version << 6) | (u8::from(self.return_code) & 0x3f);
        put(b, 2, 2, u64::from(self.payload_length & 0x3fff));
        b[4] = 0;
        put(b, 5, 3, u64::from(self.job_id & 0xff_ffff));
        put(b, 8, 4, u64::from(self.original_request_psn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(tail: StdTail, flags: u8) -> StandardRequest {
        StandardRequest {
            opcode: Opcode::Write,
            version: 0,
            flags,
            message_id: 0x0102,
            ri_generation: 3,
            job_id: 0x0a0b0c,
            pid_on_fep: 0x0fed,
            resource_index: 0x0123,
            buffer_offset: 0x1122_3344_5566_7788,
            initiator: 0x99aa_bbcc,
            memory_key: 0xdead_beef_0000_0001,
            tail,
            request_length: 65536,
        }
    }

    #[test]
    fn a_standard_request_lays_out_as_the_sources_say() {
        let r = write(StdTail::Continuation { payload_length: 4096, message_offset: 8192 }, flags::EOM);
        let mut b = [0u8; STANDARD_REQUEST_LEN];
        r.emit(&mut b);
        #[rustfmt::skip]
        let want: [u8; 44] = [
            0x01, 0x02, 0x01, 0x02, 0x03, 0x0a, 0x0b, 0x0c, 0x0f, 0xed, 0x01, 0x23,
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc,
            0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x01,
            0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00,
            0x00, 0x01, 0x00, 0x00,
        ];
        assert_eq!(b, want);
        assert_eq!(StandardRequest::parse(&b).unwrap(), r);
        let first = write(StdTail::HeaderData(42), flags::SOM | flags::HD);
        first.emit(&mut b);
        assert_eq!(b[1], 0x05);
        assert_eq!(StandardRequest::parse(&b).unwrap(), first);
        assert!(StandardRequest::parse(&b[..43]).is_err());
    }

    #[test]
    fn a_response_round_trips_and_keeps_unknown_codes() {
        let r = Response {
            list: 0,
            opcode: ResponseOpcode::Default,
            version: 0,
            return_code: ReturnCode::Ok,
            message_id: 7,
            ri_generation: 0,
            job_id: 0x123456,
            modified_length: 4096,
        };
        let mut b = [0u8; RESPONSE_LEN];
        r.emit(&mut b);
        assert_eq!(b, [0x00, 0x01, 0x00, 0x07, 0x00, 0x12, 0x34, 0x56, 0x00, 0x00, 0x10, 0x00]);
        assert_eq!(Response::parse(&b).unwrap(), r);
        b[1] = 0x3e;
        assert_eq!(Response::parse(&b).unwrap().return_code, ReturnCode::Other(0x3e));
        assert_eq!(
            Response::parse(&b[..11]).unwrap_err().to_string(),
            "UET SES response truncated: need 12 bytes, have 11"
        );
    }

    #[test]
    fn small_and_medium_requests_lay_out_as_wireshark_and_uet_ref_prov_say() {
        let common = ShortCommon {
            opcode: Opcode::Read,
            version: 1,
            flags: flags::SOM | flags::EOM | flags::REL,
            request_length: 0x3fff,
            ri_generation: 0x77,
            job_id: 0xabcdef,
            pid_on_fep: 0x678,
            resource_index: 0x9ab,
        };
        let small = SmallRequest { common, buffer_offset: 0x9876_5432_9876_5432 };
        let mut b = [0xa5u8; SMALL_REQUEST_LEN];
        small.emit(&mut b);
        #[rustfmt::skip]
        let want: [u8; 20] = [
            0x02, 0x4b, 0x3f, 0xff, 0x77, 0xab, 0xcd, 0xef, 0x06, 0x78, 0x09, 0xab,
            0x98, 0x76, 0x54, 0x32, 0x98, 0x76, 0x54, 0x32,
        ];
        assert_eq!(b, want);
        assert_eq!(SmallRequest::parse(&b).unwrap(), small);
        assert!(SmallRequest::parse(&b[..19]).is_err());
        let medium = MediumRequest {
            common: ShortCommon { opcode: Opcode::Write, request_length: 100, ..common },
            header_data_or_offset: 0x0102_0304_0506_0708,
            initiator: 0x8765_4321,
            memory_key: 0xccbb_ddee_ff00_9988,
        };
        let mut b = [0xa5u8; MEDIUM_REQUEST_LEN];
        medium.emit(&mut b);
        assert_eq!(&b[..4], &[0x01, 0x4b, 0x00, 100]);
        assert_eq!(
            &b[12..],
            &[1, 2, 3, 4, 5, 6, 7, 8, 0x87, 0x65, 0x43, 0x21, 0xcc, 0xbb, 0xdd, 0xee, 0xff, 0, 0x99, 0x88]
        );
        assert_eq!(MediumRequest::parse(&b).unwrap(), medium);
        assert_eq!(
            MediumRequest::parse(&b[..31]).unwrap_err().to_string(),
            "UET SES medium request truncated: need 32 bytes, have 31"
        );
    }

    #[test]
    fn responses_with_data_lay_out_as_the_sources_say() {
        let r = ResponseWithData {
            list: 3,
            opcode: ResponseOpcode::ResponseWithData,
            version: 0,
            return_code: ReturnCode::AtPerm,
            message_id: 0x1234,
            byte4: 0,
            job_id: 0x654321,
            read_request_message_id: 0x5678,
            payload_length: 0x2321,
            modified_length: 0x8765_4321,
            message_offset: 0x09ab_cdef,
        };
        let mut b = [0xa5u8; RESPONSE_WITH_DATA_LEN];
        r.emit(&mut b);
        #[rustfmt::skip]
        let want: [u8; 20] = [0xc2, 0x09, 0x12, 0x34, 0x00, 0x65, 0x43, 0x21, 0x56, 0x78, 0x23, 0x21,
                              0x87, 0x65, 0x43, 0x21, 0x09, 0xab, 0xcd, 0xef];
        assert_eq!(b, want);
        assert_eq!(ResponseWithData::parse(&b).unwrap(), r);
        let s = SmallResponseWithData {
            list: 0,
            opcode: ResponseOpcode::ResponseWithData,
            version: 0,
            return_code: ReturnCode::Ok,
            payload_length: 0x3456,
            job_id: 223344,
            original_request_psn: 0x1234,
        };
        let mut b = [0xa5u8; SMALL_RESPONSE_WITH_DATA_LEN];
        s.emit(&mut b);
        // 223344 = 0x036870.
        assert_eq!(b, [0x02, 0x01, 0x34, 0x56, 0x00, 0x03, 0x68, 0x70, 0x00, 0x00, 0x12, 0x34]);
        assert_eq!(SmallResponseWithData::parse(&b).unwrap(), s);
        assert!(SmallResponseWithData::parse(&b[..11]).is_err());
        assert!(ResponseWithData::parse(&[0u8; 19]).is_err());
    }
}
