//! A real browser for the tests: Debian's headless Chromium driven over WebDriver (W3C) by
//! chromedriver (Debian packages `chromium` and `chromium-driver`, installed by `cargo xtask
//! setup`), through the `fantoccini` client.
//!
//! [`Driver::start`] runs chromedriver on a free loopback port; Chromium runs with a profile
//! directory of its own, so [`Driver`]'s `Drop` can end every Chromium process of the test (by
//! that directory in their command lines) before it stops chromedriver, also when the test
//! panics. Chromium as root needs `--no-sandbox`.
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

use crate::fabric::pids_with_cmdline;
use crate::proc::Proc;
use crate::scratch::{temp_dir, TempDir};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver, and the Chromium it starts.
pub struct Driver {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    profile: TempDir,
    _proc: Proc,
}

impl Driver {
    /// Starts chromedriver; panics (the test fails, never skips) when chromium or chromedriver
    /// is missing or chromedriver does not listen within 10 s.
    pub fn start() -> Driver {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(bin).is_file(),
                "{bin} is required (Debian packages chromium and chromium-driver: cargo xtask setup)"
            );
        }
        let port = crate::http::free_port();
        let proc = Proc::spawn(
            "chromedriver",
            Command::new(CHROMEDRIVER)
                .args([format!("--port={port}"), "--log-level=WARNING".into()])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let end = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(Instant::now() < end, "chromedriver does not listen on {addr} after 10 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { url: format!("http://{addr}"), profile: temp_dir("rf-h-chromium-"), _proc: proc }
    }

    /// Headless Chromium in a `width` × `height` window, keeping the page's console messages.
    pub fn capabilities(&self, width: u32, height: u32) -> Capabilities {
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--no-first-run",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", self.profile.path().display()),
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        match caps {
            Value::Object(m) => m,
            _ => unreachable!("a JSON object"),
        }
    }

    /// A WebDriver session on a new headless Chromium.
    pub async fn connect(&self, width: u32, height: u32) -> Client {
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(self.capabilities(width, height))
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("a WebDriver session on {}: {e}", self.url))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Chromium (and its helpers) of this test, whatever became of the session.
        let mine = self.profile.path().display().to_string();
        for pid in pids_with_cmdline(&mine) {
            // SAFETY: kill(2) of a process whose command line names this test's own profile.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        // Then chromedriver (the Proc guard), then the profile directory.
    }
}

/// chromedriver's command for the browser's console log (`goog:loggingPrefs`), which W3C
/// WebDriver does not define: `POST /session/<id>/se/log {"type": "browser"}`.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.to_string()))
    }
}

/// The console messages the page logged since the last call: `{level, message, timestamp}`.
pub async fn console_log(c: &Client) -> Vec<Value> {
    let v = c.issue_cmd(BrowserLog).await.unwrap_or_else(|e| panic!("reading the browser's console log: {e}"));
    v.as_array().cloned().unwrap_or_default()
}
