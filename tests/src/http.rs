//! The tests' HTTP client for the daemons' endpoints (`/metrics`, `/lldp`, `/capture`): a GET
//! whose whole answer is read (HTTP/1.0), and a GET whose answer is a chunked stream read as it
//! comes (HTTP/1.1, RFC 9112 §7.1), a POST whose status line is read, and a free loopback port
//! for a listener. The daemons close every connection after their response.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET path` on `addr`: the body of a 200 answer, or an error naming what went wrong (connect,
/// timeout, another status).
pub fn get(addr: SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").with_context(|| format!("{addr}{path}"))?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).with_context(|| format!("{addr}{path}"))?;
    let (head, body) = buf.split_once("\r\n\r\n").ok_or_else(|| anyhow!("{addr}{path}: bad HTTP response"))?;
    if !(head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")) {
        bail!("{addr}{path}: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

/// `POST path` with an empty body on `addr`: the answer's status line (`HTTP/1.1 200 OK`).
pub fn post(addr: SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    write!(s, "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .with_context(|| format!("{addr}{path}"))?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).with_context(|| format!("{addr}{path}"))?;
    Ok(buf.lines().next().unwrap_or_default().to_string())
}

/// A free TCP port on 127.0.0.1 (free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// An answer being read: its head, and the connection with what was read past the head.
pub struct Stream {
    /// Status line and headers, lower-cased.
    pub head: String,
    pub sock: TcpStream,
    /// Body bytes already read.
    pub raw: Vec<u8>,
}

impl Stream {
    /// `GET path` (HTTP/1.1) on `addr`, reading until the end of the head (by `deadline`); the
    /// socket then reads with `read_timeout`.
    pub fn open(addr: SocketAddr, path: &str, read_timeout: Duration, deadline: Instant) -> Result<Stream> {
        let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).with_context(|| format!("connect {addr}"))?;
        s.set_read_timeout(Some(read_timeout))?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").with_context(|| format!("{addr}{path}"))?;
        let mut raw = Vec::new();
        let head_end = loop {
            if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if Instant::now() >= deadline {
                bail!("{addr}{path}: no response head: {:?}", String::from_utf8_lossy(&raw));
            }
            let mut buf = [0u8; 4096];
            match s.read(&mut buf) {
                Ok(0) => break raw.len(),
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e).with_context(|| format!("{addr}{path}")),
            }
        };
        let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
        raw.drain(..head_end);
        Ok(Stream { head, sock: s, raw })
    }
}

/// Whether a read error is the socket's read timeout.
pub fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

/// Takes the complete chunks of an HTTP/1.1 chunked body (RFC 9112 §7.1) off the front of
/// `raw` into `body`; `Ok(true)` at the last chunk.
pub fn dechunk(raw: &mut Vec<u8>, body: &mut Vec<u8>) -> Result<bool, String> {
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else { return Ok(false) };
        let line = String::from_utf8_lossy(&raw[..eol]).into_owned();
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("chunk size {line:?}: {e}"))?;
        if size == 0 {
            return Ok(true);
        }
        let end = eol + 2 + size + 2;
        if raw.len() < end {
            return Ok(false);
        }
        if &raw[end - 2..end] != b"\r\n" {
            return Err("chunk not followed by CRLF".into());
        }
        body.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw.drain(..end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server answering one connection with `answer` after reading the request head.
    fn serve_once(answer: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut b = [0u8; 256];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut b).unwrap();
                req.extend_from_slice(&b[..n]);
            }
            s.write_all(answer).unwrap();
        });
        addr
    }

    #[test]
    fn get_returns_the_body_of_a_200_and_names_other_statuses() {
        let a = serve_once(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nrocefab_up 1\n");
        assert_eq!(get(a, "/metrics").unwrap(), "rocefab_up 1\n");
        let a = serve_once(b"HTTP/1.1 404 Not Found\r\n\r\nno");
        let e = get(a, "/lldp").unwrap_err().to_string();
        assert!(e.ends_with("/lldp: HTTP/1.1 404 Not Found"), "{e}");
        let a = serve_once(b"garbage");
        assert!(get(a, "/").unwrap_err().to_string().contains("bad HTTP response"));
    }

    #[test]
    fn a_stream_keeps_what_follows_its_head_and_dechunks_it() {
        let a =
            serve_once(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n");
        let end = Instant::now() + Duration::from_secs(5);
        let mut s = Stream::open(a, "/capture", Duration::from_millis(200), end).unwrap();
        assert!(s.head.starts_with("http/1.1 200") && s.head.contains("transfer-encoding: chunked"), "{}", s.head);
        let mut body = Vec::new();
        while !dechunk(&mut s.raw, &mut body).unwrap() {
            let mut b = [0u8; 64];
            match s.sock.read(&mut b) {
                Ok(n) => s.raw.extend_from_slice(&b[..n]),
                Err(e) if timed_out(&e) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(body, b"abcde");
        let mut raw = b"4\r\nabcdX\r\n".to_vec();
        assert!(dechunk(&mut raw, &mut Vec::new()).is_err(), "a chunk longer than its size");
    }
}
