//! rocefab's switch model: what a switch does to the frames it is handed, kernel-free and
//! unit-tested: the shared buffer with its per-ingress PFC accounting and headroom
//! ([`buffer`]), per-priority egress queues ([`queue`]), the scheduler (strict priority and
//! DWRR, [`sched`]), the egress shaper ([`shaper`]) and delay lines ([`delay`]), PFC pause
//! timers ([`pfc`]) and the PFC watchdog ([`pfcwd`]), ECN marking at dequeue ([`ecn`]), the
//! XDP program's verdicts ([`decision`]), the FIB and ECMP groups ([`fib`]) and what carrier
//! does to them ([`carrier`]), the L3 rewrite ([`rewrite`]), packet trimming ([`trim`]), the published queue depths
//! ([`depths`]), the statistics the metrics read ([`stats`]) and stalled-port detection
//! ([`stall`]).
//!
//! The switch daemon (`dataplane-user`) drives it over AF_XDP: it reads the ports, hands frames
//! in, takes the frames the scheduler releases and sends them, as `gpu-host` is driven by
//! `host-daemons`.

pub mod buffer;
pub mod carrier;
pub mod decision;
pub mod delay;
pub mod depths;
pub mod ecn;
pub mod fib;
pub mod pfc;
pub mod pfcwd;
pub mod queue;
pub mod rewrite;
pub mod sched;
pub mod shaper;
pub mod stall;
pub mod stats;
pub mod trim;
