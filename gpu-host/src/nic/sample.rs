//! `GET /sample` of `rocefab-hostd`: a contract with the CLI's timeline, in
//! `rocefab-contracts` ([`rocefab_contracts::host_sample`]).
pub use rocefab_contracts::host_sample::*;
