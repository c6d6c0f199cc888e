//! rocefab's switch daemon, userspace side: it drives the switch model (`switch-model`: buffer,
//! queues, scheduler, shaper, PFC, watchdog, delay lines, ECN, FIB; kernel-free) over AF_XDP.
//! The XDP object, its loader, netns, signals, HTTP and capture taps are kernel plumbing shared
//! with the host daemons (`rocefab-plumbing`).
//!
//! Here: [`xsk`] (AF_XDP sockets) and [`frames`] (their frame pools), [`dataplane`] (one
//! switch's packet path, a pass at a time), [`worker`] (a thread driving the data planes of
//! many switches), [`ctrl`] (its channels to the control side), [`metrics`] and
//! [`sample`] (what the model counted, as Prometheus metrics and `GET /sample`), [`switchd`]
//! (the daemon: start-up, control side, shutdown; the `rocefab-switchd` binary only parses its
//! arguments and calls it).
//! Its ports' LLDP/DCBX agents are `lldp_agent::NodeAgent`, shared with the NIC agent.

pub mod ctrl;
pub mod dataplane;
pub mod frames;
pub mod metrics;
pub mod sample;
pub mod switchd;
pub mod worker;
pub mod xsk;
