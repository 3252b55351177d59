//! The local server's connections, with the HTTP/1 parser's own answers made problem+json.
//!
//! hyper answers a request it cannot parse (a request line or header that is not HTTP, a
//! target over 64 KiB, headers over its buffer) before any handler runs, with a status and no
//! body. The API answers every refusal with `application/problem+json`, so this connection
//! recognises those answers as they are written (a 400, 414 or 431 with no `content-type`, the
//! only answers of the server that have none) and writes the problem in their place. On AWS,
//! API Gateway answers such requests itself.

use axum::serve::Listener;
use rp_http::problem::Problem;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// A TCP listener whose connections are [`Answering`].
pub struct AnsweringListener(pub TcpListener);

impl Listener for AnsweringListener {
    type Io = Answering;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Answering, std::net::SocketAddr) {
        let (stream, address) = Listener::accept(&mut self.0).await;
        (Answering { stream, pending: Vec::new() }, address)
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection that writes the problem in place of the parser's bodiless refusals.
pub struct Answering {
    stream: TcpStream,
    /// What is still to be written of a problem that replaced a refusal.
    pending: Vec<u8>,
}

/// The problem in place of `written`, when it is one of the parser's own refusals: a whole
/// answer of 400, 414 or 431 with no `content-type` and no body.
fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    // The status first: every other answer (all the API's successes, bodies and all) is left
    // after reading three bytes.
    let status = written.strip_prefix(b"HTTP/1.1 ")?.get(..3)?;
    let problem = Problem::unparsed(std::str::from_utf8(status).ok()?.parse().ok()?)?;
    let head = std::str::from_utf8(written.strip_suffix(b"\r\n\r\n")?).ok()?;
    if head.contains("\r\n\r\n") || head.to_ascii_lowercase().contains("\r\ncontent-type:") {
        return None;
    }
    Some(problem.http1())
}

impl Answering {
    /// Writes what is left of a replacement; ready once it is all written.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let written = ready!(Pin::new(&mut self.stream).poll_write(cx, &self.pending))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..written);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Answering {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Answering {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.drain(cx))?;
        if let Some(problem) = replacement(buf) {
            // The refusal counts as written; the problem goes out in its place.
            self.pending = problem;
            let _ = self.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    // One buffer per answer (hyper then writes an answer's head whole), so that a refusal is
    // recognised in one piece.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_parsers_bodiless_refusals_are_replaced() {
        let refusal =
            b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Fri, 27 Nov 2026 06:00:00 GMT\r\n\r\n";
        let problem = String::from_utf8(replacement(refusal).unwrap()).unwrap();
        assert!(
            problem.starts_with("HTTP/1.1 414 URI Too Long\r\ncontent-type: application/problem+json\r\n")
        );
        let body: serde_json::Value =
            serde_json::from_str(problem.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            (body["status"].as_u64(), body["type"].as_str()),
            (Some(414), Some("/problems/uri-too-long"))
        );
        assert!(replacement(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").is_some());
        // The API's own answers carry a content type, or are other statuses, or have a body.
        let own = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\ncontent-length: 2\r\n\r\n";
        assert!(replacement(own).is_none());
        assert!(replacement(b"HTTP/1.1 204 No Content\r\n\r\n").is_none());
        assert!(replacement(b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 2\r\n\r\n{}").is_none());
    }
}
