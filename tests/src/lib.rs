//! Helpers for the privileged integration tests.

pub mod xdp;
