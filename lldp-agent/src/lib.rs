//! The LLDP/DCBX agent of rocefab's switch ports and GPU NICs, as pure logic: the daemons own
//! the sockets and the clock and call into it.
//!
//! - [`port`]: one port's LLDP agent (IEEE 802.1AB): transmit timers with fast start, shutdown
//!   LLDPDU, receive validation, a neighbour that ages out at its TTL, and the port's row of the
//!   neighbour table ([`port::PortReport`], served as JSON on `GET /lldp`).
//! - [`dcb`]: DCBX (IEEE 802.1Qaz / 802.1Q-2018 clause 38): the TLVs of a switch's or NIC's
//!   settings (`rocefab_contracts::dcb`), willing negotiation, and mismatch checks.
//! - [`metrics`]: the Prometheus families both daemons export.
//! - [`node`]: the driver of a node's ports, shared by the switch daemon and the NIC agent.
pub mod dcb;
pub mod metrics;
pub mod node;
pub mod port;

pub use dcb::{Dcb, DcbxTlvs, Mismatch, Oper, PeerDcb};
pub use node::{Kind, Link, NodeAgent};
pub use port::{Expected, Identity, NodeReport, PortAgent, PortReport, Rx, Timing};
