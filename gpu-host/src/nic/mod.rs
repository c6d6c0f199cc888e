//! The emulated RDMA NIC behind `rocefab-hostd`: one AF_XDP socket per GPU NIC veth, the
//! RoCEv2 RC protocol engine on top, and the job / report formats a controller uses.
//!
//! | module       | what                                                              |
//! |--------------|-------------------------------------------------------------------|
//! | [`collective_job`] | collective schedule → one job per host (torchrun ranks) |
//! | [`job`]      | job file (QPNs, PSNs, R_Keys exchanged out of band) and report     |
//! | [`pattern`]  | deterministic data for end-to-end verification                     |
//! | [`engine`]   | frames ⇄ `Sender`/`Receiver`/`NicPfc`, shaping, CNP, PFC (pure)     |
//! | [`xsk`]      | AF_XDP sockets (xsk-rs, copy mode) and the host XDP program         |
//! | [`metrics`]  | Prometheus metrics per QP and per NIC, HTTP exposition           |
//! | [`sample`]   | `GET /sample`: DCQCN rate, α, CNPs, pause state for the timeline  |
//! | [`daemon`]   | the data thread: RX, timers, TX with explicit kicks, sleep when idle |
//! | [`mirror`]   | shared-memory ring: AF_XDP frames hostd mirrors for nicd's captures |
//! | [`agent`]    | `rocefab-nicd`: LLDP/DCBX agent per NIC, negotiated classes          |
pub mod agent;
pub mod collective_job;
pub mod daemon;
pub mod engine;
pub mod job;
pub mod metrics;
pub mod mirror;
pub mod pattern;
pub mod sample;
pub mod xsk;
