//! rocefab switch data plane, userspace side: the switch daemon's pieces (AF_XDP ports,
//! per-priority queues, shaper, scheduler, L3 rewrite, Prometheus metrics). The XDP object, its
//! loader, netns, signals, HTTP and capture taps are kernel plumbing shared with the host daemons
//! (`rocefab-plumbing`).
//!
//! Pure, unprivileged, unit-tested logic: [`decision`], [`queue`], [`sched`], [`shaper`],
//! [`rewrite`], [`delay`], [`ecn`], [`stall`], [`stats`], [`metrics`], [`sample`]. Kernel-facing: [`xsk`] (AF_XDP
//! sockets), [`dataplane`] (the per-switch packet thread), [`switchd`] (the daemon: start-up, control side,
//! shutdown; the `rocefab-switchd` binary only parses its arguments and calls it).
//! Its ports' LLDP/DCBX agents are `lldp_agent::NodeAgent`, shared with the NIC agent.

pub mod buffer;
pub mod carrier;
pub mod ctrl;
pub mod dataplane;
pub mod decision;
pub mod delay;
pub mod ecn;
pub mod fib;
pub mod frames;
pub mod metrics;
pub mod pfc;
pub mod pfcwd;
pub mod queue;
pub mod rewrite;
pub mod sample;
pub mod sched;
pub mod shaper;
pub mod stall;
pub mod stats;
pub mod switchd;
pub mod xsk;
