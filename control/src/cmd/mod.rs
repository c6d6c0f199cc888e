//! The subcommands, one file each with its arguments and what it prints, over the running
//! fabric (`crate::fabric`) and the jobs on it (`crate::job`); `main.rs` dispatches to them.
pub mod capture;
pub mod exec;
pub mod fabric;
pub mod fail;
pub mod frame;
pub mod lldp;
pub mod pcap_show;
pub mod ping;
pub mod plan;
pub mod prometheus_config;
pub mod qos_import;
pub mod routes;
pub mod run;
pub mod send;
pub mod status;
pub mod train;
pub mod uplinks;
pub mod web;
