//! `rocefab-bench gen`: an AF_XDP transmit-only UDP generator.
//!
//! Every UMEM frame (2048 bytes, or 4096 for frames longer than 2048) is written once, at
//! start-up, with one of the prebuilt flow frames ([`crate::frame`]); the send loop only moves
//! descriptors: completion ring → free list → TX ring, then kicks the kernel with `sendto`
//! (veth AF_XDP is copy mode, where TX runs inside that syscall). Completed descriptors come
//! back with length 0, so the length is restored before reuse. libxdp is told not to load an
//! XDP program: the generator never receives.
use std::io::Write;
use std::net::Ipv4Addr;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use xsk_rs::config::{BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{FrameDesc, Socket, Umem};

use crate::frame::{build_frames, parse_mac, FrameSpec};
use crate::sys;

#[derive(Debug, clap::Args)]
pub struct GenArgs {
    /// Network namespace to enter (by `ip netns` name); none = stay.
    #[arg(long)]
    pub netns: Option<String>,
    /// Interface to transmit on.
    #[arg(long)]
    pub iface: String,
    #[arg(long, value_parser = parse_mac)]
    pub src_mac: [u8; 6],
    #[arg(long, value_parser = parse_mac)]
    pub dst_mac: [u8; 6],
    #[arg(long)]
    pub src_ip: Ipv4Addr,
    #[arg(long)]
    pub dst_ip: Ipv4Addr,
    /// Frame size on the wire, FCS included (64 → 60-byte frames).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// How long to send.
    #[arg(long, default_value = "5s", value_parser = sys::parse_duration)]
    pub duration: Duration,
    /// Stop after this many packets even if the duration has not elapsed.
    #[arg(long, default_value_t = 100_000_000)]
    pub max_packets: u64,
    /// Number of UDP flows (source ports 10000..10000+N).
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// DSCP of the IPv4 header (0 = best effort, 24 = RoCEv2 class).
    #[arg(long, default_value_t = 0)]
    pub dscp: u8,
    /// Descriptors per TX batch (one kick each).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
}

/// What `gen` prints (one JSON line on stdout).
#[derive(Debug, serde::Serialize)]
pub struct GenReport {
    /// Frames the kernel completed (handed to the veth).
    pub sent: u64,
    /// Seconds from the first send to the last completion.
    pub elapsed_s: f64,
    pub pps: f64,
    pub frame_len: usize,
    pub tx_invalid_descs: u64,
}

const FRAMES: u32 = 4096;
const RING: u32 = 4096;

pub fn run(a: &GenArgs) -> anyhow::Result<()> {
    if let Some(ns) = &a.netns {
        sys::enter_netns(ns)?;
    }
    sys::install_stop_handler()?;
    let frames = build_frames(&FrameSpec {
        src_mac: a.src_mac,
        dst_mac: a.dst_mac,
        src_ip: a.src_ip,
        dst_ip: a.dst_ip,
        size: a.size,
        flows: a.flows,
        dscp: a.dscp,
    })
    .map_err(|e| anyhow!("{e}"))?;
    let frame_len = frames[0].len();
    let batch = a.batch.clamp(1, RING as usize);

    // The smallest chunk that holds the frame: 2048 up to 2048 bytes, else a 4096-byte page.
    let chunk = if frame_len <= 2048 { 2048 } else { 4096 };
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(chunk).expect("power of two"))
        .fill_queue_size(QueueSize::new(64).expect("power of two"))
        .comp_queue_size(QueueSize::new(RING).expect("power of two"))
        .build()
        .map_err(|e| anyhow!("UMEM config: {e}"))?;
    let (umem, mut descs) = Umem::new(umem_cfg, NonZeroU32::new(FRAMES).expect("non-zero"), false)
        .map_err(|e| anyhow!("creating the UMEM: {e}"))?;
    let sock_cfg = SocketConfig::builder()
        .rx_queue_size(QueueSize::new(64).expect("power of two"))
        .tx_queue_size(QueueSize::new(RING).expect("power of two"))
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP)
        .build();
    let iface: Interface = a.iface.parse().context("interface name")?;
    // SAFETY: the UMEM is not shared with another socket on this (iface, queue) pair.
    let (mut tx, _rx, rings) = sys::retry_busy(|| unsafe { Socket::new(sock_cfg, &umem, &iface, 0) })
        .map_err(|e| anyhow!("creating the AF_XDP socket on {}: {e:?}", a.iface))?;
    let (_fq, mut cq) = rings.ok_or_else(|| anyhow!("{}: queue 0 already bound", a.iface))?;

    for (i, d) in descs.iter_mut().enumerate() {
        // SAFETY: the frame belongs to `umem` and is not in any ring yet.
        unsafe { umem.data_mut(d).cursor().write_all(&frames[i % frames.len()]) }.context("writing a frame")?;
    }
    let mut free: Vec<FrameDesc> = descs;
    let mut done = vec![FrameDesc::default(); RING as usize];

    tracing::info!(iface = %a.iface, frame_len, flows = a.flows, duration = ?a.duration, "generator start");
    let start = Instant::now();
    let deadline = start + a.duration;
    let mut produced: u64 = 0;
    let mut completed: u64 = 0;
    let mut reclaim = |free: &mut Vec<FrameDesc>, completed: &mut u64| {
        // SAFETY: `done` holds plain descriptors the completion ring fills.
        let n = unsafe { cq.consume(&mut done) };
        for d in &mut done[..n] {
            // SAFETY: the kernel is done with this frame; restore the length it zeroed.
            unsafe { umem.data_mut(d).cursor().set_pos(frame_len) };
            free.push(*d);
        }
        *completed += n as u64;
    };
    loop {
        reclaim(&mut free, &mut completed);
        if produced >= a.max_packets || sys::stop_requested() || Instant::now() >= deadline {
            break;
        }
        let want = batch.min(free.len()).min((a.max_packets - produced) as usize);
        if want > 0 {
            let from = free.len() - want;
            // SAFETY: the descriptors are free frames of this UMEM, owned by no ring.
            let k = unsafe { tx.produce(&free[from..]) };
            free.drain(from..from + k);
            produced += k as u64;
        }
        tx.wakeup().context("kicking AF_XDP TX")?;
    }
    let drain_deadline = Instant::now() + Duration::from_secs(1);
    while completed < produced && Instant::now() < drain_deadline {
        tx.wakeup().context("kicking AF_XDP TX")?;
        reclaim(&mut free, &mut completed);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let stats = tx.fd().xdp_statistics().context("XDP_STATISTICS")?;
    let report = GenReport {
        sent: completed,
        elapsed_s: elapsed,
        pps: completed as f64 / elapsed,
        frame_len,
        tx_invalid_descs: stats.tx_invalid_descs(),
    };
    tracing::info!(sent = completed, pps = report.pps, "generator done");
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
