//! The UET Semantic Sublayer (SES) headers rocefab emits: the standard request (44 bytes) a
//! WRITE carries in every packet, and the response without data (12 bytes) an ACK carries.
//!
//! Layouts from docs/research/uet-wire-formats.md §9 and §11 (xdp2 `ses.h` X-S:682-812 and
//! X-S:930-958, Wireshark `dissect_ses_std_req` / `dissect_ses_resp`, uet-ref-prov
//! `uet_ses_req_std` / `uet_ses_rsp`; the three agree on every field used here):
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
        PermViolation = 0x17, "PERM_VIOLATION";
        OpViolation = 0x18, "OP_VIOLATION";
        BadIndex = 0x19, "BAD_INDEX";
        BadPid = 0x1a, "BAD_PID";
        BadJobId = 0x1b, "BAD_JOB_ID";
        BadMkey = 0x1c, "BAD_MKEY";
        BadAddr = 0x1d, "BAD_ADDR";
        Cancelled = 0x1e, "CANCELLED";
        Undeliverable = 0x1f, "UNDELIVERABLE";
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
}
