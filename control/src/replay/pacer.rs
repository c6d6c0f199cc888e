//! Sending on time: [`pace_with`] keeps every frame's due time absolute from one start on a
//! [`PaceClock`] (the wall clock sleeps until ~200 µs before a due time and spins the rest), so
//! errors never accumulate, and measures the timing error against the schedule;
//! [`send_from_netns`] runs it on a thread inside the sending GPU's namespace, from a
//! [`PacketSocket`].

use std::time::{Duration, Instant};

use super::schedule::Schedule;
use rocefab_plumbing::packet::PacketSocket;

/// Why the sending thread could not send.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Entering the namespace failed (the message carries the cause chain).
    #[error("entering {path}: {err}")]
    Netns { path: String, err: String },
    /// The socket could not be opened inside the namespace.
    #[error("in namespace {path}: {err}")]
    Socket { path: String, err: std::io::Error },
    #[error("sender thread panicked")]
    Panicked,
}

/// Inter-frame timing error of actual send times against the schedule, accumulated online.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingError {
    /// Gaps measured (sends − 1).
    pub gaps: u64,
    sum_abs_error_ns: f64,
    /// Largest |actual gap − scheduled gap|.
    pub max_abs_error_ns: u64,
    sum_scheduled_gap_ns: f64,
    prev: Option<(u64, u64)>,
}

impl TimingError {
    /// One send: when it was due and when it happened, both ns from the start.
    pub fn record(&mut self, scheduled_ns: u64, actual_ns: u64) {
        if let Some((ps, pa)) = self.prev {
            let want = scheduled_ns as i128 - ps as i128;
            let got = actual_ns as i128 - pa as i128;
            let err = (got - want).unsigned_abs() as u64;
            self.gaps += 1;
            self.sum_abs_error_ns += err as f64;
            self.sum_scheduled_gap_ns += want as f64;
            self.max_abs_error_ns = self.max_abs_error_ns.max(err);
        }
        self.prev = Some((scheduled_ns, actual_ns));
    }

    /// Adds `o`'s gaps (another stream of the same replay) to these.
    pub fn merge(&mut self, o: &TimingError) {
        self.gaps += o.gaps;
        self.sum_abs_error_ns += o.sum_abs_error_ns;
        self.sum_scheduled_gap_ns += o.sum_scheduled_gap_ns;
        self.max_abs_error_ns = self.max_abs_error_ns.max(o.max_abs_error_ns);
    }

    pub fn mean_abs_error_ns(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.sum_abs_error_ns / self.gaps as f64)
    }

    pub fn mean_scheduled_gap_ns(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.sum_scheduled_gap_ns / self.gaps as f64)
    }

    /// Mean absolute error as a percentage of the mean scheduled gap (`None` without gaps or
    /// when every frame was due at once).
    pub fn mean_abs_error_pct(&self) -> Option<f64> {
        (self.gaps > 0 && self.sum_scheduled_gap_ns > 0.0)
            .then(|| 100.0 * self.sum_abs_error_ns / self.sum_scheduled_gap_ns)
    }
}

/// What [`pace`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SendLog {
    pub sent: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Bytes of the frames sent (Ethernet header included, FCS not).
    pub bytes: u64,
    /// Bytes of the first frame sent (rates count what followed it).
    pub first_len: u64,
    /// From the first send to the end of the last.
    pub duration: Duration,
    pub timing: TimingError,
    /// The run stopped at the deadline before the schedule's end.
    pub stopped_at_deadline: bool,
}

/// How long before a due time the sender stops sleeping and spins.
const SPIN_BEFORE: Duration = Duration::from_micros(200);

/// Waits until `due`: sleeps until [`SPIN_BEFORE`] ahead of it, then spins — at most
/// `SPIN_BEFORE` and a little, should the clock misbehave.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN_BEFORE {
            std::thread::sleep(left - SPIN_BEFORE);
            continue;
        }
        let bound = now + SPIN_BEFORE + Duration::from_micros(50);
        while Instant::now() < due && Instant::now() < bound {
            std::hint::spin_loop();
        }
        return;
    }
}

/// The clock [`pace_with`] keeps its schedule on: nanoseconds since the start, and a wait until
/// such a time. [`WallClock`] is the real one; tests drive a fake one.
pub trait PaceClock {
    fn now_ns(&mut self) -> u64;
    fn wait_until_ns(&mut self, t: u64);
}

/// The monotonic clock, from when it was made: sleeps until shortly before a due time, then spins.
#[derive(Debug, Clone, Copy)]
pub struct WallClock(Instant);

impl WallClock {
    pub fn start() -> WallClock {
        WallClock(Instant::now())
    }
}

impl PaceClock for WallClock {
    fn now_ns(&mut self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    fn wait_until_ns(&mut self, t: u64) {
        wait_until(self.0 + Duration::from_nanos(t));
    }
}

/// [`pace_with`] on the wall clock.
pub fn pace(schedule: &Schedule, limit: Duration, send: impl FnMut(usize) -> std::io::Result<usize>) -> SendLog {
    pace_with(schedule, limit, &mut WallClock::start(), send)
}

/// Sends every frame of `schedule` on time: `send(i)` sends one loop's frame `i` and returns
/// its length. Due times are absolute from one start, so a late send never delays the
/// following ones. Stops after `limit`. The send time recorded is taken right before `send`.
pub fn pace_with<C: PaceClock>(
    schedule: &Schedule,
    limit: Duration,
    clock: &mut C,
    mut send: impl FnMut(usize) -> std::io::Result<usize>,
) -> SendLog {
    let mut log = SendLog::default();
    let limit_ns = limit.as_nanos() as u64;
    let mut first: Option<u64> = None;
    let mut last_end = 0;
    for k in 0..schedule.len() {
        let due_ns = schedule.at(k);
        if due_ns > limit_ns {
            log.stopped_at_deadline = true;
            break;
        }
        clock.wait_until_ns(due_ns);
        let t = clock.now_ns();
        if t > limit_ns {
            log.stopped_at_deadline = true;
            break;
        }
        first.get_or_insert(t);
        match send(schedule.frame(k)) {
            Ok(n) => {
                if log.sent == 0 {
                    log.first_len = n as u64;
                }
                log.sent += 1;
                log.bytes += n as u64;
            }
            Err(e) => {
                log.errors += 1;
                log.first_error.get_or_insert_with(|| e.to_string());
            }
        }
        last_end = clock.now_ns();
        log.timing.record(due_ns, t);
    }
    log.duration = first.map_or(Duration::ZERO, |f| Duration::from_nanos(last_end.saturating_sub(f)));
    log
}

/// Mean scheduled gap from which the sending thread asks for real-time scheduling: it then
/// spins at most a fifth of the time, so it cannot starve the switch daemons.
const REALTIME_MIN_GAP_NS: u64 = 1_000_000;

/// Sends `frames` on `schedule` from `ifname` inside namespace `netns`, on a dedicated thread
/// that enters it (setns affects only the calling thread). When the frames are at least
/// [`REALTIME_MIN_GAP_NS`] apart on average the thread asks for `SCHED_FIFO` priority 1, so a
/// busy machine (a compiler on every core) does not delay its wake-ups by milliseconds; where
/// that is not permitted it runs as a normal thread.
pub(crate) fn send_from_netns(
    netns: &str,
    ifname: &str,
    frames: Vec<Vec<u8>>,
    schedule: Schedule,
    limit: Duration,
) -> Result<SendLog, SendError> {
    let ns_path = format!("/run/netns/{netns}");
    let (netns, ifname) = (netns.to_string(), ifname.to_string());
    let realtime = schedule.len() > 1 && schedule.duration_ns() / (schedule.len() - 1) >= REALTIME_MIN_GAP_NS;
    std::thread::spawn(move || -> Result<SendLog, SendError> {
        crate::fabric::netns::enter(&netns)
            .map_err(|e| SendError::Netns { path: ns_path.clone(), err: format!("{e:#}") })?;
        // SAFETY: prctl(PR_SET_TIMERSLACK) takes plain integer arguments; 1 µs of slack keeps
        // the sleeps close to the 200 µs spin window.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
        if realtime {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: pid 0 is the calling thread; `param` is live for the call.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                tracing::debug!("SCHED_FIFO for the replay thread: {}", std::io::Error::last_os_error());
            }
        }
        let sock = PacketSocket::sender(&ifname).map_err(|err| SendError::Socket { path: ns_path, err })?;
        // A full transmit queue (ENOBUFS / EAGAIN) is retried for up to 10 ms.
        Ok(pace(&schedule, limit, |i| sock.send_retrying(&frames[i], Duration::from_millis(10))))
    })
    .join()
    .map_err(|_| SendError::Panicked)?
}
