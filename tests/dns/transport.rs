//! The network transport against scripted socket servers on loopback: truncation (and
//! answers too big for the receive buffer) and the TCP fallback, stray datagrams, garbled
//! and mismatched answers, silence, refusal, and many queries sharing one socket.

use std::net::SocketAddr;
use std::time::Duration;

use dnssec_warden::dns::classify::classify_ds;
use dnssec_warden::dns::wire::{build_query, parse_name};
use dnssec_warden::dns::{DsAnswer, ExchangeError, NetTransport, Transport};
use dnssec_warden_lab::DigestType;
use dnssec_warden_lab::dns::zone::{ds_rdata, sign};
use dnssec_warden_lab::keys::LabKey;
use futures::StreamExt;
use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

#[derive(Clone, Copy)]
enum Udp {
    Truncate,
    /// An answer bigger than the EDNS payload offered, without the TC bit.
    Oversized,
    StrayThenAnswer,
    Garbage,
    OtherQuestion,
    Silence,
}

/// An empty authoritative answer to `query`: its ID and question, AA set.
fn authoritative_reply(query: &Message) -> Message {
    let mut m = Message::new(
        query.metadata.id,
        MessageType::Response,
        query.metadata.op_code,
    );
    m.queries = query.queries.clone();
    m.metadata.authoritative = true;
    m
}

/// A big signed DS answer: 40 DS records do not fit in 1232 octets.
fn full_answer(query: &Message, key: &LabKey) -> Message {
    let zone = parse_name("child.test.").unwrap();
    let mut m = authoritative_reply(query);
    let records: Vec<Record> = (0..40)
        .map(|_| {
            let k = LabKey::generate(257).unwrap().dnskey();
            Record::from_rdata(
                zone.clone(),
                3600,
                ds_rdata(&k.to_ds("child.test.", DigestType::Sha256).unwrap()),
            )
        })
        .collect();
    let sig = sign(
        &records,
        RecordType::DS,
        &zone,
        &parse_name("test.").unwrap(),
        key,
        3600,
        (0, u32::MAX),
    )
    .unwrap();
    m.answers = records;
    m.answers.push(sig);
    m
}

async fn server(mode: Udp) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let udp = UdpSocket::bind("127.0.61.1:0").await.unwrap();
    let addr = udp.local_addr().unwrap();
    let tcp = TcpListener::bind(addr).await.unwrap();
    let key = LabKey::generate(257).unwrap();
    let task = tokio::spawn(async move {
        let tcp_key = key.clone();
        let tcp_task = tokio::spawn(async move {
            while let Ok((mut s, _)) = tcp.accept().await {
                let mut len = [0u8; 2];
                s.read_exact(&mut len).await.unwrap();
                let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                s.read_exact(&mut q).await.unwrap();
                let query = Message::from_vec(&q).unwrap();
                let wire = full_answer(&query, &tcp_key).to_vec().unwrap();
                let mut framed = (wire.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&wire);
                s.write_all(&framed).await.unwrap();
            }
        });
        let mut buf = vec![0u8; 4096];
        while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
            let query = Message::from_vec(&buf[..n]).unwrap();
            let mut reply = full_answer(&query, &key);
            match mode {
                Udp::Truncate => {
                    reply.answers.clear();
                    reply.metadata.truncation = true;
                }
                Udp::Oversized => {
                    let more = reply.answers.clone();
                    reply.answers.extend(more.iter().cloned());
                    reply.answers.extend(more);
                }
                Udp::StrayThenAnswer => {
                    let mut stray = reply.clone();
                    stray.metadata.id = query.metadata.id.wrapping_add(1);
                    udp.send_to(&stray.to_vec().unwrap(), peer).await.unwrap();
                    reply.answers.truncate(1);
                }
                Udp::Garbage => {
                    // Noise with another ID is skipped; garbage with ours is the answer.
                    let other = query.metadata.id.wrapping_add(1).to_be_bytes();
                    udp.send_to(&[&other[..], b"noise"].concat(), peer)
                        .await
                        .unwrap();
                    let ours = query.metadata.id.to_be_bytes();
                    udp.send_to(&[&ours[..], b"garbage"].concat(), peer)
                        .await
                        .unwrap();
                    continue;
                }
                Udp::OtherQuestion => {
                    reply.queries[0] = hickory_proto::op::Query::query(
                        parse_name("other.test.").unwrap(),
                        RecordType::DS,
                    );
                    reply.answers.truncate(1);
                }
                Udp::Silence => continue,
            }
            udp.send_to(&reply.to_vec().unwrap(), peer).await.unwrap();
        }
        tcp_task.abort();
    });
    (addr, task)
}

fn transport() -> NetTransport {
    NetTransport::new(Duration::from_millis(500))
}

fn ds_query() -> Message {
    build_query(&parse_name("child.test.").unwrap(), RecordType::DS, false)
}

/// A truncated answer, and one bigger than the receive buffer (123 records by UDP, without
/// TC), are both fetched again over TCP: 41 records.
#[tokio::test]
async fn a_truncated_or_oversized_udp_answer_is_fetched_over_tcp() {
    for mode in [Udp::Truncate, Udp::Oversized] {
        let (addr, task) = server(mode).await;
        let answer = transport().exchange(addr, &ds_query()).await.unwrap();
        assert!(!answer.metadata.truncation);
        assert_eq!(answer.answers.len(), 41);
        let outcome = Ok(std::sync::Arc::new(answer));
        match classify_ds(&parse_name("child.test.").unwrap(), "test.", &outcome) {
            DsAnswer::Present { ds, ttl } => {
                assert_eq!(ds.len(), 40);
                assert_eq!(ttl, 3600);
            }
            other => panic!("{other:?}"),
        }
        task.abort();
    }
}

#[tokio::test]
async fn a_stray_datagram_is_skipped() {
    let (addr, task) = server(Udp::StrayThenAnswer).await;
    let answer = transport().exchange(addr, &ds_query()).await.unwrap();
    assert_eq!(answer.answers.len(), 1);
    task.abort();
}

#[tokio::test]
async fn garbage_and_wrong_questions_are_malformed() {
    for mode in [Udp::Garbage, Udp::OtherQuestion] {
        let (addr, task) = server(mode).await;
        let err = transport().exchange(addr, &ds_query()).await.unwrap_err();
        assert!(matches!(err, ExchangeError::Malformed(_)), "{err:?}");
        task.abort();
    }
}

#[tokio::test]
async fn silence_times_out_and_a_closed_port_is_a_network_error() {
    let (addr, task) = server(Udp::Silence).await;
    let started = std::time::Instant::now();
    let err = transport().exchange(addr, &ds_query()).await.unwrap_err();
    assert_eq!(err, ExchangeError::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
    task.abort();
    // A port nobody listens on: the kernel's ICMP refusal, not a timeout.
    let closed = {
        let s = std::net::UdpSocket::bind("127.0.61.2:0").unwrap();
        s.local_addr().unwrap()
    };
    let err = transport().exchange(closed, &ds_query()).await.unwrap_err();
    assert!(matches!(err, ExchangeError::Network(_)), "{err:?}");
}

#[tokio::test]
async fn an_nxdomain_needs_the_parents_soa_to_count_as_absent() {
    let query = ds_query();
    let mut m = authoritative_reply(&query);
    m.metadata.response_code = ResponseCode::NXDomain;
    let soa = |owner: &str| {
        Record::from_rdata(
            parse_name(owner).unwrap(),
            60,
            RData::SOA(SOA::new(Name::root(), Name::root(), 1, 1, 1, 1, 60)),
        )
    };
    m.authorities.push(soa("test."));
    let zone = parse_name("child.test.").unwrap();
    let ok = Ok(std::sync::Arc::new(m.clone()));
    assert_eq!(classify_ds(&zone, "test.", &ok), DsAnswer::Absent);
    m.authorities = vec![soa("child.test.")];
    let from_child = Ok(std::sync::Arc::new(m.clone()));
    assert!(matches!(
        classify_ds(&zone, "test.", &from_child),
        DsAnswer::Unknown(_)
    ));
    m.authorities.clear();
    let bare = Ok(std::sync::Arc::new(m));
    assert!(matches!(
        classify_ds(&zone, "test.", &bare),
        DsAnswer::Unknown(_)
    ));
}

/// A server that answers each query after its own random delay, so answers come back out
/// of order, and answers every third one twice.
async fn shuffling_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let udp = std::sync::Arc::new(UdpSocket::bind("127.0.61.1:0").await.unwrap());
    let addr = udp.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        let mut n_seen = 0u64;
        while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
            let query = Message::from_vec(&buf[..n]).unwrap();
            n_seen += 1;
            let copies = if n_seen.is_multiple_of(3) { 2 } else { 1 };
            let udp = udp.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(fastrand::u64(0..15))).await;
                let wire = authoritative_reply(&query).to_vec().unwrap();
                for _ in 0..copies {
                    let _ = udp.send_to(&wire, peer).await;
                }
            });
        }
    });
    (addr, task)
}

/// Many queries in flight to one server share its socket: answers arriving out of order,
/// some twice, each reach the query they answer, even when every query came with the same
/// ID (the transport renumbers the ones that would collide).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_out_of_order_reach_their_own_queries() {
    let (addr, task) = shuffling_server().await;
    let transport = transport();
    let queries: Vec<Message> = (0..150)
        .map(|i| {
            let mut q = build_query(
                &parse_name(&format!("q{i}.test.")).unwrap(),
                RecordType::DS,
                false,
            );
            q.metadata.id = 7;
            q
        })
        .collect();
    // 48 in flight (as the querier's caps would allow at most 64): past one socket's 64
    // uses, and few enough for the server's receive buffer under a busy test run.
    let transport = &transport;
    let answers: Vec<_> = futures::stream::iter(queries.iter())
        .map(|q| async move { (q, transport.exchange(addr, q).await) })
        .buffer_unordered(48)
        .collect()
        .await;
    assert_eq!(answers.len(), 150);
    for (query, answer) in answers {
        let answer = answer.unwrap();
        assert_eq!(answer.queries[0].name(), query.queries[0].name());
    }
    task.abort();
}

/// The question name's bytes as the server received them.
fn qname_bytes(datagram: &[u8]) -> Vec<u8> {
    let mut at = 12;
    let mut out = Vec::new();
    while let Some(&len) = datagram.get(at) {
        if len == 0 {
            break;
        }
        out.extend_from_slice(&datagram[at..at + 1 + usize::from(len)]);
        at += 1 + usize::from(len);
    }
    out
}

/// A server that answers a question in mixed case with the case lowered and NXDOMAIN (a
/// forger who got ID and port right, or a server that does not echo case) and a question
/// in lower case with NOERROR; it reports every question name it received.
async fn case_mangling_server() -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    tokio::task::JoinHandle<()>,
) {
    let udp = UdpSocket::bind("127.0.61.1:0").await.unwrap();
    let addr = udp.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((len, peer)) = udp.recv_from(&mut buf).await else {
                continue;
            };
            let sent = qname_bytes(&buf[..len]);
            let mixed = sent.iter().any(u8::is_ascii_uppercase);
            let _ = tx.send(sent);
            let Ok(query) = Message::from_vec(&buf[..len]) else {
                continue;
            };
            let mut reply = authoritative_reply(&query);
            if mixed {
                for q in &mut reply.queries {
                    let lower = q.name().to_lowercase();
                    q.set_name(lower);
                }
                reply.metadata.response_code = ResponseCode::NXDomain;
            }
            let _ = udp.send_to(&reply.to_vec().unwrap(), peer).await;
        }
    });
    (addr, rx, task)
}

/// 0x20: the question goes out in mixed case; an answer whose question differs only in
/// case is never used: the server is asked again at once without 0x20 (and so for a
/// while), and that answer counts.
#[tokio::test]
async fn an_answer_that_does_not_echo_the_case_is_never_used() {
    let (addr, mut received, task) = case_mangling_server().await;
    // 28 letters: the chance that 0x20 leaves them all lower case is 2^-28.
    let name = parse_name("a-long-child-name-for-the-case.test.").unwrap();
    let query = build_query(&name, RecordType::DS, false);
    let transport = transport();
    let answer = transport.exchange(addr, &query).await.expect("an answer");
    assert_eq!(answer.metadata.response_code, ResponseCode::NoError);
    let first = received.recv().await.unwrap();
    let second = received.recv().await.unwrap();
    assert!(
        first.iter().any(u8::is_ascii_uppercase),
        "0x20 was not used"
    );
    assert!(first.eq_ignore_ascii_case(&second));
    assert!(!second.iter().any(u8::is_ascii_uppercase), "no fallback");
    // The fallback holds for this server: one query, in lower case.
    let answer = transport.exchange(addr, &query).await.expect("an answer");
    assert_eq!(answer.metadata.response_code, ResponseCode::NoError);
    let third = received.recv().await.unwrap();
    assert!(!third.iter().any(u8::is_ascii_uppercase));
    assert!(received.try_recv().is_err(), "one exchange, one query");
    // Without 0x20 the name goes out as given.
    let plain = NetTransport::new(Duration::from_millis(500)).with_case_randomization(false);
    plain.exchange(addr, &query).await.expect("an answer");
    assert!(
        !received
            .recv()
            .await
            .unwrap()
            .iter()
            .any(u8::is_ascii_uppercase)
    );
    task.abort();
}
