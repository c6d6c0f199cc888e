//! rocefab control plane library.
