//! The AF_XDP half of a GPU NIC capture (`rocefab capture <fabric> host1:gpu0`): a bounded
//! single-producer single-consumer byte ring in shared memory, from `rocefab-hostd`'s data thread
//! (producer) to `rocefab-nicd` (consumer), which merges it with what the kernel's packet taps
//! see into the capture stream (`rocefab_plumbing::capture`).
//!
//! # Why a second source
//!
//! The host XDP program (`dataplane-ebpf/src/host.rs`) redirects RoCEv2 (UDP 4791) and MAC
//! control (PAUSE / PFC) frames to the NIC emulator's AF_XDP sockets, and the emulator sends
//! RoCEv2 from AF_XDP in copy mode. Neither kind of frame is an `sk_buff` on the kernel's
//! receive or transmit path, so `AF_PACKET` (tcpdump) never sees them: the data thread copies
//! them here. Everything else is seen by nicd's `AF_PACKET` socket.
//!
//! # Why the two sources never see the same frame
//!
//! - Received: XDP runs before any packet tap. A frame the program answers with `XDP_REDIRECT`
//!   (into an AF_XDP socket) is consumed there and never becomes an `sk_buff` for the stack (in
//!   native veth XDP no `sk_buff` is built; in generic XDP, `do_xdp_generic` runs in
//!   `__netif_receive_skb_core` before the `ptype_all` taps and consumes the `sk_buff`). Only
//!   `XDP_PASS` frames reach the taps. A redirected frame is mirrored by hostd when it takes it
//!   from the RX ring; a passed frame by nicd's `AF_PACKET` socket. One frame takes one verdict.
//! - Sent: frames hostd sends from AF_XDP in copy mode go through `xsk_generic_xmit` →
//!   `__dev_direct_xmit` → the driver, which skips `dev_queue_xmit_nit` (the taps); hostd
//!   mirrors them when it produces them to the TX ring. Frames the kernel sends (ARP, ICMP,
//!   LLDP from nicd's socket, ...) go through `dev_queue_xmit` and its taps and never through
//!   an AF_XDP ring.
//!
//! Frames dropped by XDP (a redirect with no socket bound) are seen by neither, as on a real
//! NIC whose pipeline drops them.
//!
//! # The ring
//!
//! A file `/dev/shm/rocefab-<netns>-nicmirror` ([`shm_path`]), created by nicd at start
//! ([`MirrorConsumer::create`], mode 0600, published by `rename(2)` once initialised) and
//! removed when nicd exits; hostd maps it when a job starts ([`MirrorProducer::open`], under an
//! exclusive `flock(2)` so a second producer cannot corrupt it) and goes on without it when it
//! does not exist. Layout: one [`Header`] page, then `capacity` data bytes.
//!
//! - `enabled_mask` (written by nicd): bit p = NIC p (its index in nicd's configuration, whose
//!   names the header lists) is being captured. The data thread reads it once per batch and
//!   copies nothing when its NIC's bit is clear.
//! - `head` / `tail`: byte positions (monotonic, modulo `capacity` into the data area) of the
//!   producer and the consumer. The producer writes a whole record and then publishes `head`
//!   (Release); the consumer reads `head` (Acquire), copies the records out, then publishes
//!   `tail` (Release), which the producer reads (Acquire) before reusing that space. Each side
//!   writes only its own position and the bytes the protocol gives it.
//! - Records: the format of `rocefab_plumbing::capture` ([`Record::header`], 24 bytes, then the
//!   frame), written in two parts when they wrap around the end of the data area.
//! - A record that does not fit is counted in `lost` and dropped: the producer never waits.
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use rocefab_plumbing::capture::{Record, DIR_IN, DIR_OUT, RECORD_HEADER};

/// "RFNICMIR".
pub const MAGIC: u64 = u64::from_le_bytes(*b"RFNICMIR");
/// Layout version.
pub const VERSION: u32 = 1;
/// Bytes of the header page.
pub const HEADER_BYTES: usize = 4096;
/// Data bytes of nicd's ring.
pub const DATA_BYTES: usize = 8 << 20;
/// NICs a ring can name (bits of `enabled_mask`).
pub const MAX_NICS: usize = 64;
/// Bytes per NIC name (IFNAMSIZ, NUL-padded).
pub const NAME_BYTES: usize = 16;
/// Smallest data area accepted.
pub const MIN_CAPACITY: usize = 256;

/// Where the mirror of the host whose namespace is `netns` lives.
pub fn shm_path(netns: &str) -> PathBuf {
    PathBuf::from(format!("/dev/shm/rocefab-{netns}-nicmirror"))
}

/// Errors creating or opening a mirror ring.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// No ring at this path (no `rocefab-nicd` for this host).
    #[error("{path}: no NIC mirror (is rocefab-nicd running for this host?)")]
    Absent { path: String },
    /// Another producer holds the ring.
    #[error("{path}: another rocefab-hostd is mirroring into this ring")]
    Busy { path: String },
    #[error("{path}: {what}: {source}")]
    Io {
        path: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a NIC mirror ring: {why}")]
    Invalid { path: String, why: String },
}

/// The header page, shared by both processes.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`].
    magic: u64,
    /// [`VERSION`].
    version: u32,
    /// Names in `names`.
    nic_count: u32,
    /// Bytes of the data area that follows the header page.
    capacity: u64,
    /// NICs being captured (bit = index in `names`), written by the consumer.
    enabled_mask: AtomicU64,
    /// Frames the producer dropped because the ring was full.
    lost: AtomicU64,
    /// Frames the producer wrote.
    mirrored: AtomicU64,
    _pad0: [u8; 16],
    /// Producer position (bytes written, ever); its own cache line.
    head: AtomicU64,
    _pad1: [u8; 56],
    /// Consumer position (bytes read, ever); its own cache line.
    tail: AtomicU64,
    _pad2: [u8; 56],
    /// NIC names by capture port number, NUL-padded.
    names: [[u8; NAME_BYTES]; MAX_NICS],
    _reserved: [u8; HEADER_BYTES - 192 - NAME_BYTES * MAX_NICS],
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(Header, enabled_mask) == 24);
const _: () = assert!(std::mem::offset_of!(Header, head) == 64);
const _: () = assert!(std::mem::offset_of!(Header, tail) == 128);
const _: () = assert!(std::mem::offset_of!(Header, names) == 192);
const _: () = assert!(std::mem::align_of::<Header>() <= 4096);

/// A shared, read-write mapping of a whole ring file.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access to it goes through atomics (the
// header's counters and positions), through fields written once before the file is published,
// or through the data area under the SPSC protocol of the module docs.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only gives out `&Header` (atomics, immutable fields) and raw
// pointers whose use is governed by the SPSC protocol.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: usize, path: &Path) -> Result<Mapping, MirrorError> {
        // SAFETY: a new shared mapping of `len` bytes of an open file we may read and write;
        // the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(MirrorError::Io {
                path: path.display().to_string(),
                what: "mmap",
                source: io::Error::last_os_error(),
            });
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| MirrorError::Invalid {
            path: path.display().to_string(),
            why: "mmap returned null".into(),
        })?;
        Ok(Mapping { ptr, len })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is page aligned and at least HEADER_BYTES long (checked by both
        // constructors), `Header` is plain integers and atomics (every bit pattern is valid),
        // and the mapping lives as long as `self`. Its non-atomic fields are only written
        // before the file is published (no reference to them exists then).
        unsafe { &*self.ptr.as_ptr().cast::<Header>() }
    }

    /// Start of the data area.
    fn data(&self) -> *mut u8 {
        // SAFETY: HEADER_BYTES < len, so the result points into the mapping.
        unsafe { self.ptr.as_ptr().add(HEADER_BYTES) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `new`, unmapped once, here; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Counters of a ring, readable from any thread.
#[derive(Clone)]
pub struct MirrorCounters(Arc<Mapping>);

impl MirrorCounters {
    /// Frames the producers dropped because the ring was full.
    pub fn lost(&self) -> u64 {
        self.0.header().lost.load(Ordering::Relaxed)
    }
    /// Frames the producers wrote.
    pub fn mirrored(&self) -> u64 {
        self.0.header().mirrored.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for MirrorCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorCounters").field("lost", &self.lost()).field("mirrored", &self.mirrored()).finish()
    }
}

/// Copies `src` into the data area at ring position `pos`, in two parts if it wraps.
///
/// # Safety
/// `data` is the data area of `cap` bytes, `src.len() <= cap`, and the caller owns the ring
/// bytes `[pos, pos + src.len())` under the SPSC protocol (no other party touches them).
unsafe fn write_at(data: *mut u8, cap: usize, pos: u64, src: &[u8]) {
    let off = (pos % cap as u64) as usize;
    let first = src.len().min(cap - off);
    // SAFETY: `off + first <= cap` and `src.len() - first <= off <= cap`, so both copies stay
    // in the data area; the bytes are owned by the caller (contract above).
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), data.add(off), first);
        std::ptr::copy_nonoverlapping(src.as_ptr().add(first), data, src.len() - first);
    }
}

/// Appends `len` bytes at ring position `pos` to `out`, in two parts if they wrap.
///
/// # Safety
/// As [`write_at`], for reading: `len <= cap` and the caller owns `[pos, pos + len)`.
unsafe fn read_at(data: *const u8, cap: usize, pos: u64, len: usize, out: &mut Vec<u8>) {
    let off = (pos % cap as u64) as usize;
    let first = len.min(cap - off);
    out.reserve(len);
    // SAFETY: both ranges lie in the data area (as in `write_at`) and are owned by the caller.
    unsafe {
        out.extend_from_slice(std::slice::from_raw_parts(data.add(off), first));
        out.extend_from_slice(std::slice::from_raw_parts(data, len - first));
    }
}

/// nicd's end: creates the ring, says which NICs to mirror, drains records; removes the file
/// when dropped.
pub struct MirrorConsumer {
    map: Arc<Mapping>,
    cap: usize,
    tail: u64,
    file: File,
    path: PathBuf,
}

impl std::fmt::Debug for MirrorConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorConsumer").field("path", &self.path).field("capacity", &self.cap).finish()
    }
}

impl MirrorConsumer {
    /// Creates (or replaces) the ring at `path` with `capacity` data bytes, naming `nics` (port
    /// p = `nics[p]`). The file appears at `path` only once its header is written.
    pub fn create(path: &Path, capacity: usize, nics: &[String]) -> Result<MirrorConsumer, MirrorError> {
        let p = || path.display().to_string();
        let invalid = |why: String| MirrorError::Invalid { path: p(), why };
        if nics.len() > MAX_NICS {
            return Err(invalid(format!("{} NICs, at most {MAX_NICS}", nics.len())));
        }
        if let Some(n) = nics.iter().find(|n| n.is_empty() || n.len() >= NAME_BYTES) {
            return Err(invalid(format!("NIC name {n:?} is not 1..{NAME_BYTES} bytes")));
        }
        if capacity < MIN_CAPACITY {
            return Err(invalid(format!("capacity {capacity} < {MIN_CAPACITY}")));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|source| MirrorError::Io { path: tmp.display().to_string(), what: "creating", source })?;
        let built = (|| {
            file.set_len((HEADER_BYTES + capacity) as u64).map_err(|source| MirrorError::Io {
                path: p(),
                what: "sizing",
                source,
            })?;
            let map = Mapping::new(&file, HEADER_BYTES + capacity, path)?;
            let h = map.ptr.as_ptr().cast::<Header>();
            // SAFETY: `h` is the header page of a zero-filled mapping nobody else can see yet
            // (the file has a fresh private name); raw field writes create no references.
            unsafe {
                std::ptr::addr_of_mut!((*h).version).write(VERSION);
                std::ptr::addr_of_mut!((*h).nic_count).write(nics.len() as u32);
                std::ptr::addr_of_mut!((*h).capacity).write(capacity as u64);
                for (i, n) in nics.iter().enumerate() {
                    let slot = std::ptr::addr_of_mut!((*h).names[i]).cast::<u8>();
                    std::ptr::copy_nonoverlapping(n.as_ptr(), slot, n.len());
                }
                std::ptr::addr_of_mut!((*h).magic).write(MAGIC);
            }
            std::fs::rename(&tmp, path).map_err(|source| MirrorError::Io {
                path: p(),
                what: "publishing (rename)",
                source,
            })?;
            Ok(map)
        })();
        let map = match built {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        Ok(MirrorConsumer { map: Arc::new(map), cap: capacity, tail: 0, file, path: path.to_path_buf() })
    }

    /// Counters (lost, mirrored), for metrics on another thread.
    pub fn counters(&self) -> MirrorCounters {
        MirrorCounters(self.map.clone())
    }

    /// Sets the NICs to mirror (bit p = port p).
    pub fn set_enabled(&self, mask: u64) {
        self.map.header().enabled_mask.store(mask, Ordering::Release);
    }

    /// Discards everything written so far (records of an earlier capture).
    pub fn clear(&mut self) {
        let head = self.map.header().head.load(Ordering::Acquire);
        self.tail = head;
        self.map.header().tail.store(head, Ordering::Release);
    }

    /// Appends every record written since the last call to `out` (whole records, in the order
    /// written); returns the bytes appended. A corrupt `head` (more than the capacity ahead)
    /// discards the ring's contents.
    pub fn drain(&mut self, out: &mut Vec<u8>) -> usize {
        let h = self.map.header();
        let head = h.head.load(Ordering::Acquire);
        let n = head.wrapping_sub(self.tail);
        if n == 0 {
            return 0;
        }
        if n > self.cap as u64 {
            tracing::warn!(path = %self.path.display(), head, tail = self.tail, "NIC mirror positions out of range: discarding its contents");
            self.clear();
            return 0;
        }
        // SAFETY: the data area has `cap` bytes; `[tail, head)` holds records the producer
        // published (Acquire above) and will not touch until we publish `tail` below.
        unsafe { read_at(self.map.data(), self.cap, self.tail, n as usize, out) };
        self.tail = head;
        h.tail.store(head, Ordering::Release);
        n as usize
    }

    /// Drains into `buf` (cleared first) and calls `f` on each record; stops at the first
    /// record that does not decode. Returns the records seen.
    pub fn drain_each(&mut self, buf: &mut Vec<u8>, mut f: impl FnMut(Record<'_>)) -> usize {
        buf.clear();
        self.drain(buf);
        let mut at = 0;
        let mut n = 0;
        while let Some((r, len)) = buf.get(at..).and_then(Record::decode) {
            f(r);
            at += len;
            n += 1;
        }
        n
    }
}

impl Drop for MirrorConsumer {
    fn drop(&mut self) {
        self.set_enabled(0);
        // Remove the file only if it is still ours (a newer nicd may have replaced it).
        let ours = match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), "removing the NIC mirror: {e}");
            }
        }
    }
}

/// hostd's end: copies frames in while their NIC is enabled, never blocks.
pub struct MirrorProducer {
    map: Arc<Mapping>,
    cap: usize,
    head: u64,
    names: Vec<String>,
    path: PathBuf,
    /// Holds the exclusive `flock`.
    _file: File,
}

impl std::fmt::Debug for MirrorProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorProducer").field("path", &self.path).field("nics", &self.names).finish()
    }
}

impl MirrorProducer {
    /// Maps the ring at `path` ([`MirrorError::Absent`] when there is none) and takes the
    /// producer's lock.
    pub fn open(path: &Path) -> Result<MirrorProducer, MirrorError> {
        let p = || path.display().to_string();
        let file = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(MirrorError::Absent { path: p() }),
            Err(source) => return Err(MirrorError::Io { path: p(), what: "opening", source }),
        };
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(MirrorError::Busy { path: p() });
            }
            return Err(MirrorError::Io { path: p(), what: "locking (flock)", source: e });
        }
        let len = file.metadata().map_err(|source| MirrorError::Io { path: p(), what: "stat", source })?.len();
        let invalid = |why: String| MirrorError::Invalid { path: p(), why };
        if len < (HEADER_BYTES + MIN_CAPACITY) as u64 || len > (1u64 << 40) {
            return Err(invalid(format!("size {len}")));
        }
        let map = Mapping::new(&file, len as usize, path)?;
        let h = map.header();
        if h.magic != MAGIC || h.version != VERSION {
            return Err(invalid(format!(
                "magic {:#x} version {} (want {MAGIC:#x} version {VERSION})",
                h.magic, h.version
            )));
        }
        if h.capacity != len - HEADER_BYTES as u64 || h.nic_count as usize > MAX_NICS {
            return Err(invalid(format!("capacity {} / {} NICs in a file of {len} bytes", h.capacity, h.nic_count)));
        }
        let names = h.names[..h.nic_count as usize]
            .iter()
            .map(|n| String::from_utf8_lossy(&n[..n.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES)]).into_owned())
            .collect();
        let head = h.head.load(Ordering::Acquire);
        let cap = h.capacity as usize;
        Ok(MirrorProducer { map: Arc::new(map), cap, head, names, path: path.to_path_buf(), _file: file })
    }

    /// The capture port number nicd gives NIC `name`, if it has one.
    pub fn port_of(&self, name: &str) -> Option<u16> {
        self.names.iter().position(|n| n == name).map(|i| i as u16)
    }

    /// NIC names by port number.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Port `port` is being captured (one relaxed load: call once per batch).
    #[inline]
    pub fn enabled(&self, port: u16) -> bool {
        port < 64 && self.map.header().enabled_mask.load(Ordering::Relaxed) & (1u64 << port) != 0
    }

    pub fn counters(&self) -> MirrorCounters {
        MirrorCounters(self.map.clone())
    }

    /// Writes one record (a frame seen on `port` in direction `dir` at `ts_ns`, ns since the
    /// Unix epoch), or counts it as lost when the ring has no room. Returns whether it was
    /// written.
    pub fn push(&mut self, port: u16, dir: u8, ts_ns: u64, frame: &[u8]) -> bool {
        let h = self.map.header();
        let need = (RECORD_HEADER + frame.len()) as u64;
        let tail = h.tail.load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        // `used > cap` only if the consumer wrote nonsense: treat the ring as full.
        if used > self.cap as u64 || need > self.cap as u64 - used {
            h.lost.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let hdr = Record::header(ts_ns, port, dir, frame.len() as u32, frame.len() as u32);
        // SAFETY: `[head, head + need)` is free space (need ≤ cap − used): the consumer reads
        // only `[tail, head)` and this is the only producer (flock), so we own those bytes
        // until `head` is published below.
        unsafe {
            write_at(self.map.data(), self.cap, self.head, &hdr);
            write_at(self.map.data(), self.cap, self.head + RECORD_HEADER as u64, frame);
        }
        self.head += need;
        h.head.store(self.head, Ordering::Release);
        h.mirrored.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// Now, ns since the Unix epoch (the records' clock).
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A unique ring path in the temp dir, removed (with its consumer) at the end.
    fn temp_path(what: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        std::env::temp_dir().join(format!(
            "rocefab-mirror-test-{}-{what}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn nics() -> Vec<String> {
        vec!["gpu0".into(), "gpu1".into()]
    }

    fn records(c: &mut MirrorConsumer) -> Vec<(u64, u16, u8, Vec<u8>)> {
        let mut buf = Vec::new();
        let mut v = Vec::new();
        c.drain_each(&mut buf, |r| v.push((r.ts_ns, r.port, r.dir, r.data.to_vec())));
        v
    }

    #[test]
    fn open_needs_a_ring_and_names_map_to_ports() {
        let path = temp_path("open");
        assert!(matches!(MirrorProducer::open(&path), Err(MirrorError::Absent { .. })));
        let c = MirrorConsumer::create(&path, 4096, &nics()).unwrap();
        let p = MirrorProducer::open(&path).unwrap();
        assert_eq!((p.port_of("gpu1"), p.port_of("gpu7")), (Some(1), None));
        assert_eq!(p.names(), &nics()[..]);
        // One producer at a time.
        assert!(matches!(MirrorProducer::open(&path), Err(MirrorError::Busy { .. })));
        drop(p);
        drop(c);
        assert!(!path.exists(), "the consumer removes the ring");
        // Not a ring.
        std::fs::write(&path, vec![0u8; HEADER_BYTES + 4096]).unwrap();
        assert!(matches!(MirrorProducer::open(&path), Err(MirrorError::Invalid { .. })));
        std::fs::remove_file(&path).unwrap();
        assert!(MirrorConsumer::create(&path, 4096, &["a-name-far-too-long".into()]).is_err());
    }

    #[test]
    fn a_disabled_nic_copies_nothing() {
        let path = temp_path("disabled");
        let mut c = MirrorConsumer::create(&path, 4096, &nics()).unwrap();
        let mut p = MirrorProducer::open(&path).unwrap();
        assert!(!p.enabled(0) && !p.enabled(1));
        c.set_enabled(0b10);
        assert!(!p.enabled(0) && p.enabled(1) && !p.enabled(64));
        // The data thread checks before copying; a push is only made for enabled NICs.
        for port in 0..2u16 {
            if p.enabled(port) {
                p.push(port, DIR_IN, 7, &[port as u8; 60]);
            }
        }
        assert_eq!(records(&mut c), vec![(7, 1, DIR_IN, vec![1; 60])]);
        c.set_enabled(0);
        assert!(!p.enabled(1));
        assert_eq!(p.counters().mirrored(), 1);
        assert_eq!(records(&mut c), vec![]);
    }

    #[test]
    fn records_wrap_around_the_end_and_overflow_is_counted() {
        let path = temp_path("wrap");
        let mut c = MirrorConsumer::create(&path, 256, &nics()).unwrap();
        let mut p = MirrorProducer::open(&path).unwrap();
        c.set_enabled(1);
        // 24 + 50 = 74-byte records: the write position walks through every offset mod 256,
        // so many records are split at the end of the data area.
        for i in 0..200u8 {
            assert!(p.push(0, if i % 2 == 0 { DIR_IN } else { DIR_OUT }, u64::from(i), &[i; 50]));
            let got = records(&mut c);
            assert_eq!(
                got,
                vec![(u64::from(i), 0, if i % 2 == 0 { DIR_IN } else { DIR_OUT }, vec![i; 50])],
                "record {i}"
            );
        }
        // Three fit (222 of 256 bytes), the fourth is lost, nothing blocks.
        for i in 0..3u8 {
            assert!(p.push(0, DIR_IN, 1000 + u64::from(i), &[i; 50]));
        }
        assert!(!p.push(0, DIR_IN, 2000, &[9; 50]));
        assert!(!p.push(0, DIR_IN, 2001, &[9; 300]), "larger than the ring");
        assert_eq!(c.counters().lost(), 2);
        let got = records(&mut c);
        assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1000, 1001, 1002]);
        // Room again once drained.
        assert!(p.push(0, DIR_IN, 3000, &[1; 50]));
        // Clear discards what an earlier capture left.
        c.clear();
        assert_eq!(records(&mut c), vec![]);
    }

    #[test]
    fn producer_and_consumer_in_two_threads() {
        let path = temp_path("threads");
        let mut c = MirrorConsumer::create(&path, 4096, &nics()).unwrap();
        c.set_enabled(0b11);
        let p = MirrorProducer::open(&path).unwrap();
        const N: u32 = 20_000;
        let producer = std::thread::spawn(move || {
            let mut p = p;
            let mut sent = Vec::new();
            for i in 0..N {
                let len = 60 + (i as usize * 7) % 900;
                let mut frame = vec![(i % 251) as u8; len];
                frame[..4].copy_from_slice(&i.to_le_bytes());
                let port = (i % 2) as u16;
                if p.push(port, DIR_OUT, u64::from(i), &frame) {
                    sent.push(i);
                }
                if i % 64 == 0 {
                    std::thread::yield_now();
                }
            }
            (sent, p.counters().lost())
        });
        let mut seen = Vec::new();
        let mut buf = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let done = producer.is_finished();
            c.drain_each(&mut buf, |r| {
                let i = u32::from_le_bytes(r.data[..4].try_into().unwrap());
                assert_eq!(r.ts_ns, u64::from(i));
                assert_eq!(r.port, (i % 2) as u16);
                assert_eq!(r.data.len(), 60 + (i as usize * 7) % 900);
                assert!(r.data[4..].iter().all(|&b| b == (i % 251) as u8), "frame {i} intact");
                seen.push(i);
            });
            if done {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "producer did not finish");
        }
        let (sent, lost) = producer.join().unwrap();
        c.drain_each(&mut buf, |r| seen.push(u32::from_le_bytes(r.data[..4].try_into().unwrap())));
        assert_eq!(seen, sent, "every written record arrives once, in order");
        assert_eq!(sent.len() as u64 + lost, u64::from(N));
    }
}
