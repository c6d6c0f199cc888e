//! rocefab's GPU-host daemons on top of the pure NIC model (`gpu-host`) and the shared kernel
//! plumbing (`rocefab-plumbing`): `rocefab-hostd`, the emulated RDMA NIC on AF_XDP, and
//! `rocefab-nicd`, the NIC agent (LLDP/DCBX, captures), and `rocefab-rank`, a training job's
//! process per GPU.
//!
//! | module      | what                                                                  |
//! |-------------|-----------------------------------------------------------------------|
//! | [`xsk`]     | AF_XDP sockets (xsk-rs, copy mode) and the host XDP program             |
//! | [`metrics`] | Prometheus metrics per QP and per NIC, HTTP exposition                |
//! | [`daemon`]  | the data thread: RX, timers, TX with explicit kicks, sleep when idle  |
//! | [`links`]   | the NIC ports' carrier from rtnetlink link notifications              |
//! | [`mirror`]  | shared-memory ring: AF_XDP frames hostd mirrors for nicd's captures   |
//! | [`hostd`]   | `rocefab-hostd`: start-up, the job, the report, the linger            |
//! | [`hosts`]   | `rocefab-hostd --hosts`: every host of a job in one process             |
//! | [`nicd`]    | `rocefab-nicd`: the NICs' LLDP/DCBX agents, HTTP, the capture thread   |
//! | [`rank`]    | `rocefab-rank`: a torchrun-style training process's TCP rendezvous     |
//!
//! The binaries only parse their arguments and call [`hostd::run`] (or [`hosts::run`]) and
//! [`nicd::run`].
pub mod daemon;
pub mod hostd;
pub mod hosts;
pub mod links;
pub mod metrics;
pub mod mirror;
pub mod nicd;
pub mod rank;
pub mod xsk;
