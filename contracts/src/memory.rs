//! Memory that follows the work (DESIGN "Latency, scale and routing"): how many UMEM chunks of
//! which size a switch daemon (`rocefab-switchd`) and a GPU host's NIC data path
//! (`rocefab-hostd`) pin, computed from what their links carry on the wall clock (line rate /
//! time dilation D), the link MTU and the shared buffer. The daemons size their UMEMs, rings and
//! queues with these functions, and `rocefab plan` / `rocefab up` print and check the same
//! numbers: there is one computation.
//!
//! - **Chunk size.** A frame that fits one 2 KiB chunk (the kernel's smallest,
//!   `XDP_UMEM_MIN_CHUNK_SIZE`) after the 256-byte XDP headroom and the 16 bytes of metadata the
//!   XDP program writes in front of the frame gets one: link MTU up to [`MAX_SMALL_CHUNK_MTU`]
//!   (1758). Larger MTUs keep 4 KiB chunks (a page: the kernel refuses larger ones), and above
//!   3822 bytes AF_XDP multi-buffer chains (`afxdp::chain`).
//! - **Rings.** (Switches; a NIC keeps [`NIC_MAX_RING`], see [`nic_memory`].) A ring holds what arrives while the data-plane thread is not looking: the port's
//!   wall-clock packet rate (smallest frames, at most [`MAX_PORT_PPS`], more than one veth peer
//!   delivers on this machine kind) over [`WAKEUP_BOUND_NS`], as a power of two, at least
//!   [`MIN_RING`] and at most the sizes rocefab used before it sized them (2048 RX / 1024 TX on a
//!   switch, 1024 on a NIC). 400G at D 8000 is 50 Mbit/s of wall clock: 74 kpps, 256 entries.
//! - **The buffer's frame pool.** The shared buffer counts bytes (or cells); its frames are
//!   counted apart, at a realistic frame mix rather than one chunk per smallest charge: as many
//!   smallest frames as frames of the link MTU ([`mix_bytes_per_chunk`]). The shared pool's part
//!   and the lossless headroom's part (every port × lossless priority) are sized separately: a
//!   lossless frame that finds no shared frame goes to its group's headroom (and sends PFC), as
//!   when the shared bytes run out, so a pool shortage never drops a lossless frame before its
//!   headroom. A lossy frame that finds no frame is an admission drop, counted per queue.
//!
//! Pure arithmetic: no kernel, no allocation.
use crate::config::{QosConfig, SwitchConfig, MIN_FRAME_BYTES};
use crate::time::Dilation;

/// Headroom the kernel leaves in front of every received frame in copy mode
/// (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;
/// The XDP metadata (`dataplane_common::XdpMeta`) the programs write right in front of a frame.
pub const XDP_META_BYTES: u32 = 16;
/// Ethernet header with one 802.1Q tag: what a frame adds to the link MTU.
pub const ETH_TAGGED_HLEN: u32 = 18;
/// The kernel's smallest UMEM chunk (`XDP_UMEM_MIN_CHUNK_SIZE`).
pub const SMALL_CHUNK: u32 = 2048;
/// The largest chunk the kernel accepts (a page); jumbo frames chain several.
pub const LARGE_CHUNK: u32 = 4096;
/// The largest link MTU whose frames fit one [`SMALL_CHUNK`] with headroom and metadata.
pub const MAX_SMALL_CHUNK_MTU: u32 = SMALL_CHUNK - XDP_HEADROOM - XDP_META_BYTES - ETH_TAGGED_HLEN;
/// Bytes of a frame one [`LARGE_CHUNK`] takes on RX (`afxdp::chain::RX_FRAME_BYTES`).
pub const LARGE_CHUNK_FRAME_BYTES: u32 = LARGE_CHUNK - XDP_HEADROOM;
/// The largest link MTU rocefab accepts.
pub const MAX_LINK_MTU: u32 = 9216;
/// Bytes a minimum-size frame occupies on the wire: 64 with FCS, preamble and SFD 8, gap 12.
pub const MIN_WIRE_FRAME_BYTES: u64 = 84;

/// The longest a data path may leave a ring unattended (a wake-up on a loaded 2-core machine).
pub const WAKEUP_BOUND_NS: u64 = 1_000_000;
/// The most packets per second one port receives on this machine kind, whatever its line rate:
/// four times what the minimal AF_XDP forwarder moves (0.5 Mpps, docs/src/benchmark.md).
pub const MAX_PORT_PPS: u64 = 2_000_000;
/// Smallest ring: a pass's batch of the largest packets (64 × 3 descriptors) and then some.
pub const MIN_RING: u32 = 256;
/// Largest switch RX (and fill) ring, the size used before rings were sized.
pub const SWITCH_MAX_RX_RING: u32 = 2048;
/// Largest switch TX (and completion) ring.
pub const SWITCH_MAX_TX_RING: u32 = 1024;
/// Largest NIC ring (RX, fill, TX, completion), the size used before rings were sized.
pub const NIC_MAX_RING: u32 = 1024;

/// Descriptors the switch's data path moves per port per pass (`dataplane-user` BATCH).
pub const BATCH: usize = 64;
/// Frames a switch port's control queue holds; the switch reserves that many per port for the
/// frames it originates (PFC, LLDP).
pub const OWN_QUEUE_LEN: usize = 32;
/// The switch shaper's burst: three full 1500-byte frames on the wire (preamble, FCS, gap).
pub const SHAPER_BURST_BYTES: u64 = 3 * (1514 + 24);
/// Heap bytes per slot of a switch egress queue (a held frame's descriptor, charges and
/// length; `dataplane-user` checks its slot fits).
pub const QUEUE_SLOT_BYTES: u64 = 64;
/// What a switch daemon holds besides its UMEM and queues (binary, tokio, metrics, maps),
/// measured as the RSS of an idle `rocefab-switchd` less its UMEM (docs/src/memory.md).
pub const SWITCH_BASE_BYTES: u64 = 16 << 20;
/// What a NIC agent (`rocefab-nicd`) holds (it opens no UMEM).
pub const NIC_AGENT_BASE_BYTES: u64 = 8 << 20;
/// What a host's job process (`rocefab-hostd`) holds besides its UMEMs and staging buffers.
pub const HOSTD_BASE_BYTES: u64 = 16 << 20;

/// What the kernel holds per AF_XDP socket for every chunk of the UMEM the socket is bound to:
/// its buffer pool's `heads` entry (a `struct xdp_buff_xsk`) and `free_heads` pointer, allocated
/// (vmalloc) in `xp_create_and_assign_umem` for each chunk of the whole UMEM, once per socket on
/// another device or queue: `XDP_SHARED_UMEM` shares the UMEM, not the pool. So a switch whose
/// P ports share one UMEM of C chunks costs the kernel P × C of these, beside the UMEM itself.
/// Measured on pod-64gpu (Linux 6.18, `/proc/vmallocinfo`, docs/src/memory.md): 1058.7 MiB of
/// `xp_create_and_assign_umem` areas for 80 sockets on UMEMs of 8,340,592 chunk-sockets, 133 B
/// each (with the areas' page rounding).
pub const XSK_POOL_BYTES_PER_CHUNK: u64 = 133;
/// What the kernel holds for a switch's XDP program: its maps, mostly the preallocated flowlet
/// LRU hash (`htab_map_alloc`). Measured on pod-64gpu: 19.2 MiB for 6 switches.
pub const SWITCH_BPF_MAP_BYTES: u64 = 3200 << 10;

/// UMEM chunk size for links of `link_mtu` bytes.
pub const fn chunk_bytes(link_mtu: u32) -> u32 {
    if link_mtu <= MAX_SMALL_CHUNK_MTU {
        SMALL_CHUNK
    } else {
        LARGE_CHUNK
    }
}

/// Chunks a received frame of `frame_bytes` takes in chunks of `chunk` bytes (more than one
/// only with multi-buffer, above one [`LARGE_CHUNK`]).
pub const fn chunks_per_frame(frame_bytes: u32, chunk: u32) -> u32 {
    if chunk == SMALL_CHUNK || frame_bytes <= LARGE_CHUNK_FRAME_BYTES {
        1
    } else {
        frame_bytes.div_ceil(LARGE_CHUNK_FRAME_BYTES)
    }
}

/// Entries of a ring for a port that moves `wall_rate_bps` on the wall clock: its packet rate
/// at the smallest frame (at most [`MAX_PORT_PPS`]) over [`WAKEUP_BOUND_NS`], a power of two in
/// [`MIN_RING`]`..=max`.
pub fn ring_entries(wall_rate_bps: u64, max: u32) -> u32 {
    let pps = (wall_rate_bps / (8 * MIN_WIRE_FRAME_BYTES)).min(MAX_PORT_PPS);
    let n = (pps * WAKEUP_BOUND_NS).div_ceil(1_000_000_000).max(1);
    let n = u32::try_from(n).unwrap_or(u32::MAX).checked_next_power_of_two().unwrap_or(max);
    n.clamp(MIN_RING, max.max(MIN_RING))
}

/// Bytes the shared buffer charges a frame of `frame_bytes` (whole cells, or frame bytes).
pub fn charge(frame_bytes: u64, cell_bytes: u32) -> u64 {
    let len = frame_bytes.max(1);
    match cell_bytes {
        0 => len,
        c => len.div_ceil(u64::from(c)) * u64::from(c),
    }
}

/// Buffer bytes per UMEM chunk at the realistic frame mix: as many smallest frames (60 bytes)
/// as frames of the link MTU, each charged as the buffer charges it, over the chunks they take.
/// MTU 1500 with 256-byte cells: (256 + 1536) / 2 = 896 bytes a chunk (the smallest charge,
/// 256, was the old assumption: 3.5 times more chunks).
pub fn mix_bytes_per_chunk(link_mtu: u32, cell_bytes: u32) -> u64 {
    let large = link_mtu.min(MAX_LINK_MTU) + ETH_TAGGED_HLEN;
    let chunks = u64::from(chunks_per_frame(large, chunk_bytes(link_mtu)));
    ((charge(MIN_FRAME_BYTES, cell_bytes) + charge(u64::from(large), cell_bytes)) / (1 + chunks)).max(1)
}

/// UMEM chunks a shared buffer holds at the realistic frame mix ([`mix_bytes_per_chunk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferChunks {
    /// For frames charged to the shared pool (buffer less the reserved headroom).
    pub shared: u64,
    /// For frames charged to the lossless groups' headroom (every port × lossless priority).
    pub headroom: u64,
}

impl BufferChunks {
    pub fn total(&self) -> u64 {
        self.shared + self.headroom
    }
}

/// The chunks the buffer of `qos` holds on a switch of `ports` ports with links of `link_mtu`.
pub fn buffer_chunks(qos: &QosConfig, ports: usize, link_mtu: u32) -> BufferChunks {
    let per = mix_bytes_per_chunk(link_mtu, qos.cell_bytes);
    let lossless = u64::from(qos.lossless_priorities.count_ones());
    let reserved = ports as u64 * lossless * qos.headroom_bytes;
    let shared = qos.buffer_bytes.saturating_sub(reserved);
    let headroom = if lossless == 0 { 0 } else { ports as u64 * lossless * qos.headroom_bytes.div_ceil(per) };
    BufferChunks { shared: shared.div_ceil(per).max(1), headroom }
}

/// Frames a delay line of `delay_ns` at `rate_bps` (both wall clock: their product is the
/// emulated bandwidth-delay product) holds at the smallest frame, plus `slack`; 0 for no delay.
pub fn delay_line_capacity(rate_bps: u64, delay_ns: u64, slack: usize) -> usize {
    if delay_ns == 0 {
        return 0;
    }
    let bytes = (rate_bps as u128 * delay_ns as u128).div_ceil(8_000_000_000);
    (bytes.div_ceil(MIN_WIRE_FRAME_BYTES as u128) as usize).saturating_add(slack).max(1)
}

/// Slack of a transmit delay line: two batches and the shaper's burst in smallest frames.
pub const TX_LINE_SLACK: usize = 2 * BATCH + (SHAPER_BURST_BYTES / MIN_WIRE_FRAME_BYTES) as usize;
/// Slack of a receive delay line: two batches.
pub const RX_LINE_SLACK: usize = 2 * BATCH;

/// What a switch daemon pins and holds, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchMemory {
    pub ports: usize,
    /// Link MTU the chunks are sized for.
    pub link_mtu: u32,
    pub chunk_bytes: u32,
    /// Every socket is bound with `XDP_USE_SG` (frames longer than a chunk).
    pub multi_buffer: bool,
    /// RX and fill ring entries per port (the fastest port's; one UMEM shares one size).
    pub rx_ring: u32,
    /// TX and completion ring entries per port.
    pub tx_ring: u32,
    /// Chunks the rings of every port may hold at once (fill + RX + TX per port).
    pub ring_chunks: u64,
    /// Chunks the shared buffer holds ([`buffer_chunks`]).
    pub buffer: BufferChunks,
    /// Chunks reserved for the frames the switch originates ([`OWN_QUEUE_LEN`] per port).
    pub own_chunks: u64,
    /// Chunks the ports' delay lines hold (cables and pipelines).
    pub delay_chunks: u64,
    /// Chunks of the UMEM: the sum of the above.
    pub umem_chunks: u64,
    /// Slots of each egress queue of a port, by traffic class ([`queue_capacities`]).
    pub queue_caps: [usize; 8],
    /// Slots of the egress queues (allocated at start, never again).
    pub queue_slots: u64,
}

impl SwitchMemory {
    /// Bytes of UMEM, pinned by the kernel for as long as the daemon runs.
    pub fn umem_bytes(&self) -> u64 {
        self.umem_chunks * u64::from(self.chunk_bytes)
    }

    /// Bytes of the kernel's rings (16-byte RX/TX descriptors, 8-byte fill/completion addresses).
    pub fn ring_bytes(&self) -> u64 {
        self.ports as u64 * (24 * u64::from(self.rx_ring) + 24 * u64::from(self.tx_ring))
    }

    /// Heap the data path allocates by size: queue slots and, with multi-buffer, one chain link
    /// per chunk.
    pub fn heap_bytes(&self) -> u64 {
        let chains = if self.multi_buffer { self.umem_chunks * 32 } else { 0 };
        self.queue_slots * QUEUE_SLOT_BYTES + chains
    }

    /// Everything the daemon is expected to hold: UMEM, rings, heap and [`SWITCH_BASE_BYTES`].
    pub fn total_bytes(&self) -> u64 {
        self.umem_bytes() + self.ring_bytes() + self.heap_bytes() + SWITCH_BASE_BYTES
    }

    /// What the kernel holds for the switch beyond the daemon's memory: every port's socket's
    /// buffer pool over the whole UMEM ([`XSK_POOL_BYTES_PER_CHUNK`]).
    pub fn xsk_pool_bytes(&self) -> u64 {
        self.ports as u64 * self.umem_chunks * XSK_POOL_BYTES_PER_CHUNK
    }
}

/// The traffic classes a switch's frames can be queued in (bit per class): every class its
/// DSCP map names, and class 0 (non-IP frames and unmapped DSCPs). The XDP program classifies
/// by the same map, so no frame reaches another class's queue.
pub fn used_classes(dscp_to_tc: &[u8]) -> u8 {
    dscp_to_tc.iter().filter(|&&tc| tc < 8).fold(1, |m, &tc| m | 1 << tc)
}

/// Capacity of each egress queue (per traffic class) of a switch: a lossy queue holds at most
/// its byte limit in smallest charges, a lossless one whatever the buffer's frames allow; a
/// class no frame can be classified into (`used`, [`used_classes`]) one slot.
pub fn queue_capacities(cfg_qos: &QosConfig, queue_limit_bytes: u64, buffer: &BufferChunks, used: u8) -> [usize; 8] {
    let held = buffer.total().max(1) as usize;
    let lossy = ((queue_limit_bytes / charge(MIN_FRAME_BYTES, cfg_qos.cell_bytes)) as usize + 1).min(held);
    std::array::from_fn(|tc| match (used & (1 << tc) != 0, cfg_qos.lossless_priorities & (1 << tc) != 0) {
        (false, _) => 1,
        (true, true) => held,
        (true, false) => lossy.max(1),
    })
}

/// The memory of the switch `cfg` whose links have an MTU of `link_mtu` bytes: what
/// `rocefab-switchd` allocates and what `rocefab plan` prints.
pub fn switch_memory(cfg: &SwitchConfig, link_mtu: u32) -> SwitchMemory {
    let d = Dilation::new(cfg.time_dilation).unwrap_or_default();
    let ports = cfg.ports.len();
    let chunk = chunk_bytes(link_mtu);
    let fastest = cfg.ports.iter().map(|p| d.rate(p.line_rate_bps)).max().unwrap_or(0);
    let rx_ring = ring_entries(fastest, SWITCH_MAX_RX_RING);
    let tx_ring = ring_entries(fastest, SWITCH_MAX_TX_RING);
    let ring_chunks = ports as u64 * (2 * u64::from(rx_ring) + u64::from(tx_ring));
    let buffer = buffer_chunks(&cfg.qos, ports, link_mtu);
    let own_chunks = (ports * OWN_QUEUE_LEN) as u64;
    let delay_chunks: u64 = cfg
        .ports
        .iter()
        .map(|p| {
            let rate = d.rate(p.line_rate_bps);
            (delay_line_capacity(rate, d.duration(p.tx_delay_ns), TX_LINE_SLACK)
                + delay_line_capacity(rate, d.duration(p.rx_delay_ns), RX_LINE_SLACK)) as u64
        })
        .sum();
    // Trimmed frames are queued on the trim queue whatever their DSCP says.
    let trim = &cfg.qos.trim;
    let trim_queue = if trim.queues != 0 { 1u8 << (trim.queue & 7) } else { 0 };
    let caps = queue_capacities(&cfg.qos, cfg.queue_limit_bytes, &buffer, used_classes(&cfg.dscp_to_tc) | trim_queue);
    let queue_slots = ports as u64 * caps.iter().map(|&c| c as u64).sum::<u64>();
    SwitchMemory {
        ports,
        link_mtu,
        chunk_bytes: chunk,
        multi_buffer: link_mtu + ETH_TAGGED_HLEN > LARGE_CHUNK_FRAME_BYTES,
        rx_ring,
        tx_ring,
        ring_chunks,
        buffer,
        own_chunks,
        delay_chunks,
        umem_chunks: ring_chunks + buffer.total() + own_chunks + delay_chunks,
        queue_caps: caps,
        queue_slots,
    }
}

/// What one GPU NIC's AF_XDP port pins in `rocefab-hostd` while a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicMemory {
    pub chunk_bytes: u32,
    /// Fill, RX and completion ring entries; that many chunks circulate on the RX side.
    pub rx_ring: u32,
    /// TX ring entries; that many chunks are the TX pool.
    pub tx_ring: u32,
}

impl NicMemory {
    pub fn umem_chunks(&self) -> u64 {
        u64::from(self.rx_ring) + u64::from(self.tx_ring)
    }
    pub fn umem_bytes(&self) -> u64 {
        self.umem_chunks() * u64::from(self.chunk_bytes)
    }

    /// The kernel's buffer pool of the NIC's one socket ([`XSK_POOL_BYTES_PER_CHUNK`]).
    pub fn xsk_pool_bytes(&self) -> u64 {
        self.umem_chunks() * XSK_POOL_BYTES_PER_CHUNK
    }
}

/// The UMEM of a NIC of `wall_rate_bps` (emulated line rate / D) on a link of `link_mtu`: chunks
/// from the MTU, rings of [`NIC_MAX_RING`] whatever the rate. Sized from the rate like a
/// switch's, the 100 Mbit/s incast receiver of `rail-spine-incast.yaml` at MTU 9216 got 256
/// entries (43 ms of its 4.2 KB frames) and lost frames in its RX ring when `rocefab-hostd` (a
/// debug build, at nice 19 on a loaded 2-core machine) went longer than that without reading
/// it (`fabric_jumbo`: 78 retransmissions); with 1024 entries it loses none.
pub fn nic_memory(wall_rate_bps: u64, link_mtu: u32) -> NicMemory {
    let _ = wall_rate_bps;
    let ring = NIC_MAX_RING;
    NicMemory { chunk_bytes: chunk_bytes(link_mtu), rx_ring: ring, tx_ring: ring }
}

/// `n` bytes for people: `512 KiB`, `37.1 MiB`, `4.40 GiB`.
pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let x = n as f64;
    if x < K * K {
        format!("{:.0} KiB", x / K)
    } else if x < K * K * K {
        format!("{:.1} MiB", x / (K * K))
    } else {
        format!("{:.2} GiB", x / (K * K * K))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PortConfig;

    #[test]
    fn chunks_are_2_kib_up_to_mtu_1758_and_4_kib_above() {
        assert_eq!(MAX_SMALL_CHUNK_MTU, 1758);
        assert_eq!(chunk_bytes(1500), 2048);
        assert_eq!(chunk_bytes(1758), 2048);
        assert_eq!(chunk_bytes(1759), 4096);
        assert_eq!(chunk_bytes(3500), 4096);
        assert_eq!(chunk_bytes(9216), 4096);
        // 1500 + 18 + 16 bytes of metadata after 256 of headroom: 1790 of 2048.
        const { assert!(XDP_HEADROOM + XDP_META_BYTES + 1500 + ETH_TAGGED_HLEN <= SMALL_CHUNK) };
        assert_eq!(chunks_per_frame(1518, 2048), 1);
        assert_eq!(chunks_per_frame(3518, 4096), 1);
        assert_eq!(chunks_per_frame(4170, 4096), 2);
        assert_eq!(chunks_per_frame(9234, 4096), 3);
    }

    #[test]
    fn rings_follow_the_wall_clock_packet_rate() {
        // 400G at D 8000 = 50 Mbit/s: 74 kpps, 74 frames in 1 ms: the floor.
        assert_eq!(ring_entries(400_000_000_000 / 8000, SWITCH_MAX_RX_RING), MIN_RING);
        // 100G at D 100 = 1 Gbit/s: 1.49 Mpps, 1489 in 1 ms.
        assert_eq!(ring_entries(1_000_000_000, SWITCH_MAX_RX_RING), 2048);
        assert_eq!(ring_entries(1_000_000_000, SWITCH_MAX_TX_RING), 1024);
        // 400 Mbit/s: 595 kpps, 596 in 1 ms: 1024.
        assert_eq!(ring_entries(400_000_000, SWITCH_MAX_RX_RING), 1024);
        // 8 Gbit/s: capped at MAX_PORT_PPS, 2000 in 1 ms.
        assert_eq!(ring_entries(8_000_000_000, SWITCH_MAX_RX_RING), 2048);
        assert_eq!(ring_entries(8_000_000_000, NIC_MAX_RING), 1024);
        assert_eq!(ring_entries(0, SWITCH_MAX_RX_RING), MIN_RING);
        assert_eq!(ring_entries(u64::MAX, SWITCH_MAX_RX_RING), 2048);
        for r in [1, 1_000, 1_000_000, 123_456_789, 10_000_000_000] {
            assert!(ring_entries(r, 2048).is_power_of_two());
        }
    }

    #[test]
    fn the_buffer_pool_is_the_buffer_at_a_realistic_mix() {
        // MTU 1500, 256-byte cells: a 60-byte frame charges 256, a 1518-byte one 1536.
        assert_eq!(mix_bytes_per_chunk(1500, 256), 896);
        // Frame bytes: (60 + 1518) / 2.
        assert_eq!(mix_bytes_per_chunk(1500, 0), 789);
        // MTU 9216: 9234 bytes in three 4 KiB chunks, cells of 256: (256 + 9472) / 4.
        assert_eq!(mix_bytes_per_chunk(9216, 256), 2432);
        let qos = QosConfig::default(); // 16 MiB, cell 256, headroom 512000 on priority 3
        let b = buffer_chunks(&qos, 18, 1500);
        assert_eq!(b.shared, (16u64 << 20).saturating_sub(18 * 512_000).div_ceil(896));
        assert_eq!(b.headroom, 18 * 512_000u64.div_ceil(896));
        // The old count, one chunk per smallest charge, was 65 536 chunks.
        assert!(b.total() < 65_536 / 3, "{b:?}");
        // A buffer full of MTU frames always finds its chunks.
        assert!(b.shared * 896 >= (16u64 << 20) - 18 * 512_000);
        let lossy = QosConfig { lossless_priorities: 0, ..QosConfig::default() };
        assert_eq!(buffer_chunks(&lossy, 18, 1500).headroom, 0);
        assert_eq!(buffer_chunks(&lossy, 18, 1500).shared, (16u64 << 20).div_ceil(896));
    }

    #[test]
    fn only_the_classes_the_dscp_map_names_get_queue_slots() {
        let mut dscp = vec![0u8; 64];
        assert_eq!(used_classes(&dscp), 0b0000_0001);
        (dscp[24], dscp[48]) = (3, 7);
        assert_eq!(used_classes(&dscp), 0b1000_1001);
        let mut cfg = switch(8, 1_000_000_000, 1.0);
        cfg.qos.lossless_priorities = 1 << 3;
        let all = switch_memory(&cfg, 1500);
        // Every DSCP in class 0: class 0 holds its byte limit, the other seven one slot each.
        assert_eq!(all.queue_caps[1..], [1; 7]);
        cfg.dscp_to_tc = dscp;
        let m = switch_memory(&cfg, 1500);
        let held = m.buffer.total() as usize;
        assert_eq!(m.queue_caps[3], held, "the lossless class may hold the whole buffer");
        assert_eq!(m.queue_caps[0], m.queue_caps[7]);
        assert!(m.queue_caps[0] > 1 && m.queue_caps[0] < held, "{:?}", m.queue_caps);
        assert_eq!([m.queue_caps[1], m.queue_caps[2], m.queue_caps[4], m.queue_caps[5], m.queue_caps[6]], [1; 5]);
        assert_eq!(m.queue_slots, 8 * m.queue_caps.iter().map(|&c| c as u64).sum::<u64>());
        // A trim queue no DSCP names holds trimmed frames: a lossy queue's slots.
        cfg.qos.trim = crate::config::TrimConfig { queues: 1, queue: 6, ..Default::default() };
        let t = switch_memory(&cfg, 1500);
        assert_eq!(t.queue_caps[6], m.queue_caps[0]);
    }

    fn switch(ports: usize, rate: u64, d: f64) -> SwitchConfig {
        SwitchConfig {
            name: "rail1".into(),
            role: "rail".into(),
            netns: None,
            hash_seed: 0,
            metrics_listen: "127.0.0.1:9400".parse().unwrap(),
            dscp_to_tc: vec![0; 64],
            queue_limit_bytes: 1 << 20,
            xdp_mode: "driver".into(),
            ports: (0..ports)
                .map(|i| PortConfig {
                    name: format!("p{i}"),
                    mac: crate::config::Mac([2, 0, 0, 0, 0, i as u8]),
                    line_rate_bps: rate,
                    addresses: vec![],
                    peer: String::new(),
                    tx_delay_ns: 0,
                    rx_delay_ns: 0,
                })
                .collect(),
            nexthops: vec![],
            groups: vec![],
            routes: vec![],
            qos: QosConfig::default(),
            lldp: Default::default(),
            chassis_mac: None,
            time_dilation: d,
            load_balance: Default::default(),
            fib: false,
        }
    }

    #[test]
    fn a_dilated_400g_switch_pins_a_fraction_of_a_real_time_one() {
        let slow = switch_memory(&switch(18, 400_000_000_000, 8000.0), 1500);
        assert_eq!((slow.chunk_bytes, slow.rx_ring, slow.tx_ring, slow.multi_buffer), (2048, 256, 256, false));
        assert_eq!(slow.ring_chunks, 18 * 768);
        assert_eq!(slow.own_chunks, 18 * 32);
        assert_eq!(slow.delay_chunks, 0);
        assert_eq!(slow.umem_chunks, 18 * 768 + slow.buffer.total() + 18 * 32);
        assert_eq!(slow.umem_bytes(), slow.umem_chunks * 2048);
        // The old sizing: 18 × 5120 ring chunks + 65 536 buffer chunks + 576, at 4 KiB: 633 MB.
        let old = (18 * 5120 + 65_536 + 18 * 32) * 4096u64;
        assert!(slow.umem_bytes() * 9 < old, "{} vs {old}", slow.umem_bytes());
        let fast = switch_memory(&switch(18, 8_000_000_000, 1.0), 1500);
        assert_eq!((fast.rx_ring, fast.tx_ring), (2048, 1024));
        assert!(fast.umem_bytes() * 2 < old, "{} vs {old}", fast.umem_bytes());
        let jumbo = switch_memory(&switch(4, 400_000_000_000, 8000.0), 9216);
        assert_eq!((jumbo.chunk_bytes, jumbo.multi_buffer), (4096, true));
        assert!(jumbo.heap_bytes() >= jumbo.umem_chunks * 32);
    }

    #[test]
    fn delay_lines_hold_the_bandwidth_delay_product() {
        let mut c = switch(2, 400_000_000_000, 8000.0);
        c.ports[0].tx_delay_ns = 1_000; // 1 µs at 400G: 50 000 bytes, 596 smallest frames
        let m = switch_memory(&c, 1500);
        assert_eq!(m.delay_chunks, (596 + TX_LINE_SLACK) as u64);
        assert_eq!(delay_line_capacity(1, 0, 5), 0);
    }

    #[test]
    fn nics_take_chunks_from_the_mtu_and_keep_their_rings() {
        let n = nic_memory(400_000_000_000 / 8000, 1500);
        assert_eq!((n.chunk_bytes, n.rx_ring, n.tx_ring), (2048, 1024, 1024));
        assert_eq!(n.umem_bytes(), 4 << 20);
        let n = nic_memory(1_000_000_000, 9216);
        assert_eq!((n.chunk_bytes, n.rx_ring, n.tx_ring), (4096, 1024, 1024));
        assert_eq!(n.umem_bytes(), 8 << 20);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512 << 10), "512 KiB");
        assert_eq!(human_bytes(37 << 20), "37.0 MiB");
        assert_eq!(human_bytes(4_724_464_025), "4.40 GiB");
    }
}
