//! GPU-host emulator: the pure logic of an RDMA NIC and its GPU's collectives.
//!
//! Nothing here touches sockets or the wire. State machines consume and produce abstract
//! packet descriptors ([`desc`]) and take time as `now: u64` nanoseconds on any monotonic
//! clock (and randomness as a seed), so everything is unit-tested without sleeps. The
//! RoCEv2 wire format lives in `rocefab_wire::roce`; the AF_XDP glue is the [`nic`] layer
//! (`rocefab-hostd`), whose protocol engine is pure as well and only its socket and daemon
//! modules touch the kernel.
//!
//! | module          | what                                                       | standard / source |
//! |-----------------|------------------------------------------------------------|-------------------|
//! | [`psn`]         | 24-bit PSN arithmetic                                       | IBTA Vol. 1 §9.7.1 |
//! | [`desc`]        | opcodes, RETH, AETH syndromes, packet descriptors           | IBTA Vol. 1 §9.2–9.3, RoCEv2 A17 |
//! | [`segment`]     | RDMA WRITE First/Middle/Last/Only, Write-Only-per-packet    | IBTA Vol. 1 §9.4; book ch. 12 |
//! | [`sender`]      | RC requester: window, go-back-N, timeout/retry, pacer        | IBTA Vol. 1 §9.7 |
//! | [`receiver`]    | RC responder: ePSN, placement, NAK, dup, ACK coalescing, CNP | IBTA Vol. 1 §9.7 |
//! | [`dcqcn`]       | DCQCN reaction point and notification point                 | Zhu et al., SIGCOMM 2015 |
//! | [`pfc`]         | NIC-side PFC pause timers                                   | IEEE 802.1Qbb |
//! | [`uet`]         | UET PDC (RUD): PSNs, SACK, NACK, retransmission, window CC  | UEC 1.0 PDS |
//! | [`collective`]  | ring AllReduce, incast, all-to-all, broadcast schedules     | book ch. 14 |
//! | [`nic`]         | emulated RDMA NIC: frames ⇄ RC state machines, AF_XDP, jobs | RoCEv2 A17, 802.1Qbb |

pub mod collective;
pub mod dcqcn;
pub mod desc;
pub mod pfc;
pub mod psn;
pub mod receiver;
pub mod segment;
pub mod sender;
pub mod training;
pub mod uet;

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = u64;

/// The AF_XDP NIC emulator (`rocefab-hostd`): wire glue, job files, the data thread.
pub mod nic;
