//! The daemons' HTTP server (docs/src/architecture.md: the metrics HTTP server comes from a kept
//! crate): [`axum`] over hyper's HTTP/1.1 (RFC 9112), run by the daemon's tokio runtime.
//!
//! [`metrics_router`] serves the Prometheus text exposition (format 0.0.4,
//! <https://prometheus.io/docs/instrumenting/exposition_formats/>) on `GET /metrics`; more routes
//! join with [`axum::Router::merge`] or [`axum::Router::route`] before the router is handed to
//! [`serve`]. Every response says `Connection: close`, so each request gets a connection of its
//! own, as the scrapers (`rocefab`, the tests, `cargo xtask bench`) expect: they read to EOF.
//!
//! The listener is a [`std::net::TcpListener`] bound by the caller, because the daemons bind it in
//! the network namespace they were started in (reachable from the root namespace) and only then
//! enter their own; [`serve`] adopts it into the running tokio runtime.
use std::sync::Arc;

use axum::http::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

/// Content type of the Prometheus text exposition format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics` answered with `render()` (called once per scrape, on the runtime's thread, so
/// it must not block for long), `GET /` with a one-line pointer to `/metrics`; `HEAD` works on
/// both, other methods get 405 and other paths 404.
pub fn metrics_router<F>(render: F) -> Router
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let render = Arc::new(render);
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let body = render();
                async move { ([(CONTENT_TYPE, METRICS_CONTENT_TYPE)], body) }
            }),
        )
        .route("/", get(|| async { "rocefab: see /metrics\n" }))
}

/// Serves `router` on `listener` until the task is dropped (it only returns on an error adopting
/// the listener). Must be called from within a tokio runtime with I/O and time enabled.
pub async fn serve(listener: std::net::TcpListener, router: Router) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let router = router.layer(axum::middleware::map_response(close_after));
    axum::serve(listener, router).await
}

/// One request per connection.
async fn close_after(mut r: Response) -> Response {
    r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::Duration;

    /// Starts `router` on 127.0.0.1 on a thread of its own (left running until the test process
    /// exits) and returns its address.
    fn start(router: Router) -> SocketAddr {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        std::thread::spawn(move || rt.block_on(serve(l, router)).unwrap());
        addr
    }

    /// Sends `parts` as separate writes (a pause between them) and reads the response to EOF.
    fn request(addr: SocketAddr, parts: &[&[u8]]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            s.write_all(p).unwrap();
        }
        let mut out = String::new();
        s.read_to_string(&mut out).expect("the server closes the connection after its response");
        out
    }

    /// The value of header `name` (case-insensitive) in response `r`.
    fn header<'a>(r: &'a str, name: &str) -> Option<&'a str> {
        let (head, _) = r.split_once("\r\n\r\n")?;
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn body(r: &str) -> &str {
        r.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }

    fn metrics() -> SocketAddr {
        start(metrics_router(|| "metric_a 1\n".to_string()))
    }

    #[test]
    fn metrics_is_served_with_the_exposition_content_type() {
        let r = request(metrics(), &[b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert_eq!(header(&r, "content-type"), Some(METRICS_CONTENT_TYPE), "{r}");
        assert_eq!(header(&r, "content-length"), Some("11"), "{r}");
        assert_eq!(header(&r, "connection"), Some("close"), "{r}");
        assert_eq!(body(&r), "metric_a 1\n");
    }

    #[test]
    fn root_points_to_metrics_and_unknown_paths_are_404() {
        let addr = metrics();
        let r = request(addr, &[b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert_eq!(body(&r), "rocefab: see /metrics\n");
        let r = request(addr, &[b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
        assert_eq!(header(&r, "connection"), Some("close"), "{r}");
        let r = request(addr, &[b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = request(addr, &[b"\x00\x01garbage\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    }

    #[test]
    fn a_request_in_small_writes_is_answered_once_complete() {
        let r = request(metrics(), &[b"GE", b"T /met", b"rics HTTP/1.1\r", b"\nHost: x\r\n", b"\r", b"\n"]);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert_eq!(body(&r), "metric_a 1\n");
    }

    #[test]
    fn http_1_0_and_head_work() {
        let addr = metrics();
        let r = request(addr, &[b"GET /metrics HTTP/1.0\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.0 200 OK\r\n"), "{r}");
        assert_eq!(body(&r), "metric_a 1\n");
        let r = request(addr, &[b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"]);
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert_eq!(body(&r), "", "{r}");
    }

    #[test]
    fn merged_routes_are_served_alongside_metrics() {
        let other = Router::new().route("/lldp", get(|| async { "[]" }));
        let addr = start(metrics_router(|| "m 1\n".to_string()).merge(other));
        assert_eq!(body(&request(addr, &[b"GET /lldp HTTP/1.1\r\nHost: x\r\n\r\n"])), "[]");
        assert_eq!(body(&request(addr, &[b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"])), "m 1\n");
    }
}
