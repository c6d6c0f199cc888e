//! Helpers shared by rocefab's tests that need no kernel plumbing, so any crate's tests can use
//! them (wire's and control's oracle tests as well as the privileged `rocefab-tests`, which
//! re-exports them): std and serde_json only, no eBPF build, no aya, no runtime.
//!
//! - [`tshark`]: tshark (Wireshark's CLI) as the decoding oracle: fields of the frames of a
//!   capture, a bounded live capture in a namespace, and the number formats it prints.
//! - [`promtool`]: `promtool check metrics` on a Prometheus scrape, `check config` on a
//!   configuration, PromQL expressions parsed through `check rules`.
//! - [`grafana`]: the PromQL of the repository's Grafana dashboard, variables replaced.
//! - [`scapy`]: a Python script run with /usr/bin/python3 (scapy) as the frame oracle, and the
//!   UET scapy layers written from the sources.
//! - [`fabric_build`]: the packages and binaries a fabric runs (built by `cargo xtask`,
//!   checked for staleness by the tests).

pub mod fabric_build;
pub mod grafana;
pub mod promtool;
pub mod scapy;
pub mod tshark;
