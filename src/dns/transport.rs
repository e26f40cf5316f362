//! One exchange with one server: UDP, and TCP when the UDP answer is truncated.
//!
//! Built directly on hickory-proto messages and tokio sockets rather than hickory-net's
//! `Client`: the observer must see every failure as it happened (timeout, ICMP refusal,
//! truncation, a garbled answer) to classify it, must control the retry budget itself, and
//! must open no connection pools or background tasks per server.
//!
//! A UDP socket is connected to one server and serves one exchange at a time, so each
//! exchange still sees only its server's datagrams and the kernel's ICMP refusal. Opening
//! and closing a socket per query was most of the cost of a pass (socket, bind, connect,
//! epoll registration, close, a receive buffer), so a socket whose exchange ended with
//! an answer is kept, with its buffer, for the next exchange with the same server; it is
//! retired after [`SOCKET_MAX_USES`] exchanges or [`SOCKET_MAX_AGE`], so the source port
//! keeps changing, and at most [`IDLE_SOCKETS`] wait idle. A socket whose exchange failed
//! (silence, refusal, garbage) is never reused. The number of sockets is the number of
//! queries in flight plus at most [`IDLE_SOCKETS`].
//!
//! [`Transport`] is a trait so that tests can script each server's answer.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{Instant, timeout_at};

/// Exchanges one UDP socket (one source port) serves before it is closed.
pub const SOCKET_MAX_USES: u32 = 64;
/// How long one UDP socket (one source port) is used at most.
pub const SOCKET_MAX_AGE: Duration = Duration::from_secs(1);
/// UDP sockets kept idle between exchanges, all servers together.
pub const IDLE_SOCKETS: usize = 64;
/// Receive buffer of a UDP socket. Every query offers an EDNS payload of 1232 bytes
/// ([`super::wire::EDNS_PAYLOAD`]); a server that sends more than this buffer holds is
/// asked again over TCP, since the kernel cuts a datagram to the buffer.
const DATAGRAM_MAX: usize = 4096;
/// Stale datagrams read off a reused socket before giving up on it.
const DRAIN_MAX: usize = 16;

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

/// The real network. Clones share their idle sockets.
#[derive(Debug, Clone)]
pub struct NetTransport {
    /// Time limit of one exchange, TCP fallback included.
    pub timeout: Duration,
    sockets: Arc<SocketPool>,
}

impl NetTransport {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            sockets: Arc::default(),
        }
    }
}

impl Transport for NetTransport {
    fn exchange<'a>(&'a self, server: SocketAddr, query: &'a Message) -> ExchangeFuture<'a> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            let wire = super::wire::encode_query(query)
                .map_err(|e| ExchangeError::Malformed(format!("cannot encode query: {e}")))?;
            match self.udp_exchange(server, &wire, query, deadline).await? {
                // RFC 7766: a truncated UDP answer is retried over TCP.
                Some(answer) if !answer.metadata.truncation => Ok(answer),
                _ => tcp_exchange(server, &wire, query, deadline).await,
            }
        })
    }
}

fn net(err: std::io::Error) -> ExchangeError {
    ExchangeError::Network(err.to_string())
}

/// A UDP socket connected to one server, with its receive buffer.
struct Conn {
    socket: UdpSocket,
    buf: Vec<u8>,
    uses: u32,
    born: std::time::Instant,
    /// Sockets are registered with one runtime's I/O driver.
    runtime: tokio::runtime::Id,
}

impl Conn {
    async fn open(server: SocketAddr, runtime: tokio::runtime::Id) -> Result<Self, ExchangeError> {
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // A fresh socket: the kernel picks a random ephemeral source port.
        let socket = UdpSocket::bind(local).await.map_err(net)?;
        // Connected: only the server's datagrams arrive, and an ICMP refusal is reported.
        socket.connect(server).await.map_err(net)?;
        Ok(Self {
            socket,
            buf: Vec::with_capacity(DATAGRAM_MAX),
            uses: 0,
            born: std::time::Instant::now(),
            runtime,
        })
    }

    fn reusable(&self, runtime: tokio::runtime::Id) -> bool {
        self.uses < SOCKET_MAX_USES
            && self.born.elapsed() < SOCKET_MAX_AGE
            && self.runtime == runtime
    }

    /// Reads off whatever arrived since the last exchange (a duplicate answer, say): it is
    /// no answer to the next query. False if the socket should not be used again.
    fn drain(&mut self) -> bool {
        let mut scratch = [0u8; 16];
        for _ in 0..DRAIN_MAX {
            match self.socket.try_recv(&mut scratch) {
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        false
    }
}

#[derive(Default)]
struct SocketPool {
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    by_server: HashMap<SocketAddr, Vec<Conn>>,
    count: usize,
}

impl std::fmt::Debug for SocketPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().map(|i| i.count).unwrap_or_default();
        f.debug_struct("SocketPool").field("idle", &idle).finish()
    }
}

impl SocketPool {
    /// An idle socket connected to `server`, still fit for use, drained.
    fn take(&self, server: SocketAddr, runtime: tokio::runtime::Id) -> Option<Conn> {
        let mut retired = Vec::new();
        let found = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let Idle { by_server, count } = &mut *idle;
            let mut found = None;
            if let Some(conns) = by_server.get_mut(&server) {
                while let Some(conn) = conns.pop() {
                    *count -= 1;
                    if conn.reusable(runtime) {
                        found = Some(conn);
                        break;
                    }
                    retired.push(conn);
                }
                if conns.is_empty() {
                    by_server.remove(&server);
                }
            }
            found
        };
        // Sockets are closed outside the lock.
        drop(retired);
        let mut conn = found?;
        conn.drain().then_some(conn)
    }

    /// Keeps `conn` for the next exchange with `server`, if it may serve one.
    fn give_back(&self, server: SocketAddr, conn: Conn) {
        if !conn.reusable(conn.runtime) {
            return;
        }
        let mut retired = Vec::new();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.count >= IDLE_SOCKETS {
            // Full: sweep the sockets too old to be used again; bounded by IDLE_SOCKETS.
            let Idle { by_server, count } = &mut *idle;
            by_server.retain(|_, conns| {
                let (keep, old): (Vec<Conn>, Vec<Conn>) = std::mem::take(conns)
                    .into_iter()
                    .partition(|c| c.born.elapsed() < SOCKET_MAX_AGE);
                *count -= old.len();
                retired.extend(old);
                *conns = keep;
                !conns.is_empty()
            });
        }
        if idle.count < IDLE_SOCKETS {
            idle.count += 1;
            idle.by_server.entry(server).or_default().push(conn);
        } else {
            retired.push(conn);
        }
        drop(idle);
        drop(retired);
    }
}

impl NetTransport {
    async fn udp_exchange(
        &self,
        server: SocketAddr,
        wire: &[u8],
        query: &Message,
        deadline: Instant,
    ) -> Result<Option<Message>, ExchangeError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ExchangeError::Network(e.to_string()))?
            .id();
        let mut conn = match self.sockets.take(server, runtime) {
            Some(conn) => conn,
            None => Conn::open(server, runtime).await?,
        };
        conn.uses += 1;
        conn.socket.send(wire).await.map_err(net)?;
        // Bounded: each round either returns or consumes one stray datagram before the
        // deadline.
        loop {
            conn.buf.clear();
            let len = match timeout_at(deadline, conn.socket.recv_buf(&mut conn.buf)).await {
                Err(_) => return Err(ExchangeError::Timeout),
                Ok(Err(e)) => return Err(net(e)),
                Ok(Ok(len)) => len,
            };
            let Some(bytes) = conn.buf.get(..len) else {
                return Err(ExchangeError::Malformed("short datagram".into()));
            };
            // A datagram that fills the buffer may have been cut: if it is ours, the
            // answer is fetched over TCP (`None`).
            if len >= DATAGRAM_MAX && bytes.get(..2) == Some(&query.metadata.id.to_be_bytes()[..]) {
                return Ok(None);
            }
            let answer = match Message::from_vec(bytes) {
                Ok(m) => m,
                Err(e) => return Err(ExchangeError::Malformed(e.to_string())),
            };
            // A datagram with another ID is not ours (a late answer, or spoofing): keep
            // waiting.
            if answer.metadata.id != query.metadata.id {
                continue;
            }
            check_answers(&answer, query)?;
            // Only a socket that gave a proper answer serves again.
            self.sockets.give_back(server, conn);
            return Ok(Some(answer));
        }
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
