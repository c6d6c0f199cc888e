//! Prometheus metrics of one `rocefab-hostd` (per QP and per NIC), updated from report
//! snapshots the data thread publishes every `snapshot_interval_ms` (100 ms by default; never
//! from the per-packet path), and served (`GET /metrics`, text exposition format 0.0.4) by the
//! daemons' shared HTTP server, [`rocefab_plumbing::http`], on a control thread of its own, next to
//! `GET /sample` (the latest snapshot as a [`HostSample`], JSON; 503 before the first).
//!
//! Times and rates are emulated, as in the [`Report`] (docs/src/emulated-time.md): wall-clock
//! measurements converted with the job's time dilation D, which `rocefab_time_dilation` exports.
use std::net::TcpListener;
use std::sync::{Arc, Mutex, PoisonError};

use rocefab_contracts::host_sample::HostSample;

use prometheus::{Counter, CounterVec, Encoder, Gauge, IntCounterVec, Opts, Registry, TextEncoder};

use rocefab_contracts::job::{Job, MigrationCause, Report};

/// The registry and every metric family.
pub struct Metrics {
    registry: Registry,
    /// Families without the `rocefab_host_` prefix (`rocefab_time_dilation`, named as the
    /// switch daemon names it).
    plain: Registry,
    /// Per-QP values, rendered by hand (see [`QpRows`]).
    qps: Mutex<QpRows>,
    /// `job="<name>"`, the registries' constant label as the QP rows print it.
    job_label: String,
    nic_counters: Vec<(&'static str, IntCounterVec)>,
    nic_paused: CounterVec,
    elapsed: Gauge,
    ok: Gauge,
    snapshots: Counter,
    nvlink: prometheus::IntCounter,
    migrations: IntCounterVec,
    /// The latest snapshot as `GET /sample` serves it.
    sample: Mutex<Option<HostSample>>,
}

fn qp_value(q: &rocefab_contracts::job::QpReport, name: &str) -> u64 {
    match name {
        "packets_sent" => q.packets_sent,
        "retransmitted_packets" => q.retransmitted_packets,
        "timeouts" => q.timeouts,
        "naks_received" => q.naks_received,
        "naks_sent" => q.naks_sent,
        "cnps_received" => q.cnps_received,
        "cnps_sent" => q.cnps_sent,
        "ce_marked_packets" => q.ce_marked,
        "acked_bytes" => q.send_completed_bytes,
        "placed_bytes" => q.bytes_placed,
        "packets_received" => q.packets_received,
        "duplicate_packets" => q.duplicates,
        "out_of_sequence_packets" => q.out_of_sequence,
        "out_of_order_packets" => q.out_of_order,
        "acks_sent" => q.acks_sent,
        "uet_trimmed_nacks_received" => q.pdc.as_ref().map_or(0, |p| p.nacks_trimmed),
        "uet_trimmed_packets_received" => q.pdc.as_ref().map_or(0, |p| p.trimmed_received),
        "uet_retransmitted_on_nack_packets" => q.pdc.as_ref().map_or(0, |p| p.retransmitted_on_nack),
        "uet_retransmitted_on_timeout_packets" => q.pdc.as_ref().map_or(0, |p| p.retransmitted_on_timeout),
        "uet_window_cuts" => q.pdc.as_ref().map_or(0, |p| p.window_cuts),
        _ => 0,
    }
}

fn nic_value(n: &rocefab_contracts::job::NicReport, name: &str) -> u64 {
    match name {
        "tx_frames" => n.tx_frames,
        "tx_bytes" => n.tx_bytes,
        "rx_frames" => n.rx_frames,
        "rx_bytes" => n.rx_bytes,
        "rx_bad_icrc_frames" => n.rx_bad_icrc,
        "rx_malformed_frames" => n.rx_malformed,
        "pfc_frames_received" => n.pfc_frames_received,
        "pfc_ignored_frames" => n.pfc_ignored_frames,
        "pfc_pause_frames_prio3" => n.pfc_pause_frames_prio3,
        "cnps_sent" => n.cnps_sent,
        "cnps_received" => n.cnps_received,
        _ => 0,
    }
}

const QP_COUNTERS: [(&str, &str); 20] = [
    ("packets_sent", "RoCEv2 data packets sent by the requester, retransmissions included"),
    ("retransmitted_packets", "packets sent again by go-back-N"),
    ("timeouts", "local ACK timeouts"),
    ("naks_received", "PSN sequence error NAKs received"),
    ("naks_sent", "PSN sequence error NAKs sent by the responder"),
    ("cnps_received", "CNPs received (DCQCN reaction point)"),
    ("cnps_sent", "CNPs sent (DCQCN notification point)"),
    ("ce_marked_packets", "data packets that arrived CE-marked"),
    ("acked_bytes", "payload bytes acknowledged"),
    ("placed_bytes", "payload bytes placed in the responder's memory region"),
    ("packets_received", "request packets received by the responder"),
    ("duplicate_packets", "request packets received again (a retransmission of delivered data: spurious timeout or lost ACK)"),
    ("out_of_sequence_packets", "request packets received past a gap and dropped (data lost or reordered upstream)"),
    ("out_of_order_packets", "request packets that arrived ahead of the expected PSN (reordered or past a loss); placed in Write-Only mode, else dropped"),
    ("acks_sent", "ACKs sent by the responder"),
    ("uet_trimmed_nacks_received", "UET: NACKs for trimmed packets received by the PDC's sender"),
    ("uet_trimmed_packets_received", "UET: trimmed packets received (each NACKed at once)"),
    ("uet_retransmitted_on_nack_packets", "UET: packets sent again on a NACK"),
    ("uet_retransmitted_on_timeout_packets", "UET: packets sent again after the retransmission timeout"),
    ("uet_window_cuts", "UET: congestion window cuts (ECN-marked ACK, trim NACK, timeout)"),
];

const NIC_COUNTERS: [(&str, &str); 11] = [
    ("tx_frames", "frames transmitted"),
    ("tx_bytes", "bytes transmitted (without FCS)"),
    ("rx_frames", "frames received from the AF_XDP socket"),
    ("rx_bytes", "bytes received"),
    ("rx_bad_icrc_frames", "RoCEv2 frames dropped for a bad ICRC"),
    ("rx_malformed_frames", "frames that did not parse"),
    ("pfc_frames_received", "PFC and PAUSE frames received"),
    (
        "pfc_ignored_frames",
        "PFC frames naming a priority on which PFC is not enabled (DCBX PFC enable vector): not acted on for it",
    ),
    ("pfc_pause_frames_prio3", "frames that paused priority 3"),
    ("cnps_sent", "CNPs sent by this NIC"),
    ("cnps_received", "CNPs received by this NIC"),
];

/// Every QP's values and its label set, rendered into the text exposition by hand.
///
/// A `prometheus` vector keeps one child (its label values, a hash-map slot and an atomic) per
/// label set and family: 17 families cost a hostd about 17 KB a QP, 140 MB for the 8,176 QP ends
/// each host of a 512-rank all-to-all has. A row here is its pre-rendered label set and the
/// numbers, about 200 bytes, and a scrape writes straight into the response text.
#[derive(Default)]
struct QpRows {
    rows: Vec<QpRow>,
}

struct QpRow {
    qpn: u32,
    /// `label="..",nic="..",peer_qpn="..",qpn=".."` (names sorted, as the crate prints them).
    labels: Box<str>,
    /// The NIC port in `labels` (a QP that migrates to its alternate port changes it).
    nic: Box<str>,
    counters: [u64; QP_COUNTERS.len()],
    rate_bytes: f64,
    goodput_bytes: Option<f64>,
}

/// A QP row's labels: `label="..",nic="..",peer_qpn="..",qpn=".."`.
fn qp_labels(q: &rocefab_contracts::job::QpReport) -> Box<str> {
    format!(
        "label=\"{}\",nic=\"{}\",peer_qpn=\"{}\",qpn=\"{}\"",
        escape_label_value(&q.label),
        escape_label_value(&q.nic),
        q.peer_qpn,
        q.qpn
    )
    .into_boxed_str()
}

impl QpRows {
    /// Brings every row up to `r` (counters only move forward); the rows follow the report's
    /// QPs, which keep their order from snapshot to snapshot.
    fn update(&mut self, r: &Report) {
        if self.rows.len() != r.qps.len() || self.rows.iter().zip(&r.qps).any(|(row, q)| row.qpn != q.qpn) {
            self.rows = r
                .qps
                .iter()
                .map(|q| QpRow {
                    qpn: q.qpn,
                    labels: qp_labels(q),
                    nic: q.nic.as_str().into(),
                    counters: [0; QP_COUNTERS.len()],
                    rate_bytes: 0.0,
                    goodput_bytes: None,
                })
                .collect();
        }
        for (row, q) in self.rows.iter_mut().zip(&r.qps) {
            if *row.nic != *q.nic {
                row.labels = qp_labels(q);
                row.nic = q.nic.as_str().into();
            }
            for (c, (name, _)) in row.counters.iter_mut().zip(QP_COUNTERS) {
                *c = (*c).max(qp_value(q, name));
            }
            row.rate_bytes = q.rate_bps as f64 / 8.0;
            if let Some(g) = q.goodput_bps {
                row.goodput_bytes = Some(g / 8.0);
            }
        }
    }

    /// Appends the per-QP families (`rocefab_host_qp_*`, each row also labelled `job_label`)
    /// in the text exposition format 0.0.4.
    fn render(&self, job_label: &str, out: &mut String) {
        use std::fmt::Write as _;
        if self.rows.is_empty() {
            return;
        }
        let head = |out: &mut String, name: &str, help: &str, kind: &str| {
            let _ = writeln!(out, "# HELP rocefab_host_{name} {}", escape_help(help));
            let _ = writeln!(out, "# TYPE rocefab_host_{name} {kind}");
        };
        for (i, (name, help)) in QP_COUNTERS.iter().enumerate() {
            let family = format!("qp_{name}_total");
            head(out, &family, help, "counter");
            for row in &self.rows {
                let _ = writeln!(out, "rocefab_host_{family}{{{},{job_label}}} {}", row.labels, row.counters[i]);
            }
        }
        head(out, "qp_rate_bytes_per_second", QP_RATE_HELP, "gauge");
        for row in &self.rows {
            let _ = writeln!(
                out,
                "rocefab_host_qp_rate_bytes_per_second{{{},{job_label}}} {}",
                row.labels,
                PromFloat(row.rate_bytes)
            );
        }
        if self.rows.iter().any(|r| r.goodput_bytes.is_some()) {
            head(out, "qp_goodput_bytes_per_second", QP_GOODPUT_HELP, "gauge");
            for row in &self.rows {
                if let Some(g) = row.goodput_bytes {
                    let _ = writeln!(
                        out,
                        "rocefab_host_qp_goodput_bytes_per_second{{{},{job_label}}} {}",
                        row.labels,
                        PromFloat(g)
                    );
                }
            }
        }
    }
}

const QP_RATE_HELP: &str =
    "current DCQCN sending rate of the requester, bytes per emulated second (Prometheus base unit: bytes)";
const QP_GOODPUT_HELP: &str = "acknowledged payload bytes per emulated second until the QP finished";

/// A label value escaped for the text format (backslash, double quote, line feed).
fn escape_label_value(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A HELP text escaped for the text format (backslash, line feed).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as the text format spells it (`+Inf`, `-Inf`, `NaN`).
struct PromFloat(f64);

impl std::fmt::Display for PromFloat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

impl Metrics {
    /// Registers every family with the constant label `job`.
    pub fn new(job: &Job) -> Result<Metrics, prometheus::Error> {
        let registry =
            Registry::new_custom(Some("rocefab_host".into()), Some([("job".to_string(), job.name.clone())].into()))?;
        let mut nic_counters = Vec::new();
        for (name, help) in NIC_COUNTERS {
            let c = IntCounterVec::new(Opts::new(format!("nic_{name}_total"), help), &["nic"])?;
            registry.register(Box::new(c.clone()))?;
            nic_counters.push((name, c));
        }
        let nic_paused = CounterVec::new(
            Opts::new("nic_pfc_paused_seconds_total", "time the data priority (3 by default) was paused by received PFC, emulated seconds (wall / rocefab_time_dilation)"),
            &["nic"],
        )?;
        registry.register(Box::new(nic_paused.clone()))?;
        let elapsed = Gauge::new(
            "job_elapsed_seconds",
            "time since the job started, or its completion time once finished, emulated seconds",
        )?;
        let ok = Gauge::new("job_ok", "1 once every QP finished with verified data")?;
        let snapshots = Counter::new("snapshots_total", "report snapshots taken by the data thread")?;
        let nvlink = prometheus::IntCounter::new(
            "nvlink_bytes_total",
            "bytes the collective moved between this host's GPUs over NVLink (no network frames)",
        )?;
        registry.register(Box::new(nvlink.clone()))?;
        let migrations = IntCounterVec::new(
            prometheus::Opts::new(
                "qp_migrations_total",
                "QPs of this host that moved to their alternate path (APM, dual-port NICs), by cause",
            ),
            &["cause"],
        )?;
        registry.register(Box::new(migrations.clone()))?;
        registry.register(Box::new(elapsed.clone()))?;
        registry.register(Box::new(ok.clone()))?;
        registry.register(Box::new(snapshots.clone()))?;
        let plain = Registry::new_custom(None, Some([("job".to_string(), job.name.clone())].into()))?;
        let dilation = Gauge::new(
            "rocefab_time_dilation",
            "Time dilation D of the job: rates run D times slower and timers D times longer than the emulated fabric's; every time metric is emulated (wall / D)",
        )?;
        plain.register(Box::new(dilation.clone()))?;
        dilation.set(job.time_dilation);
        Ok(Metrics {
            registry,
            plain,
            qps: Mutex::new(QpRows::default()),
            job_label: format!("job=\"{}\"", escape_label_value(&job.name)),
            nic_counters,
            nic_paused,
            elapsed,
            ok,
            snapshots,
            nvlink,
            migrations,
            sample: Mutex::new(None),
        })
    }

    /// Brings every metric up to `r` (counters only move forward).
    pub fn update(&self, r: &Report) {
        self.qps.lock().unwrap_or_else(PoisonError::into_inner).update(r);
        for n in &r.nics {
            for (name, c) in &self.nic_counters {
                let c = c.with_label_values(&[n.name.as_str()]);
                c.inc_by(nic_value(n, name).saturating_sub(c.get()));
            }
            let p = self.nic_paused.with_label_values(&[n.name.as_str()]);
            let secs = n.pfc_paused_ns_prio3 as f64 / 1e9;
            if secs > p.get() {
                p.inc_by(secs - p.get());
            }
        }
        self.elapsed.set(r.elapsed_ns as f64 / 1e9);
        self.nvlink.inc_by(r.nvlink_bytes.saturating_sub(self.nvlink.get()));
        for cause in [MigrationCause::LinkDown, MigrationCause::RetryExhausted, MigrationCause::PeerMigrated] {
            let n = r.qps.iter().filter(|q| q.migration.as_ref().is_some_and(|m| m.cause == cause)).count() as u64;
            let c = self.migrations.with_label_values(&[cause.label()]);
            c.inc_by(n.saturating_sub(c.get()));
        }
        self.ok.set(if r.ok { 1.0 } else { 0.0 });
        self.snapshots.inc();
        *self.sample.lock().unwrap_or_else(PoisonError::into_inner) = Some(HostSample::from_report(r));
    }

    /// The latest snapshot's sample, if one was taken.
    pub fn sample(&self) -> Option<HostSample> {
        self.sample.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families.
        let mut families = self.registry.gather();
        families.extend(self.plain.gather());
        let _ = TextEncoder::new().encode(&families, &mut buf);
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        self.qps.lock().unwrap_or_else(PoisonError::into_inner).render(&self.job_label, &mut text);
        text
    }
}

/// Serves `GET /metrics` on `listener` from a thread named `rocefab-ctl` running a
/// current-thread tokio runtime. The listener is bound by the caller, typically before it enters
/// the host's network namespace, so the controller can scrape it from the root namespace; the
/// thread may be spawned after (it only accepts on that socket). The thread runs until the
/// process exits.
pub fn serve(listener: TcpListener, m: Arc<Metrics>) -> std::io::Result<std::thread::JoinHandle<()>> {
    serve_all(vec![(listener, m)])
}

/// [`serve`] for many hosts' metrics, each on its own listener, from one thread
/// (`rocefab-hostd --hosts`: one server thread, not one per host).
pub fn serve_all(servers: Vec<(TcpListener, Arc<Metrics>)>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::Builder::new().name("rocefab-ctl".into()).spawn(move || {
        rt.block_on(async move {
            let tasks: Vec<_> = servers
                .into_iter()
                .map(|(listener, m)| {
                    tokio::spawn(async move {
                        let addr = listener.local_addr().ok();
                        if let Err(e) = rocefab_plumbing::http::serve(listener, router(m)).await {
                            tracing::error!(?addr, "metrics server: {e}");
                        }
                    })
                })
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        })
    })
}

/// `GET /metrics` and `GET /sample` of one host.
fn router(m: Arc<Metrics>) -> axum::Router {
    let render = m.clone();
    rocefab_plumbing::http::metrics_router(move || render.render()).route(
        "/sample",
        axum::routing::get(move || {
            let sample = m.sample();
            async move {
                use axum::response::IntoResponse;
                match sample {
                    Some(s) => axum::Json(s).into_response(),
                    None => (axum::http::StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response(),
                }
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::job::{NicReport, QpReport};

    #[test]
    fn snapshots_become_monotonic_labelled_metrics() {
        let job: Job = serde_json::from_str(r#"{"name":"j1","nics":[],"qps":[]}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j1".into(), ..Default::default() };
        r.qps.push(QpReport {
            qpn: 5,
            peer_qpn: 6,
            nic: "gpu0".into(),
            retransmitted_packets: 7,
            rate_bps: 1000,
            duplicates: 4,
            out_of_order: 11,
            ..Default::default()
        });
        r.nvlink_bytes = 4096;
        r.qps.push(QpReport {
            qpn: 8,
            nic: "gpu0p1".into(),
            migration: Some(rocefab_contracts::job::Migration {
                from_nic: "gpu0p0".into(),
                at_ns: 5,
                cause: MigrationCause::RetryExhausted,
            }),
            ..Default::default()
        });
        r.nics.push(NicReport {
            name: "gpu0".into(),
            pfc_paused_ns_prio3: 1_500_000_000,
            tx_frames: 3,
            pfc_ignored_frames: 2,
            ..Default::default()
        });
        m.update(&r);
        r.qps[0].retransmitted_packets = 9;
        m.update(&r);
        let t = m.render();
        assert!(
            t.contains(
                r#"rocefab_host_qp_retransmitted_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 9"#
            ),
            "{t}"
        );
        assert!(t.contains(r#"rocefab_host_nic_pfc_paused_seconds_total{nic="gpu0",job="j1"} 1.5"#), "{t}");
        assert!(t.contains(r#"rocefab_host_nic_pfc_ignored_frames_total{nic="gpu0",job="j1"} 2"#), "{t}");
        assert!(
            t.contains(
                r#"rocefab_host_qp_rate_bytes_per_second{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 125"#
            ),
            "{t}"
        );
        assert!(t.contains("# HELP rocefab_host_qp_retransmitted_packets_total packets sent again by go-back-N"));
        assert!(t.contains("rocefab_host_snapshots_total{job=\"j1\"} 2"));
        assert!(t.contains("rocefab_host_nvlink_bytes_total{job=\"j1\"} 4096\n"), "{t}");
        assert!(t.contains("rocefab_host_qp_migrations_total{cause=\"retry_exhausted\",job=\"j1\"} 1\n"), "{t}");
        assert!(t.contains(r#"nic="gpu0p1",peer_qpn="0",qpn="8""#), "{t}");
        r.qps[1].nic = "gpu0p0".into();
        m.update(&r);
        let t = m.render();
        assert!(
            t.contains(r#"nic="gpu0p0",peer_qpn="0",qpn="8""#) && !t.contains(r#"nic="gpu0p1""#),
            "a QP's row follows its port: {t}"
        );
        assert!(t.contains("rocefab_host_qp_migrations_total{cause=\"link_down\",job=\"j1\"} 0\n"), "{t}");
        assert!(
            t.contains(
                r#"rocefab_host_qp_duplicate_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 4"#
            ),
            "{t}"
        );
        assert!(t.contains("rocefab_time_dilation{job=\"j1\"} 1\n"), "{t}");
        assert!(
            t.contains(
                r#"rocefab_host_qp_out_of_order_packets_total{label="",nic="gpu0",peer_qpn="6",qpn="5",job="j1"} 11"#
            ),
            "{t}"
        );
    }

    /// QP labels are escaped, a QP that left the report leaves the scrape, and `promtool check
    /// metrics` (installed by `cargo xtask setup`) accepts the hand-rendered families.
    #[test]
    fn qp_rows_are_escaped_follow_the_report_and_pass_promtool() {
        let job: Job = serde_json::from_str(r#"{"name":"j\"4","nics":[],"qps":[]}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j\"4".into(), ..Default::default() };
        for qpn in [7, 8] {
            r.qps.push(QpReport {
                qpn,
                nic: "gpu0".into(),
                label: "rank 0 \"a\\b\"\nx".into(),
                packets_sent: u64::from(qpn) * 10,
                goodput_bps: (qpn == 8).then_some(16.0),
                ..Default::default()
            });
        }
        m.update(&r);
        let t = m.render();
        let want = r#"rocefab_host_qp_packets_sent_total{label="rank 0 \"a\\b\"\nx",nic="gpu0",peer_qpn="0",qpn="8",job="j\"4"} 80"#;
        assert!(t.contains(want), "{t}");
        assert!(t.contains(r#"rocefab_host_qp_goodput_bytes_per_second{label="rank 0 \"a\\b\"\nx",nic="gpu0",peer_qpn="0",qpn="8",job="j\"4"} 2"#), "{t}");
        assert_eq!(t.matches("rocefab_host_qp_goodput_bytes_per_second{").count(), 1, "{t}");
        assert_eq!(t.matches("# TYPE rocefab_host_qp_packets_sent_total counter\n").count(), 1, "{t}");
        rocefab_test_support::promtool::promtool_check("a host's scrape", &t);
        // A QP gone from the report is gone from the scrape.
        r.qps.remove(0);
        m.update(&r);
        let t = m.render();
        assert!(!t.contains("qpn=\"7\""), "{t}");
        assert!(t.contains(want), "{t}");
    }

    /// A QP row stays small: the per-QP metrics of a 512-rank all-to-all (8,176 QP ends a host)
    /// must not cost what `prometheus` vectors did (about 17 KB an end).
    #[test]
    fn a_qp_row_costs_a_few_hundred_bytes() {
        let mut r = Report::default();
        r.qps.push(QpReport {
            qpn: 16_777_215,
            peer_qpn: 16_777_214,
            nic: "gpu7".into(),
            label: "rank 511 -> rank 510".into(),
            ..Default::default()
        });
        let mut rows = QpRows::default();
        rows.update(&r);
        let bytes = std::mem::size_of::<QpRow>() + rows.rows[0].labels.len();
        assert!(bytes < 300, "{bytes} bytes");
    }

    #[test]
    fn a_uet_pdc_has_its_trims_and_retransmissions_by_cause() {
        let job: Job = serde_json::from_str(r#"{"name":"j5","nics":[],"qps":[]}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j5".into(), ..Default::default() };
        let pdc = rocefab_contracts::job::PdcReport {
            nacks_trimmed: 3,
            trimmed_received: 4,
            retransmitted_on_nack: 3,
            retransmitted_on_timeout: 1,
            window_cuts: 2,
            ..Default::default()
        };
        r.qps.push(QpReport { qpn: 9, nic: "gpu0".into(), pdc: Some(pdc), ..Default::default() });
        m.update(&r);
        let t = m.render();
        let row = |name: &str, v: u64| {
            format!(r#"rocefab_host_qp_{name}_total{{label="",nic="gpu0",peer_qpn="0",qpn="9",job="j5"}} {v}"#)
        };
        for (name, v) in [
            ("uet_trimmed_nacks_received", 3),
            ("uet_trimmed_packets_received", 4),
            ("uet_retransmitted_on_nack_packets", 3),
            ("uet_retransmitted_on_timeout_packets", 1),
            ("uet_window_cuts", 2),
        ] {
            assert!(t.contains(&row(name, v)), "{name}: {t}");
        }
    }

    #[test]
    fn the_time_dilation_is_exported_and_times_are_documented_as_emulated() {
        let job: Job = serde_json::from_str(r#"{"name":"j3","nics":[],"qps":[],"time_dilation":8000}"#).unwrap();
        let m = Metrics::new(&job).unwrap();
        let mut r = Report { job: "j3".into(), time_dilation: 8000.0, ..Default::default() };
        r.qps.push(QpReport { qpn: 5, goodput_bps: Some(8e9), ..Default::default() });
        r.nics.push(NicReport { name: "gpu0".into(), ..Default::default() });
        m.update(&r);
        let t = m.render();
        assert!(t.contains("# TYPE rocefab_time_dilation gauge\nrocefab_time_dilation{job=\"j3\"} 8000\n"), "{t}");
        for name in [
            "rocefab_host_nic_pfc_paused_seconds_total",
            "rocefab_host_job_elapsed_seconds",
            "rocefab_host_qp_goodput_bytes_per_second",
        ] {
            let help =
                t.lines().find(|l| l.starts_with(&format!("# HELP {name} "))).unwrap_or_else(|| panic!("{name}: {t}"));
            assert!(help.contains("emulated"), "{help}");
        }
    }

    #[test]
    fn serve_answers_a_scrape_from_its_own_thread() {
        use std::io::{Read, Write};
        let job: Job = serde_json::from_str(r#"{"name":"j2","nics":[],"qps":[]}"#).unwrap();
        let m = Arc::new(Metrics::new(&job).unwrap());
        m.update(&Report { job: "j2".into(), ..Default::default() });
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = serve(l, m).unwrap();
        assert_eq!(t.thread().name(), Some("rocefab-ctl"));
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.contains("rocefab_host_snapshots_total{job=\"j2\"} 1\n"), "{out}");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /sample HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        let body = out.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(serde_json::from_str::<HostSample>(body).unwrap().job, "j2");
    }
}
