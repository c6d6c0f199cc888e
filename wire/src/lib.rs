//! Wire formats.
