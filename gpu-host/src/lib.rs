//! GPU-host emulator.
