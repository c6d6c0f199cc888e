//! rocefab switch data plane (userspace side).
