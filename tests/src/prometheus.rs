//! A real Prometheus server (Debian package `prometheus`, installed by `cargo xtask setup`) for
//! the tests: started on a configuration with its TSDB in a temp dir and its web API on a free
//! loopback port, stopped (SIGTERM, then SIGKILL) and its data removed on drop; queried through
//! its HTTP API (<https://prometheus.io/docs/prometheus/latest/querying/api/>).
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::proc::Proc;
use crate::scratch::{temp_dir, TempDir};

/// A running `prometheus` server.
pub struct Prometheus {
    pub addr: SocketAddr,
    // Dropped first: the server stops before its TSDB directory is removed.
    _proc: Proc,
    _data: TempDir,
}

impl Prometheus {
    /// Starts `prometheus` on `config` and waits (up to 30 s) until `/-/ready` answers 200.
    pub fn start(config: &Path) -> Prometheus {
        let data = temp_dir("rocefab-prometheus-");
        let addr = free_port();
        let mut proc = Proc::spawn(
            "prometheus",
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.path().display()))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=error")
                .stdout(Stdio::null()),
        );
        let end = Instant::now() + Duration::from_secs(30);
        while !matches!(get(addr, "/-/ready"), Ok((200, _))) {
            if let Some(st) = proc.child.try_wait().expect("try_wait") {
                panic!("prometheus {st} (its stderr is above)");
            }
            assert!(Instant::now() < end, "prometheus on {addr} not ready within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Prometheus { addr, _proc: proc, _data: data }
    }

    /// `GET /api/v1/<endpoint>?<params>`: the answer's `data`, or an error with Prometheus's
    /// `errorType` and `error` (a query that does not parse is a 400 with `bad_data`).
    pub fn api(&self, endpoint: &str, params: &[(&str, &str)]) -> Result<Value> {
        let q: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        let path = format!("/api/v1/{endpoint}?{}", q.join("&"));
        let (code, body) = get(self.addr, &path)?;
        let v: Value = serde_json::from_str(&body).with_context(|| format!("{endpoint}: HTTP {code}: {body}"))?;
        if v["status"] != "success" {
            bail!("{endpoint}: HTTP {code}: {}: {}", v["errorType"], v["error"]);
        }
        Ok(v["data"].clone())
    }

    /// An instant query at the server's current time: the result's series (a scalar or string
    /// result is one series).
    pub fn query(&self, expr: &str) -> Result<Vec<Value>> {
        let data = self.api("query", &[("query", expr)])?;
        match data["resultType"].as_str() {
            Some("vector" | "matrix") => Ok(data["result"].as_array().cloned().unwrap_or_default()),
            _ => Ok(vec![data["result"].clone()]),
        }
    }

    /// The value of a one-series instant query (`sum(...)`, `max(...)`), or an error naming
    /// what came back.
    pub fn value(&self, expr: &str) -> Result<f64> {
        let r = self.query(expr)?;
        match r.as_slice() {
            [s] => {
                s["value"][1].as_str().and_then(|v| v.parse().ok()).ok_or_else(|| anyhow!("{expr}: no value in {s}"))
            }
            _ => bail!("{expr}: {} series, expected one: {r:?}", r.len()),
        }
    }

    /// The active targets (`/api/v1/targets`): their labels, `health` (`up`, `down`,
    /// `unknown`) and `lastError`.
    pub fn targets(&self) -> Result<Vec<Value>> {
        Ok(self.api("targets", &[("state", "active")])?["activeTargets"].as_array().cloned().unwrap_or_default())
    }

    /// Polls the targets until `done` holds (every 200 ms, for at most `timeout`); the last list.
    pub fn wait_targets(&self, what: &str, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let end = Instant::now() + timeout;
        loop {
            let t = self.targets().unwrap_or_else(|e| panic!("{e:#}"));
            if done(&t) {
                return t;
            }
            assert!(Instant::now() < end, "{what}: not within {timeout:?}; targets:\n{}", describe(&t));
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// `GET path` on `addr`: the status code and body (HTTP/1.0: the server closes the connection
/// after its answer, whatever the status).
pub fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).with_context(|| format!("{addr}{path}"))?;
    let (head, body) = buf.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{addr}{path}: bad HTTP response"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("{addr}{path}: bad status line {:?}", head.lines().next()))?;
    Ok((code, body.to_string()))
}

/// One line per target: job, address, health, last error.
pub fn describe(targets: &[Value]) -> String {
    targets
        .iter()
        .map(|t| {
            format!(
                "  {} {} {} {}",
                t["labels"]["job"].as_str().unwrap_or("?"),
                t["labels"]["instance"].as_str().unwrap_or("?"),
                t["health"].as_str().unwrap_or("?"),
                t["lastError"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A loopback address with a port nothing listens on right now.
fn free_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], crate::http::free_port()))
}

/// Percent-encoding of a query-string value (RFC 3986: everything but the unreserved
/// characters).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(super::encode("sum(up{a=\"b c\"})[5m]"), "sum%28up%7Ba%3D%22b%20c%22%7D%29%5B5m%5D");
    }
}
