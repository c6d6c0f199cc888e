//! The one client of the fabric's daemons' HTTP endpoints (`/metrics`, `/lldp`, `/routes`,
//! `/ports/...`): a blocking HTTP/1.0 request per call, with a timeout, and the reading of a
//! per-port counter or gauge out of a Prometheus text scrape.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

/// The values of the samples of `name` for `port` in a Prometheus text scrape.
fn port_samples<'a>(text: &'a str, name: &'a str, port: &str) -> impl Iterator<Item = f64> + 'a {
    let want = format!("port=\"{port}\"");
    text.lines().filter_map(move |l| {
        let (labels, value) = l.strip_prefix(name)?.strip_prefix('{')?.split_once('}')?;
        labels.split(',').any(|kv| kv == want).then(|| value.trim().parse::<f64>().ok())?
    })
}

/// Sum of the samples of the per-port counter `name` for `port` in a Prometheus text scrape.
pub fn port_counter(text: &str, name: &str, port: &str) -> u64 {
    port_samples(text, name, port).sum::<f64>() as u64
}

/// The value of the per-port gauge `name` for `port` in a Prometheus text scrape; `None` when
/// the scrape has no such series (an older daemon, or a port it does not have).
pub fn port_gauge(text: &str, name: &str, port: &str) -> Option<f64> {
    port_samples(text, name, port).next()
}

/// HTTP GET of a `http://host:port/path` URL (the daemons' `/metrics` and `/lldp`); body on 200.
pub fn scrape(url: &str, timeout: Duration) -> anyhow::Result<String> {
    http_request("GET", url, None, timeout)
}

/// An HTTP/1.0 request to one of the fabric's daemons (`http://addr:port/path`) with an
/// optional JSON body; the response body, or an error with the status line and body.
pub fn http_request(method: &str, url: &str, json: Option<&[u8]>, timeout: Duration) -> anyhow::Result<String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| anyhow!("{url}: only http:// URLs"))?;
    let (hostport, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap_or((rest, "/".into()));
    let addr: std::net::SocketAddr = hostport.parse().with_context(|| format!("{url}: bad address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {hostport}\r\nConnection: close\r\n")?;
    match json {
        Some(b) => {
            write!(s, "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n", b.len())?;
            s.write_all(b)?;
        }
        None => write!(s, "\r\n")?,
    }
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).with_context(|| format!("read {url}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{url}: no HTTP header"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("{method} {url}: {status}: {}", body.trim());
    }
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_gauge_is_read_by_its_port_label_and_missing_is_none() {
        let text = "# TYPE rocefab_port_last_tx_timestamp_seconds gauge\n\
            rocefab_port_last_tx_timestamp_seconds{port=\"eth1\",switch=\"rail1\"} 1795952732.5593317\n\
            rocefab_port_last_tx_timestamp_seconds{port=\"eth10\",switch=\"rail1\"} 0\n";
        let g = |port| port_gauge(text, "rocefab_port_last_tx_timestamp_seconds", port);
        assert_eq!((g("eth1"), g("eth10"), g("eth2")), (Some(1795952732.5593317), Some(0.0), None));
        assert_eq!(port_gauge(text, "rocefab_port_last_tx", "eth1"), None);
    }
}
