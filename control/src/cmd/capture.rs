//! `rocefab capture [<fabric>] <node>:<port>[,…] [-w file.pcapng | -w -] [--duration T]
//! [--count N] [--filter EXPR] [--snaplen N]`: records what switch ports and GPU NICs receive
//! and send, into pcapng.
//!
//! Each node's daemon mirrors its ports into a bounded ring and streams the records
//! (`GET /capture`, format in `rocefab_contracts::capture`): switch daemons from their AF_XDP data
//! path (tcpdump in a switch namespace sees nothing, because XDP hands frames to AF_XDP), host
//! NIC agents from the kernel path and from the NIC emulator's AF_XDP path. This command reads
//! one stream per node on its own thread and writes one pcapng: a Section Header Block, one
//! Interface Description Block per `node:port` (`if_name`, `if_tsresol` = 9: nanoseconds,
//! `if_description`), and one Enhanced Packet Block per frame with the direction in `epb_flags`
//! (inbound / outbound, pcapng §4.3.1) and the time the frame crossed the port. `-w -` writes to
//! stdout and flushes every batch, so `rocefab capture … -w - | tshark -i -` decodes live.
//!
//! Timestamps are the fabric's emulated time (docs/src/emulated-time.md): the daemons stamp
//! frames with the wall clock, and this command maps every stamp onto the fabric's one
//! [`EmulatedClock`] (`zero + (wall − zero) / D`, zero = when `rocefab up` began), so at
//! `time_dilation: 8000` a gap of 80 ms between two frames reads as the 10 µs it models, in
//! Wireshark as in every other report, and captures of different nodes share one time line. The
//! interface descriptions say which clock the file uses; `--wall-clock` keeps the daemons'
//! stamps (to line a capture up with tcpdump's in a host namespace). `--duration` bounds how
//! long the command runs and is wall-clock time.
//!
//! `--filter` takes a tcpdump (libpcap) filter expression, compiled with libpcap and run on each
//! frame here. Frames the daemons' mirror rings had no room for are counted by the daemons
//! (`rocefab_capture_lost_frames_total`); the summary prints how many were lost during this
//! capture.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use rocefab_contracts::capture::{Record, DIR_IN, DIR_OUT, HEARTBEAT_PORT};

use crate::fabric::capture::daemon_urls;
use crate::fabric::capture::lost_frames;
use crate::fabric::capture::open_stream;
use crate::fabric::capture::LOST_FRAMES;
use crate::fabric::pick_fabric;
use crate::fabric::rundir::{self, EmulatedClock, State};
use crate::units::fmt_ns;

/// Arguments of `rocefab capture`.
#[derive(clap::Args, Debug, Clone)]
pub struct CaptureArgs {
    /// `[<fabric>] <node>:<port>[,<node>:<port>…]`: the fabric may be left out when one is running.
    #[arg(value_name = "FABRIC_OR_PORTS", num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Output file (pcapng), or `-` for stdout.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: String,
    /// Stop after this long on the wall clock (e.g. 10s, 500ms, 2m): how long the command runs,
    /// whatever the fabric's time dilation.
    #[arg(long)]
    pub duration: Option<String>,
    /// Stop after this many frames (after the filter).
    #[arg(long)]
    pub count: Option<u64>,
    /// tcpdump filter expression (libpcap syntax), applied to every frame.
    #[arg(long)]
    pub filter: Option<String>,
    /// Bytes captured per frame at most (default: whole frames).
    #[arg(long)]
    pub snaplen: Option<u32>,
    /// Write the daemons' wall-clock timestamps instead of the fabric's emulated time (they
    /// differ when the topology sets `time_dilation` above 1).
    #[arg(long)]
    pub wall_clock: bool,
}

/// The clock a capture's timestamps are written in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stamps {
    /// The fabric's emulated time (the default).
    Emulated(EmulatedClock),
    /// The daemons' wall clock (`--wall-clock`).
    Wall(EmulatedClock),
}

impl Stamps {
    /// The timestamp (Unix ns) written for a frame the daemon stamped at `wall_ns`.
    pub fn convert(&self, wall_ns: u64) -> u64 {
        match self {
            Stamps::Emulated(c) => c.emulated_unix_ns(wall_ns),
            Stamps::Wall(_) => wall_ns,
        }
    }

    /// What the timestamps are, for the interface descriptions.
    pub fn describe(&self) -> String {
        match self {
            Stamps::Emulated(c) => c.describe(),
            Stamps::Wall(c) if c.dilation().is_real_time() => "wall clock (= emulated time, time_dilation 1)".into(),
            Stamps::Wall(c) => format!("wall clock, not emulated time (--wall-clock; time_dilation {})", c.dilation()),
        }
    }

    /// `1.2 s wall clock` and, when they differ, the emulated span.
    pub fn span(&self, wall: Duration) -> String {
        let c = match self {
            Stamps::Emulated(c) | Stamps::Wall(c) => c,
        };
        let d = c.dilation();
        if d.is_real_time() {
            format!("{:.1} s", wall.as_secs_f64())
        } else {
            let emu = d.to_emulated_secs(wall.as_secs_f64());
            format!("{:.1} s wall clock = {} emulated at time_dilation {d}", wall.as_secs_f64(), fmt_ns(emu * 1e9))
        }
    }
}

/// One `node:port` to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub node: String,
    pub port: String,
}

/// Parses `node:port[,node:port…]`.
pub fn parse_targets(s: &str) -> anyhow::Result<Vec<Target>> {
    let mut v = Vec::new();
    for t in s.split(',').filter(|t| !t.is_empty()) {
        let (node, port) = t
            .split_once(':')
            .ok_or_else(|| anyhow!("{t:?}: expected <node>:<port> (e.g. rail1:eth1 or host1:gpu0)"))?;
        if node.is_empty() || port.is_empty() {
            bail!("{t:?}: expected <node>:<port> (e.g. rail1:eth1 or host1:gpu0)");
        }
        let t = Target { node: node.to_string(), port: port.to_string() };
        if !v.contains(&t) {
            v.push(t);
        }
    }
    if v.is_empty() {
        bail!("no port to capture: give <node>:<port>[,<node>:<port>…]");
    }
    Ok(v)
}

/// One frame on its way to the writer: (interface index, timestamp ns, direction, original length, bytes).
type Frame = (u32, u64, u8, u32, Vec<u8>);

/// Reads one node's stream until `stop`, sending frames of the wanted ports.
fn pump(
    mut body: Box<dyn BufRead + Send>,
    port_to_if: BTreeMap<u16, u32>,
    tx: mpsc::SyncSender<Frame>,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut tmp = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        let n = match body.read(&mut tmp) {
            Ok(0) => bail!("the daemon closed the capture stream"),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e).context("reading the capture stream"),
        };
        buf.extend_from_slice(&tmp[..n]);
        let mut off = 0;
        while let Some((r, len)) = Record::decode(&buf[off..]) {
            off += len;
            if r.port == HEARTBEAT_PORT {
                continue;
            }
            if let Some(&ifx) = port_to_if.get(&r.port) {
                if tx.send((ifx, r.ts_ns, r.dir, r.orig_len, r.data.to_vec())).is_err() {
                    return Ok(());
                }
            }
        }
        buf.drain(..off);
    }
    Ok(())
}

/// The summary's account of lost frames: how many the daemons' rings lost during the capture,
/// or, for each node whose counter could not be read before or after, that it is unknown.
fn lost_summary(
    before: &BTreeMap<&String, Result<f64, String>>,
    after: &BTreeMap<&String, Result<f64, String>>,
) -> String {
    let mut lost = 0.0;
    let mut unknown = Vec::new();
    for (n, b) in before {
        match (b, &after[n]) {
            (Ok(b), Ok(a)) => lost += (a - b).max(0.0),
            (Err(e), _) | (_, Err(e)) => unknown.push(format!("{n}: {e}")),
        }
    }
    let mut s = format!(", {lost} lost by the daemons' mirror rings ({LOST_FRAMES})");
    if !unknown.is_empty() {
        s += &format!("; lost frames unknown on {}", unknown.join("; "));
    }
    s
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

pub fn run(a: &CaptureArgs) -> anyhow::Result<()> {
    let (fabric, spec) = match a.args.as_slice() {
        [f, s] => (f.clone(), s.clone()),
        [s] => (pick_fabric(None)?, s.clone()),
        _ => bail!("usage: rocefab capture [<fabric>] <node>:<port>[,…] -w <file>"),
    };
    let targets = parse_targets(&spec)?;
    let st = State::load(&fabric)
        .with_context(|| format!("fabric {fabric:?} is not up (no {})", rundir::state_path(&fabric).display()))?;
    let clock = st.clock()?;
    let stamps = if a.wall_clock { Stamps::Wall(clock) } else { Stamps::Emulated(clock) };
    let urls = daemon_urls(&st);
    let duration = a
        .duration
        .as_deref()
        .map(|d| crate::text::parse_wall_duration(d).map_err(|e| anyhow!("--duration {e}")))
        .transpose()?;
    let filter = match &a.filter {
        Some(expr) => {
            let dead = pcap::Capture::dead(pcap::Linktype::ETHERNET).context("libpcap")?;
            Some(dead.compile(expr, true).map_err(|e| anyhow!("--filter {expr:?}: {e}"))?)
        }
        None => None,
    };
    // Group the targets by node; interface numbers follow the order given.
    let mut by_node: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (i, t) in targets.iter().enumerate() {
        if !urls.contains_key(&t.node) {
            let names: Vec<&str> = urls.keys().map(String::as_str).collect();
            bail!(
                "fabric {fabric} has no daemon on node {:?} to capture from (nodes with one: {})",
                t.node,
                names.join(", ")
            );
        }
        by_node.entry(t.node.clone()).or_default().push((i, t.port.clone()));
    }
    let lost_before: BTreeMap<&String, Result<f64, String>> =
        by_node.keys().map(|n| (n, lost_frames(&urls[n]))).collect();

    // Open every stream before writing anything, so a bad port fails cleanly.
    let mut streams = Vec::new();
    for (node, ports) in &by_node {
        let names: Vec<&str> = ports.iter().map(|(_, p)| p.as_str()).collect();
        let (hdr, body) =
            open_stream(&urls[node], &names, a.snaplen).with_context(|| format!("starting the capture on {node}"))?;
        if hdr.clock != rocefab_contracts::capture::WALL_CLOCK {
            bail!(
                "{node} stamps its capture with {:?}, not the {:?} this rocefab converts to emulated time",
                hdr.clock,
                rocefab_contracts::capture::WALL_CLOCK
            );
        }
        let mut map = BTreeMap::new();
        for (ifx, p) in ports {
            let idx = hdr.ports.iter().position(|x| x == p).ok_or_else(|| anyhow!("{node} has no port {p}"))?;
            map.insert(idx as u16, *ifx as u32);
        }
        streams.push((node.clone(), hdr, body, map));
    }

    let out: Box<dyn Write> = if a.write == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&a.write).with_context(|| format!("creating {}", a.write))?,
        ))
    };
    let mut w = PcapNgWriter::new(out).map_err(|e| write_error(&a.write, e))?;
    for t in &targets {
        let hdr = &streams.iter().find(|s| s.0 == t.node).expect("opened above").1;
        let mut idb = InterfaceDescriptionBlock::new(DataLink::ETHERNET, hdr.snaplen);
        idb.options.push(InterfaceDescriptionOption::IfName(Cow::Owned(format!("{}:{}", t.node, t.port))));
        idb.options.push(InterfaceDescriptionOption::IfDescription(Cow::Owned(format!(
            "rocefab fabric {fabric}, {} port {}; timestamps (ns): {}",
            t.node,
            t.port,
            stamps.describe()
        ))));
        idb.options.push(InterfaceDescriptionOption::IfTsResol(9));
        w.write_pcapng_block(idb).map_err(|e| write_error(&a.write, e))?;
    }
    // The headers are on disk (or the pipe) once every daemon mirrors: a reader may start now.
    w.get_mut().flush().with_context(|| format!("writing {}", a.write))?;

    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<Frame>(65_536);
    let started = Instant::now();
    let mut elapsed = Duration::ZERO;
    let mut written = vec![0u64; targets.len()];
    let mut filtered = 0u64;
    let mut result = Ok(());
    // Live streams (`-w -`) are flushed after every frame; files when the capture ends.
    let streaming = a.write == "-";
    std::thread::scope(|sc| {
        let mut pumps = Vec::new();
        for (node, _, body, map) in streams {
            let tx = tx.clone();
            let stop = &stop;
            pumps.push((node, sc.spawn(move || pump(body, map, tx, stop))));
        }
        drop(tx);
        loop {
            if INTERRUPTED.load(Ordering::Relaxed)
                || duration.is_some_and(|d| started.elapsed() >= d)
                || a.count.is_some_and(|c| written.iter().sum::<u64>() >= c)
            {
                break;
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((ifx, ts, dir, orig_len, data)) => {
                    if filter.as_ref().is_some_and(|f| !f.filter(&data)) {
                        filtered += 1;
                        continue;
                    }
                    let flags = match dir {
                        DIR_IN => 1,
                        DIR_OUT => 2,
                        _ => 0,
                    };
                    let epb = EnhancedPacketBlock {
                        interface_id: ifx,
                        timestamp: Duration::from_nanos(stamps.convert(ts)),
                        original_len: orig_len,
                        data: Cow::Owned(data),
                        options: vec![EnhancedPacketOption::Flags(flags)],
                    };
                    if let Err(e) = w.write_pcapng_block(epb) {
                        // A closed pipe (`| tshark -c 50` that has its frames) ends the capture
                        // quietly; any other write error is reported.
                        let e = write_error(&a.write, e);
                        if !crate::pipe::is_broken_pipe(&e) {
                            result = Err(e);
                        }
                        break;
                    }
                    written[ifx as usize] += 1;
                    if streaming {
                        if let Err(e) = w.get_mut().flush() {
                            // A closed pipe (`| head`, tshark quit) ends the capture quietly.
                            if e.kind() != std::io::ErrorKind::BrokenPipe {
                                result = Err(anyhow!("{}: {e}", a.write));
                            }
                            break;
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        // The capture ends here; joining the readers below may wait for a stream's next read.
        elapsed = started.elapsed();
        stop.store(true, Ordering::Relaxed);
        drop(rx);
        for (node, h) in pumps {
            // A pump returns Ok once it sees `stop`; an error means its stream broke first
            // (the daemon stopped), which the capture reports after writing what it has.
            let err = match h.join() {
                Ok(r) => r.err(),
                Err(_) => Some(anyhow!("reader thread panicked")),
            };
            if let (Some(e), true) = (err, result.is_ok()) {
                result = Err(e.context(format!("capture on {node}")));
            }
        }
    });
    let flushed = w.get_mut().flush();
    if let Err(e) = flushed {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            result = result.and(Err(anyhow!("{}: {e}", a.write)));
        }
    }
    let lost_after: BTreeMap<&String, Result<f64, String>> =
        lost_before.keys().map(|n| (*n, lost_frames(&urls[*n]))).collect();
    let per: Vec<String> = targets.iter().zip(&written).map(|(t, n)| format!("{}:{} {n}", t.node, t.port)).collect();
    eprintln!(
        "captured {} frame(s) in {} ({}){}{}",
        written.iter().sum::<u64>(),
        stamps.span(elapsed),
        per.join(", "),
        if a.filter.is_some() { format!(", {filtered} not matching the filter") } else { String::new() },
        lost_summary(&lost_before, &lost_after)
    );
    result
}

/// A failed pcapng write, as "writing <path>" with the I/O error kept as its source (pcap-file
/// calls every I/O error "Error reading bytes", also a write's).
fn write_error(path: &str, e: pcap_file::PcapError) -> anyhow::Error {
    match e {
        pcap_file::PcapError::IoError(io) => anyhow::Error::new(io).context(format!("writing {path}")),
        other => anyhow!("writing {path}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_frames_that_cannot_be_read_are_unknown_not_zero() {
        let (a, b) = (String::from("rail1"), String::from("host1"));
        let before = BTreeMap::from([(&a, Ok(3.0)), (&b, Ok(0.0))]);
        let after = BTreeMap::from([(&a, Ok(5.0)), (&b, Ok(0.0))]);
        assert_eq!(
            lost_summary(&before, &after),
            ", 2 lost by the daemons' mirror rings (rocefab_capture_lost_frames_total)"
        );
        let failed = BTreeMap::from([(&a, Ok(5.0)), (&b, Err("connection refused".to_string()))]);
        assert_eq!(
            lost_summary(&before, &failed),
            ", 2 lost by the daemons' mirror rings (rocefab_capture_lost_frames_total); \
             lost frames unknown on host1: connection refused"
        );
    }

    #[test]
    fn a_failed_write_says_writing_and_keeps_the_io_error() {
        let e = write_error("-", pcap_file::PcapError::IoError(std::io::ErrorKind::BrokenPipe.into()));
        assert!(crate::pipe::is_broken_pipe(&e));
        let msg = format!("{e:#}");
        assert!(msg.starts_with("writing -: ") && !msg.contains("reading"), "{msg}");
    }

    #[test]
    fn targets_and_durations_parse_with_clear_errors() {
        let t = parse_targets("rail1:eth1,host1:gpu0,rail1:eth1").unwrap();
        assert_eq!(
            t,
            vec![
                Target { node: "rail1".into(), port: "eth1".into() },
                Target { node: "host1".into(), port: "gpu0".into() }
            ]
        );
        assert!(parse_targets("rail1").unwrap_err().to_string().contains("<node>:<port>"));
        assert!(parse_targets(",").is_err());
    }

    #[test]
    fn timestamps_are_emulated_unless_wall_clock_is_asked_for() {
        let zero = 1_700_000_000_000_000_000;
        let c = EmulatedClock { time_dilation: 8000.0, zero_unix_ns: zero };
        let (emu, wall) = (Stamps::Emulated(c), Stamps::Wall(c));
        // 80 ms between two frames on the wall clock are the 10 us they model.
        let (t1, t2) = (zero + 4_000_000_000, zero + 4_080_000_000);
        assert_eq!(emu.convert(t2) - emu.convert(t1), 10_000);
        assert_eq!(emu.convert(t1), zero + 500_000);
        assert_eq!((wall.convert(t1), wall.convert(t2)), (t1, t2));
        assert_eq!(
            emu.describe(),
            "emulated time at time_dilation 8000: 2023-11-14T22:13:20Z + wall time since then / 8000"
        );
        assert_eq!(wall.describe(), "wall clock, not emulated time (--wall-clock; time_dilation 8000)");
        assert_eq!(emu.span(Duration::from_secs(2)), "2.0 s wall clock = 250.000 us emulated at time_dilation 8000");
        let real = EmulatedClock { time_dilation: 1.0, zero_unix_ns: zero };
        assert_eq!(Stamps::Emulated(real).convert(t2), t2);
        assert_eq!(Stamps::Emulated(real).span(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(Stamps::Wall(real).describe(), "wall clock (= emulated time, time_dilation 1)");
    }
}
