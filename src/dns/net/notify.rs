//! NOTIFY(CDS) to a parent's notification target (RFC 9859, over RFC 1996's NOTIFY):
//! "the child's CDS changed, scan it now". A hint, never a request the receiver must
//! trust: it checks the CDS itself.
//!
//! Not through [`Transport`](super::transport::Transport): the transport's socket hands
//! one datagram to each query ID and ends the exchange there, while a NOTIFY must keep
//! waiting past a datagram that is not its answer (another opcode, another question,
//! noise), and a late answer to an earlier attempt is as good as one to the last (RFC
//! 1996 section 3.6 retransmits the same NOTIFY). So one socket of its own for every
//! attempt of one NOTIFY, each attempt with a fresh ID. Each attempt still takes its turn
//! at the address's pace and in-flight cap ([`Querier::paced`]): a burst of NOTIFYs for
//! many zones to one registry is spaced as the observer's queries are.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::query::Querier;
use super::transport::Transport;
use super::wire;

/// How a NOTIFY is sent: attempts and their waits, RFC 1996 section 3.6 style (a bounded
/// number of retransmissions, each waiting longer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifyOptions {
    /// Sends of the NOTIFY, the first included (at least 1).
    pub attempts: u32,
    /// How long the first send waits for its answer; each further one waits twice as
    /// long as the one before, at most `max_wait`.
    pub first_wait: Duration,
    pub max_wait: Duration,
    /// Send an OPT record (EDNS, no DO bit). Off by default: NOTIFY needs none.
    pub edns: bool,
}

impl NotifyOptions {
    /// The daemon's, inside a zone's look: a few quick attempts, so a silent target
    /// holds the look for seconds, not minutes; the next look tries again.
    pub const DAEMON: Self = Self {
        attempts: 3,
        first_wait: Duration::from_secs(2),
        max_wait: Duration::from_secs(8),
        edns: false,
    };
}

impl Default for NotifyOptions {
    /// RFC 1996 suggests 5 retransmissions and 60 s between them; we start sooner and
    /// double up to that.
    fn default() -> Self {
        Self {
            attempts: 5,
            first_wait: Duration::from_secs(4),
            max_wait: Duration::from_secs(60),
            edns: false,
        }
    }
}

/// What the target said.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NotifyOutcome {
    /// NOERROR: the target took the hint.
    Acknowledged,
    /// Another RCODE (REFUSED, NOTAUTH, NOTIMP, ...): the target answered and said no.
    Refused { rcode: u16, name: String },
    /// No answer to any attempt.
    NoAnswer,
    /// The NOTIFY could not be sent at all (no socket, no route).
    Failed { detail: String },
}

/// A NOTIFY's outcome, and what it took.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NotifyReport {
    pub outcome: NotifyOutcome,
    /// Sends made.
    pub attempts: u32,
    /// Datagrams read and set aside: not a decodable DNS message, or not the answer to
    /// our NOTIFY (another ID, not a response, another opcode, another question).
    pub ignored: u32,
}

impl NotifyReport {
    /// In words: "acknowledged", "REFUSED", "no answer to 3 attempts", "not sent: ...".
    pub fn describe(&self) -> String {
        match &self.outcome {
            NotifyOutcome::Acknowledged => "acknowledged".to_string(),
            NotifyOutcome::Refused { name, .. } => format!("answered {name}"),
            NotifyOutcome::NoAnswer => format!("no answer to {} attempts", self.attempts),
            NotifyOutcome::Failed { detail } => format!("not sent: {detail}"),
        }
    }
}

/// Datagrams one attempt reads at most before it gives up waiting (its wait bounds it
/// too): a flood of noise ends the attempt, not the daemon.
const MAX_DATAGRAMS_AN_ATTEMPT: u32 = 64;
/// Receive buffer: a NOTIFY answer is a header and a question.
const DATAGRAM_MAX: usize = 4096;

/// The NOTIFY message for `zone` about `rrtype`: opcode NOTIFY, AA=1, the question
/// `zone rrtype IN`, a random ID (RFC 1996 section 3.7).
pub fn notify_message(zone: &Name, rrtype: RecordType, edns: bool) -> Message {
    let mut message = Message::new(wire::query_id(), MessageType::Query, OpCode::Notify);
    message.metadata.authoritative = true;
    let mut question = Query::query(zone.clone(), rrtype);
    question.set_query_class(DNSClass::IN);
    message.add_query(question);
    if edns {
        let mut opt = Edns::new();
        opt.set_max_payload(wire::EDNS_PAYLOAD);
        message.set_edns(opt);
    }
    message
}

/// What a datagram is to a NOTIFY whose attempts used `ids`: its answer's RCODE, or
/// `None` when it is to be ignored. Only a response (QR=1) with one of our IDs, opcode
/// NOTIFY and our question echoed counts; FORMERR and NOTIMP may leave the question out
/// (as for any query, DESIGN.md section 5).
pub fn answer_to(datagram: &[u8], ids: &[u16], sent: &Message) -> Option<ResponseCode> {
    let answer = Message::from_vec(datagram).ok()?;
    let md = &answer.metadata;
    if !ids.contains(&md.id) || md.message_type != MessageType::Response {
        return None;
    }
    if md.op_code != OpCode::Notify {
        return None;
    }
    let code = md.response_code;
    if answer.queries.is_empty() {
        return matches!(code, ResponseCode::FormErr | ResponseCode::NotImp).then_some(code);
    }
    let echoed = answer.queries.len() == sent.queries.len()
        && answer.queries.iter().zip(&sent.queries).all(|(a, q)| {
            a.query_type() == q.query_type()
                && a.query_class() == q.query_class()
                && wire::same_name(a.name(), q.name())
        });
    echoed.then_some(code)
}

/// Sends NOTIFY(`rrtype`) for `zone` to `to`, unpaced (see [`notify_paced`]).
pub async fn notify(
    to: SocketAddr,
    zone: &Name,
    rrtype: RecordType,
    options: &NotifyOptions,
) -> NotifyReport {
    send(to, zone, rrtype, options, None::<&Querier>).await
}

/// As [`notify`], each attempt taking its turn at `to`'s pace and in-flight cap in
/// `querier` (`dns.max_qps_per_server`, `dns.queries_per_server`).
pub async fn notify_paced<T: Transport>(
    querier: &Querier<T>,
    to: SocketAddr,
    zone: &Name,
    rrtype: RecordType,
    options: &NotifyOptions,
) -> NotifyReport {
    send(to, zone, rrtype, options, Some(querier)).await
}

async fn send<T: Transport>(
    to: SocketAddr,
    zone: &Name,
    rrtype: RecordType,
    options: &NotifyOptions,
    pace: Option<&Querier<T>>,
) -> NotifyReport {
    let mut report = NotifyReport {
        outcome: NotifyOutcome::NoAnswer,
        attempts: 0,
        ignored: 0,
    };
    let failed = |report: NotifyReport, detail: String| NotifyReport {
        outcome: NotifyOutcome::Failed { detail },
        ..report
    };
    let local: SocketAddr = if to.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = match UdpSocket::bind(local).await {
        Ok(s) => s,
        Err(e) => return failed(report, format!("no UDP socket: {e}")),
    };
    if let Err(e) = socket.connect(to).await {
        return failed(report, format!("cannot reach {to}: {e}"));
    }
    let mut ids: Vec<u16> = Vec::new();
    let mut wait = options.first_wait;
    let mut buf = vec![0u8; DATAGRAM_MAX];
    for _ in 0..options.attempts.max(1) {
        let message = notify_message(zone, rrtype, options.edns);
        let bytes = match message.to_vec() {
            Ok(b) => b,
            Err(e) => return failed(report, format!("cannot encode the NOTIFY: {e}")),
        };
        ids.push(message.metadata.id);
        report.attempts += 1;
        let attempt = attempt(&socket, &bytes, &ids, &message, wait, &mut buf);
        let heard = match pace {
            Some(querier) => match querier.paced(to.ip(), attempt).await {
                Ok(heard) => heard,
                Err(e) => return failed(report, e.to_string()),
            },
            None => attempt.await,
        };
        report.ignored += heard.ignored;
        match heard.result {
            Heard::Answer(code) => {
                report.outcome = if code == ResponseCode::NoError {
                    NotifyOutcome::Acknowledged
                } else {
                    NotifyOutcome::Refused {
                        rcode: u16::from(code),
                        name: code.to_str().to_string(),
                    }
                };
                return report;
            }
            Heard::Nothing => {}
            Heard::SendFailed(detail) => return failed(report, detail),
        }
        wait = (wait * 2).min(options.max_wait.max(options.first_wait));
    }
    report
}

enum Heard {
    Answer(ResponseCode),
    Nothing,
    SendFailed(String),
}

struct AttemptResult {
    result: Heard,
    ignored: u32,
}

/// One send, then reading until its answer, the wait's end or the datagram cap.
async fn attempt(
    socket: &UdpSocket,
    bytes: &[u8],
    ids: &[u16],
    sent: &Message,
    wait: Duration,
    buf: &mut [u8],
) -> AttemptResult {
    let mut ignored = 0;
    if let Err(e) = socket.send(bytes).await {
        return AttemptResult {
            result: Heard::SendFailed(format!("cannot send: {e}")),
            ignored,
        };
    }
    let deadline = Instant::now() + wait;
    for _ in 0..MAX_DATAGRAMS_AN_ATTEMPT {
        let read = tokio::time::timeout_at(deadline, socket.recv(buf)).await;
        let len = match read {
            Err(_elapsed) => break,
            // An ICMP refusal from the target (nothing listens): silence to us, as the
            // querier counts a refused port; the next attempt may find it up.
            Ok(Err(_)) => {
                tokio::time::sleep_until(deadline).await;
                break;
            }
            Ok(Ok(len)) => len,
        };
        match buf.get(..len).and_then(|d| answer_to(d, ids, sent)) {
            Some(code) => {
                return AttemptResult {
                    result: Heard::Answer(code),
                    ignored,
                };
            }
            None => ignored += 1,
        }
    }
    AttemptResult {
        result: Heard::Nothing,
        ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// What the test responder does with each NOTIFY it reads.
    #[derive(Clone, Copy)]
    enum Script {
        Answer(ResponseCode),
        Silent,
        /// First a datagram with another ID, then one with another opcode, then one
        /// without QR, then garbage, then the real NOERROR.
        DecoysThenAnswer,
        /// Silent to the first `n` NOTIFYs, then NOERROR.
        SilentFor(u32),
        /// NOERROR echoing another question.
        OtherQuestion,
    }

    /// A UDP responder on `ip` (loopback), answering each datagram by `script`; counts
    /// the NOTIFYs it read. Stops when the test's runtime ends.
    async fn responder(ip: [u8; 4], script: Script) -> (SocketAddr, Arc<AtomicU32>) {
        let socket = UdpSocket::bind((std::net::Ipv4Addr::from(ip), 0))
            .await
            .expect("bind on loopback");
        let addr = socket.local_addr().expect("address");
        let seen = Arc::new(AtomicU32::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            // Bounded: the test ends long before.
            for _ in 0..1000 {
                let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                let Ok(query) = Message::from_vec(&buf[..len]) else {
                    continue;
                };
                let n = count.fetch_add(1, Ordering::SeqCst);
                assert_eq!(query.metadata.op_code, OpCode::Notify);
                assert!(query.metadata.authoritative, "a NOTIFY says AA=1");
                let reply = |code: ResponseCode| {
                    let mut m =
                        Message::new(query.metadata.id, MessageType::Response, OpCode::Notify);
                    m.metadata.authoritative = true;
                    m.metadata.response_code = code;
                    m.queries = query.queries.clone();
                    m
                };
                let mut out: Vec<Vec<u8>> = Vec::new();
                match script {
                    Script::Answer(code) => out.push(reply(code).to_vec().unwrap()),
                    Script::Silent => {}
                    Script::SilentFor(k) if n < k => {}
                    Script::SilentFor(_) => {
                        out.push(reply(ResponseCode::NoError).to_vec().unwrap())
                    }
                    Script::DecoysThenAnswer => {
                        let mut other_id = reply(ResponseCode::Refused);
                        other_id.metadata.id = query.metadata.id.wrapping_add(1);
                        let mut other_op = reply(ResponseCode::Refused);
                        other_op.metadata.op_code = OpCode::Query;
                        let mut not_response = reply(ResponseCode::Refused);
                        not_response.metadata.message_type = MessageType::Query;
                        out.push(other_id.to_vec().unwrap());
                        out.push(other_op.to_vec().unwrap());
                        out.push(not_response.to_vec().unwrap());
                        out.push(vec![0xde, 0xad, 0xbe]);
                        out.push(reply(ResponseCode::NoError).to_vec().unwrap());
                    }
                    Script::OtherQuestion => {
                        let mut m = reply(ResponseCode::NoError);
                        m.queries = vec![Query::query(
                            Name::from_ascii("other.test.").unwrap(),
                            RecordType::CDS,
                        )];
                        out.push(m.to_vec().unwrap());
                    }
                }
                for d in out {
                    let _ = socket.send_to(&d, peer).await;
                }
            }
        });
        (addr, seen)
    }

    fn zone() -> Name {
        Name::from_ascii("child.test.").unwrap()
    }

    fn quick(attempts: u32) -> NotifyOptions {
        NotifyOptions {
            attempts,
            first_wait: Duration::from_millis(100),
            max_wait: Duration::from_millis(400),
            edns: false,
        }
    }

    #[tokio::test]
    async fn noerror_is_acknowledged_at_the_first_attempt() {
        let (to, seen) = responder([127, 0, 61, 1], Script::Answer(ResponseCode::NoError)).await;
        let report = notify(to, &zone(), RecordType::CDS, &quick(3)).await;
        assert_eq!(report.outcome, NotifyOutcome::Acknowledged, "{report:?}");
        assert_eq!((report.attempts, report.ignored), (1, 0));
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn refused_is_said_with_its_rcode_and_not_retried() {
        let (to, seen) = responder([127, 0, 61, 2], Script::Answer(ResponseCode::Refused)).await;
        let report = notify(to, &zone(), RecordType::CDS, &quick(3)).await;
        assert_eq!(
            report.outcome,
            NotifyOutcome::Refused {
                rcode: 5,
                name: "Query Refused".into()
            },
            "{report:?}"
        );
        assert_eq!(report.attempts, 1);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    /// Silence: every attempt sent, waits growing, then "no answer"; bounded in time.
    #[tokio::test]
    async fn silence_is_retried_a_bounded_number_of_times_with_growing_waits() {
        let (to, seen) = responder([127, 0, 61, 3], Script::Silent).await;
        let start = Instant::now();
        let report = notify(to, &zone(), RecordType::CDS, &quick(4)).await;
        assert_eq!(report.outcome, NotifyOutcome::NoAnswer);
        assert_eq!(report.attempts, 4);
        // The responder read every one of them.
        assert_eq!(seen.load(Ordering::SeqCst), 4);
        // 100 + 200 + 400 + 400 ms (doubling, capped).
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(1100) && took < Duration::from_secs(5),
            "{took:?}"
        );

        // Silent to the first two, answering the third: acknowledged after three sends.
        let (to, seen) = responder([127, 0, 61, 4], Script::SilentFor(2)).await;
        let report = notify(to, &zone(), RecordType::CDS, &quick(5)).await;
        assert_eq!(report.outcome, NotifyOutcome::Acknowledged, "{report:?}");
        assert_eq!(report.attempts, 3);
        assert_eq!(seen.load(Ordering::SeqCst), 3);
    }

    /// Another ID, another opcode, no QR, garbage: each set aside, and the real answer
    /// after them still counts within the same attempt.
    #[tokio::test]
    async fn datagrams_that_are_not_our_answer_are_ignored() {
        let (to, _) = responder([127, 0, 61, 5], Script::DecoysThenAnswer).await;
        let report = notify(to, &zone(), RecordType::CDS, &quick(1)).await;
        assert_eq!(report.outcome, NotifyOutcome::Acknowledged, "{report:?}");
        assert_eq!((report.attempts, report.ignored), (1, 4));

        // An answer to another question is no acknowledgement.
        let (to, _) = responder([127, 0, 61, 6], Script::OtherQuestion).await;
        let report = notify(to, &zone(), RecordType::CDS, &quick(2)).await;
        assert_eq!(report.outcome, NotifyOutcome::NoAnswer, "{report:?}");
        assert_eq!((report.attempts, report.ignored), (2, 2));
    }

    /// Nothing listening (the kernel's port unreachable): no answer after every attempt,
    /// each waited out as silence, never a spin on the error.
    #[tokio::test]
    async fn a_closed_port_is_no_answer_after_the_bounded_attempts() {
        let closed = {
            let s = std::net::UdpSocket::bind("127.0.61.8:0").expect("bind");
            s.local_addr().expect("address")
        };
        let start = Instant::now();
        let report = notify(closed, &zone(), RecordType::CDS, &quick(2)).await;
        assert_eq!(report.outcome, NotifyOutcome::NoAnswer, "{report:?}");
        assert_eq!(report.attempts, 2);
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }

    #[test]
    fn the_notify_message_is_opcode_notify_aa_with_the_zones_question() {
        let m = notify_message(&zone(), RecordType::CDS, true);
        assert_eq!(m.metadata.op_code, OpCode::Notify);
        assert_eq!(m.metadata.message_type, MessageType::Query);
        assert!(m.metadata.authoritative);
        assert_eq!(m.queries.len(), 1);
        assert_eq!(m.queries[0].query_type(), RecordType::CDS);
        assert_eq!(m.queries[0].query_class(), DNSClass::IN);
        assert!(m.edns.as_ref().is_some_and(|e| !e.flags().dnssec_ok));
        assert!(
            notify_message(&zone(), RecordType::CDS, false)
                .edns
                .is_none()
        );
        // Decoded again, opcode and question survive the wire.
        let back = Message::from_vec(&m.to_vec().unwrap()).unwrap();
        assert_eq!(back.metadata.op_code, OpCode::Notify);
        // A FORMERR without the question counts; a NOERROR without it does not.
        let ids = [m.metadata.id];
        let bare = |code| {
            let mut r = Message::new(m.metadata.id, MessageType::Response, OpCode::Notify);
            r.metadata.response_code = code;
            r.to_vec().unwrap()
        };
        assert_eq!(
            answer_to(&bare(ResponseCode::FormErr), &ids, &m),
            Some(ResponseCode::FormErr)
        );
        assert_eq!(answer_to(&bare(ResponseCode::NoError), &ids, &m), None);
    }

    /// Paced through the querier: each attempt takes a turn at the address's pace.
    #[tokio::test]
    async fn paced_attempts_take_turns_at_the_address() {
        let (to, _) = responder([127, 0, 61, 7], Script::Answer(ResponseCode::NoError)).await;
        let querier = Querier::new(
            Arc::new(super::super::transport::NetTransport::new(
                Duration::from_millis(100),
            )),
            super::super::query::Limits {
                qps_per_server: 5,
                ..Default::default()
            },
        );
        let start = Instant::now();
        for _ in 0..3 {
            let report = notify_paced(&querier, to, &zone(), RecordType::CDS, &quick(1)).await;
            assert_eq!(report.outcome, NotifyOutcome::Acknowledged);
        }
        // Three sends at 5 a second: the third leaves 400 ms after the first.
        assert!(
            start.elapsed() >= Duration::from_millis(390),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(querier.stats().paced, 2);
    }
}
