//! What rocefab's daemons and its CLI exchange, as plain serde types and stream formats with no
//! kernel plumbing: the switch configuration ([`config`]) and its time/dilation types ([`time`]),
//! the NIC agent's configuration ([`agent`]) with the DCBX settings it advertises ([`dcb`]), the
//! job file and report ([`job`], [`rdma`], [`dcqcn`]), the capture stream of `GET /capture`
//! ([`capture`]), the metrics text of `/metrics` ([`promtext`]) and the samples of `GET /sample`
//! ([`sample`], [`host_sample`]). The daemons produce them (`dataplane-user`, `host-daemons`),
//! the CLI (`control`) reads them; neither side needs the other's internals.

pub mod agent;
pub mod capture;
pub mod config;
pub mod dcb;
pub mod dcqcn;
pub mod host_sample;
pub mod job;
pub mod memory;
pub mod promtext;
pub mod rdma;
pub mod rendezvous;
pub mod sample;
pub mod time;
