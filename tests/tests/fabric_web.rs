//! `rocefab web` (issue 27) in a real browser: Debian's headless Chromium, driven over WebDriver
//! by chromedriver, on the page of `rail-spine-incast.yaml` while its 7:1 lossless incast into
//! host1:gpu0 runs (rank 0 behind a 100 Mbit/s link, small PFC thresholds; see fabric_pfc).
//!
//! The page loads without a console error and draws every switch; during the incast rail1's link
//! towards host1:gpu0 turns the congestion colour, and a PFC pause shows on one of rail1's ports
//! within a second of the first PFC frame rail1 counts (its `/metrics`, polled by the test
//! beside the page). A screenshot is taken then (`target/rocefab-web.png`, or
//! `$ROCEFAB_WEB_SCREENSHOT`: the book's `docs/src/images/web.png` comes from here). Clicking the link
//! shows both ends' counters and LLDP neighbours, the capture button downloads a pcapng, and
//! `/api/capture` of rail1's port during the incast holds its frames. Before the incast, a cut
//! spine link (`rocefab fail link --for 2s`) is drawn down and its failure and restoration
//! appear in the event log; after it, a switch daemon that stops answering (SIGSTOP) is shown as
//! down and logged, and as up again after SIGCONT; closing the browser leaves the server
//! running, and Ctrl-C ends it with status 0.
//!
//! Needs root, chromium and chromium-driver. Run serially, after
//! `cargo build -p control -p dataplane-user -p host-daemons -p rocefab-web`.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use rocefab_tests::browser::{console_log, Driver};
use rocefab_tests::fabric::{metric, rocefab, rocefab_bin, run_dir, stderr, workspace, Fabric};
use rocefab_tests::http::free_port;
use rocefab_tests::proc::Proc;
use serde_json::Value;

/// The page's congestion colour (`--congested` in style.css) as the browser computes it.
const CONGESTED: &str = "rgb(214, 39, 40)";

/// `rocefab-web`, the server `rocefab web` hands over to: it must be beside `rocefab`.
fn require_server() {
    let p = rocefab_bin().with_file_name("rocefab-web");
    assert!(p.is_file(), "{} not found: run `cargo build -p rocefab-web` first", p.display());
}

#[test]
fn rocefab_web_without_the_fabric_says_it_is_not_up() {
    require_server();
    let o = rocefab(&["web", "rfwb-none", "--listen", "127.0.0.1:0"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("fabric \"rfwb-none\" is not up"), "{e}");
}

/// `GET path` on `addr`, the whole answer as bytes: (head, body).
fn get_bytes(addr: SocketAddr, path: &str, timeout: Duration) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect to rocefab web");
    s.set_read_timeout(Some(timeout)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP head") + 4;
    (String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase(), raw[end..].to_vec())
}

/// The Enhanced Packet Blocks of a pcapng file (little-endian, as rocefab writes it); panics
/// unless it starts with a Section Header Block and its blocks fit.
fn pcapng_packets(b: &[u8]) -> usize {
    assert!(b.len() >= 28 && b[..4] == [0x0a, 0x0d, 0x0d, 0x0a], "not a pcapng file: {} bytes", b.len());
    let (mut off, mut packets) = (0, 0);
    while off + 8 <= b.len() {
        let kind = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
        let len = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
        assert!(len >= 12 && off + len <= b.len(), "block at {off}: length {len}");
        packets += usize::from(kind == 6);
        off += len;
    }
    packets
}

/// Runs `script` in the page and returns its value.
async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap_or_else(|e| panic!("{e}: {script}"))
}

/// Polls `script` until `ok` holds on its value (10 s at most); the last value.
async fn until(c: &Client, what: &str, script: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let v = js(c, script).await;
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < end, "{what} within 10 s; last: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The page's errors and the browser's SEVERE console messages: none may be there.
async fn assert_no_console_errors(c: &Client, when: &str) {
    let page = js(c, "return window.__errors").await;
    assert_eq!(page, Value::Array(vec![]), "page errors {when}");
    let severe: Vec<Value> = console_log(c).await.into_iter().filter(|m| m["level"] == "SEVERE").collect();
    assert!(severe.is_empty(), "console errors {when}: {severe:?}");
}

/// SIGSTOPs a process, SIGCONTs it on drop.
struct Stopped(i32);
impl Stopped {
    fn stop(pid: i32) -> Stopped {
        // SAFETY: kill(2) of the fabric's own switch daemon.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        Stopped(pid)
    }
}
impl Drop for Stopped {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the process this guard stopped.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

#[test]
fn the_live_view_shows_the_incast_congest_its_link_and_pause_within_a_second() {
    require_server();
    let f = Fabric::up("rail-spine-incast.yaml", "rfwb");
    let switches = ["rail1", "rail2", "spine1", "spine2"];
    let to_host1 = f.port_to("rail1", "host1:gpu0");
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut web = Proc::spawn(
        "rocefab web",
        Command::new(rocefab_bin()).args(["web", &f.name, "--listen", &addr.to_string()]).stdout(Stdio::piped()),
    );
    let ready = web.line(Duration::from_secs(10));
    assert!(ready.contains(&format!("http://{addr}/")), "{ready}");
    let driver = Driver::start();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = driver.connect(1600, 1000).await;
        c.goto(&format!("http://{addr}/")).await.expect("open the page");

        // Every node is drawn, the stream is live and frames arrive.
        until(&c, "the page live with its frames", "return [document.querySelectorAll('g.node').length, document.getElementById('conn').dataset.state, document.getElementById('clock').textContent]", |v| {
            v[0] == 8 && v[1] == "live" && v[2].as_str().is_some_and(|t| t.contains("emulated"))
        })
        .await;
        let drawn = js(&c, "return [...document.querySelectorAll('g.node')].filter(g => g.dataset.kind !== 'host').map(g => [g.dataset.node, g.textContent])").await;
        let drawn: Vec<&str> = drawn.as_array().unwrap().iter().map(|n| n[0].as_str().unwrap()).collect();
        assert_eq!(drawn.len(), switches.len(), "{drawn:?}");
        for s in switches {
            assert!(drawn.contains(&s), "{s} is not drawn: {drawn:?}");
        }
        until(&c, "every switch up", "return [...document.querySelectorAll('g.node:not([data-kind=host])')].map(g => g.dataset.state)", |v| {
            v.as_array().unwrap().iter().all(|s| s == "up")
        })
        .await;
        assert_no_console_errors(&c, "after loading").await;

        // A cut link is drawn down while it is cut, and the event log has its failure and its
        // restoration.
        let up = f.config("rail2").ports.iter().find(|p| p.peer.starts_with("spine2:")).unwrap().name.clone();
        let mut cut = Proc::spawn(
            "rocefab fail link",
            Command::new(rocefab_bin())
                .args(["fail", "link", &f.name, &format!("rail2:{up}"), "--for", "2s"])
                .stdout(Stdio::null()),
        );
        let link = format!(
            "return [[...document.querySelectorAll('line.dir[data-from=\"rail2:{up}\"]')].map(l => l.dataset.state), document.getElementById('events').textContent]"
        );
        let cut_up = format!("rail2:{up}");
        until(&c, "the cut link drawn down and logged", &link, |v| {
            v[0] == serde_json::json!(["down"]) && v[1].as_str().unwrap().contains("link down") && v[1].as_str().unwrap().contains(&cut_up)
        })
        .await;
        until(&c, "the restored link drawn up and logged", &link, |v| {
            v[0] != serde_json::json!(["down"]) && v[1].as_str().unwrap().contains("link up")
        })
        .await;
        assert_eq!(cut.wait(Duration::from_secs(20)), 0, "rocefab fail link --for 2s");

        // The incast, and a capture of rail1's port to host1 while it runs.
        let mut run = Proc::drained(
            "rocefab run incast",
            Command::new(rocefab_bin())
                .args(["run", &f.name, "incast", "--size", "4MiB", "--json", "--retransmit-timeout-ms", "2000"])
                .args(["--timeout", "60", "--metrics-port-base", "9900"])
                .stdout(Stdio::piped()),
        );
        // Started once the incast is under way (rail1 sent its first PFC frame).
        let cap_path = format!("/api/capture?port=rail1:{to_host1}&seconds=2");
        let mut capture = None;

        let probe = format!(
            "const l = document.querySelector('line.dir[data-from=\"rail1:{to_host1}\"][data-to=\"host1:gpu0\"]');
             return {{ state: l.dataset.state, stroke: getComputedStyle(l).stroke, link: l.dataset.link,
                      pfc: [...document.querySelectorAll('circle.port[data-pfc=on]')].map(c => c.dataset.port) }};"
        );
        let (mut first_pfc, mut first_shown, mut congested, mut shot) = (None, None, None, None);
        let mut link_id = String::new();
        let end = Instant::now() + Duration::from_secs(80);
        while run.child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < end, "the incast did not finish within 80 s");
            let t = f.metrics("rail1");
            if first_pfc.is_none() && metric(&t, "rocefab_pfc_tx_frames_total", &[]) > 0.0 {
                first_pfc = Some(Instant::now());
                let cap_path = cap_path.clone();
                capture = Some(std::thread::spawn(move || get_bytes(addr, &cap_path, Duration::from_secs(20))));
            }
            let v = js(&c, &probe).await;
            let now = Instant::now();
            link_id = v["link"].as_str().unwrap_or_default().to_string();
            let shown = v["pfc"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with("rail1:"));
            if shown && first_shown.is_none() {
                first_shown = Some(now);
            }
            if congested.is_none() && v["state"] == "congested" && v["stroke"] == CONGESTED {
                congested = Some(now);
            }
            if shot.is_none() && congested.is_some() && first_shown.is_some_and(|s| now - s > Duration::from_millis(1500)) {
                shot = Some(c.screenshot().await.expect("screenshot"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let report = String::from_utf8_lossy(&run.output().stdout).into_owned();
        let r: Value = serde_json::from_str(&report).unwrap_or_else(|e| panic!("rocefab run --json: {e}: {report}"));
        assert_eq!(r["ok"], true, "{r}");

        let first_pfc = first_pfc.expect("rail1 sent no PFC during the incast");
        let first_shown = first_shown.expect("the page never showed a PFC pause on rail1");
        let late = first_shown.saturating_duration_since(first_pfc);
        eprintln!("rail1's first PFC frame: shown {late:?} after the switch counted it");
        assert!(late <= Duration::from_secs(1), "the pause showed {late:?} after rail1's first PFC frame");
        assert!(congested.is_some(), "rail1:{to_host1} -> host1:gpu0 never turned the congestion colour");
        let png = shot.expect("no screenshot: the congestion and the pause were not both shown for 1.5 s");
        let path = std::env::var_os("ROCEFAB_WEB_SCREENSHOT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/rocefab-web.png"));
        std::fs::write(&path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("screenshot: {}", path.display());
        assert_no_console_errors(&c, "during the incast").await;

        // What the capture endpoint gave during the incast.
        let (head, body) = capture.expect("no capture: rail1 sent no PFC").join().expect("capture thread");
        assert_eq!(head.split_whitespace().nth(1), Some("200"), "{head}{}", String::from_utf8_lossy(&body));
        assert!(head.contains("content-disposition: attachment; filename=\"rfwb-rail1-"), "{head}");
        assert!(pcapng_packets(&body) > 0, "the capture of rail1:{to_host1} during the incast holds no frame");

        // Clicking the link: both ends' counters and LLDP neighbours, and a capture button.
        c.find(Locator::Css(&format!("line.hit[data-link=\"{link_id}\"]"))).await.unwrap().click().await.unwrap();
        until(&c, "the link's details", "return document.getElementById('detail-body').textContent", |v| {
            let t = v.as_str().unwrap_or_default();
            t.contains("host1:gpu0 ↔ rail1:") && t.contains("PFC sent") && t.contains(&format!("rail1 {to_host1} -> host1 gpu0"))
        })
        .await;
        let buttons = c.find_all(Locator::Css("#detail-body button")).await.unwrap();
        assert_eq!(buttons.len(), 2, "a capture button per end");
        buttons[1].clone().click().await.unwrap();
        until(&c, "the capture button's pcapng", "return document.querySelectorAll('#detail-body button')[1].textContent", |v| {
            v.as_str().is_some_and(|t| t.contains("saved"))
        })
        .await;
        // A switch: its ports and its neighbours.
        c.find(Locator::Css("g.node[data-node=\"spine1\"]")).await.unwrap().click().await.unwrap();
        until(&c, "spine1's details", "return document.getElementById('detail-body').textContent", |v| {
            let t = v.as_str().unwrap_or_default();
            t.contains("spine1 (spine, up)") && t.contains("rail1:") && t.contains("spine1 eth1 -> rail")
        })
        .await;

        // A daemon that stops answering is shown as down, and as up once it answers again.
        let st: Value = serde_json::from_slice(&std::fs::read(run_dir(&f.name).join("state.json")).unwrap()).unwrap();
        let pid = st["daemons"].as_array().unwrap().iter().find(|d| d["switch"] == "spine2").unwrap()["pid"].as_i64().unwrap();
        let stopped = Stopped::stop(pid as i32);
        let state = "return [document.querySelector('g.node[data-node=spine2]').dataset.state, document.getElementById('events').textContent]";
        until(&c, "spine2 shown down", state, |v| v[0] == "down" && v[1].as_str().unwrap().contains("spine2: switch daemon does not answer")).await;
        drop(stopped);
        until(&c, "spine2 shown up again", state, |v| v[0] == "up" && v[1].as_str().unwrap().contains("spine2: switch daemon answers again")).await;
        assert_no_console_errors(&c, "after the clicks").await;

        // The browser goes away; the server keeps serving.
        c.close().await.expect("closing the browser");
    });
    let (head, _) = get_bytes(addr, "/api/view", Duration::from_secs(5));
    assert_eq!(head.split_whitespace().nth(1), Some("200"), "{head}");
    web.interrupt();
    assert_eq!(web.wait(Duration::from_secs(5)), 0, "rocefab web ends with status 0 on Ctrl-C");
}
