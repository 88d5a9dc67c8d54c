//! A minimal HTTP/1.1 client for the end-to-end tests (one request per connection), and
//! a server on an ephemeral port.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A response: status, headers (lower-cased names) and body.
#[derive(Debug)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Headers in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header with this (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends one request and reads the whole response.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    parse(&raw).ok_or_else(|| {
        std::io::Error::other(format!("bad response: {}", String::from_utf8_lossy(&raw)))
    })
}

/// POSTs JSON.
pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    json: &serde_json::Value,
) -> HttpResponse {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request(addr, "POST", path, &all, json.to_string().as_bytes())
        .await
        .expect("request")
}

/// GETs a path.
pub async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    get_with(addr, path, &[]).await
}

/// GETs a path with extra headers.
pub async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    request(addr, "GET", path, headers, b"")
        .await
        .expect("request")
}

fn parse(raw: &[u8]) -> Option<HttpResponse> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Some(HttpResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// Binds an ephemeral port on loopback.
pub async fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

/// Serves `router` on an ephemeral loopback port as an application does
/// (`queue_axum::serve_until`: its limits, and each request knowing its client's
/// address), until the test ends; its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let (listener, addr) = listener().await;
    tokio::spawn(queue_axum::serve_until(
        listener,
        router,
        None,
        std::time::Duration::from_secs(1),
        std::future::pending(),
    ));
    addr
}
