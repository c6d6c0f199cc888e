//! Wire formats rocefab emits and parses, byte-exact to the standards, in the smoltcp style:
//! a zero-copy `Packet<T: AsRef<[u8]>>` view with checked construction plus a `Repr` with
//! `parse` / `buffer_len` / `emit`.
//!
//! - [`mac_control`]: IEEE 802.3x PAUSE and IEEE 802.1Qbb PFC (EtherType 0x8808).
//! - [`lldp`]: IEEE 802.1AB LLDP TLVs (EtherType 0x88cc).
//! - [`dcbx`]: IEEE 802.1Qaz DCBX TLVs (ETS, PFC, Application Priority) and CEE DCBX.
//! - [`roce`]: RoCEv2 (UDP 4791) and RoCE v1 (EtherType 0x8915): InfiniBand BTH and every RC /
//!   UC / UD extension header (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), ICRC.
//! - [`uet`]: Ultra Ethernet Transport (UDP 4793, or IP protocol 253 with the entropy header):
//!   the PDS prologue, RUD/ROD requests, ACK, ACK_CC (SACK, NSCC state) and NACK; the SES
//!   standard request and response ([`uet::ses`]); whole frames ([`uet::frame`]).
//! - [`pcap`]: pcap and pcapng reading and writing.

pub mod dcbx;
pub mod ethernet;
mod hex;
pub mod lldp;
pub mod mac_control;
pub mod pcap;
pub mod roce;
pub mod uet;
