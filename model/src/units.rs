//! How reports print durations: the units crate's formatter, re-exported where reports look.
pub use rocefab_units::fmt_ns;
