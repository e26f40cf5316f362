//! The PowerDNS client against a real PowerDNS Authoritative (Debian's `pdns-server` with
//! the sqlite3 backend), started here on loopback ports of its own and stopped by its PID:
//! the zone, its name servers and largest TTL, DNSSEC on with the key the server then
//! serves over DNS, off again, and the server's refusals as typed errors.

use std::process::Command;
use std::time::Duration;

use dnssec_warden_test_support::pdns::free_port;

use dnssec_warden::provider::powerdns::{PowerDnsClient, PowerDnsSettings};
use dnssec_warden::provider::{CdsPublication, ErrorClass, PermitAnswer, Provider, ProviderError};
use dnssec_warden::secret::Secret;

const API_KEY: &str = "pdns-test-key-8e1f";

/// A `pdns_server` of this test (test-support's, stopped by its PID), DNS on 127.0.0.1.
struct Pdns {
    server: dnssec_warden_test_support::pdns::Pdns,
    dns: u16,
    _dir: tempfile::TempDir,
}

impl Pdns {
    /// Starts the server. PowerDNS missing is installed as root, or a failure that says
    /// what to install (the README's test command, tests/run.sh, installs it).
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dns = free_port().expect("a free port");
        let server = dnssec_warden_test_support::pdns::Pdns::start(
            dir.path(),
            &[std::net::Ipv4Addr::LOCALHOST],
            dns,
            API_KEY,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self {
            server,
            dns,
            _dir: dir,
        }
    }

    fn client(&self, key: &str) -> PowerDnsClient {
        let settings = PowerDnsSettings {
            base_url: self.server.base_url().parse().expect("a URL"),
            server_id: "localhost".into(),
            request_timeout: Duration::from_secs(5),
            max_attempts: 2,
            retry_budget: Duration::from_secs(5),
        };
        PowerDnsClient::new(&settings, Secret::new(key.into())).expect("a client")
    }

    /// The DNSKEY RRset the server answers over DNS, as `dig` prints the records' data.
    fn served_dnskeys(&self, zone: &str) -> Vec<String> {
        self.served(zone, "DNSKEY")
    }

    /// One RRset the server answers over DNS, as `dig` prints the records' data.
    fn served(&self, zone: &str, rtype: &str) -> Vec<String> {
        let out = Command::new("dig")
            .args([
                "+short",
                "+norec",
                "+time=2",
                "+tries=2",
                "-p",
                &self.dns.to_string(),
                "@127.0.0.1",
                zone,
                rtype,
            ])
            .output()
            .expect("dig runs (bind9-dnsutils)");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| !l.is_empty())
            .collect()
    }
}

fn allowed() -> PermitAnswer<'static> {
    Box::pin(async { true })
}

fn denied() -> PermitAnswer<'static> {
    Box::pin(async { false })
}

#[tokio::test]
async fn a_zone_is_read_signed_and_unsigned_through_the_trait() {
    let pdns = Pdns::start();
    let client = pdns.client(API_KEY);
    assert!(matches!(
        Provider::zone(&client, "ex.test.").await,
        Err(ProviderError::NotFound(_))
    ));
    client
        .create_zone("ex.test", &["ns1.pdns.test", "NS2.pdns.test."])
        .await
        .expect("the zone is created");

    let hosted = Provider::zone(&client, "ex.test").await.unwrap();
    assert_eq!(hosted.name, "ex.test.");
    assert_eq!(hosted.dnssec_enabled, Some(false));
    assert_eq!(
        hosted.name_servers,
        Some(vec!["ns1.pdns.test.".into(), "ns2.pdns.test.".into()])
    );
    let flags = Provider::zone_flags(&client).await.unwrap();
    assert_eq!(flags.len(), 1);
    assert_eq!(flags[0].dnssec_enabled, Some(false));
    assert_eq!(
        Provider::largest_ttl(&client, "ex.test").await.unwrap(),
        Some(2),
        "SOA and NS at the server's default-ttl (2 in the lab)"
    );
    assert_eq!(
        Provider::dnssec_key(&client, "ex.test").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert!(pdns.served_dnskeys("ex.test.").is_empty());

    let switched = Provider::set_dnssec(&client, "ex.test", true, &allowed)
        .await
        .unwrap();
    let key = Provider::dnssec_key(&client, "ex.test").await.unwrap();
    assert_eq!(switched.key.as_ref(), Some(&key));
    assert_eq!(key.zone, "ex.test.");
    assert_eq!(key.dnskey.flags, 257, "4.7 signs with one CSK");
    assert_eq!(key.dnskey.algorithm, 13);
    // The key the client hands over is the one the server serves over DNS.
    let served = pdns.served_dnskeys("ex.test.");
    assert_eq!(served.len(), 1, "{served:?}");
    let expected = format!("257 3 13 {}", base64_of(&key.dnskey.public_key));
    assert_eq!(served[0].replace(' ', ""), expected.replace(' ', ""));
    assert_eq!(
        Provider::zone(&client, "ex.test")
            .await
            .unwrap()
            .dnssec_enabled,
        Some(true)
    );

    Provider::set_dnssec(&client, "ex.test", false, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::dnssec_key(&client, "ex.test").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert!(
        pdns.served_dnskeys("ex.test.").is_empty(),
        "every key is gone"
    );
}

#[tokio::test]
async fn the_cds_publication_is_set_read_and_served() {
    let pdns = Pdns::start();
    let client = pdns.client(API_KEY);
    client
        .create_zone("cds.test", &["ns1.pdns.test"])
        .await
        .expect("the zone is created");
    Provider::set_dnssec(&client, "cds.test", true, &allowed)
        .await
        .unwrap();
    let key = Provider::dnssec_key(&client, "cds.test").await.unwrap();
    assert_eq!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .unwrap(),
        Some(CdsPublication::Nothing)
    );
    assert!(pdns.served("cds.test.", "CDS").is_empty());

    Provider::set_cds_publication(&client, "cds.test", CdsPublication::Key, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .unwrap(),
        Some(CdsPublication::Key)
    );
    // The server publishes the CDS of the key the client hands over, and its CDNSKEY.
    let ds = &key.ds;
    // (dig splits a long digest in two: compared without spaces.)
    let cds: Vec<String> = pdns
        .served("cds.test.", "CDS")
        .iter()
        .map(|c| c.replace(' ', ""))
        .collect();
    assert_eq!(
        cds,
        vec![format!(
            "{}{}{}{}",
            ds.key_tag,
            ds.algorithm,
            ds.digest_type,
            hex_upper(&ds.digest)
        )],
        "the DS the daemon announces, as CDS"
    );
    assert_eq!(pdns.served("cds.test.", "CDNSKEY").len(), 1);

    Provider::set_cds_publication(&client, "cds.test", CdsPublication::Delete, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .unwrap(),
        Some(CdsPublication::Delete)
    );
    assert_eq!(
        pdns.served("cds.test.", "CDS"),
        vec!["0 0 0 00".to_string()]
    );
    assert_eq!(
        pdns.served("cds.test.", "CDNSKEY"),
        vec!["0 3 0 AA==".to_string()]
    );

    Provider::set_cds_publication(&client, "cds.test", CdsPublication::Nothing, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .unwrap(),
        Some(CdsPublication::Nothing)
    );
    assert!(pdns.served("cds.test.", "CDS").is_empty());

    // A setting the daemon does not make (other digest types, set by hand) is refused,
    // never read as one it does.
    pdns.server
        .pdnsutil(&["set-publish-cds", "cds.test", "2,4"])
        .expect("pdnsutil");
    let read = Provider::cds_publication(&client, "cds.test").await;
    assert!(
        matches!(&read, Err(ProviderError::Invalid(m)) if m.contains("PUBLISH-CDS")),
        "{read:?}"
    );
    // A denied permission sends nothing.
    let denied_set =
        Provider::set_cds_publication(&client, "cds.test", CdsPublication::Key, &denied).await;
    assert!(denied_set.is_err());
    assert!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .is_err()
    );
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[tokio::test]
async fn the_servers_refusals_are_typed_and_the_key_never_shows() {
    let pdns = Pdns::start();
    let wrong = pdns.client("not-the-key-42");
    let err = Provider::zone_flags(&wrong).await.unwrap_err();
    assert!(matches!(err, ProviderError::Unauthorized(_)), "{err:?}");
    assert_eq!(err.class(), ErrorClass::NotPerformed);
    assert!(!format!("{err} {err:?}").contains("not-the-key-42"));

    let client = pdns.client(API_KEY);
    client
        .create_zone("dup.test", &["ns1.pdns.test"])
        .await
        .unwrap();
    // A second create is refused, as a conflict.
    let again = client
        .create_zone("dup.test", &["ns1.pdns.test"])
        .await
        .unwrap_err();
    assert!(matches!(&again, ProviderError::Conflict(_)), "{again:?}");
    assert_eq!(again.class(), ErrorClass::Refused);
    // Invalid input is a 422 with the server's message.
    let bad = client
        .create_zone("bad..test", &["ns1.pdns.test"])
        .await
        .unwrap_err();
    assert!(
        matches!(bad, ProviderError::Rejected { status: 422, .. }),
        "{bad:?}"
    );

    // A switch-off the caller no longer may send leaves nothing behind.
    Provider::set_dnssec(&client, "dup.test", true, &allowed)
        .await
        .unwrap();
    let refused = Provider::set_dnssec(&client, "dup.test", false, &denied)
        .await
        .unwrap_err();
    assert!(matches!(refused, ProviderError::NotSent(_)), "{refused:?}");
    assert!(Provider::dnssec_key(&client, "dup.test").await.is_ok());
}

#[tokio::test]
async fn a_server_that_is_gone_is_a_connect_error_not_a_missing_zone() {
    let pdns = Pdns::start();
    let client = pdns.client(API_KEY);
    drop(pdns);
    let err = Provider::zone(&client, "ex.test").await.unwrap_err();
    assert!(matches!(err, ProviderError::Connect(_)), "{err:?}");
    assert!(!matches!(err, ProviderError::NotFound(_)));
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
