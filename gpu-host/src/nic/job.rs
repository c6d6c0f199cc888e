//! The job file a controller gives each `rocefab-hostd` and the report it writes back: a
//! contract between the CLI and the daemon, in `rocefab-contracts` ([`rocefab_contracts::job`]).
pub use rocefab_contracts::job::*;
