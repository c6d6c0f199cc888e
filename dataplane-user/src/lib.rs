//! rocefab switch data plane, userspace side: loads the XDP program and fills its maps
//! ([`loader`]), and the switch daemon's pieces (AF_XDP ports, per-priority queues, shaper,
//! scheduler, L3 rewrite, Prometheus metrics).

pub mod loader;
