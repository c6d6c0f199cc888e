//! The daemons' capture streams: each node's daemon (a switch's, from its AF_XDP data path; a
//! host's NIC agent, from the kernel and the NIC emulator) mirrors its ports into a bounded ring
//! and streams the records on `GET /capture` (format in `rocefab_contracts::capture`, HTTP
//! chunked); this is the client: where each node's stream is, opening it, decoding the chunks,
//! and the daemons' count of frames their rings had no room for.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use rocefab_contracts::capture::StreamHeader;

use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::State;

/// Decodes an HTTP/1.1 chunked body as it arrives.
struct Chunked<R: BufRead> {
    r: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            if line.trim().is_empty() {
                // The CRLF after the previous chunk's data.
                line.clear();
                if self.r.read_line(&mut line)? == 0 {
                    self.done = true;
                    return Ok(0);
                }
            }
            let size = line.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad chunk size line {line:?}"))
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = self.left.min(buf.len());
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 {
            self.done = true;
        }
        self.left -= n;
        Ok(n)
    }
}

/// Opens `GET /capture` on a daemon; returns the stream header and the body reader.
pub fn open_stream(
    base: &str,
    ports: &[&str],
    snaplen: Option<u32>,
) -> anyhow::Result<(StreamHeader, Box<dyn BufRead + Send>)> {
    let hostport = base.strip_prefix("http://").unwrap_or(base).trim_end_matches('/');
    let addr: std::net::SocketAddr = hostport.parse().with_context(|| format!("{base}: bad address"))?;
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(3)).with_context(|| format!("connecting to {addr}"))?;
    let mut path = format!("/capture?ports={}", ports.join(","));
    if let Some(n) = snaplen {
        path.push_str(&format!("&snaplen={n}"));
    }
    write!(s, "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\r\n")?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status)?;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if h.to_ascii_lowercase().starts_with("transfer-encoding:") && h.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        }
    }
    let mut body: Box<dyn BufRead + Send> =
        if chunked { Box::new(BufReader::new(Chunked { r, left: 0, done: false })) } else { Box::new(r) };
    if status.split_whitespace().nth(1) != Some("200") {
        let mut msg = String::new();
        let _ = body.take(4096).read_to_string(&mut msg);
        bail!("{}: {}", status.trim(), msg.trim());
    }
    let mut line = String::new();
    body.read_line(&mut line)?;
    let hdr: StreamHeader =
        serde_json::from_str(line.trim()).with_context(|| format!("not a capture stream header: {line:?}"))?;
    Ok((hdr, body))
}

/// The daemon base URL (`http://127.0.0.1:port`) of every node of the fabric.
pub fn daemon_urls(st: &State) -> BTreeMap<String, String> {
    st.daemons.iter().map(|d| (d.node().to_string(), d.url("").trim_end_matches('/').to_string())).collect()
}

/// Sum of `rocefab_capture_lost_frames_total` a daemon reports; an error says why it could not
/// be read (the scrape failed, or the daemon exports no such series), never a 0.
pub fn lost_frames(base: &str) -> Result<f64, String> {
    let text = scrape(&format!("{base}/metrics"), Duration::from_secs(2)).map_err(|e| format!("{e:#}"))?;
    rocefab_contracts::promtext::sum_present(&text, LOST_FRAMES, &[])
        .ok_or_else(|| format!("{base}/metrics has no {LOST_FRAMES} series"))
}

/// The daemons' count of frames their mirror rings had no room for.
pub const LOST_FRAMES: &str = "rocefab_capture_lost_frames_total";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_decode_across_reads() {
        let raw = b"5\r\nhello\r\n3\r\n wo\r\n2\r\nrl\r\n1\r\nd\r\n0\r\n\r\n";
        let mut c = Chunked { r: BufReader::with_capacity(3, &raw[..]), left: 0, done: false };
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello world");
    }
}
