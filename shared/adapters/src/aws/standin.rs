//! A loopback stand-in for an AWS service, for the adapters' tests of answers no emulator here
//! gives (a write refused by contention, a batch entry failed on the service's side, a service
//! that stops answering).

use aws_config::{BehaviorVersion, Region, SdkConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A stand-in on 127.0.0.1 that answers its calls with `answers` in turn (an HTTP status and a
/// JSON or XML body; the last one again once they run out), and the bodies of the calls it took. The SDK
/// configuration it gives reads nothing from the environment: region, dummy credentials and the
/// loopback endpoint are set.
pub fn answering(answers: Vec<(u16, String)>) -> (SdkConfig, Arc<Mutex<Vec<String>>>) {
    replying(move |n, _| answers[n.min(answers.len() - 1)].clone())
}

/// A stand-in on 127.0.0.1 that answers its `n`-th call (from 0) with what `reply` makes of
/// `n` and the call's body, and the bodies of the calls it took; configured as
/// [`answering`]'s.
pub fn replying(
    reply: impl Fn(usize, &str) -> (u16, String) + Send + Sync + 'static,
) -> (SdkConfig, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let taken = calls.clone();
    let reply = Arc::new(reply);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            // Each connection on its own thread: the SDK opens one for each call in flight.
            let (reply, taken) = (reply.clone(), taken.clone());
            std::thread::spawn(move || serve(stream, reply.as_ref(), &taken));
        }
    });
    (config(port), calls)
}

/// What a stand-in answers its `n`-th call with, given the call's body.
type Reply = dyn Fn(usize, &str) -> (u16, String) + Send + Sync;

/// Answers the calls of one connection, in turn, until the client closes it: each call's body
/// is recorded in `taken`, and answered as `reply` says.
fn serve(mut stream: std::net::TcpStream, reply: &Reply, taken: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut length = 0;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            line.clear();
        }
        if line != "\r\n" {
            return;
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let body = String::from_utf8_lossy(&body).into_owned();
        let n = {
            let mut taken = taken.lock().unwrap();
            taken.push(body.clone());
            taken.len() - 1
        };
        let (status, body) = reply(n, &body);
        // JSON for the services that speak it, XML for the query ones (SNS).
        let kind = if body.starts_with('<') { "text/xml" } else { "application/x-amz-json-1.0" };
        let head =
            format!("HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n", body.len());
        stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    }
}

/// A stand-in on 127.0.0.1 that takes every call and never answers it, and how many
/// connections it has had.
pub fn stalling() -> (SdkConfig, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            // Kept open and unread: the call was sent, and nothing comes back.
            held.push(stream);
        }
    });
    (config(port), connections)
}

/// The SDK configuration of a stand-in on `port`, with the functions' HTTP client and
/// [`super::call_timeouts`], as [`super::sdk_config`] builds it; it reads nothing from the
/// environment.
fn config(port: u16) -> SdkConfig {
    let credentials = aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "stand-in");
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(credentials))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .http_client(super::https_client(super::TrustRoots::Amazon).unwrap())
        .timeout_config(super::call_timeouts())
        .build()
}
