//! The subcommands, one file each with its arguments and what it prints (issue 40's `cmd/`
//! layer, over `fabric/`; the others still live beside the fabric code).
pub mod exec;
pub mod fabric;
pub mod plan;
pub mod qos_import;
pub mod send;
pub mod status;
pub mod uplinks;
