//! Helpers for the privileged integration tests.

pub mod fabric;
pub mod xdp;
