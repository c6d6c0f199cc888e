//! The kernel plumbing every rocefab daemon shares, written once: the XDP object and its loaders
//! for switch and host ports ([`loader`], [`host_loader`], [`depths`]), network namespaces
//! ([`netns`]), link queries ([`link`]), the eventfd doorbell ([`eventfd`]), the daemons' `main`,
//! signals and async waits ([`daemon`]), a log file per switch in a shared process
//! ([`log_route`]), the HTTP server ([`http`]) and capture taps ([`capture`]).
//!
//! Arrows: daemons (`dataplane-user`, `host-daemons`) -> plumbing -> kernel. The CLI uses only
//! the feature-less part (no aya, no tokio, no eBPF toolchain): `default-features = false`.

pub mod eventfd;
pub mod link;
pub mod netns;
pub mod packet;

#[cfg(feature = "bpf")]
pub mod depths;
#[cfg(feature = "bpf")]
pub mod host_loader;
#[cfg(feature = "bpf")]
pub mod loader;

#[cfg(feature = "runtime")]
pub mod capture;
#[cfg(feature = "runtime")]
pub mod daemon;
#[cfg(feature = "runtime")]
pub mod http;
#[cfg(feature = "runtime")]
pub mod kernel_tap;
#[cfg(feature = "runtime")]
pub mod log_route;
