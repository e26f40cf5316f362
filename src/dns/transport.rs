//! One exchange with one server: UDP, and TCP when the UDP answer is truncated.
//!
//! Built directly on hickory-proto messages and tokio sockets rather than hickory-net's
//! `Client`: the observer must see every failure as it happened (timeout, ICMP refusal,
//! truncation, a garbled answer) to classify it, must control the retry budget itself, and
//! must open no connection pools or background tasks per server. A socket lives exactly as
//! long as one exchange, so the number of sockets is the number of queries in flight.
//!
//! [`Transport`] is a trait so that tests can script each server's answer.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{Instant, timeout_at};

/// Why one exchange gave no DNS message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    #[error("timeout")]
    Timeout,
    #[error("network: {0}")]
    Network(String),
    #[error("malformed answer: {0}")]
    Malformed(String),
}

pub type ExchangeFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Message, ExchangeError>> + Send + 'a>>;

/// Sends one query to one server and returns its answer, checked to be the answer to
/// this query (ID, QR bit, question).
pub trait Transport: Send + Sync + 'static {
    fn exchange<'a>(&'a self, server: SocketAddr, query: &'a Message) -> ExchangeFuture<'a>;
}

/// The real network.
#[derive(Debug, Clone)]
pub struct NetTransport {
    /// Time limit of one exchange, TCP fallback included.
    pub timeout: Duration,
}

impl Transport for NetTransport {
    fn exchange<'a>(&'a self, server: SocketAddr, query: &'a Message) -> ExchangeFuture<'a> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            let wire = query
                .to_vec()
                .map_err(|e| ExchangeError::Malformed(format!("cannot encode query: {e}")))?;
            let answer = udp_exchange(server, &wire, query, deadline).await?;
            if answer.metadata.truncation {
                // RFC 7766: a truncated UDP answer is retried over TCP.
                return tcp_exchange(server, &wire, query, deadline).await;
            }
            Ok(answer)
        })
    }
}

fn net(err: std::io::Error) -> ExchangeError {
    ExchangeError::Network(err.to_string())
}

async fn udp_exchange(
    server: SocketAddr,
    wire: &[u8],
    query: &Message,
    deadline: Instant,
) -> Result<Message, ExchangeError> {
    let local: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).await.map_err(net)?;
    // Connected: only the server's datagrams arrive, and an ICMP refusal is reported.
    socket.connect(server).await.map_err(net)?;
    socket.send(wire).await.map_err(net)?;
    let mut buf = vec![0u8; 65_535];
    // Bounded: each round either returns or consumes one stray datagram before the deadline.
    loop {
        let len = match timeout_at(deadline, socket.recv(&mut buf)).await {
            Err(_) => return Err(ExchangeError::Timeout),
            Ok(Err(e)) => return Err(net(e)),
            Ok(Ok(len)) => len,
        };
        let Some(bytes) = buf.get(..len) else {
            return Err(ExchangeError::Malformed("short datagram".into()));
        };
        let answer = match Message::from_vec(bytes) {
            Ok(m) => m,
            Err(e) => return Err(ExchangeError::Malformed(e.to_string())),
        };
        // A datagram with another ID is not ours (a late answer, or spoofing): keep waiting.
        if answer.metadata.id != query.metadata.id {
            continue;
        }
        check_answers(&answer, query)?;
        return Ok(answer);
    }
}

async fn tcp_exchange(
    server: SocketAddr,
    wire: &[u8],
    query: &Message,
    deadline: Instant,
) -> Result<Message, ExchangeError> {
    let io = async {
        let mut stream = TcpStream::connect(server).await.map_err(net)?;
        let len = u16::try_from(wire.len())
            .map_err(|_| ExchangeError::Malformed("query too long".into()))?;
        let mut framed = Vec::with_capacity(wire.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(wire);
        stream.write_all(&framed).await.map_err(net)?;
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.map_err(net)?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut buf).await.map_err(net)?;
        let answer =
            Message::from_vec(&buf).map_err(|e| ExchangeError::Malformed(e.to_string()))?;
        if answer.metadata.id != query.metadata.id {
            return Err(ExchangeError::Malformed("answer ID differs".into()));
        }
        check_answers(&answer, query)?;
        Ok(answer)
    };
    match timeout_at(deadline, io).await {
        Err(_) => Err(ExchangeError::Timeout),
        Ok(result) => result,
    }
}

/// The answer must be a response to this very question.
pub fn check_answers(answer: &Message, query: &Message) -> Result<(), ExchangeError> {
    if answer.metadata.message_type != hickory_proto::op::MessageType::Response {
        return Err(ExchangeError::Malformed("not a response".into()));
    }
    // A FORMERR or NOTIMP may legitimately come back without the question.
    if answer.queries.is_empty() {
        return Ok(());
    }
    let same = answer.queries.len() == query.queries.len()
        && answer.queries.iter().zip(&query.queries).all(|(a, q)| {
            a.query_type() == q.query_type()
                && a.query_class() == q.query_class()
                && super::wire::same_name(a.name(), q.name())
        });
    if same {
        Ok(())
    } else {
        Err(ExchangeError::Malformed(
            "the answer is for another question".into(),
        ))
    }
}
