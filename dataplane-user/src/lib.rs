//! rocefab switch data plane, userspace side: loads the XDP program and fills its maps
//! ([`loader`]), and the switch daemon's pieces (AF_XDP ports, per-priority queues, shaper,
//! scheduler, L3 rewrite, Prometheus metrics).
//!
//! Pure, unprivileged, unit-tested logic: [`decision`], [`queue`], [`sched`], [`shaper`],
//! [`rewrite`], [`stats`], [`metrics`], [`sample`]. Kernel-facing: [`xsk`] (AF_XDP sockets), [`dataplane`]
//! (the per-switch packet thread), [`daemon`] (process lifecycle, namespaces, signals). Control
//! side (tokio): [`http`] (the daemons' HTTP server, shared with `rocefab-hostd`), [`lldp`]
//! (the LLDP/DCBX agent of every port).

pub mod buffer;
pub mod capture;
pub mod ctrl;
pub mod daemon;
pub mod dataplane;
pub mod decision;
pub mod depths;
pub mod host_loader;
pub mod http;
pub mod lldp;
pub mod loader;
pub mod metrics;
pub mod pfc;
pub mod pfcwd;
pub mod queue;
pub mod rewrite;
pub mod sample;
pub mod sched;
pub mod shaper;
pub mod stats;
pub mod xsk;
