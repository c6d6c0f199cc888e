//! The fabric model, as a topology file describes it and `rocefab up` compiles it: pure code
//! (no processes, no root, no kernel plumbing) that the CLI (`control`), the web view and the
//! fuzz targets share.
//!
//! - [`topology`]: the schema of a topology file and its loader (every error names file, line
//!   and field);
//! - [`qos`], [`lb`], [`lldp`]: the topology's QoS, load-balancing and LLDP sections, resolved
//!   per switch;
//! - [`plan`]: the plan compiler (names, addresses, links, routes, the switches' and hosts'
//!   configurations);
//! - [`memory`]: what a fabric pins in memory, switch by switch;
//! - [`qos_import`]: an NX-OS configuration's QoS as a `qos:` section;
//! - [`schema`]: the topology file's JSON Schema, generated from the types;
//! - [`units`]: how reports print durations.

pub mod lb;
pub mod lldp;
pub mod memory;
pub mod plan;
pub mod qos;
pub mod qos_import;
pub mod schema;
pub mod topology;
pub mod units;
