//! DNS servers that stop answering are said once an episode per server address: one WARN
//! when it begins (what failed and since when), one INFO when the server answers again,
//! every attempt and every later failure at debug only; at most `MAX_TRACKED` addresses
//! in an episode at once. A fake transport, no socket.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use dnssec_warden::dns::net::query::{Limits, Querier};
use dnssec_warden::dns::net::silence::{ANSWERS_AGAIN, MAX_TRACKED, NOT_ANSWERING, TOO_MANY};
use dnssec_warden::dns::wire::parse_name;
use dnssec_warden::dns::{ExchangeError, Transport};
use dnssec_warden_test_support::logs;
use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::RecordType;

/// Answers every query (an empty authoritative answer) but from the addresses down.
#[derive(Default)]
struct Servers {
    down: Mutex<HashSet<IpAddr>>,
}

impl Servers {
    fn set_down(&self, addr: IpAddr, down: bool) {
        let mut set = self.down.lock().unwrap();
        if down {
            set.insert(addr);
        } else {
            set.remove(&addr);
        }
    }
}

impl Transport for Servers {
    fn exchange<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a Message,
    ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
        Box::pin(async move {
            if self.down.lock().unwrap().contains(&server.ip()) {
                return Err(ExchangeError::Timeout);
            }
            let mut answer = query.clone();
            answer.metadata.message_type = MessageType::Response;
            answer.metadata.authoritative = true;
            Ok(answer)
        })
    }
}

fn count(text: &str, level: &str, words: &str) -> usize {
    text.lines()
        .filter(|l| l.contains(level) && l.contains(words))
        .count()
}

fn addr(i: u32) -> SocketAddr {
    let [_, _, c, d] = i.to_be_bytes();
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 77 + c, d)), 53)
}

#[tokio::test]
async fn a_server_that_stops_answering_is_said_once_an_episode() {
    let lines = logs::capture();
    let servers = Arc::new(Servers::default());
    let limits = Limits {
        attempts: 3,
        ..Limits::default()
    };
    let querier = Querier::new(servers.clone(), limits);
    let qname = parse_name("child.test.").unwrap();
    let (parent, child) = (addr(1), addr(2));
    servers.set_down(parent.ip(), true);
    servers.set_down(child.ip(), true);
    // Many polls of many zones: every question to the two silent servers fails.
    for qtype in [
        RecordType::DS,
        RecordType::NS,
        RecordType::DNSKEY,
        RecordType::SOA,
    ] {
        for server in [parent, child] {
            assert!(querier.ask(server, &qname, qtype).await.is_err());
        }
    }
    let text = lines.text();
    assert_eq!(
        count(&text, "WARN", NOT_ANSWERING),
        2,
        "one per server:\n{text}"
    );
    assert!(
        text.contains(&format!("server={parent}")) && text.contains("since"),
        "what and since when:\n{text}"
    );
    assert_eq!(count(&text, "INFO", ANSWERS_AGAIN), 0, "{text}");

    // The parent server answers again: said once; the child is still in its episode.
    servers.set_down(parent.ip(), false);
    for _ in 0..3 {
        assert!(querier.ask(parent, &qname, RecordType::DS).await.is_ok());
    }
    assert!(querier.ask(child, &qname, RecordType::DS).await.is_err());
    let text = lines.text();
    assert_eq!(count(&text, "INFO", ANSWERS_AGAIN), 1, "{text}");
    assert_eq!(count(&text, "WARN", NOT_ANSWERING), 2, "{text}");

    // Down again: a new episode.
    servers.set_down(parent.ip(), true);
    assert!(querier.ask(parent, &qname, RecordType::NS).await.is_err());
    assert!(querier.ask(parent, &qname, RecordType::DS).await.is_err());
    let text = lines.text();
    assert_eq!(
        count(&text, "WARN", NOT_ANSWERING),
        3,
        "a new episode:\n{text}"
    );
}

/// Memory and lines stay bounded when a great many servers fail at once.
#[tokio::test]
async fn the_servers_in_an_episode_are_capped() {
    let lines = logs::capture();
    let servers = Arc::new(Servers::default());
    let limits = Limits {
        attempts: 1,
        ..Limits::default()
    };
    let querier = Querier::new(servers.clone(), limits);
    let qname = parse_name("child.test.").unwrap();
    let many = u32::try_from(MAX_TRACKED).unwrap() + 40;
    for i in 0..many {
        servers.set_down(addr(i).ip(), true);
    }
    for _ in 0..2 {
        for i in 0..many {
            assert!(querier.ask(addr(i), &qname, RecordType::DS).await.is_err());
        }
    }
    let text = lines.text();
    assert_eq!(count(&text, "WARN", NOT_ANSWERING), MAX_TRACKED);
    assert_eq!(count(&text, "WARN", TOO_MANY), 1, "the cap is said once");
    // One answers again: its place is free, and the next newcomer is said.
    servers.set_down(addr(0).ip(), false);
    assert!(querier.ask(addr(0), &qname, RecordType::DS).await.is_ok());
    assert!(
        querier
            .ask(addr(many - 1), &qname, RecordType::NS)
            .await
            .is_err()
    );
    let text = lines.text();
    assert_eq!(count(&text, "INFO", ANSWERS_AGAIN), 1);
    assert_eq!(count(&text, "WARN", NOT_ANSWERING), MAX_TRACKED + 1);
}
