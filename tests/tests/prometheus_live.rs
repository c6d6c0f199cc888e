//! `rocefab prometheus-config` and the Grafana dashboard (`grafana/rocefab-dashboard.json`)
//! against a live fabric and a real Prometheus server (Debian package `prometheus`, as
//! `cargo xtask setup` installs it): promtool accepts the configuration; Prometheus scrapes
//! every switch daemon and NIC agent, labelled as the configuration says, and shows the hosts'
//! rocefab-hostd down between jobs and up while one runs; every PromQL expression of the
//! dashboard (panels and query variables, variables replaced) parses and returns series while a
//! lossless incast with WRED/ECN runs (so the PFC, ECN and CNP counters move); and the panels'
//! arithmetic (emulated time, line rate) gives fractions between 0 and 1. Needs root.
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_test_support::promtool::promtool_check_config;
use rocefab_tests::fabric::{rocefab, rocefab_bin, stderr, stdout, Fabric};
use rocefab_tests::grafana::{dashboard, queries, substitute};
use rocefab_tests::proc::Proc;
use rocefab_tests::prometheus::{describe, Prometheus};
use rocefab_tests::scratch::TempFile;
use serde_json::Value;

/// The hosts' metrics ports during the job (`rocefab run --metrics-port-base`).
const HOSTD_BASE: u16 = 9800;

/// Targets of `role` (the configuration's label).
fn of_role<'a>(targets: &'a [Value], role: &str) -> Vec<&'a Value> {
    targets.iter().filter(|t| t["labels"]["role"] == role).collect()
}

/// Whether there are `n` targets of `role`, all with `health`.
fn all(targets: &[Value], role: &str, n: usize, health: &str) -> bool {
    let t = of_role(targets, role);
    t.len() == n && t.iter().all(|t| t["health"] == health)
}

/// The dashboard's expression whose source (`panel "<title>" <refId>`) starts with `panel`.
fn panel_expr(panel: &str) -> String {
    let q = queries(&dashboard());
    q.iter().find(|q| q.source.starts_with(panel)).unwrap_or_else(|| panic!("no query of {panel}")).expr.clone()
}

#[test]
fn prometheus_scrapes_every_daemon_and_every_dashboard_query_returns_series() {
    // rail-spine-incast.yaml with WRED/ECN on (as fabric_ecn runs it): the incast pauses
    // (PFC), marks CE and makes the receiver send CNPs. At time dilation 4, so that the panels'
    // conversion to emulated time is checked (a rate not multiplied by D reads a quarter).
    let f = Fabric::up_edited("rail-spine-incast.yaml", "rfgf", |t| {
        assert!(t.contains("  wred: off") && !t.contains("time_dilation"), "rail-spine-incast.yaml changed");
        t.replacen("  wred: off", "  wred: { min: 20KB, max: 60KB, probability: 100 }", 1) + "time_dilation: 4\n"
    });
    let base = HOSTD_BASE.to_string();
    let o = rocefab(&["prometheus-config", &f.name, "--scrape-interval", "1s", "--hostd-port-base", &base]);
    assert!(o.status.success(), "rocefab prometheus-config: {}", stderr(&o));
    let cfg = TempFile::new("prometheus.yml");
    std::fs::write(&cfg, stdout(&o)).unwrap();
    promtool_check_config(&cfg);
    let prom = Prometheus::start(&cfg);

    // Between jobs: every switch daemon and NIC agent is up, every hostd down.
    let t = prom.wait_targets("switch daemons and NIC agents up, hostd down", Duration::from_secs(30), |t| {
        t.len() == 12 && all(t, "switch", 4, "up") && all(t, "nic-agent", 4, "up") && all(t, "hostd", 4, "down")
    });
    let mut want = BTreeMap::new();
    for (sw, tier) in [("rail1", "rail"), ("rail2", "rail"), ("spine1", "spine"), ("spine2", "spine")] {
        want.insert(f.config(sw).metrics_listen.to_string(), ("rocefab-switchd", sw.to_string(), "switch", Some(tier)));
    }
    for h in 1..=4u16 {
        let host = format!("host{h}");
        want.insert(f.nicd_addr(&host).to_string(), ("rocefab-nicd", host.clone(), "nic-agent", None));
        want.insert(format!("127.0.0.1:{}", HOSTD_BASE + h - 1), ("rocefab-hostd", host, "hostd", None));
    }
    for t in &t {
        let l = &t["labels"];
        let instance = l["instance"].as_str().unwrap();
        let (job, node, role, tier) = want.remove(instance).unwrap_or_else(|| panic!("unexpected target {t}"));
        assert_eq!(
            (l["job"].as_str(), l["fabric"].as_str(), l["node"].as_str()),
            (Some(job), Some("rfgf"), Some(node.as_str()))
        );
        assert_eq!((l["role"].as_str(), l["tier"].as_str()), (Some(role), tier), "{instance}");
    }
    assert!(want.is_empty(), "targets missing: {want:?}");

    // A 7:1 incast into host1:gpu0's 100 Mbit/s link (25 Mbit/s on the wall clock), with the
    // hosts' metrics on HOSTD_BASE.
    let report = TempFile::new("incast.json");
    let mut job = Proc::spawn(
        "rocefab run incast",
        Command::new(rocefab_bin())
            .args(["run", &f.name, "incast", "--size", "4MiB", "--json", "--retransmit-timeout-ms", "2000"])
            .args(["--timeout", "90", "--metrics-port-base", &base])
            .stdout(Stdio::from(std::fs::File::create(&report).unwrap())),
    );

    // Every expression of the dashboard, as Grafana would send it: the fabric chosen, all
    // switches, top 5, `$__rate_interval` as Grafana computes it for a 1 s scrape interval
    // (4 × the interval, at least) with room to spare, the range the last two minutes.
    let vars = [("fabric", "rfgf"), ("switch", ".+"), ("topn", "5"), ("__rate_interval", "10s"), ("__range", "2m")];
    let exprs: Vec<(String, String)> = queries(&dashboard())
        .into_iter()
        .map(|q| {
            let e = substitute(&q.expr, &vars).unwrap_or_else(|e| panic!("{}: {e}", q.source));
            (q.source, e)
        })
        .collect();
    assert!(exprs.len() >= 20, "{} expressions", exprs.len());
    let mut pending: BTreeMap<String, String> = exprs.iter().cloned().collect();
    let mut hostd_seen_up = false;
    // While the job runs (NIC series exist only then), then up to 30 s for what is left.
    let mut deadline = Instant::now() + Duration::from_secs(150);
    let mut finished = None;
    while !pending.is_empty() && Instant::now() < deadline {
        if finished.is_none() {
            if let Some(st) = job.child.try_wait().expect("try_wait") {
                finished = Some(st);
                deadline = deadline.min(Instant::now() + Duration::from_secs(30));
            }
        }
        pending.retain(|source, expr| match prom.query(expr) {
            Ok(series) => series.is_empty(),
            Err(e) => panic!("{source}: {expr}: {e:#}"),
        });
        if !hostd_seen_up {
            hostd_seen_up = all(&prom.targets().unwrap(), "hostd", 4, "up");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(pending.is_empty(), "dashboard expressions that returned no series while the incast ran: {pending:#?}");
    let st = match finished {
        Some(st) => st,
        None => {
            let end = Instant::now() + Duration::from_secs(120);
            loop {
                if let Some(st) = job.child.try_wait().expect("try_wait") {
                    break st;
                }
                assert!(Instant::now() < end, "rocefab run did not finish");
                if !hostd_seen_up {
                    hostd_seen_up = all(&prom.targets().unwrap(), "hostd", 4, "up");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(st.success(), "rocefab run: {st}\n{text}");
    let r: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(r["ok"], true, "{r}");
    assert!(hostd_seen_up, "Prometheus never saw all four rocefab-hostd up during the job");
    prom.wait_targets("every hostd down again after the job", Duration::from_secs(15), |t| all(t, "hostd", 4, "down"));

    // The incast did what the panels show: CE marks, CNPs, pauses; a hostd's own `job` label is
    // Prometheus's `exported_job`.
    let value = |e: &str| {
        prom.value(e).unwrap_or_else(|err| panic!("{err:#}\ntargets:\n{}", describe(&prom.targets().unwrap())))
    };
    assert!(value(r#"sum(increase(rocefab_xdp_ecn_marked_total{fabric="rfgf"}[5m]))"#) > 0.0);
    assert!(value(r#"sum(increase(rocefab_host_nic_cnps_sent_total{fabric="rfgf"}[5m]))"#) > 0.0);
    assert_eq!(
        value(
            r#"count(last_over_time(rocefab_host_nic_cnps_sent_total{fabric="rfgf", job="rocefab-hostd", exported_job=~"rfgf-.+"}[5m]))"#
        ),
        8.0,
        "one series per GPU NIC, the rocefab job's name in exported_job"
    );
    // The pauses started at rail1's ingress groups crossing xOFF (64 KB): the watermarks say so.
    let onsets = value(r#"sum(rocefab_pfc_pause_onsets_total{fabric="rfgf", node="rail1", priority="3"})"#);
    assert!(onsets > 0.0, "rail1 sent no pause");
    assert!(value(r#"max(rocefab_ingress_pg_peak_bytes{fabric="rfgf", node="rail1", priority="3"})"#) >= 64_000.0);
    assert!(value(r#"max(rocefab_ingress_pg_headroom_peak_bytes{fabric="rfgf", priority="3"})"#) > 0.0);
    // Utilisation and pause occupancy are fractions of emulated time: the busiest port (the
    // 100 Mbit/s link into host1:gpu0) near 1 (0.94-0.98 measured), never above it; the senders
    // paused most of the time (0.99 measured). Without the dilation either would read at most
    // 0.25. 3 s windows (three scrapes) so a window can fall inside the job.
    let short = [("fabric", "rfgf"), ("switch", ".+"), ("__rate_interval", "3s")];
    let peak = |panel: &str| {
        let e = substitute(&panel_expr(panel), &short).unwrap();
        value(&format!("max(max_over_time(({e})[5m:1s]))"))
    };
    let util = peak("panel \"Egress utilisation per port\" A");
    assert!(util > 0.5 && util <= 1.1, "peak egress utilisation {util}");
    let paused = peak("panel \"PFC pause occupancy by priority\" A");
    eprintln!("peak egress utilisation {util:.3}, peak pause occupancy {paused:.3}");
    assert!(paused > 0.3 && paused <= 1.1, "peak pause occupancy {paused}");
}
