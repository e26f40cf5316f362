//! Every query the observer sends goes through [`Querier`]: a global cap on queries in
//! flight (so 10,000 zones never open 10,000 sockets), per server address a cap on
//! queries in flight and a pace (`dns.max_qps_per_server`: TLD operators limit queries
//! per source), one in-flight exchange per identical question (callers asking the same
//! thing share it), and the bounded retry budget of `dns.query_attempts`.

use std::collections::hash_map::Entry;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::sync::{Semaphore, oneshot};

use super::ipv6::Ipv6Health;
use super::silence::Silence;
use super::transport::{ExchangeError, NetTransport, Transport};
use super::wire;

/// What one question to one server gave, after retries. Shared by every caller that asked
/// the same question while it was in flight.
pub type Outcome = Result<Arc<Message>, ExchangeError>;

/// The answer, if the server spoke for its zone (AA, NOERROR or NXDOMAIN); otherwise what
/// it said instead, for an error message: `a.nic.test. (127.0.0.1): Server Failure`.
pub fn authoritative<'a>(
    outcome: &'a Outcome,
    host: &str,
    addr: IpAddr,
) -> Result<&'a Arc<Message>, String> {
    match outcome {
        Ok(m)
            if m.metadata.authoritative
                && matches!(
                    m.metadata.response_code,
                    ResponseCode::NoError | ResponseCode::NXDomain
                ) =>
        {
            Ok(m)
        }
        Ok(m) => Err(format!(
            "{host} ({addr}): {}{}",
            m.metadata.response_code,
            if m.metadata.authoritative {
                ""
            } else {
                ", not authoritative"
            }
        )),
        Err(e) => Err(format!("{host} ({addr}): {e}")),
    }
}

/// The cap on queries in flight, all servers together: one socket each, so 10,000 zones
/// never open 10,000 sockets.
pub const QUERIES_IN_FLIGHT: usize = 64;
/// Default of `dns.queries_per_server`. Validating resolvers (Unbound, BIND, Knot Resolver)
/// put no cap of their own on queries in flight to one server, and `dnsperf` keeps 100;
/// 32 stays far below what any authoritative server answers. The fewer wait at a server,
/// the more often it wakes for one, so a server spends less a query with more waiting,
/// and our side gets more answers per wake-up too (docs/benchmarks.md).
pub const DEFAULT_QUERIES_PER_SERVER: usize = 32;
/// Upper bound of `dns.queries_per_server`: more to one server than to all of them
/// together ([`QUERIES_IN_FLIGHT`]) would never be reached.
pub const MAX_QUERIES_PER_SERVER: usize = QUERIES_IN_FLIGHT;
/// Default of `dns.query_attempts`.
pub const DEFAULT_QUERY_ATTEMPTS: u32 = 3;
/// Default of `dns.max_qps_per_server`. Authoritative operators bound what one source
/// may ask: response rate limiting per source prefix and response (NSD's default is 200
/// a second for one source prefix and kind of answer, BIND's and Windows DNS's usual
/// settings 5 to 20 for one identical answer), and per-source query limits in front of
/// the servers (dnsdist's `MaxQPSIPRule`). Our questions are for distinct names, so the
/// per-source limits are the ones that bite. 50 a second is a quarter of NSD's default;
/// settled zones are looked at from samples (DESIGN.md section 4), so a fleet of 100,000
/// zones looked at hourly under a TLD of four addresses asks each about 14 a second for
/// its samples and 2 for its daily full looks, leaving room for zones that decide (a
/// fleet that outruns the pace has its looks come late, and a disable's wait restarts
/// after two polls without a confirming look, DESIGN.md rule 2).
pub const DEFAULT_MAX_QPS_PER_SERVER: u32 = 50;
/// Upper bound of `dns.max_qps_per_server`.
pub const MAX_QPS_PER_SERVER: u32 = 100_000;

/// Limits of the querier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Queries in flight at once, all servers together (one socket each).
    pub in_flight: usize,
    /// Queries in flight at once to one server address.
    pub per_server: usize,
    /// Exchanges per question, the first one included (`dns.query_attempts`).
    pub attempts: u32,
    /// Queries a second to one server address, evenly spaced (`dns.max_qps_per_server`).
    pub qps_per_server: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            in_flight: QUERIES_IN_FLIGHT,
            per_server: DEFAULT_QUERIES_PER_SERVER,
            attempts: DEFAULT_QUERY_ATTEMPTS,
            qps_per_server: DEFAULT_MAX_QPS_PER_SERVER,
        }
    }
}

/// Counters for tests and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Exchanges started (retries included).
    pub exchanges: u64,
    /// Questions that joined an identical one in flight instead of being sent.
    pub shared: u64,
    /// The most exchanges ever in flight at once.
    pub peak_in_flight: usize,
    /// Exchanges that waited for their turn at a server address's pace, and how long
    /// they waited together.
    pub paced: u64,
    pub paced_wait: std::time::Duration,
    /// Times a server's pace was slowed because it dropped or slipped queries.
    pub backoffs: u64,
}

/// What every querier of this process sent, and waited for the servers' pace: counters
/// since the process started, for the metrics endpoint (a reload's new observer adds to
/// them, so they never go back).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessTotals {
    pub exchanges: u64,
    pub paced: u64,
    pub paced_wait: std::time::Duration,
    /// Times a server's pace was slowed because it dropped or slipped queries.
    pub backoffs: u64,
}

static PROCESS_EXCHANGES: AtomicU64 = AtomicU64::new(0);
static PROCESS_PACED: AtomicU64 = AtomicU64::new(0);
static PROCESS_PACED_WAIT_MICROS: AtomicU64 = AtomicU64::new(0);
static PROCESS_BACKOFFS: AtomicU64 = AtomicU64::new(0);

pub fn process_totals() -> ProcessTotals {
    ProcessTotals {
        exchanges: PROCESS_EXCHANGES.load(Ordering::Relaxed),
        paced: PROCESS_PACED.load(Ordering::Relaxed),
        paced_wait: std::time::Duration::from_micros(
            PROCESS_PACED_WAIT_MICROS.load(Ordering::Relaxed),
        ),
        backoffs: PROCESS_BACKOFFS.load(Ordering::Relaxed),
    }
}

/// One question to one server; identical ones in flight are sent once. `Name` compares
/// and hashes without regard to case.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    server: SocketAddr,
    qname: Name,
    qtype: RecordType,
    recursion: bool,
    checking_disabled: bool,
}

/// The querier's state, shared with the tasks that run its exchanges.
struct Shared<T> {
    transport: Arc<T>,
    limits: Limits,
    global: Semaphore,
    per_server: Mutex<super::FastMap<IpAddr, Arc<ServerGate>>>,
    /// The questions in flight, each with the callers that joined it.
    flights: Mutex<super::FastMap<Question, Vec<oneshot::Sender<Outcome>>>>,
    exchanges: AtomicU64,
    shared: AtomicU64,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    paced: AtomicU64,
    paced_wait_micros: AtomicU64,
    backoffs: AtomicU64,
    ipv6: Ipv6Health,
    /// Server addresses that stopped answering, said once an episode.
    silence: Silence,
}

/// What stands between a question and one server address: its cap on queries in flight,
/// and its pace.
struct ServerGate {
    in_flight: Semaphore,
    pace: Pace,
}

/// The queries to one server address, at most `rate` a second and evenly spaced: each
/// leaves `1/rate` after the one before (a virtual schedule, GCRA), in the order they
/// came. Where `1/rate` is finer than the runtime's timer (a millisecond), a burst as
/// long as `BURST_TOLERANCE` leaves together rather than each waiting a whole tick. A
/// query that gives up while waiting (its observation's time is up) takes no turn:
/// nothing is reserved ahead, so callers that left never hold back those after them.
///
/// A server that pushes back (drops a query while it answers others, or slips: answers
/// over UDP with TC=1 what then fits in a UDP answer, as response rate limiting does) is
/// asked more slowly: the spacing doubles, at most once a [`BACKOFF_STEP`] and up to
/// [`BACKOFF_MAX`] times the configured one, and steps back by one base interval for
/// each `BACKOFF_STEP` it then answers without pushing back. A server that answers
/// nothing is not slowed (its queries time out anyway, and a queue behind a slowed dead
/// server would hold every observation that needs it).
struct Pace {
    interval: std::time::Duration,
    tolerance: std::time::Duration,
    /// When the next query may leave (the schedule's theoretical arrival time).
    next: tokio::sync::Mutex<Option<tokio::time::Instant>>,
    backoff: Mutex<Backoff>,
}

/// How far a server that pushes back has slowed its pace.
#[derive(Debug, Default)]
struct Backoff {
    /// The spacing is `factor` times the configured one (0 or 1: not slowed).
    factor: u32,
    /// The last change of `factor`, and the last push-back (a step back waits for a
    /// `BACKOFF_STEP` without either).
    changed: Option<tokio::time::Instant>,
    pushed: Option<tokio::time::Instant>,
    /// The last answer from the server.
    answered: Option<tokio::time::Instant>,
}

/// The slowest a pushing-back server is asked: an eighth of its pace.
pub const BACKOFF_MAX: u32 = 8;
/// The least time between two slow-downs, and the calm before each step back.
const BACKOFF_STEP: std::time::Duration = std::time::Duration::from_secs(1);
/// A timeout counts as a drop only from a server that answered this recently.
const ANSWERED_LATELY: std::time::Duration = std::time::Duration::from_secs(10);

/// What a server's pace did on an exchange's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PaceChange {
    Slowed(u32),
    Restored,
}

/// How far ahead of its slot a query may leave, at rates whose spacing the timer cannot
/// keep (above 500 a second); none below them.
const BURST_TOLERANCE: std::time::Duration = std::time::Duration::from_millis(2);

impl Pace {
    fn new(rate: u32) -> Self {
        let interval = std::time::Duration::from_secs(1) / rate.max(1);
        Self {
            interval,
            tolerance: if interval < BURST_TOLERANCE {
                BURST_TOLERANCE
            } else {
                std::time::Duration::ZERO
            },
            next: tokio::sync::Mutex::new(None),
            backoff: Mutex::default(),
        }
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The spacing now: the configured one, times the back-off.
    fn spacing(&self) -> std::time::Duration {
        self.interval * self.backoff().factor.max(1)
    }

    /// The server answered; `slipped`: with TC=1 over UDP what fits in UDP.
    fn answered(&self, slipped: bool) -> Option<PaceChange> {
        let now = tokio::time::Instant::now();
        let mut b = self.backoff();
        b.answered = Some(now);
        if slipped {
            return Self::slow(&mut b, now);
        }
        let calm = [b.changed, b.pushed]
            .iter()
            .all(|at| at.is_none_or(|at| now - at >= BACKOFF_STEP));
        if b.factor > 1 && calm {
            b.factor -= 1;
            b.changed = Some(now);
            return (b.factor == 1).then_some(PaceChange::Restored);
        }
        None
    }

    /// The server let a query time out: a drop, if it answers others.
    fn timed_out(&self) -> Option<PaceChange> {
        let now = tokio::time::Instant::now();
        let mut b = self.backoff();
        if b.answered.is_some_and(|at| now - at <= ANSWERED_LATELY) {
            return Self::slow(&mut b, now);
        }
        None
    }

    fn slow(b: &mut Backoff, now: tokio::time::Instant) -> Option<PaceChange> {
        b.pushed = Some(now);
        if b.factor >= BACKOFF_MAX || b.changed.is_some_and(|at| now - at < BACKOFF_STEP) {
            return None;
        }
        b.factor = (b.factor.max(1) * 2).min(BACKOFF_MAX);
        b.changed = Some(now);
        Some(PaceChange::Slowed(b.factor))
    }

    /// Waits for this query's turn. `Some(wait)` when the schedule held it (from its
    /// arrival, its place in the queue included), `None` when it went at once.
    async fn turn(&self) -> Option<std::time::Duration> {
        let asked = tokio::time::Instant::now();
        // tokio's mutex queues its waiters in order (fair), and a waiter dropped leaves
        // the queue; the schedule moves on only for a query that takes its turn.
        let mut next = self.next.lock().await;
        let mut held = false;
        if let Some(at) = *next {
            let start = at.checked_sub(self.tolerance).unwrap_or(at);
            if start > tokio::time::Instant::now() {
                tokio::time::sleep_until(start).await;
                held = true;
            }
        }
        let now = tokio::time::Instant::now();
        let slot = next.map_or(now, |at| at.max(now));
        *next = Some(slot + self.spacing());
        held.then(|| now - asked)
    }
}

pub struct Querier<T = NetTransport>(Arc<Shared<T>>);

/// A question in flight, owned by the caller that sends it. Landing (or the owner giving
/// up) takes it off the list; those that joined it are told the outcome, or let go.
struct Flight<'a, T> {
    shared: &'a Shared<T>,
    question: &'a Question,
    landed: bool,
}

impl<T> Flight<'_, T> {
    /// Takes the question off the list: the callers that joined it, to be told.
    fn land(&mut self) -> Vec<oneshot::Sender<Outcome>> {
        self.landed = true;
        self.shared
            .flights()
            .remove(self.question)
            .unwrap_or_default()
    }
}

impl<T> Drop for Flight<'_, T> {
    /// The owner gave up: its joiners' channels close, and each asks again.
    fn drop(&mut self) {
        if !self.landed {
            self.shared.flights().remove(self.question);
        }
    }
}

/// A caller that gives up on a question ends its exchange: the permits and its query's
/// place on the socket are released at once, not when the exchange would have timed out.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

/// One exchange counted in flight for as long as it lives: an exchange whose task is
/// aborted (its caller gave up) leaves the count as surely as one that ends.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize, peak: &AtomicUsize) -> Self {
        let now = count.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T: Transport> Querier<T> {
    pub fn new(transport: Arc<T>, limits: Limits) -> Self {
        let limits = Limits {
            in_flight: limits.in_flight.max(1),
            per_server: limits.per_server.max(1),
            attempts: limits.attempts.max(1),
            qps_per_server: limits.qps_per_server.max(1),
        };
        Self(Arc::new(Shared {
            transport,
            global: Semaphore::new(limits.in_flight),
            limits,
            per_server: Mutex::default(),
            flights: Mutex::default(),
            exchanges: AtomicU64::new(0),
            shared: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            paced: AtomicU64::new(0),
            paced_wait_micros: AtomicU64::new(0),
            backoffs: AtomicU64::new(0),
            ipv6: Ipv6Health::default(),
            silence: Silence::default(),
        }))
    }

    /// What the exchanges say of this host's IPv6.
    pub fn ipv6(&self) -> &Ipv6Health {
        &self.0.ipv6
    }

    /// The server addresses whose pace is slowed now (they dropped or slipped queries),
    /// each with its slow-down, by address.
    pub fn slowed(&self) -> Vec<(IpAddr, u32)> {
        let gates = self.0.per_server.lock().unwrap_or_else(|p| p.into_inner());
        let mut slowed: Vec<(IpAddr, u32)> = gates
            .iter()
            .map(|(ip, gate)| (*ip, gate.pace.backoff().factor))
            .filter(|(_, factor)| *factor > 1)
            .collect();
        slowed.sort();
        slowed
    }

    pub fn stats(&self) -> QueryStats {
        let s = &self.0;
        QueryStats {
            exchanges: s.exchanges.load(Ordering::Relaxed),
            shared: s.shared.load(Ordering::Relaxed),
            peak_in_flight: s.peak.load(Ordering::Relaxed),
            paced: s.paced.load(Ordering::Relaxed),
            paced_wait: std::time::Duration::from_micros(
                s.paced_wait_micros.load(Ordering::Relaxed),
            ),
            backoffs: s.backoffs.load(Ordering::Relaxed),
        }
    }

    /// Runs `exchange` (one send to `server` and its wait, outside the transport: a
    /// NOTIFY, `super::notify`) under the same politeness as a query: the address's
    /// place in flight, then its turn at the pace, then a place among all. Counted as an
    /// exchange. The pace's back-off is not told the outcome: a NOTIFY's silence says
    /// nothing of the address's load.
    pub async fn paced<R>(
        &self,
        server: IpAddr,
        exchange: impl Future<Output = R>,
    ) -> Result<R, ExchangeError> {
        let s = &self.0;
        let gate = s.server_gate(server);
        let Ok(_server_permit) = gate.in_flight.acquire().await else {
            return Err(ExchangeError::Network("querier shut down".into()));
        };
        if let Some(waited) = gate.pace.turn().await {
            let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
            for (count, wait) in [
                (&s.paced, &s.paced_wait_micros),
                (&PROCESS_PACED, &PROCESS_PACED_WAIT_MICROS),
            ] {
                count.fetch_add(1, Ordering::Relaxed);
                wait.fetch_add(micros, Ordering::Relaxed);
            }
        }
        let Ok(_permit) = s.global.acquire().await else {
            return Err(ExchangeError::Network("querier shut down".into()));
        };
        let _counted = InFlight::enter(&s.in_flight, &s.peak);
        s.exchanges.fetch_add(1, Ordering::Relaxed);
        PROCESS_EXCHANGES.fetch_add(1, Ordering::Relaxed);
        Ok(exchange.await)
    }

    /// An authoritative query: RD=0, DO=1.
    pub async fn ask(&self, server: SocketAddr, qname: &Name, qtype: RecordType) -> Outcome {
        self.query(server, qname, qtype, false, false).await
    }

    /// A query with the given RD and CD bits (RD=1 only towards validating resolvers).
    pub async fn query(
        &self,
        server: SocketAddr,
        qname: &Name,
        qtype: RecordType,
        recursion: bool,
        checking_disabled: bool,
    ) -> Outcome {
        let question = Question {
            server,
            qname: qname.clone(),
            qtype,
            recursion,
            checking_disabled,
        };
        loop {
            // The entry API: one hash of the question to join or start, one to leave.
            let joined = {
                let mut flights = self.0.flights();
                match flights.entry(question.clone()) {
                    Entry::Occupied(mut flight) => {
                        let (tx, rx) = oneshot::channel();
                        flight.get_mut().push(tx);
                        Some(rx)
                    }
                    Entry::Vacant(place) => {
                        place.insert(Vec::new());
                        None
                    }
                }
            };
            let Some(joined) = joined else {
                // Ours to send. Whoever joined meanwhile gets the same outcome; if this
                // caller gives up first, they are let go and ask again themselves.
                let mut flight = Flight {
                    shared: &self.0,
                    question: &question,
                    landed: false,
                };
                let outcome = self.send(question.clone()).await;
                for joiner in flight.land() {
                    let _ = joiner.send(outcome.clone());
                }
                return outcome;
            };
            self.0.shared.fetch_add(1, Ordering::Relaxed);
            // The answer is not a cache: once delivered, the next caller asks again.
            if let Ok(outcome) = joined.await {
                return outcome;
            }
        }
    }

    /// The exchange (permits, attempts) runs as a task of its own: it goes on as soon as a
    /// permit or an answer is there, on whichever worker thread holds it, instead of
    /// waiting for the caller's task (often one task driving every zone) to be polled.
    async fn send(&self, question: Question) -> Outcome {
        let shared = self.0.clone();
        let mut task = AbortOnDrop(tokio::spawn(async move { shared.send(&question).await }));
        match (&mut task.0).await {
            Ok(outcome) => outcome,
            Err(e) => Err(ExchangeError::Network(format!("query task: {e}"))),
        }
    }
}

impl<T> Shared<T> {
    fn flights(
        &self,
    ) -> std::sync::MutexGuard<'_, super::FastMap<Question, Vec<oneshot::Sender<Outcome>>>> {
        self.flights.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<T: Transport> Shared<T> {
    fn server_gate(&self, ip: IpAddr) -> Arc<ServerGate> {
        let mut gates = self.per_server.lock().unwrap_or_else(|p| p.into_inner());
        gates
            .entry(ip)
            .or_insert_with(|| {
                Arc::new(ServerGate {
                    in_flight: Semaphore::new(self.limits.per_server),
                    pace: Pace::new(self.limits.qps_per_server),
                })
            })
            .clone()
    }

    async fn send(&self, question: &Question) -> Outcome {
        let Question {
            server,
            ref qname,
            qtype,
            recursion,
            checking_disabled,
        } = *question;
        let gate = self.server_gate(server.ip());
        let mut last = ExchangeError::Timeout;
        for attempt in 1..=self.limits.attempts {
            let mut query = wire::build_query(qname, qtype, recursion);
            query.metadata.checking_disabled = checking_disabled;
            let result = {
                // The server's place in flight, then its pace, then a place among all
                // servers' queries: one waiting for its turn at a server holds no place
                // another server's query could use, and the sends keep their spacing.
                // Semaphores are never closed, so acquire only fails if that changes.
                let Ok(_server_permit) = gate.in_flight.acquire().await else {
                    return Err(ExchangeError::Network("querier shut down".into()));
                };
                if let Some(waited) = gate.pace.turn().await {
                    let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
                    for (count, wait) in [
                        (&self.paced, &self.paced_wait_micros),
                        (&PROCESS_PACED, &PROCESS_PACED_WAIT_MICROS),
                    ] {
                        count.fetch_add(1, Ordering::Relaxed);
                        wait.fetch_add(micros, Ordering::Relaxed);
                    }
                }
                let Ok(_permit) = self.global.acquire().await else {
                    return Err(ExchangeError::Network("querier shut down".into()));
                };
                let _counted = InFlight::enter(&self.in_flight, &self.peak);
                self.exchanges.fetch_add(1, Ordering::Relaxed);
                PROCESS_EXCHANGES.fetch_add(1, Ordering::Relaxed);
                self.transport.exchange(server, &query).await
            };
            if server.is_ipv6() {
                match &result {
                    Err(ExchangeError::Unreachable(detail)) => self.ipv6.unreachable(detail),
                    Err(ExchangeError::Timeout) => {}
                    _ => self.ipv6.reached(),
                }
            }
            let change = match &result {
                Ok(_) => gate.pace.answered(self.transport.take_slip(server)),
                Err(ExchangeError::Timeout) => gate.pace.timed_out(),
                Err(_) => None,
            };
            match change {
                Some(PaceChange::Slowed(factor)) => {
                    self.backoffs.fetch_add(1, Ordering::Relaxed);
                    PROCESS_BACKOFFS.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        %server,
                        "the server drops or slips our queries while it answers others: asking it at 1/{factor} of dns.max_qps_per_server for now"
                    );
                }
                Some(PaceChange::Restored) => {
                    tracing::info!(%server, "the server answers again: asking it at dns.max_qps_per_server");
                }
                None => {}
            }
            match result {
                Ok(answer) => {
                    self.silence.answered(server);
                    return Ok(Arc::new(answer));
                }
                // A garbled answer will be garbled again; only silence and network
                // errors are worth another try.
                Err(ExchangeError::Malformed(detail)) => {
                    return Err(ExchangeError::Malformed(detail));
                }
                Err(other) => {
                    self.silence.attempt_failed(server, attempt, &other);
                    last = other;
                }
            }
        }
        self.silence
            .failed(server, &format!("{qname} {qtype}"), &last);
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, OpCode};

    fn answer(aa: bool, rcode: ResponseCode) -> Outcome {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.metadata.authoritative = aa;
        m.metadata.response_code = rcode;
        Ok(Arc::new(m))
    }

    /// The query turned into its answer: what the test transports reply.
    fn echo(query: &Message, authoritative: bool) -> Message {
        let mut answer = query.clone();
        answer.metadata.message_type = MessageType::Response;
        answer.metadata.authoritative = authoritative;
        answer
    }

    /// Answers every query once let through; counts the exchanges.
    struct Gated {
        calls: AtomicUsize,
        gate: Semaphore,
    }

    impl Default for Gated {
        fn default() -> Self {
            Self {
                calls: AtomicUsize::new(0),
                gate: Semaphore::new(0),
            }
        }
    }

    impl Transport for Gated {
        fn exchange<'a>(
            &'a self,
            _server: SocketAddr,
            query: &'a Message,
        ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
            Box::pin(async move {
                self.calls.fetch_add(1, Ordering::SeqCst);
                if let Ok(permit) = self.gate.acquire().await {
                    permit.forget();
                }
                Ok(echo(query, true))
            })
        }
    }

    /// IPv6 servers unreachable (as on a host without IPv6), IPv4 ones answering.
    struct NoIpv6;

    impl Transport for NoIpv6 {
        fn exchange<'a>(
            &'a self,
            server: SocketAddr,
            query: &'a Message,
        ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
            Box::pin(async move {
                if server.is_ipv6() {
                    return Err(ExchangeError::Unreachable(
                        "Network is unreachable (os error 101)".into(),
                    ));
                }
                Ok(echo(query, false))
            })
        }
    }

    /// Every IPv6 exchange failing with "network unreachable" says
    /// the host cannot reach IPv6 (once, for the host, naming the key), whatever IPv4
    /// does; an IPv6 answer clears it.
    #[tokio::test]
    async fn every_ipv6_exchange_unreachable_says_the_host_has_no_ipv6() {
        let querier = Querier::new(Arc::new(NoIpv6), Limits::default());
        let name = Name::from_ascii("child.test.").expect("name");
        for i in 0..8u16 {
            let v4 = SocketAddr::from(([127, 0, 0, 1], 53 + i));
            assert!(querier.ask(v4, &name, RecordType::DS).await.is_ok());
            let v6 = SocketAddr::from((
                std::net::Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
                53 + i,
            ));
            let e = querier.ask(v6, &name, RecordType::DS).await.unwrap_err();
            assert!(matches!(e, ExchangeError::Unreachable(_)), "{e:?}");
        }
        let crate::condition::Seen::Holds(episode) = querier.ipv6().condition().seen() else {
            panic!("the host's IPv6 is said to be unreachable")
        };
        assert!(
            episode
                .message
                .contains("dns.address_families = [\"ipv4\"]"),
            "{}",
            episode.message
        );
        querier.ipv6().reached();
        assert!(!querier.ipv6().condition().holding());
    }

    /// Runs the other tasks until `done` holds (bounded: a second at most).
    async fn until(done: impl Fn() -> bool) {
        for _ in 0..1000 {
            if done() {
                return;
            }
            tokio::task::yield_now().await;
            // A question asked again waits for its server's pace.
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        panic!("never happened");
    }

    fn ask_in_task(querier: &Arc<Querier<Gated>>) -> tokio::task::JoinHandle<Outcome> {
        let querier = querier.clone();
        tokio::spawn(async move {
            let name = Name::from_ascii("child.test.").expect("name");
            let server = SocketAddr::from(([127, 0, 0, 1], 53));
            querier.ask(server, &name, RecordType::DS).await
        })
    }

    /// One caller's question in flight (unanswered until the gate opens) and a second
    /// caller joined to it.
    async fn sent_and_joined() -> (
        Arc<Gated>,
        Arc<Querier<Gated>>,
        tokio::task::JoinHandle<Outcome>,
        tokio::task::JoinHandle<Outcome>,
    ) {
        let transport = Arc::new(Gated::default());
        let querier = Arc::new(Querier::new(transport.clone(), Limits::default()));
        let owner = ask_in_task(&querier);
        until(|| transport.calls.load(Ordering::SeqCst) == 1).await;
        let joiner = ask_in_task(&querier);
        until(|| querier.stats().shared == 1).await;
        (transport, querier, owner, joiner)
    }

    /// A question asked while the same one is in flight is sent once, and both callers
    /// get the answer.
    #[tokio::test]
    async fn a_question_in_flight_is_sent_once() {
        let (transport, querier, owner, joiner) = sent_and_joined().await;
        transport.gate.add_permits(1);
        assert!(owner.await.expect("owner").is_ok());
        assert!(joiner.await.expect("joiner").is_ok());
        assert_eq!(transport.calls.load(Ordering::SeqCst), 1);
        assert!(querier.0.flights().is_empty(), "the question stayed listed");
    }

    /// When the caller that sends a question gives up, the one that joined it is not
    /// left waiting: it sends the question itself.
    #[tokio::test]
    async fn a_joiner_asks_again_when_the_sender_gives_up() {
        let (transport, querier, owner, joiner) = sent_and_joined().await;
        owner.abort();
        assert!(owner.await.is_err_and(|e| e.is_cancelled()));
        until(|| transport.calls.load(Ordering::SeqCst) == 2).await;
        transport.gate.add_permits(1);
        assert!(joiner.await.expect("joiner").is_ok());
        assert_eq!(transport.calls.load(Ordering::SeqCst), 2);
        assert!(querier.0.flights().is_empty(), "the question stayed listed");
        assert_eq!(
            querier.0.in_flight.load(Ordering::SeqCst),
            0,
            "the exchange given up stayed counted in flight"
        );
    }

    #[test]
    fn only_an_authoritative_noerror_or_nxdomain_is_an_answer() {
        let addr: IpAddr = [192, 0, 2, 1].into();
        for rcode in [ResponseCode::NoError, ResponseCode::NXDomain] {
            assert!(authoritative(&answer(true, rcode), "a.test.", addr).is_ok());
        }
        let said = |outcome: &Outcome| authoritative(outcome, "a.test.", addr).unwrap_err();
        assert_eq!(
            said(&answer(true, ResponseCode::ServFail)),
            "a.test. (192.0.2.1): Server Failure"
        );
        assert_eq!(
            said(&answer(false, ResponseCode::NoError)),
            "a.test. (192.0.2.1): No Error, not authoritative"
        );
        assert_eq!(
            said(&Err(ExchangeError::Timeout)),
            "a.test. (192.0.2.1): timeout"
        );
    }

    /// Answers at once; notes when each query reached it, and where.
    #[derive(Default)]
    struct Clocked(Mutex<Vec<(SocketAddr, tokio::time::Instant)>>);

    impl Transport for Clocked {
        fn exchange<'a>(
            &'a self,
            server: SocketAddr,
            query: &'a Message,
        ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
            Box::pin(async move {
                let now = tokio::time::Instant::now();
                self.0.lock().unwrap().push((server, now));
                Ok(echo(query, true))
            })
        }
    }

    fn paced(rate: u32) -> (Arc<Clocked>, Arc<Querier<Clocked>>) {
        let transport = Arc::new(Clocked::default());
        let limits = Limits {
            qps_per_server: rate,
            ..Limits::default()
        };
        (transport.clone(), Arc::new(Querier::new(transport, limits)))
    }

    fn ask_many(
        querier: &Arc<Querier<Clocked>>,
        server: SocketAddr,
        n: usize,
    ) -> Vec<tokio::task::JoinHandle<Outcome>> {
        (0..n)
            .map(|i| {
                let querier = querier.clone();
                tokio::spawn(async move {
                    let name = Name::from_ascii(format!("z{i}.test.")).expect("name");
                    querier.ask(server, &name, RecordType::DS).await
                })
            })
            .collect()
    }

    /// `dns.max_qps_per_server`: the queries to one address leave evenly spaced, so no
    /// second sees more than the rate; another address is not held by the first's queue.
    #[tokio::test(start_paused = true)]
    async fn queries_to_one_server_keep_its_pace_and_others_do_not_wait() {
        let before = process_totals();
        let (transport, querier) = paced(10);
        let busy = SocketAddr::from(([192, 0, 2, 1], 53));
        let other = SocketAddr::from(([192, 0, 2, 2], 53));
        let start = tokio::time::Instant::now();
        let queued = ask_many(&querier, busy, 30);
        tokio::task::yield_now().await;
        let name = Name::from_ascii("other.test.").expect("name");
        assert!(querier.ask(other, &name, RecordType::DS).await.is_ok());
        for q in queued {
            assert!(q.await.expect("task").is_ok());
        }
        let sent = transport.0.lock().unwrap().clone();
        let to_other: Vec<_> = sent.iter().filter(|(s, _)| *s == other).collect();
        assert_eq!(to_other.len(), 1);
        assert!(
            to_other[0].1 - start < std::time::Duration::from_millis(10),
            "the other address waited"
        );
        let times: Vec<_> = sent
            .iter()
            .filter(|(s, _)| *s == busy)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(times.len(), 30);
        for pair in times.windows(2) {
            assert!(
                pair[1] - pair[0] >= std::time::Duration::from_millis(100),
                "{:?}",
                pair[1] - pair[0]
            );
        }
        for (i, t) in times.iter().enumerate() {
            let in_a_second = times[i..]
                .iter()
                .take_while(|u| **u - *t < std::time::Duration::from_secs(1))
                .count();
            assert!(in_a_second <= 10, "{in_a_second} queries in one second");
        }
        let stats = querier.stats();
        assert_eq!(stats.paced, 29);
        assert!(stats.paced_wait >= std::time::Duration::from_secs(40));
        // The process's totals (the metrics endpoint's) count them too.
        let after = process_totals();
        assert!(after.exchanges >= before.exchanges + 31);
        assert!(after.paced >= before.paced + 29);
        assert!(after.paced_wait >= before.paced_wait + stats.paced_wait);
    }

    /// A rate finer than the timer's millisecond (the benches' unpaced 100,000 a second)
    /// is kept in short bursts, not one query a tick.
    #[tokio::test(start_paused = true)]
    async fn a_rate_finer_than_the_timer_is_not_held_to_a_query_a_tick() {
        let (transport, querier) = paced(100_000);
        let server = SocketAddr::from(([192, 0, 2, 1], 53));
        let start = tokio::time::Instant::now();
        for q in ask_many(&querier, server, 1000) {
            assert!(q.await.expect("task").is_ok());
        }
        assert_eq!(transport.0.lock().unwrap().len(), 1000);
        let took = start.elapsed();
        assert!(
            took <= std::time::Duration::from_millis(20),
            "1,000 queries at 100,000 a second took {took:?}"
        );
    }

    /// Answers at once, except a name starting `drop` (a timeout) or `slip` (answered,
    /// but said to have slipped); notes when each query reached it.
    #[derive(Default)]
    struct PushingBack {
        sent: Mutex<Vec<tokio::time::Instant>>,
        slipped: std::sync::atomic::AtomicBool,
    }

    impl Transport for PushingBack {
        fn exchange<'a>(
            &'a self,
            _server: SocketAddr,
            query: &'a Message,
        ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
            Box::pin(async move {
                self.sent.lock().unwrap().push(tokio::time::Instant::now());
                let name = query.queries[0].name().to_ascii().to_ascii_lowercase();
                if name.starts_with("drop") {
                    return Err(ExchangeError::Timeout);
                }
                if name.starts_with("slip") {
                    self.slipped.store(true, Ordering::Relaxed);
                }
                Ok(echo(query, true))
            })
        }

        fn take_slip(&self, _server: SocketAddr) -> bool {
            self.slipped.swap(false, Ordering::Relaxed)
        }
    }

    /// Asks `names` one after the other; the gaps between the sends that follow.
    async fn gaps(names: &[&str]) -> (Vec<std::time::Duration>, QueryStats) {
        let transport = Arc::new(PushingBack::default());
        let limits = Limits {
            qps_per_server: 10,
            attempts: 1,
            ..Limits::default()
        };
        let querier = Querier::new(transport.clone(), limits);
        let server = SocketAddr::from(([192, 0, 2, 1], 53));
        for name in names {
            let name = Name::from_ascii(format!("{name}.test.")).expect("name");
            let _ = querier.ask(server, &name, RecordType::DS).await;
        }
        let sent = transport.sent.lock().unwrap().clone();
        let gaps = sent.windows(2).map(|w| w[1] - w[0]).collect();
        (gaps, querier.stats())
    }

    /// A server that drops a query while it answers others, or slips one, is asked at
    /// half the pace, down to an eighth; a server that answers nothing is not slowed (a
    /// queue behind it would hold every observation that needs it); calm brings the pace
    /// back one step a second.
    #[tokio::test(start_paused = true)]
    async fn a_server_that_pushes_back_is_asked_more_slowly_a_dead_one_is_not() {
        let ms = std::time::Duration::from_millis;
        // Answered, then a drop: the queries after it leave 200 ms apart, not 100.
        let (g, stats) = gaps(&["a", "drop", "b", "c"]).await;
        assert_eq!(g, vec![ms(100), ms(100), ms(200)], "{g:?}");
        assert_eq!(stats.backoffs, 1);
        // A slip slows it the same way (from the turn after the next, already given).
        let (g, stats) = gaps(&["slip", "b", "c"]).await;
        assert_eq!(g, vec![ms(100), ms(200)], "{g:?}");
        assert_eq!(stats.backoffs, 1);
        // A server that never answered: its timeouts slow nothing.
        let (g, stats) = gaps(&["drop1", "drop2", "drop3", "drop4"]).await;
        assert_eq!(g, vec![ms(100); 3], "{g:?}");
        assert_eq!(stats.backoffs, 0);
        // At most one slow-down a second, and never below an eighth of the pace.
        let many: Vec<String> = (0..40)
            .map(|i| {
                if i % 2 == 0 {
                    format!("a{i}")
                } else {
                    format!("drop{i}")
                }
            })
            .collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let (g, stats) = gaps(&names).await;
        assert!(g.iter().all(|gap| *gap <= ms(100) * BACKOFF_MAX), "{g:?}");
        assert_eq!(g.last(), Some(&(ms(100) * BACKOFF_MAX)), "{g:?}");
        assert_eq!(stats.backoffs, 3, "x2, x4, x8");
        // Calm: one step back a second of answers, to the configured pace.
        let mut calm = vec!["a", "drop", "b"];
        calm.extend(std::iter::repeat_n("ok", 30));
        let (g, _) = gaps(&calm).await;
        assert_eq!(g.last(), Some(&ms(100)), "{g:?}");
    }

    /// Queries that give up while waiting for their turn (their observation's time is
    /// up) take none: the next caller is not held behind turns nobody uses.
    #[tokio::test(start_paused = true)]
    async fn queries_that_gave_up_take_no_turn() {
        let (transport, querier) = paced(10);
        let server = SocketAddr::from(([192, 0, 2, 1], 53));
        let queued = ask_many(&querier, server, 50);
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        for q in &queued {
            q.abort();
        }
        let sent_before = transport.0.lock().unwrap().len();
        assert!(
            sent_before <= 4,
            "{sent_before} sent in 250 ms at 10 a second"
        );
        let asked = tokio::time::Instant::now();
        let name = Name::from_ascii("late.test.").expect("name");
        assert!(querier.ask(server, &name, RecordType::DS).await.is_ok());
        assert!(
            asked.elapsed() <= std::time::Duration::from_millis(100),
            "waited {:?} behind queries that left",
            asked.elapsed()
        );
    }
}
