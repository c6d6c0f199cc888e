//! Helpers for the privileged integration tests, in one place: fabrics and their daemons
//! ([`fabric`]), GPU-host namespaces and jobs ([`host`]), child processes ([`proc`]), captures
//! ([`capture`]), the oracles ([`tshark`], from `rocefab-test-support`, and [`scapy`]), the
//! daemons' HTTP endpoints ([`http`]), a Prometheus server ([`prometheus`]), scratch files
//! ([`scratch`]), a switch daemon started on its own ([`switchd`]), the XDP test-run fixtures ([`xdp`]) and a headless browser ([`browser`]).

pub mod browser;
pub mod capture;
pub mod fabric;
pub mod host;
pub mod http;
pub mod proc;
pub mod prometheus;
pub mod scapy;
pub mod scratch;
pub mod switchd;
pub mod xdp;

/// tshark, the decoding oracle: the one wrapper, shared with wire's and control's tests.
pub use rocefab_test_support::tshark;

/// The Grafana dashboard's queries, shared with control's unprivileged dashboard test.
pub use rocefab_test_support::grafana;
