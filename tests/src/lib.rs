//! Helpers for the privileged integration tests, in one place: fabrics and their daemons
//! ([`fabric`]), GPU-host namespaces and jobs ([`host`]), child processes ([`proc`]), captures
//! ([`capture`]), the oracles ([`tshark`], [`scapy`]), the daemons' HTTP endpoints ([`http`]),
//! scratch files ([`scratch`]) and the XDP test-run fixtures ([`xdp`]).

pub mod capture;
pub mod fabric;
pub mod host;
pub mod http;
pub mod proc;
pub mod scapy;
pub mod scratch;
pub mod tshark;
pub mod xdp;
