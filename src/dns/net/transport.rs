//! One exchange with one server: UDP, and TCP when the UDP answer is truncated.
//!
//! Built directly on hickory-proto messages and tokio sockets rather than hickory-net's
//! `Client`: the observer must see every failure as it happened (timeout, ICMP refusal,
//! truncation, a garbled answer) to classify it, must control the retry budget itself, and
//! must keep no connection pools or long-lived tasks per server.
//!
//! UDP works the way `dnsperf` does. The queries in flight to one server share one socket
//! connected to it (so only that server's datagrams arrive, and the kernel's ICMP refusal
//! is reported), told apart by their IDs: random (the OS CSPRNG), and never one sent twice
//! on one socket, so a late answer cannot reach a later query. One reader task per socket
//! drains every datagram that arrived at each wake-up and hands each to the query with its
//! ID; anything else (a late or duplicate answer, spoofing, noise) is dropped. The reader
//! also keeps its queries' deadlines: one timer a socket, not one a query. Opening a
//! socket per query was most of the cost of a pass. A socket takes new queries for at
//! most [`SOCKET_MAX_USES`] queries or [`SOCKET_MAX_AGE`], so the source port keeps
//! changing; its reader then ends once the last of them is answered or has given up. A
//! forger must hit the port and the ID of one of the queries in flight, and those are at
//! most the querier's per-server cap, and also the case of every letter of the question
//! name (0x20, see [`NetTransport::exchange_net`]).
//!
//! Every query carries EDNS with DO. A server that does not implement EDNS answers it
//! FORMERR or NOTIMP without an OPT (RFC 6891 section 7); it is asked again without EDNS
//! (section 6.2.2), and so for a while. Such an answer carries no DNSSEC records: the
//! classifiers read its lack of signatures as unknown, never as unsigned or bogus
//! ([`super::wire::unsigned_without_edns`]).
//!
//! [`Transport`] is a trait so that tests can script each server's answer.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hickory_proto::op::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{Notify, oneshot};
use tokio::time::{Instant, timeout_at};

/// Queries one UDP socket (one source port) takes before it is retired. A forger's odds
/// a datagram are set by the queries in flight on the port (at most the querier's
/// per-server cap), not by how many it saw; what a long-lived port gives away is time to
/// find it (side channels such as SAD DNS take seconds), and that is [`SOCKET_MAX_AGE`].
/// At a full pass's rate 256 queries take a few milliseconds; fewer cost CPU (a socket, a
/// reader task and a fresh server-side flow each time) for no margin.
pub const SOCKET_MAX_USES: usize = 256;
/// How long one UDP socket (one source port) takes new queries at most.
pub const SOCKET_MAX_AGE: Duration = Duration::from_secs(1);
/// Receive buffer of a UDP socket. A query offers an EDNS payload of 1232 bytes
/// ([`super::wire::EDNS_PAYLOAD`]), or none (512 bytes) to a server without EDNS; a
/// server that sends more than this buffer holds is asked again over TCP, since the
/// kernel cuts a datagram to the buffer.
const DATAGRAM_MAX: usize = 4096;

/// Why one exchange gave no DNS message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    #[error("timeout")]
    Timeout,
    #[error("network: {0}")]
    Network(String),
    /// The host cannot reach the server's network at all (no route, no source address
    /// of its family): `super::ipv6` counts these for IPv6 servers.
    #[error("network unreachable: {0}")]
    Unreachable(String),
    #[error("malformed answer: {0}")]
    Malformed(String),
}

/// Sends one query to one server and returns its answer, checked to be the answer to
/// this query (ID, QR bit, question). The querier is generic over it, so the real
/// network's exchange is called without boxing its future.
pub trait Transport: Send + Sync + 'static {
    fn exchange<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a Message,
    ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a;

    /// Whether `server` slipped an answer since this was last asked: TC=1 over UDP on an
    /// answer that then fit in a UDP one (response rate limiting's slip, not a large
    /// answer). The querier slows its pace for it.
    fn take_slip(&self, _server: SocketAddr) -> bool {
        false
    }
}

/// The real network. Clones share their sockets.
#[derive(Debug, Clone)]
pub struct NetTransport {
    /// Time limit of one exchange, TCP fallback included.
    pub timeout: Duration,
    muxes: Arc<Muxes>,
    /// Randomise the case of every question name (0x20, see [`NetTransport::exchange`]).
    case_randomization: bool,
    /// Servers seen answering with the question's case changed, and since when: asked
    /// without 0x20 until [`NO_ECHO_KEPT`] has passed.
    no_echo: Arc<Mutex<super::FastMap<SocketAddr, std::time::Instant>>>,
    /// Servers found not to implement EDNS, and since when: asked without EDNS until
    /// [`NO_EDNS_KEPT`] has passed.
    no_edns: Arc<Mutex<super::FastMap<SocketAddr, std::time::Instant>>>,
    /// Servers that slipped an answer not yet told to the querier ([`Transport::take_slip`]),
    /// and whether there is any (read first: the map is rarely touched).
    slips: Arc<Mutex<std::collections::HashSet<SocketAddr>>>,
    any_slip: Arc<std::sync::atomic::AtomicBool>,
}

/// How long a server that did not echo the question's case is asked without 0x20. Not
/// for ever: a forger who got one case-mangled answer accepted by ID and port (it was
/// dropped, but it turned 0x20 off) gains only this long.
pub const NO_ECHO_KEPT: Duration = Duration::from_secs(600);

/// How long a server found not to implement EDNS is asked without it (RFC 6891 section
/// 6.2.2 allows caching the finding "for a brief time"), then with EDNS again. Bounded,
/// because what a forged FORMERR gains is this long of answers without DNSSEC records,
/// which are unknown for every question that needs them, never evidence.
pub const NO_EDNS_KEPT: Duration = Duration::from_secs(600);

impl NetTransport {
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            muxes: Arc::default(),
            case_randomization: true,
            no_echo: Arc::default(),
            no_edns: Arc::default(),
            slips: Arc::default(),
            any_slip: Arc::default(),
        }
    }

    /// The same, with 0x20 on or off (the benchmark measures its cost).
    pub fn with_case_randomization(mut self, on: bool) -> Self {
        self.case_randomization = on;
        self
    }

    fn echoes_case(&self, server: SocketAddr) -> bool {
        !found_lately(&self.no_echo, server, NO_ECHO_KEPT)
    }

    fn speaks_edns(&self, server: SocketAddr) -> bool {
        !found_lately(&self.no_edns, server, NO_EDNS_KEPT)
    }

    /// One exchange of `wire`: UDP, then TCP if the answer is truncated.
    async fn exchange_wire(
        &self,
        server: SocketAddr,
        wire: &[u8],
        query: &Message,
        deadline: Instant,
    ) -> Result<Message, ExchangeError> {
        // RFC 7766: a truncated UDP answer is retried over TCP.
        if let Some(answer) = self.udp_exchange(server, wire, query, deadline).await?
            && !answer.metadata.truncation
        {
            return Ok(answer);
        }
        // Boxed apart, and with the UDP answer dropped first: the rare TCP path would
        // otherwise grow every exchange's future (held in its task).
        let answer = Box::pin(tcp_exchange(server, wire, query, deadline)).await?;
        // Truncated, yet it fits: a slip (response rate limiting), not a large answer.
        let fits = answer
            .to_vec()
            .is_ok_and(|w| w.len() <= usize::from(super::wire::EDNS_PAYLOAD));
        if fits && query.edns.is_some() {
            self.slips
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(server);
            self.any_slip
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(answer)
    }
}

impl Transport for NetTransport {
    fn exchange<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a Message,
    ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
        self.exchange_net(server, query)
    }

    fn take_slip(&self, server: SocketAddr) -> bool {
        use std::sync::atomic::Ordering;
        if !self.any_slip.load(Ordering::Relaxed) {
            return false;
        }
        let mut slips = self.slips.lock().unwrap_or_else(|p| p.into_inner());
        let slipped = slips.remove(&server);
        if slips.is_empty() {
            self.any_slip.store(false, Ordering::Relaxed);
        }
        slipped
    }
}

impl NetTransport {
    /// Spoofing margin: the question name goes out in randomised case (0x20,
    /// draft-vixie-dnsext-dns0x20) and the answer's question must echo it byte for byte.
    /// A forger must then also guess one bit per letter of the name, on top of the ID
    /// and the source port. Chosen over DNS cookies because it needs no support from the
    /// server (Knot answers cookies only with mod-cookies loaded, many registries not at
    /// all) and costs no extra packet or per-server state beyond the fallback below; and
    /// over fewer queries per socket because sockets are what a pass spends most on (see
    /// the module comment). A server that answers with the case changed (the only
    /// difference, the question matching otherwise) is asked again at once without 0x20,
    /// and so for [`NO_ECHO_KEPT`]: the mangled answer itself is never used.
    ///
    ///
    /// EDNS fallback (RFC 6891 sections 6.2.2 and 7): a FORMERR or NOTIMP without an OPT
    /// to a query with one says the server does not implement EDNS. The question is asked
    /// again without EDNS, as Unbound does ("attempt without EDNS"); only if that answer is
    /// a real one (NOERROR, NXDOMAIN, YXDOMAIN) is the server remembered as such, for
    /// [`NO_EDNS_KEPT`]: a server that rejects the question itself is not. Unlike Unbound,
    /// which does not remember it for DNSSEC questions, we do, because what we lose is
    /// only a round trip: an answer without EDNS has no DNSSEC records, and the
    /// classifiers take it as unknown for anything that needs them
    /// ([`super::wire::unsigned_without_edns`]). Without EDNS a UDP answer is at most 512
    /// bytes; a truncated one is fetched over TCP as any other.
    ///
    /// [`Transport::exchange`] without boxing the future: the querier's exchange task
    /// holds it in place (one allocation less an exchange).
    pub async fn exchange_net(
        &self,
        server: SocketAddr,
        query: &Message,
    ) -> Result<Message, ExchangeError> {
        let deadline = Instant::now() + self.timeout;
        if query.edns.is_some() && !self.speaks_edns(server) {
            // Boxed: the rare path would otherwise grow every exchange's future.
            return Box::pin(self.exchange_without_edns(server, query, deadline)).await;
        }
        let answer = self.exchange_cased(server, query, deadline).await?;
        if query.edns.is_none() || !refuses_edns(&answer) {
            return Ok(answer);
        }
        let plain = Box::pin(self.exchange_without_edns(server, query, deadline)).await;
        match plain {
            Ok(plain) if answered(&plain) => {
                self.no_edns
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(server, std::time::Instant::now());
                tracing::debug!(
                    %server,
                    "the server answers EDNS with {} and no OPT, but answers without EDNS: \
                     asking it without EDNS for {} s (its answers carry no DNSSEC records)",
                    answer.metadata.response_code,
                    NO_EDNS_KEPT.as_secs()
                );
                Ok(plain)
            }
            // Not EDNS it rejects, or no answer without it either: the first answer
            // stands, and nothing is remembered.
            _ => Ok(answer),
        }
    }

    /// `query` asked without its OPT record.
    async fn exchange_without_edns(
        &self,
        server: SocketAddr,
        query: &Message,
        deadline: Instant,
    ) -> Result<Message, ExchangeError> {
        let mut plain = query.clone();
        plain.edns = None;
        self.exchange_cased(server, &plain, deadline).await
    }

    /// One exchange of `query` with 0x20, and again without it if the server does not
    /// echo the case.
    async fn exchange_cased(
        &self,
        server: SocketAddr,
        query: &Message,
        deadline: Instant,
    ) -> Result<Message, ExchangeError> {
        let encode = || {
            super::wire::encode_query(query)
                .map_err(|e| ExchangeError::Malformed(format!("cannot encode query: {e}")))
        };
        let mixed_case = self.case_randomization && self.echoes_case(server);
        let mut wire = encode()?;
        if mixed_case {
            super::wire::randomise_case(&mut wire);
        }
        let answer = self.exchange_wire(server, &wire, query, deadline).await?;
        // FORMERR and NOTIMP may come without the question: nothing to compare.
        if !mixed_case
            || answer.queries.is_empty()
            || super::wire::question_case_matches(&answer, &wire)
        {
            return Ok(answer);
        }
        drop(answer);
        self.no_echo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(server, std::time::Instant::now());
        tracing::debug!(
            %server,
            "the answer's question differs from ours only in case (0x20): asking again without, \
             and so for {} s",
            NO_ECHO_KEPT.as_secs()
        );
        // Boxed: the rare second exchange would otherwise make every exchange's future
        // (held in its task) twice the size.
        Box::pin(self.exchange_wire(server, &encode()?, query, deadline)).await
    }
}

/// Whether `server` is in `found` (a server seen to lack some feature) since less than
/// `kept`; an entry older than that is forgotten.
fn found_lately(
    found: &Mutex<super::FastMap<SocketAddr, std::time::Instant>>,
    server: SocketAddr,
    kept: Duration,
) -> bool {
    let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
    match found.get(&server) {
        Some(since) if since.elapsed() < kept => true,
        Some(_) => {
            found.remove(&server);
            false
        }
        None => false,
    }
}

/// RFC 6891 section 7: a responder that does not implement EDNS answers a query with an
/// OPT with FORMERR (or NOTIMP), and without an OPT of its own. One with an OPT speaks
/// EDNS: its FORMERR is about something else.
fn refuses_edns(answer: &Message) -> bool {
    use hickory_proto::op::ResponseCode;
    matches!(
        answer.metadata.response_code,
        ResponseCode::FormErr | ResponseCode::NotImp
    ) && answer.edns.is_none()
}

/// An answer the question got (as Unbound judges its EDNS fallback): NOERROR, NXDOMAIN
/// or YXDOMAIN.
fn answered(answer: &Message) -> bool {
    use hickory_proto::op::ResponseCode;
    matches!(
        answer.metadata.response_code,
        ResponseCode::NoError | ResponseCode::NXDomain | ResponseCode::YXDomain
    )
}

fn net(err: std::io::Error) -> ExchangeError {
    if super::ipv6::is_unreachable(&err) {
        ExchangeError::Unreachable(err.to_string())
    } else {
        ExchangeError::Network(err.to_string())
    }
}

/// The UDP sockets in use, one current socket per server. Clones of a [`NetTransport`]
/// share them.
#[derive(Default)]
struct Muxes {
    by_server: Mutex<super::FastMap<SocketAddr, Arc<Mux>>>,
}

impl Muxes {
    fn table(&self) -> std::sync::MutexGuard<'_, super::FastMap<SocketAddr, Arc<Mux>>> {
        self.by_server.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for Muxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.by_server.lock().map(|m| m.len()).unwrap_or_default();
        f.debug_struct("Muxes").field("open", &open).finish()
    }
}

/// One UDP socket connected to one server, carrying many queries at once, told apart by
/// their IDs, and the reader task that hands each answer to the query with its ID.
struct Mux {
    socket: UdpSocket,
    /// When the socket stops taking new queries by age ([`SOCKET_MAX_AGE`] after it was
    /// opened).
    retire_at: Instant,
    /// Sockets are registered with one runtime's I/O driver.
    runtime: tokio::runtime::Id,
    state: Mutex<MuxState>,
    /// Wakes the reader when a query gives up waiting (it may have been the last one) or
    /// one starts with a deadline before the reader's next wake-up.
    wake: Notify,
}

struct MuxState {
    /// The queries waiting, by ID, each with its deadline. The reader fails those whose
    /// deadline passed: one timer a socket, not one a query.
    waiting: super::FastMap<u16, (oneshot::Sender<Delivery>, Instant)>,
    /// When the reader wakes up next at the latest (its timer).
    wake_at: Instant,
    /// Every ID ever sent on this socket (at most [`SOCKET_MAX_USES`]). None is sent twice,
    /// so a late or duplicate answer never reaches a later query, and a query that gives
    /// up only ever removes its own place.
    used: Vec<u16>,
    /// No query starts on this socket any more; its reader ends once none waits.
    retired: bool,
    /// The reader has ended: nothing will be read from this socket again.
    closed: bool,
}

/// What the reader hands a waiting query.
enum Delivery {
    Answer(Message),
    /// A datagram with the query's ID that filled the receive buffer, so may have been
    /// cut by the kernel: the answer is fetched over TCP.
    Cut,
    Failed(ExchangeError),
}

impl Mux {
    fn open(server: SocketAddr, runtime: tokio::runtime::Id) -> Result<Self, ExchangeError> {
        let retire_at = Instant::now() + SOCKET_MAX_AGE;
        let local: SocketAddr = if server.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // A fresh socket: the kernel picks a random ephemeral source port.
        let socket = std::net::UdpSocket::bind(local).map_err(net)?;
        // Connected: only the server's datagrams arrive, and an ICMP refusal is reported.
        socket.connect(server).map_err(net)?;
        socket.set_nonblocking(true).map_err(net)?;
        Ok(Self {
            socket: UdpSocket::from_std(socket).map_err(net)?,
            retire_at,
            runtime,
            state: Mutex::new(MuxState {
                waiting: super::FastMap::default(),
                wake_at: retire_at,
                used: Vec::with_capacity(SOCKET_MAX_USES),
                retired: false,
                closed: false,
            }),
            wake: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MuxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a new query may start on this socket.
    fn fit(&self, state: &MuxState, runtime: tokio::runtime::Id) -> bool {
        !state.retired
            && !state.closed
            && state.used.len() < SOCKET_MAX_USES
            && Instant::now() < self.retire_at
            && self.runtime == runtime
    }

    /// Registers a query under `wanted` or, if this socket already sent that ID, a fresh
    /// random one; the reader fails it with a timeout at `deadline`. `None` if the socket
    /// takes no new query.
    fn register(
        self: &Arc<Self>,
        wanted: u16,
        deadline: Instant,
        runtime: tokio::runtime::Id,
    ) -> Option<(Registration, oneshot::Receiver<Delivery>)> {
        let mut state = self.state();
        if !self.fit(&state, runtime) {
            state.retired = true;
            drop(state);
            self.wake.notify_one();
            return None;
        }
        let mut id = wanted;
        while state.used.contains(&id) {
            id = super::wire::query_id();
        }
        let (tx, rx) = oneshot::channel();
        state.waiting.insert(id, (tx, deadline));
        state.used.push(id);
        if state.used.len() >= SOCKET_MAX_USES {
            state.retired = true;
        }
        // Usually later than the reader's next wake-up (the socket's retirement by age).
        let sooner = deadline < state.wake_at;
        if sooner {
            state.wake_at = deadline;
        }
        drop(state);
        if sooner {
            self.wake.notify_one();
        }
        let registration = Registration {
            mux: self.clone(),
            id,
            delivered: false,
        };
        Some((registration, rx))
    }

    /// Hands one datagram to the query with its ID; anything else (a late or duplicate
    /// answer, spoofing, noise) is dropped.
    fn deliver(&self, datagram: &[u8]) {
        let Some(&[hi, lo]) = datagram.get(..2) else {
            return;
        };
        let Some((waiter, _)) = self.state().waiting.remove(&u16::from_be_bytes([hi, lo])) else {
            return;
        };
        let delivery = if datagram.len() >= DATAGRAM_MAX {
            Delivery::Cut
        } else {
            match decode(datagram) {
                Ok(answer) => Delivery::Answer(answer),
                Err(e) => Delivery::Failed(e),
            }
        };
        // The query may have given up meanwhile; its answer is then of no use.
        let _ = waiter.send(delivery);
    }

    /// The socket failed (an ICMP refusal, say): every query waiting on it fails alike,
    /// and it takes no new one.
    fn fail_all(&self, err: &ExchangeError) {
        let waiting = {
            let mut state = self.state();
            state.retired = true;
            state.closed = true;
            std::mem::take(&mut state.waiting)
        };
        for (waiter, _) in waiting.into_values() {
            let _ = waiter.send(Delivery::Failed(err.clone()));
        }
    }

    /// The reader's timer went off: the queries whose deadline passed fail with a timeout
    /// (their places stay used), the socket retires once old enough, and the reader's next
    /// wake-up (`wake_at`) becomes the next deadline.
    fn expire(&self, now: Instant) {
        let overdue = {
            let mut state = self.state();
            if now >= self.retire_at {
                state.retired = true;
            }
            let overdue: Vec<_> = state
                .waiting
                .extract_if(|_, (_, deadline)| *deadline <= now)
                .map(|(_, (waiter, _))| waiter)
                .collect();
            let earliest = state.waiting.values().map(|(_, deadline)| *deadline).min();
            let next = match earliest {
                Some(deadline) if state.retired => deadline,
                Some(deadline) => deadline.min(self.retire_at),
                None if state.retired => now + SOCKET_MAX_AGE,
                None => self.retire_at,
            };
            state.wake_at = next;
            overdue
        };
        for waiter in overdue {
            let _ = waiter.send(Delivery::Failed(ExchangeError::Timeout));
        }
    }
}

/// Whatever way the reader ends (done, failed, dropped with its runtime), no query is left
/// waiting on an answer that will never be read.
struct ReaderGone<'a>(&'a Mux);

impl Drop for ReaderGone<'_> {
    fn drop(&mut self) {
        self.0
            .fail_all(&ExchangeError::Network("socket reader ended".into()));
    }
}

/// The reader of one socket: drains every datagram that arrived at each wake-up. It ends
/// once the socket is retired (by use count or age, so the source port keeps changing)
/// and no query waits any more, or when the socket fails.
async fn read_answers(mux: Arc<Mux>, table: Weak<Muxes>, server: SocketAddr) {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    let gone = ReaderGone(&mux);
    // One timer for the socket's life: its retirement by age, then its queries' deadlines.
    let mut armed = mux.state().wake_at;
    let timer = tokio::time::sleep_until(armed);
    tokio::pin!(timer);
    'reading: loop {
        {
            let mut state = mux.state();
            if state.retired && state.waiting.is_empty() {
                state.closed = true;
                break;
            }
            if state.wake_at != armed {
                armed = state.wake_at;
                timer.as_mut().reset(armed);
            }
        }
        tokio::select! {
            // ERROR too: an ICMP refusal makes the socket neither readable nor writable.
            ready = mux.socket.ready(Interest::READABLE | Interest::ERROR) => {
                match ready {
                    Err(e) => {
                        mux.fail_all(&net(e));
                        break;
                    }
                    // The socket's error (SO_ERROR) is the refusal; the socket is done.
                    Ok(ready) if ready.is_error() => {
                        let err = match mux.socket.take_error() {
                            Ok(Some(e)) | Err(e) => net(e),
                            Ok(None) => ExchangeError::Network("socket error".into()),
                        };
                        mux.fail_all(&err);
                        break;
                    }
                    Ok(_) => {}
                }
            }
            // The timer is set again at the top of the loop, from `wake_at`.
            () = &mut timer => {
                mux.expire(Instant::now());
                continue;
            }
            () = mux.wake.notified() => continue,
        }
        loop {
            match mux.socket.try_recv(&mut buf) {
                Ok(len) => mux.deliver(buf.get(..len).unwrap_or_default()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    mux.fail_all(&net(e));
                    break 'reading;
                }
            }
        }
    }
    drop(gone);
    // Forget the socket, unless a newer one already replaced it.
    if let Some(table) = table.upgrade() {
        let mut by_server = table.table();
        if by_server.get(&server).is_some_and(|m| Arc::ptr_eq(m, &mux)) {
            by_server.remove(&server);
        }
    }
}

/// A query's place among those waiting on a socket; giving up (a dropped exchange) frees
/// it. IDs are never reused on one socket, so a place is only ever its query's.
struct Registration {
    mux: Arc<Mux>,
    id: u16,
    /// The reader took the place off the list when it handed the query its delivery (an
    /// answer, a timeout, a failure): nothing to free.
    delivered: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if self.delivered {
            return;
        }
        let removed = self.mux.state().waiting.remove(&self.id).is_some();
        if removed {
            self.mux.wake.notify_one();
        }
    }
}

impl NetTransport {
    /// The current socket for `server` and the query registered on it.
    fn register(
        &self,
        server: SocketAddr,
        wanted: u16,
        deadline: Instant,
    ) -> Result<(Registration, oneshot::Receiver<Delivery>), ExchangeError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ExchangeError::Network(e.to_string()))?
            .id();
        // A socket found unfit is replaced; the second socket is a fresh one, so this
        // ends in two rounds unless another query keeps racing us for it.
        for _ in 0..4 {
            let current = { self.muxes.table().get(&server).cloned() };
            if let Some(registered) =
                current.and_then(|mux| mux.register(wanted, deadline, runtime))
            {
                return Ok(registered);
            }
            let fresh = Arc::new(Mux::open(server, runtime)?);
            let installed = {
                let mut by_server = self.muxes.table();
                let replace = by_server.get(&server).is_none_or(|m| {
                    let state = m.state();
                    !m.fit(&state, runtime)
                });
                if replace {
                    by_server.insert(server, fresh.clone());
                }
                replace
            };
            if installed {
                tokio::spawn(read_answers(
                    fresh.clone(),
                    Arc::downgrade(&self.muxes),
                    server,
                ));
            }
        }
        Err(ExchangeError::Network(
            "no UDP socket free for the query".into(),
        ))
    }

    async fn udp_exchange(
        &self,
        server: SocketAddr,
        wire: &[u8],
        query: &Message,
        deadline: Instant,
    ) -> Result<Option<Message>, ExchangeError> {
        let (mut registration, answer) = self.register(server, query.metadata.id, deadline)?;
        let (mux, id) = (&registration.mux, registration.id);
        let renumbered;
        let datagram = if id == query.metadata.id {
            wire
        } else {
            let mut bytes = wire.to_vec();
            if let Some(head) = bytes.get_mut(..2) {
                head.copy_from_slice(&id.to_be_bytes());
            }
            renumbered = bytes;
            &renumbered
        };
        send_datagram(&mux.socket, datagram).await.map_err(net)?;
        // No timer of its own: the socket's reader fails it at its deadline.
        let Ok(delivery) = answer.await else {
            return Err(ExchangeError::Network("socket reader ended".into()));
        };
        registration.delivered = true;
        drop(registration);
        match delivery {
            Delivery::Answer(answer) => {
                check_answers(&answer, query)?;
                Ok(Some(answer))
            }
            Delivery::Cut => Ok(None),
            Delivery::Failed(err) => Err(err),
        }
    }
}

/// Sends one datagram on a connected, non-blocking UDP socket: at once, as the send buffer
/// almost always has room (without waiting for the runtime to report the fresh socket
/// writable first); only when it has none, by waiting for room, boxed apart so that the
/// rare wait does not grow every exchange's future.
async fn send_datagram(socket: &UdpSocket, datagram: &[u8]) -> std::io::Result<()> {
    match socket2::SockRef::from(socket).send(datagram) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            Box::pin(socket.send(datagram)).await.map(drop)
        }
        sent => sent.map(drop),
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
        let answer = decode(&buf)?;
        if answer.metadata.id != query.metadata.id {
            return Err(ExchangeError::Malformed("answer ID differs".into()));
        }
        check_answers(&answer, query)?;
        // RFC 7766 leaves TC no meaning over TCP: an answer that still says it is cut
        // short is incomplete, and a NODATA in it is no "no".
        if answer.metadata.truncation {
            return Err(ExchangeError::Malformed(
                "truncated answer (TC=1) over TCP".into(),
            ));
        }
        Ok(answer)
    };
    match timeout_at(deadline, io).await {
        Err(_) => Err(ExchangeError::Timeout),
        Ok(result) => result,
    }
}

/// A DNS message from the wire; when hickory cannot decode it, the error names what is
/// wrong where we can tell (a DNSKEY whose protocol is not 3, say), with hickory's words
/// after it. hickory refuses a whole message for an NSEC3 of an unknown hash algorithm
/// or unknown flags, which validators must ignore (RFC 5155 sections 8.1 and 8.2), not
/// reject: such records are set aside ([`super::wire::mask_ignored_nsec3`]) and the
/// message read again.
fn decode(bytes: &[u8]) -> Result<Message, ExchangeError> {
    Message::from_vec(bytes)
        .or_else(|e| {
            if let Some(masked) = super::wire::mask_ignored_nsec3(bytes)
                && let Ok(message) = Message::from_vec(&masked)
            {
                return Ok(message);
            }
            Err(e)
        })
        .map_err(|e| {
            ExchangeError::Malformed(match super::wire::diagnose(bytes) {
                Some(what) => format!("{what} (decoder: {e})"),
                None => e.to_string(),
            })
        })
}

/// The answer must be a response to this very question.
pub fn check_answers(answer: &Message, query: &Message) -> Result<(), ExchangeError> {
    use hickory_proto::op::ResponseCode;
    if answer.metadata.message_type != hickory_proto::op::MessageType::Response {
        return Err(ExchangeError::Malformed("not a response".into()));
    }
    // Only a FORMERR or NOTIMP may come back without the question (RFC 1035 does not
    // require a server that could not parse or does not implement the query to repeat
    // it). Any other answer without it is tied to our question by the 16-bit ID alone:
    // a NODATA of that shape would read as "no DS" or "unsigned".
    if answer.queries.is_empty() {
        return match answer.metadata.response_code {
            ResponseCode::FormErr | ResponseCode::NotImp => Ok(()),
            code => Err(ExchangeError::Malformed(format!(
                "answer ({code}) without the question section"
            ))),
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn answer_to(id: u16) -> Vec<u8> {
        let mut m = Message::new(
            id,
            hickory_proto::op::MessageType::Response,
            hickory_proto::op::OpCode::Query,
        );
        m.metadata.authoritative = true;
        m.to_vec().unwrap_or_default()
    }

    /// An ID answered once is never sent again on the socket: a duplicate of the first
    /// answer reaches nobody, and the first query giving up late leaves the second's place
    /// alone.
    #[tokio::test]
    async fn an_answered_id_is_never_reused_on_one_socket() {
        let runtime = tokio::runtime::Handle::current().id();
        let mux = Arc::new(Mux::open("127.0.0.1:9".parse().unwrap(), runtime).unwrap());
        let (first, first_answer) = mux.register(0x1234, far(), runtime).unwrap();
        mux.deliver(&answer_to(0x1234));
        let (second, mut second_answer) = mux.register(0x1234, far(), runtime).unwrap();
        assert_ne!(second.id, 0x1234, "the answered ID was taken again");
        mux.deliver(&answer_to(0x1234));
        assert!(second_answer.try_recv().is_err(), "a duplicate reached it");
        drop(first);
        drop(first_answer);
        assert!(mux.state().waiting.contains_key(&second.id));
        mux.deliver(&answer_to(second.id));
        assert!(matches!(second_answer.try_recv(), Ok(Delivery::Answer(_))));
    }

    /// Two queries in flight on one socket never share an ID; a stray datagram reaches
    /// nobody.
    #[tokio::test]
    async fn ids_in_flight_on_one_socket_differ() {
        let runtime = tokio::runtime::Handle::current().id();
        let mux = Arc::new(Mux::open("127.0.0.1:9".parse().unwrap(), runtime).unwrap());
        let (a, mut a_answer) = mux.register(7, far(), runtime).unwrap();
        let (b, mut b_answer) = mux.register(7, far(), runtime).unwrap();
        assert_eq!(a.id, 7);
        assert_ne!(b.id, 7);
        mux.deliver(&answer_to(8u16.wrapping_add(b.id)));
        mux.deliver(b"\x07");
        assert!(a_answer.try_recv().is_err() && b_answer.try_recv().is_err());
        mux.deliver(&answer_to(b.id));
        assert!(matches!(b_answer.try_recv(), Ok(Delivery::Answer(_))));
        assert!(a_answer.try_recv().is_err());
    }

    /// RFC 6891 section 7: only a FORMERR or NOTIMP without an OPT says the server does
    /// not implement EDNS; one with an OPT comes from a server that does.
    #[test]
    fn only_a_formerr_without_opt_refuses_edns() {
        use hickory_proto::op::{Edns, ResponseCode};
        let mut m = Message::new(
            7,
            hickory_proto::op::MessageType::Response,
            hickory_proto::op::OpCode::Query,
        );
        for (code, refuses) in [
            (ResponseCode::FormErr, true),
            (ResponseCode::NotImp, true),
            (ResponseCode::ServFail, false),
            (ResponseCode::NoError, false),
        ] {
            m.metadata.response_code = code;
            m.edns = None;
            assert_eq!(refuses_edns(&m), refuses, "{code}");
            m.edns = Some(Edns::new());
            assert!(!refuses_edns(&m), "{code} with an OPT");
        }
    }

    /// Only FORMERR and NOTIMP may leave the question out.
    #[test]
    fn only_formerr_and_notimp_may_omit_the_question() {
        use hickory_proto::op::ResponseCode;
        let query = crate::dns::net::wire::build_query(
            &crate::dns::net::wire::parse_name("child.test.").unwrap(),
            hickory_proto::rr::RecordType::DS,
            false,
        );
        let bare = |code| {
            let mut m = Message::new(
                query.metadata.id,
                hickory_proto::op::MessageType::Response,
                hickory_proto::op::OpCode::Query,
            );
            m.metadata.response_code = code;
            m
        };
        for code in [ResponseCode::FormErr, ResponseCode::NotImp] {
            assert!(check_answers(&bare(code), &query).is_ok(), "{code}");
        }
        for code in [
            ResponseCode::NoError,
            ResponseCode::NXDomain,
            ResponseCode::Refused,
        ] {
            assert!(
                matches!(check_answers(&bare(code), &query), Err(ExchangeError::Malformed(d)) if d.contains("question")),
                "{code}"
            );
        }
    }

    /// The reader's timer fails exactly the queries whose deadline passed, each with a
    /// timeout, and is set again to the next deadline, or to the socket's retirement by
    /// age when that comes first; once retired, to the next deadline alone.
    #[tokio::test]
    async fn the_reader_times_out_only_the_overdue() {
        let runtime = tokio::runtime::Handle::current().id();
        let mux = Arc::new(Mux::open("127.0.0.1:9".parse().unwrap(), runtime).unwrap());
        let now = Instant::now();
        let ms = Duration::from_millis;
        let (_a, mut a) = mux.register(1, now + ms(10), runtime).unwrap();
        let (_b, mut b) = mux.register(2, now + ms(50), runtime).unwrap();
        let late = mux.retire_at + ms(500);
        let (_c, mut c) = mux.register(3, late, runtime).unwrap();
        assert_eq!(
            mux.state().wake_at,
            now + ms(10),
            "the earliest deadline wakes it"
        );
        mux.expire(now + ms(20));
        assert_eq!(mux.state().wake_at, now + ms(50));
        assert!(matches!(
            a.try_recv(),
            Ok(Delivery::Failed(ExchangeError::Timeout))
        ));
        assert!(b.try_recv().is_err() && c.try_recv().is_err());
        mux.expire(now + ms(60));
        assert_eq!(mux.state().wake_at, mux.retire_at, "retirement comes first");
        assert!(matches!(
            b.try_recv(),
            Ok(Delivery::Failed(ExchangeError::Timeout))
        ));
        mux.expire(mux.retire_at);
        assert_eq!(mux.state().wake_at, late, "retired: the last deadline");
        assert!(mux.state().retired);
        assert!(c.try_recv().is_err());
        mux.deliver(&answer_to(3));
        assert!(matches!(c.try_recv(), Ok(Delivery::Answer(_))));
        assert!(
            mux.state().used.contains(&1),
            "an expired ID is not sent again"
        );
    }

    /// However the reader ends (here: its task is dropped), the queries waiting on it
    /// fail at once instead of waiting for an answer nobody reads.
    #[tokio::test]
    async fn a_dropped_reader_fails_its_queries() {
        let runtime = tokio::runtime::Handle::current().id();
        let server: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mux = Arc::new(Mux::open(server, runtime).unwrap());
        let (_place, answer) = mux.register(1, far(), runtime).unwrap();
        let reader = tokio::spawn(read_answers(mux.clone(), Weak::new(), server));
        tokio::task::yield_now().await;
        reader.abort();
        let delivery = tokio::time::timeout(Duration::from_secs(5), answer)
            .await
            .expect("left waiting");
        assert!(matches!(
            delivery,
            Ok(Delivery::Failed(ExchangeError::Network(_)))
        ));
        assert!(mux.state().closed, "the socket takes no new query");
    }

    /// A silent server's queries time out at their deadlines: one beyond the socket's
    /// retirement by age, and one sooner than the reader's timer was set for (the reader
    /// is woken to set it sooner). Time paused: the runtime jumps to each timer.
    #[tokio::test(start_paused = true)]
    async fn a_silent_servers_queries_time_out_at_their_deadlines() {
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap();
        let query = crate::dns::net::wire::build_query(
            &crate::dns::net::wire::parse_name("child.test.").unwrap(),
            hickory_proto::rr::RecordType::DS,
            false,
        );
        let long = NetTransport::new(SOCKET_MAX_AGE * 3);
        let mut short = long.clone();
        short.timeout = SOCKET_MAX_AGE / 4;
        let started = Instant::now();
        let first = {
            let (long, query) = (long.clone(), query.clone());
            tokio::spawn(async move { long.exchange_net(addr, &query).await })
        };
        // The reader runs, its timer set for the socket's retirement.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let sooner = tokio::time::timeout(SOCKET_MAX_AGE * 10, short.exchange_net(addr, &query));
        let err = sooner.await.expect("never timed out").unwrap_err();
        assert_eq!(err, ExchangeError::Timeout);
        let took = started.elapsed();
        assert!(
            took >= short.timeout && took < SOCKET_MAX_AGE / 2,
            "{took:?}"
        );
        let later = tokio::time::timeout(SOCKET_MAX_AGE * 10, first);
        let err = later.await.expect("never timed out").unwrap().unwrap_err();
        assert_eq!(err, ExchangeError::Timeout);
        let took = started.elapsed();
        assert!(
            took >= long.timeout && took < long.timeout + SOCKET_MAX_AGE / 4,
            "{took:?}"
        );
    }

    /// A socket takes at most SOCKET_MAX_USES queries.
    #[tokio::test]
    async fn a_socket_retires_after_its_uses() {
        let runtime = tokio::runtime::Handle::current().id();
        let mux = Arc::new(Mux::open("127.0.0.1:9".parse().unwrap(), runtime).unwrap());
        let mut places = Vec::new();
        for i in 0..SOCKET_MAX_USES {
            places.push(mux.register(i as u16, far(), runtime).expect("fit"));
        }
        assert!(mux.register(0, far(), runtime).is_none());
    }
}
