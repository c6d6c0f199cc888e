//! The subcommands, one file each with its arguments and what it prints (issue 40's `cmd/`
//! layer; the others still live beside the fabric code).
pub mod qos_import;
