//! `rocefab-bench l2fwd`: the minimal AF_XDP L2 forwarder baseline.
//!
//! Receives on `--in` and transmits the same frames, untouched, on `--out`: no parsing, no MAC
//! rewrite. Both sockets share one UMEM, so a received descriptor goes straight onto the other
//! socket's TX ring and, once completed, back onto the RX fill ring (the `xdpsock -l` design of
//! the kernel's AF_XDP sample). A one-instruction-block XDP program ([`crate::xdp`]) redirects
//! everything arriving on `--in` to the socket. One thread, busy while traffic flows, blocking
//! in `poll` after a short idle spin.
use std::num::NonZeroU32;

use anyhow::{anyhow, Context};
use xsk_rs::config::{BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{FrameDesc, Socket, Umem};

use crate::sys;
use crate::xdp;

#[derive(Debug, clap::Args)]
pub struct L2fwdArgs {
    /// Network namespace to enter.
    #[arg(long)]
    pub netns: Option<String>,
    /// Receive port.
    #[arg(long = "in")]
    pub in_: String,
    /// Transmit port.
    #[arg(long)]
    pub out: String,
    #[arg(long, value_enum, default_value = "driver")]
    pub xdp_mode: xdp::Mode,
    /// Largest RX batch.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
}

#[derive(Debug, serde::Serialize)]
pub struct L2fwdReport {
    pub forwarded: u64,
    pub rx_dropped: u64,
    pub rx_fill_ring_empty: u64,
    pub rx_ring_full: u64,
}

const FRAMES: u32 = 8192;
const RING: u32 = 4096;
const IDLE_SPINS: u32 = 256;

pub fn run(a: &L2fwdArgs) -> anyhow::Result<()> {
    if let Some(ns) = &a.netns {
        sys::enter_netns(ns)?;
    }
    sys::install_stop_handler()?;
    let q = |n| QueueSize::new(n).expect("power of two");
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(2048).expect("power of two"))
        .fill_queue_size(q(RING))
        .comp_queue_size(q(RING))
        .build()
        .map_err(|e| anyhow!("UMEM config: {e}"))?;
    let (umem, descs) = Umem::new(umem_cfg, NonZeroU32::new(FRAMES).expect("non-zero"), false)
        .map_err(|e| anyhow!("creating the UMEM: {e}"))?;
    let cfg = |rx, tx| {
        SocketConfig::builder()
            .rx_queue_size(q(rx))
            .tx_queue_size(q(tx))
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP)
            .build()
    };
    let in_if: Interface = a.in_.parse().context("--in")?;
    let out_if: Interface = a.out.parse().context("--out")?;
    // SAFETY: first socket on this UMEM; (in, 0) is not bound.
    let (_in_tx, mut rx, rings) = sys::retry_busy(|| unsafe { Socket::new(cfg(RING, 64), &umem, &in_if, 0) })
        .map_err(|e| anyhow!("AF_XDP socket on {}: {e:?}", a.in_))?;
    let (mut fq, _in_cq) = rings.ok_or_else(|| anyhow!("{}: queue 0 already bound", a.in_))?;
    // SAFETY: (out, 0) is a different pair, so it gets its own fill/completion rings; prog load inhibited.
    let (mut tx, _out_rx, rings) = sys::retry_busy(|| unsafe { Socket::new(cfg(64, RING), &umem, &out_if, 0) })
        .map_err(|e| anyhow!("AF_XDP socket on {}: {e:?}", a.out))?;
    let (_out_fq, mut cq) = rings.ok_or_else(|| anyhow!("{}: queue 0 already bound", a.out))?;

    // Hand the kernel RING frames to receive into; the rest are spare.
    // SAFETY: fresh frames of this UMEM, in no ring.
    let filled = unsafe { fq.produce(&descs[..RING as usize]) };
    if filled != RING as usize {
        return Err(anyhow!("fill ring accepted {filled} of {RING} frames"));
    }
    let _prog = xdp::attach(&a.in_, xdp::Program::RedirectXsk(rx.fd()), a.xdp_mode)?;
    tracing::info!(r#in = %a.in_, out = %a.out, "l2fwd running");
    // The orchestrator waits for this line before starting the generator.
    println!("{{\"ready\":true}}");
    std::io::Write::flush(&mut std::io::stdout())?;

    let batch = a.batch.clamp(1, RING as usize);
    let mut rxd = vec![FrameDesc::default(); batch];
    let mut cd = vec![FrameDesc::default(); RING as usize];
    let mut forwarded: u64 = 0;
    let mut in_flight: u64 = 0;
    let mut idle: u32 = 0;
    while !sys::stop_requested() {
        // SAFETY: `rxd` receives descriptors of frames the kernel filled.
        let n = unsafe { rx.consume(&mut rxd) };
        if n > 0 {
            let mut put = 0;
            while put < n {
                // SAFETY: received frames of the shared UMEM, now owned by us.
                put += unsafe { tx.produce(&rxd[put..n]) };
                if put < n {
                    tx.wakeup().context("kicking TX")?;
                    recycle(&mut cq, &mut fq, &mut cd, &mut in_flight);
                }
            }
            in_flight += n as u64;
            forwarded += n as u64;
            tx.wakeup().context("kicking TX")?;
        }
        let c = recycle(&mut cq, &mut fq, &mut cd, &mut in_flight);
        if n == 0 && c == 0 {
            idle += 1;
            if in_flight > 0 {
                tx.wakeup().context("kicking TX")?;
            } else if idle > IDLE_SPINS {
                match rx.poll(100) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    r => {
                        r.context("poll")?;
                    }
                }
            }
        } else {
            idle = 0;
        }
    }
    let st = rx.fd().xdp_statistics().context("XDP_STATISTICS")?;
    let report = L2fwdReport {
        forwarded,
        rx_dropped: st.rx_dropped(),
        rx_fill_ring_empty: st.rx_fill_ring_empty_descs(),
        rx_ring_full: st.rx_ring_full(),
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// Moves completed TX frames back onto the RX fill ring; returns how many.
fn recycle(cq: &mut xsk_rs::CompQueue, fq: &mut xsk_rs::FillQueue, cd: &mut [FrameDesc], in_flight: &mut u64) -> usize {
    // SAFETY: `cd` receives descriptors of frames the kernel finished sending.
    let c = unsafe { cq.consume(cd) };
    let mut put = 0;
    while put < c {
        // SAFETY: completed frames of the shared UMEM; the fill ring has room for every frame
        // we own because at most RING frames circulate between the two rings.
        put += unsafe { fq.produce(&cd[put..c]) };
    }
    *in_flight -= c as u64;
    c
}
