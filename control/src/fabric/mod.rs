//! A running fabric, the layer every command stands on: its run directory and state
//! ([`rundir`]), the handle that finds and loads it once ([`Fabric`], [`pick_fabric`]), its
//! namespaces ([`netns`]), its daemons ([`daemons`]: located, spawned, waited for, described
//! when they end; [`process`]) and their HTTP endpoints ([`daemon_http`]), bringing it up and
//! down ([`lifecycle`]), links and switches failing and coming back ([`links`]) and the event
//! log ([`events`]), routing ([`routing`], FRR in [`frr`]), the daemons' capture streams
//! ([`capture`]), the cabling check against LLDP ([`cabling`]) and the frontend network
//! ([`frontend`]).
//!
//! Nothing here parses a command line or prints a report: the subcommands are in
//! `crate::cmd`, jobs on the fabric in `crate::job`.
pub mod cabling;
pub mod capture;
pub mod daemon_http;
pub mod daemons;
pub mod events;
pub mod frontend;
pub mod frr;
mod handle;
pub mod lifecycle;
pub mod links;
pub mod netns;
pub mod process;
pub mod routing;
pub mod rundir;
pub use handle::{load_state, pick_fabric, Fabric};
