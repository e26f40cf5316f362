//! The PowerDNS client against a real PowerDNS Authoritative (Debian's `pdns-server` with
//! the sqlite3 backend), started here on loopback ports of its own and stopped by its PID:
//! the zone, its name servers and largest TTL, DNSSEC on with the key the server then
//! serves over DNS, off again, and the server's refusals as typed errors.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dnssec_warden::provider::powerdns::{PowerDnsClient, PowerDnsSettings};
use dnssec_warden::provider::{ErrorClass, PermitAnswer, Provider, ProviderError};
use dnssec_warden::secret::Secret;

const API_KEY: &str = "pdns-test-key-8e1f";

/// A `pdns_server` of this test, killed by its PID when dropped.
struct Pdns {
    child: Child,
    api: u16,
    dns: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Pdns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port free on 127.0.0.1 for TCP and UDP at the moment of asking.
fn free_port() -> u16 {
    for _ in 0..50 {
        let Ok(tcp) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = tcp.local_addr() else { continue };
        if UdpSocket::bind(addr).is_ok() {
            return addr.port();
        }
    }
    panic!("no free loopback port");
}

fn schema() -> PathBuf {
    PathBuf::from("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")
}

impl Pdns {
    /// Starts the server. PowerDNS missing is a failure that says what to install (the
    /// README's test command, tests/run.sh, installs it).
    fn start() -> Self {
        assert!(
            Path::new("/usr/sbin/pdns_server").exists() && schema().exists(),
            "pdns-server and pdns-backend-sqlite3 are not installed: run tests/run.sh, or apt-get install pdns-server pdns-backend-sqlite3 sqlite3"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = dir.path().join("pdns.sqlite3");
        let sql = std::fs::read_to_string(schema()).expect("the schema is readable");
        let created = Command::new("sqlite3")
            .arg(&db)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                if let Some(mut stdin) = c.stdin.take() {
                    stdin.write_all(sql.as_bytes())?;
                }
                c.wait()
            });
        assert!(
            created.is_ok_and(|s| s.success()),
            "sqlite3 creates the backend's database"
        );
        let (api, dns) = (free_port(), free_port());
        // Every cache off, so that what the API changes is served at once; no security
        // poll (a DNS query to the Internet); only loopback.
        let conf = format!(
            "launch=gsqlite3\ngsqlite3-database={db}\ngsqlite3-dnssec=yes\n\
             local-address=127.0.0.1\nlocal-port={dns}\n\
             api=yes\napi-key={API_KEY}\nwebserver=yes\nwebserver-address=127.0.0.1\n\
             webserver-port={api}\nwebserver-allow-from=127.0.0.0/8\n\
             socket-dir={dir}\nguardian=no\ndaemon=no\ndisable-syslog=yes\n\
             security-poll-suffix=\ncache-ttl=0\nquery-cache-ttl=0\nnegquery-cache-ttl=0\n\
             zone-metadata-cache-ttl=0\ndnssec-key-cache-ttl=0\nloglevel=3\n",
            db = db.display(),
            dir = dir.path().display(),
        );
        std::fs::write(dir.path().join("pdns.conf"), conf).expect("the config is written");
        let log = std::fs::File::create(dir.path().join("pdns.log")).expect("a log file");
        let child = Command::new("/usr/sbin/pdns_server")
            .arg(format!("--config-dir={}", dir.path().display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("pdns_server starts");
        let pdns = Self {
            child,
            api,
            dns,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", api)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pdns_server's API never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        pdns
    }

    fn client(&self, key: &str) -> PowerDnsClient {
        let settings = PowerDnsSettings {
            base_url: format!("http://127.0.0.1:{}/", self.api)
                .parse()
                .expect("a URL"),
            server_id: "localhost".into(),
            request_timeout: Duration::from_secs(5),
            max_attempts: 2,
            retry_budget: Duration::from_secs(5),
        };
        PowerDnsClient::new(&settings, Secret::new(key.into())).expect("a client")
    }

    /// The DNSKEY RRset the server answers over DNS, as `dig` prints the records' data.
    fn served_dnskeys(&self, zone: &str) -> Vec<String> {
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
                "DNSKEY",
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
        Some(3600),
        "SOA and NS at the default TTL"
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
