//! The channels between a switch's control side and its data-plane thread (docs/src/architecture.md):
//! two bounded single-producer single-consumer rings
//! ([`rtrb`], lock-free and wait-free) and an eventfd for each direction.
//!
//! - control → data plane: frames the switch originates that the control side builds (LLDP),
//!   [`OwnFrame`], copied into a frame of the data plane's reserved pool and sent through the
//!   port's control queue, ahead of the scheduler. The eventfd wakes the data-plane thread from
//!   `ppoll`.
//! - data plane → control: [`DpEvent`]s (PFC watchdog storms and restores) for logging, and the
//!   LLDP frames the ports received, copied, for the LLDP/DCBX agent. The data plane never
//!   waits: when a ring is full the event or frame is counted as lost, not blocked on.
//!
//! Nothing here allocates after [`channel`]; a push copies a fixed-size value into the ring.

/// Longest frame the control side can hand over (an untagged 1500-byte MTU frame).
pub const OWN_FRAME_MAX: usize = 1514;

/// A frame the control side wants sent out of `port`.
#[derive(Clone, Copy)]
pub struct OwnFrame {
    pub port: u16,
    pub len: u16,
    pub data: [u8; OWN_FRAME_MAX],
}

impl std::fmt::Debug for OwnFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnFrame").field("port", &self.port).field("len", &self.len).finish()
    }
}

impl OwnFrame {
    /// Copies `bytes` (at most [`OWN_FRAME_MAX`]) into a frame for `port`.
    pub fn new(port: u16, bytes: &[u8]) -> Option<OwnFrame> {
        if bytes.len() > OWN_FRAME_MAX {
            return None;
        }
        let mut data = [0u8; OWN_FRAME_MAX];
        data[..bytes.len()].copy_from_slice(bytes);
        Some(OwnFrame { port, len: bytes.len() as u16, data })
    }
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

/// Something the data-plane thread reports to the control side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpEvent {
    /// PFC watchdog: `(port, priority)` was paused continuously for `paused_for_ns`.
    Storm { port: usize, prio: u8, paused_for_ns: u64 },
    /// PFC watchdog: `(port, priority)` restored after the restoration time without pauses.
    Restore { port: usize, prio: u8 },
}

pub use rocefab_plumbing::eventfd::EventFd;

/// The control side's ends.
#[derive(Debug)]
pub struct ControlEnd {
    frames: rtrb::Producer<OwnFrame>,
    events: rtrb::Consumer<DpEvent>,
    received: rtrb::Consumer<OwnFrame>,
    /// Rung by the control side after pushing frames; polled by the data-plane thread.
    pub to_dp: std::sync::Arc<EventFd>,
    /// Rung by the data-plane thread after pushing events; polled by the control side.
    pub from_dp: std::sync::Arc<EventFd>,
}

/// The data-plane thread's ends.
#[derive(Debug)]
pub struct DataEnd {
    frames: rtrb::Consumer<OwnFrame>,
    events: rtrb::Producer<DpEvent>,
    received: rtrb::Producer<OwnFrame>,
    pub to_dp: std::sync::Arc<EventFd>,
    pub from_dp: std::sync::Arc<EventFd>,
    /// Events dropped because the ring was full (the control side fell behind).
    pub events_lost: u64,
}

/// Both ends: room for `frames` frames each way and `events` events in flight.
pub fn channel(frames: usize, events: usize) -> std::io::Result<(ControlEnd, DataEnd)> {
    let (ftx, frx) = rtrb::RingBuffer::new(frames);
    let (etx, erx) = rtrb::RingBuffer::new(events);
    let (rtx, rrx) = rtrb::RingBuffer::new(frames);
    let to_dp = std::sync::Arc::new(EventFd::new()?);
    let from_dp = std::sync::Arc::new(EventFd::new()?);
    Ok((
        ControlEnd { frames: ftx, events: erx, received: rrx, to_dp: to_dp.clone(), from_dp: from_dp.clone() },
        DataEnd { frames: frx, events: etx, received: rtx, to_dp, from_dp, events_lost: 0 },
    ))
}

impl ControlEnd {
    /// Queues a frame for the data plane and wakes it; gives the frame back when the ring is full.
    #[expect(clippy::result_large_err, reason = "the caller keeps its frame to retry; nothing is boxed on this path")]
    pub fn send(&mut self, f: OwnFrame) -> Result<(), OwnFrame> {
        match self.frames.push(f) {
            Ok(()) => {
                self.to_dp.ring();
                Ok(())
            }
            Err(rtrb::PushError::Full(f)) => Err(f),
        }
    }
    /// The next event the data plane reported, if any.
    pub fn next_event(&mut self) -> Option<DpEvent> {
        self.events.pop().ok()
    }
    /// The next frame a port received for the control side (LLDP), if any; `port` is the port
    /// it arrived on.
    pub fn next_received(&mut self) -> Option<OwnFrame> {
        self.received.pop().ok()
    }
    /// Whether frames may be sent without the ring being full.
    pub fn frame_slots(&self) -> usize {
        self.frames.slots()
    }
}

impl DataEnd {
    /// The next frame the control side handed over, if any.
    #[inline]
    pub fn next_frame(&mut self) -> Option<OwnFrame> {
        self.frames.pop().ok()
    }
    /// Whether frames are waiting (cheap: two atomic loads).
    #[inline]
    pub fn has_frames(&self) -> bool {
        !self.frames.is_empty()
    }
    /// Hands a received frame to the control side without ever blocking; false if the ring is
    /// full or the frame longer than [`OWN_FRAME_MAX`] (the caller counts it).
    #[inline]
    pub fn hand_up(&mut self, port: u16, frame: &[u8]) -> bool {
        let pushed =
            !self.received.is_full() && OwnFrame::new(port, frame).is_some_and(|f| self.received.push(f).is_ok());
        if pushed {
            self.from_dp.ring();
        }
        pushed
    }

    /// Reports an event without ever blocking: counted as lost if the ring is full.
    #[inline]
    pub fn report(&mut self, e: DpEvent) {
        if self.events.push(e).is_err() {
            self.events_lost += 1;
        }
        self.from_dp.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_order_and_a_full_ring_gives_the_frame_back() {
        let (mut c, mut d) = channel(2, 2).unwrap();
        assert!(!d.to_dp.drain());
        c.send(OwnFrame::new(1, &[1, 2, 3]).unwrap()).unwrap();
        c.send(OwnFrame::new(2, &[4; 60]).unwrap()).unwrap();
        let back = c.send(OwnFrame::new(3, &[5]).unwrap()).unwrap_err();
        assert_eq!(back.port, 3);
        assert!(d.to_dp.drain(), "sending rings the data plane's bell");
        assert!(!d.to_dp.drain());
        assert!(d.has_frames());
        let f = d.next_frame().unwrap();
        assert_eq!((f.port, f.bytes()), (1, &[1u8, 2, 3][..]));
        assert_eq!(d.next_frame().unwrap().bytes(), &[4u8; 60][..]);
        assert!(d.next_frame().is_none());
        assert!(OwnFrame::new(0, &[0; OWN_FRAME_MAX + 1]).is_none());
    }

    #[test]
    fn received_frames_go_up_and_overflow_is_counted() {
        let (mut c, mut d) = channel(2, 2).unwrap();
        assert!(d.hand_up(1, &[1; 60]));
        assert!(d.hand_up(2, &[2; 100]));
        assert!(!d.hand_up(3, &[3; 60]), "the ring is full");
        assert!(!d.hand_up(4, &[0; OWN_FRAME_MAX + 1]), "too long");
        assert!(c.from_dp.drain());
        let f = c.next_received().unwrap();
        assert_eq!((f.port, f.bytes().len()), (1, 60));
        assert_eq!(c.next_received().unwrap().port, 2);
        assert!(c.next_received().is_none());
    }

    #[test]
    fn events_never_block_the_data_plane() {
        let (mut c, mut d) = channel(1, 2).unwrap();
        for prio in 0..5 {
            d.report(DpEvent::Restore { port: 0, prio });
        }
        assert_eq!(d.events_lost, 3);
        assert!(c.from_dp.drain());
        assert_eq!(c.next_event(), Some(DpEvent::Restore { port: 0, prio: 0 }));
        assert_eq!(c.next_event(), Some(DpEvent::Restore { port: 0, prio: 1 }));
        assert_eq!(c.next_event(), None);
    }
}
