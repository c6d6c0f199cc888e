//! placeholder, owned by its helper
