//! What rocefab's daemons and its CLI exchange, as plain serde types and stream formats with no
//! kernel plumbing: the capture stream of `GET /capture` ([`capture`]), the metrics text of `/metrics` ([`promtext`]) and the switch sample of
//! `GET /sample` ([`sample`]). The daemons produce them (`dataplane-user`), the CLI (`control`)
//! reads them; neither side needs the other's internals.

pub mod capture;
pub mod config;
pub mod dcqcn;
pub mod host_sample;
pub mod job;
pub mod promtext;
pub mod rdma;
pub mod sample;
pub mod time;
