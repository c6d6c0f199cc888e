//! The emulated RDMA NIC behind `rocefab-hostd`, as a pure model: the RoCEv2 RC protocol engine,
//! and the job / report formats a controller uses. Its sockets, metrics exposition and data
//! thread are the daemons' (`host-daemons`).
//!
//! | module       | what                                                              |
//! |--------------|-------------------------------------------------------------------|
//! | [`collective_job`] | collective schedule → one job per host (torchrun ranks) |
//! | [`job`]      | job file (QPNs, PSNs, R_Keys exchanged out of band) and report     |
//! | [`pattern`]  | deterministic data for end-to-end verification                     |
//! | [`engine`]   | frames ⇄ `Sender`/`Receiver`/`NicPfc`, shaping, CNP, PFC (pure)     |
//! | [`sample`]   | `GET /sample`: DCQCN rate, α, CNPs, pause state for the timeline  |
//! | [`agent`]    | `rocefab-nicd`'s config and the classes a NIC negotiates by DCBX    |
pub mod agent;
pub mod collective_job;
pub mod engine;
pub mod job;
pub mod pattern;
pub mod sample;
