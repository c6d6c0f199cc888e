//! `rocefab-web`, the server behind `rocefab web [FABRIC] [--listen 127.0.0.1:8080]` (the CLI
//! hands over to this binary, so that `rocefab` itself links no async runtime; README
//! "Architecture"): a live view of a running fabric in the browser (issue 27). The page (static
//! files embedded in this binary, plain ES modules and SVG) draws the topology in tiers
//! ([`view`]) and colours every link in each direction by its utilisation; it marks PFC pauses
//! and ECN marks per port, plots a queue's depth with its WRED and xOFF/xON lines and the DCQCN
//! rates of a running job's QPs, and lists the event log (failures, PFC storms, LLDP mismatches,
//! daemons that stop answering). Times are emulated (wall ÷ D, README "Emulated time").
//!
//! Updates: the pollers ([`poll`]) read every switch daemon's `GET /sample` every `--interval`
//! (200 ms wall by default, at most 250 ms) and the page gets a [`live::Frame`] over server-sent
//! events (`GET /api/events`, `text/event-stream`, WHATWG HTML §9.2) whenever a sample arrived.
//! Clicking a switch, host or link shows its counters and LLDP/DCBX neighbours (`/api/node`,
//! `/api/port`); the capture button runs `rocefab capture` on the port for a few seconds and
//! serves the pcapng as a download (`/api/capture`).
//!
//! The server is axum on a current-thread tokio runtime; the pollers are plain threads using the
//! CLI's blocking HTTP client. Ctrl-C (or SIGTERM) ends it with exit status 0; a browser that
//! goes away only ends its own event stream.
pub mod live;
pub mod poll;
pub mod view;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::extract::{Query, State as AxState};
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Deserialize;

pub use control::cmd::web::WebArgs;
use control::fabric::cabling::LinkEnd;
use control::fabric::pick_fabric;
use control::fabric::rundir::{self, State};
use control::plan::compile;
use control::topology::Topology;
use poll::Hub;

/// The page's files, embedded.
const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The server's state.
struct App {
    hub: Arc<Hub>,
    view_json: String,
    max_capture: u64,
    capturing: AtomicBool,
}

type Shared = Arc<App>;

/// The links of `plan` as `rocefab lldp --check` compares them: a host NIC without a rocefab
/// agent is known by its MAC.
fn lldp_links(topo: &Topology, plan: &control::plan::Plan) -> Vec<(LinkEnd, LinkEnd)> {
    if !topo.lldp.config.enabled {
        return Vec::new();
    }
    let end = |node: &str, ifname: &str| match plan.hosts.iter().find(|h| h.name == node) {
        Some(h) if !topo.lldp.nic_agent => {
            let mac = h.nics.iter().find(|n| n.ifname == ifname).map(|n| n.mac.to_string()).unwrap_or_default();
            LinkEnd::without_agent(node, ifname, &mac)
        }
        _ => LinkEnd::new(node, ifname),
    };
    plan.links.iter().map(|l| (end(&l.a.node, &l.a.ifname), end(&l.b.node, &l.b.ifname))).collect()
}

pub fn run(a: &WebArgs) -> anyhow::Result<()> {
    let fabric = pick_fabric(a.fabric.as_deref())?;
    let st = State::load(&fabric)
        .with_context(|| format!("fabric {fabric:?} is not up (no {})", rundir::state_path(&fabric).display()))?;
    let clock = st.clock()?;
    let interval = control::text::parse_wall_duration(&a.interval).map_err(|e| anyhow::anyhow!("--interval {e}"))?;
    if interval > Duration::from_millis(250) || interval < Duration::from_millis(20) {
        bail!("--interval {}: between 20ms and 250ms (the page updates at least 4 times a second)", a.interval);
    }
    let topo = Topology::load(&st.topology)
        .with_context(|| format!("reading the topology of fabric {fabric} ({})", st.topology.display()))?;
    let plan = compile(&topo, 0);
    let view = view::build(&topo, &plan);
    let view_json = serde_json::to_string(&view)?;
    let listener = std::net::TcpListener::bind(a.listen).with_context(|| format!("listening on {}", a.listen))?;
    let local = listener.local_addr()?;

    let hub = Arc::new(Hub::new(&st, view, clock, interval, lldp_links(&topo, &plan)));
    hub.start().context("starting the pollers")?;
    let app = Arc::new(App {
        hub: Arc::clone(&hub),
        view_json,
        max_capture: a.max_capture_seconds.max(1),
        capturing: AtomicBool::new(false),
    });
    println!("rocefab web: fabric {fabric} on http://{local}/ (Ctrl-C to stop)");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    let served = rt.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = axum::serve(listener, router(app)) => r,
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
        }
    });
    hub.stop.store(true, Ordering::Relaxed);
    // Open event streams and a running capture are dropped, not waited for.
    rt.shutdown_timeout(Duration::from_millis(200));
    served.context("serving the page")
}

fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }))
        .route("/api/view", get(view_handler))
        .route("/api/events", get(events))
        .route("/api/node", get(node))
        .route("/api/port", get(port))
        .route("/api/capture", get(capture))
        .with_state(app)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(CONTENT_TYPE, content_type), (CACHE_CONTROL, "no-store")], body).into_response()
}

fn json(body: String) -> Response {
    ([(CONTENT_TYPE, "application/json"), (CACHE_CONTROL, "no-store")], body).into_response()
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, what).into_response()
}

async fn view_handler(AxState(app): AxState<Shared>) -> Response {
    json(app.view_json.clone())
}

/// `GET /api/events`: `hello` (the event log so far), the latest `frame` if there is one, then
/// every new `frame`. A client too slow for the frames skips some; one that goes away ends its
/// stream.
async fn events(AxState(app): AxState<Shared>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = app.hub.frames.subscribe();
    let (hello, latest) = app.hub.hello();
    let mut first = vec![Ok(Event::default().event("hello").data(hello))];
    if let Some(f) = latest {
        first.push(Ok(Event::default().event("frame").data(&*f)));
    }
    let rest = stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(f) => return Some((Ok(Event::default().event("frame").data(&*f)), rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Sse::new(stream::iter(first).chain(rest)).keep_alive(KeepAlive::default())
}

#[derive(Deserialize)]
struct NodeQuery {
    name: String,
}

/// `GET /api/node?name=rail1`: the node's latest sample (a switch) or its QPs (a host), its
/// LLDP neighbour table, and that table as `rocefab lldp` prints it.
async fn node(AxState(app): AxState<Shared>, Query(q): Query<NodeQuery>) -> Response {
    let Some(n) = app.hub.view.node(&q.name) else { return not_found(format!("no node {:?}", q.name)) };
    let lldp = app.hub.lldp(&n.name);
    let body = serde_json::json!({
        "name": n.name,
        "kind": n.kind,
        "sample": app.hub.switch_sample(&n.name),
        "host": app.hub.host_sample(&n.name),
        "lldp": lldp,
        "lldp_text": lldp.as_ref().map(control::cmd::lldp::render_node),
    });
    json(body.to_string())
}

#[derive(Deserialize)]
struct PortQuery {
    /// `node:port`.
    id: String,
}

/// `GET /api/port?id=rail1:eth1`: the port's counters (a switch port's latest sample), its
/// switch's thresholds, its LLDP/DCBX state and neighbour, as JSON and as text.
async fn port(AxState(app): AxState<Shared>, Query(q): Query<PortQuery>) -> Response {
    if !app.hub.view.has_port(&q.id) {
        return not_found(format!("no port {:?}", q.id));
    }
    let (node, port) = q.id.split_once(':').expect("has_port checked the colon");
    let sample = app.hub.switch_sample(node);
    let counters = sample.as_ref().and_then(|s| s.ports.iter().find(|p| p.name == port).cloned());
    let lldp = app.hub.lldp(node).and_then(|r| r.ports.into_iter().find(|p| p.port == port));
    let body = serde_json::json!({
        "id": q.id,
        "node": node,
        "port": port,
        "counters": counters,
        "thresholds": sample.map(|s| s.thresholds),
        "lldp": lldp,
        "lldp_text": lldp.as_ref().map(|p| control::cmd::lldp::render_port(node, p)),
    });
    json(body.to_string())
}

#[derive(Deserialize)]
struct CaptureQuery {
    /// `node:port`.
    port: String,
    /// Wall-clock seconds (default 2).
    seconds: Option<u64>,
}

/// Frames a page capture keeps at most.
const CAPTURE_MAX_FRAMES: u64 = 20_000;

/// `GET /api/capture?port=rail1:eth1&seconds=2`: `rocefab capture` of the port for that long
/// (at most `--max-capture-seconds`, and [`CAPTURE_MAX_FRAMES`] frames), as a pcapng download.
/// One capture at a time.
async fn capture(AxState(app): AxState<Shared>, Query(q): Query<CaptureQuery>) -> Response {
    if !app.hub.view.has_port(&q.port) {
        return not_found(format!("no port {:?}", q.port));
    }
    if app.capturing.swap(true, Ordering::AcqRel) {
        return (StatusCode::CONFLICT, "a capture is already running; try again when it has finished").into_response();
    }
    let seconds = q.seconds.unwrap_or(2).clamp(1, app.max_capture);
    let (fabric, spec) = (app.hub.fabric.clone(), q.port.clone());
    let done = tokio::task::spawn_blocking(move || run_capture(&fabric, &spec, seconds)).await;
    app.capturing.store(false, Ordering::Release);
    match done {
        Ok(Ok(bytes)) => {
            let file = format!("{}-{}.pcapng", app.hub.fabric, q.port.replace(':', "-"));
            (
                [
                    (CONTENT_TYPE, "application/vnd.tcpdump.pcapng".to_string()),
                    (CONTENT_DISPOSITION, format!("attachment; filename=\"{file}\"")),
                    (CACHE_CONTROL, "no-store".to_string()),
                ],
                bytes,
            )
                .into_response()
        }
        Ok(Err(e)) => (StatusCode::BAD_GATEWAY, format!("{e:#}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("capture task: {e}")).into_response(),
    }
}

/// `rocefab capture <fabric> <port> -w - --duration <seconds>s --count N` (the `rocefab` beside
/// this binary): the pcapng.
fn run_capture(fabric: &str, port: &str, seconds: u64) -> anyhow::Result<Vec<u8>> {
    let exe = control::fabric::process::sibling(
        "rocefab",
        None,
        "the CLI",
        "build it beside rocefab-web: cargo build -p control",
    )?;
    let out = std::process::Command::new(&exe)
        .args(["capture", fabric, port, "-w", "-", "--duration", &format!("{seconds}s")])
        .args(["--count", &CAPTURE_MAX_FRAMES.to_string()])
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!("rocefab capture {port}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}
