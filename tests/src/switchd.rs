//! A `rocefab-switchd` started by a test on its own, without `rocefab up`: its binary, a
//! two-port router's configuration, the daemon's guard (killed on drop unless it already
//! exited, also when an assertion fails) and the wait until its switches are up.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_contracts::config::{LldpConfig, NextHopConfig, PortConfig, RouteConfig, SwitchConfig};

use crate::fabric::bin_dir;
use crate::proc::sh;

/// The built `rocefab-switchd` (`$ROCEFAB_BIN_DIR`, default the workspace's `target/debug`).
pub fn binary() -> PathBuf {
    let p = bin_dir().join("rocefab-switchd");
    assert!(p.is_file(), "{} not found: run `cargo build -p dataplane-user` first or set ROCEFAB_BIN_DIR", p.display());
    p
}

/// One port of [`router`]: its interface, MAC and the peer name it reports.
pub struct Port<'a> {
    pub name: &'a str,
    pub mac: &'a str,
    pub peer: &'a str,
}

/// Switch `name` in namespace `ns` routing between 10.9.1.0/24 (port 0, next hop MAC `left`)
/// and 10.9.2.0/24 (port 1, next hop `right`), 1 Gbit/s ports, its metrics on loopback port
/// `metrics`, and no LLDP (the tests count every frame a port sends).
pub fn router(name: &str, ns: &str, ports: [Port; 2], left: &str, right: &str, metrics: u16) -> SwitchConfig {
    let port = |p: &Port| PortConfig {
        name: p.name.into(),
        mac: p.mac.parse().unwrap(),
        line_rate_bps: 1_000_000_000,
        addresses: vec![],
        peer: p.peer.into(),
        tx_delay_ns: 0,
        rx_delay_ns: 0,
    };
    SwitchConfig {
        name: name.into(),
        role: "rail".into(),
        netns: Some(ns.into()),
        hash_seed: 1,
        metrics_listen: format!("127.0.0.1:{metrics}").parse().unwrap(),
        dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
        queue_limit_bytes: 1 << 20,
        xdp_mode: "driver".into(),
        ports: ports.iter().map(port).collect(),
        nexthops: vec![
            NextHopConfig { port: 0, mac: left.parse().unwrap() },
            NextHopConfig { port: 1, mac: right.parse().unwrap() },
        ],
        groups: vec![vec![0], vec![1]],
        routes: vec![
            RouteConfig { prefix: "10.9.1.0".parse().unwrap(), len: 24, group: Some(0) },
            RouteConfig { prefix: "10.9.2.0".parse().unwrap(), len: 24, group: Some(1) },
        ],
        qos: Default::default(),
        lldp: LldpConfig { enabled: false, ..Default::default() },
        chassis_mac: None,
        time_dilation: 1.0,
        load_balance: Default::default(),
        fib: false,
    }
}

/// A running `rocefab-switchd`.
pub struct Daemon {
    pub child: Child,
    log: PathBuf,
}

impl Daemon {
    /// `rocefab-switchd --config <dir>/<name>.json ... [--workers N] --log-file <dir>/switchd.log`.
    pub fn start(cfgs: &[&SwitchConfig], workers: Option<u16>, dir: &Path) -> Daemon {
        let log = dir.join("switchd.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(binary());
        for c in cfgs {
            let path = dir.join(format!("{}.json", c.name));
            c.save(&path).unwrap();
            cmd.arg("--config").arg(path);
        }
        if let Some(n) = workers {
            cmd.arg("--workers").arg(n.to_string());
        }
        let child = cmd
            .arg("--log-file")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning rocefab-switchd");
        Daemon { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn sigterm(&mut self) {
        sh("kill", &["-TERM", &self.pid().to_string()]);
    }

    /// Waits until every switch logged that it is up and answers a scrape on its metrics port
    /// (20 s at most); panics with the log if the daemon exits first.
    pub fn wait_up(&mut self, metrics_ports: &[u16]) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("rocefab-switchd exited early with {st}; log:\n{}", self.log());
            }
            let up = self.log().matches("switch up").count() == metrics_ports.len();
            if up && metrics_ports.iter().all(|&p| scrape(p).is_ok()) {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "switches not up after 20 s; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the daemon to exit (`limit` at most); its status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(t0.elapsed() < limit, "daemon did not exit within {limit:?}; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `/metrics` of the switch listening on loopback port `port`.
pub fn scrape(port: u16) -> anyhow::Result<String> {
    crate::http::get(([127, 0, 0, 1], port).into(), "/metrics")
}
