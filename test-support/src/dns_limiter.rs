//! A per-source query limiter in front of one DNS server address, as TLD operators put
//! dnsdist in front of their servers (its `MaxQPSIPRule`): UDP and TCP on `listen`, each
//! query forwarded to `upstream` and its answer returned, and a query from a source that
//! already sent `max_qps` in the current second dropped (no answer at all, as dnsdist's
//! drop action). Every query is counted by source and second, so the highest rate one
//! source reached is known, capped or not. Stopped when dropped.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;

/// How long an upstream answer is waited for.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);

/// What the limiter saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    pub queries: u64,
    pub dropped: u64,
    /// The most queries one source sent within one second (dropped ones included).
    pub peak_qps: u64,
}

#[derive(Default)]
struct Counts {
    stats: LimiterStats,
    /// Per source: the second being counted and its queries so far.
    seconds: HashMap<IpAddr, (u64, u64)>,
}

pub struct SourceLimiter {
    pub listen: SocketAddr,
    counts: Arc<Mutex<Counts>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for SourceLimiter {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl SourceLimiter {
    pub async fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        max_qps: u64,
    ) -> std::io::Result<Self> {
        let counts = Arc::new(Mutex::new(Counts::default()));
        let started = Instant::now();
        // Whether a query from `source` passes, counted either way.
        let admit = {
            let counts = counts.clone();
            move |source: IpAddr| -> bool {
                let second = started.elapsed().as_secs();
                let mut c = counts.lock().unwrap_or_else(|p| p.into_inner());
                let entry = c.seconds.entry(source).or_insert((second, 0));
                if entry.0 != second {
                    *entry = (second, 0);
                }
                entry.1 += 1;
                let n = entry.1;
                c.stats.queries += 1;
                c.stats.peak_qps = c.stats.peak_qps.max(n);
                let pass = n <= max_qps;
                if !pass {
                    c.stats.dropped += 1;
                }
                pass
            }
        };
        let udp = Arc::new(UdpSocket::bind(listen).await?);
        let tcp = TcpListener::bind(listen).await?;
        let udp_task = {
            let admit = admit.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_535];
                loop {
                    let Ok((n, from)) = udp.recv_from(&mut buf).await else {
                        continue;
                    };
                    if !admit(from.ip()) {
                        continue;
                    }
                    let (query, socket) = (buf[..n].to_vec(), udp.clone());
                    tokio::spawn(async move {
                        if let Some(answer) = forward_udp(&query, upstream).await {
                            let _ = socket.send_to(&answer, from).await;
                        }
                    });
                }
            })
        };
        let tcp_task = tokio::spawn(async move {
            loop {
                let Ok((stream, from)) = tcp.accept().await else {
                    continue;
                };
                let admit = admit.clone();
                tokio::spawn(serve_tcp(stream, from.ip(), upstream, admit));
            }
        });
        Ok(Self {
            listen,
            counts,
            tasks: vec![udp_task, tcp_task],
        })
    }

    pub fn stats(&self) -> LimiterStats {
        self.counts.lock().unwrap_or_else(|p| p.into_inner()).stats
    }

    /// The counts so far, the peak then started again (for the next phase's own peak).
    pub fn take(&self) -> LimiterStats {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let seen = c.stats;
        c.stats.peak_qps = 0;
        seen
    }
}

async fn forward_udp(query: &[u8], upstream: SocketAddr) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind(SocketAddr::new(upstream.ip(), 0))
        .await
        .ok()?;
    socket.send_to(query, upstream).await.ok()?;
    let mut buf = vec![0u8; 65_535];
    let (n, _) = tokio::time::timeout(UPSTREAM_TIMEOUT, socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    buf.truncate(n);
    Some(buf)
}

/// One client connection: each length-prefixed query admitted or dropped, an admitted one
/// asked upstream over a connection of its own.
async fn serve_tcp(
    mut stream: TcpStream,
    source: IpAddr,
    upstream: SocketAddr,
    admit: impl Fn(IpAddr) -> bool,
) {
    loop {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        if !admit(source) {
            continue;
        }
        let Ok(Some(answer)) =
            tokio::time::timeout(UPSTREAM_TIMEOUT, forward_tcp(&query, upstream)).await
        else {
            continue;
        };
        let Ok(n) = u16::try_from(answer.len()) else {
            continue;
        };
        if stream.write_all(&n.to_be_bytes()).await.is_err()
            || stream.write_all(&answer).await.is_err()
        {
            return;
        }
    }
}

async fn forward_tcp(query: &[u8], upstream: SocketAddr) -> Option<Vec<u8>> {
    let mut up = TcpStream::connect(upstream).await.ok()?;
    let n = u16::try_from(query.len()).ok()?;
    up.write_all(&n.to_be_bytes()).await.ok()?;
    up.write_all(query).await.ok()?;
    let mut len = [0u8; 2];
    up.read_exact(&mut len).await.ok()?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    up.read_exact(&mut answer).await.ok()?;
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers every message with itself, over UDP and TCP.
    async fn echo() -> SocketAddr {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        let tcp = TcpListener::bind(addr).await.unwrap();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 512];
            while let Ok((n, from)) = udp.recv_from(&mut buf).await {
                let _ = udp.send_to(&buf[..n], from).await;
            }
        });
        tokio::spawn(async move {
            while let Ok((mut s, _)) = tcp.accept().await {
                tokio::spawn(async move {
                    let mut len = [0u8; 2];
                    while s.read_exact(&mut len).await.is_ok() {
                        let mut m = vec![0u8; usize::from(u16::from_be_bytes(len))];
                        if s.read_exact(&mut m).await.is_err() {
                            return;
                        }
                        let _ = s.write_all(&len).await;
                        let _ = s.write_all(&m).await;
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_source_over_its_rate_is_dropped_and_its_peak_counted() {
        let upstream = echo().await;
        let free = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let listen = free.local_addr().unwrap();
        drop(free);
        let limiter = SourceLimiter::start(listen, upstream, 3).await.unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for i in 0..20u8 {
            client.send_to(&[i; 12], listen).await.unwrap();
        }
        let mut answered = 0;
        let mut buf = [0u8; 64];
        while let Ok(Ok(_)) =
            tokio::time::timeout(Duration::from_millis(500), client.recv_from(&mut buf)).await
        {
            answered += 1;
        }
        let stats = limiter.stats();
        // Even if the burst straddles a second, at most two seconds' worth pass.
        assert!(answered <= 6, "{answered} answered");
        assert_eq!(stats.queries, 20);
        assert_eq!(stats.dropped, 20 - answered);
        assert!(stats.peak_qps >= 10, "{stats:?}");

        // TCP: admitted and answered the same way.
        let mut tcp = TcpStream::connect(listen).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        tcp.write_all(&[0, 3, 7, 8, 9]).await.unwrap();
        let mut answer = [0u8; 5];
        tokio::time::timeout(Duration::from_secs(2), tcp.read_exact(&mut answer))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer, [0, 3, 7, 8, 9]);
    }
}
