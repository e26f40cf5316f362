//! The PowerDNS client against a real PowerDNS Authoritative (Debian's `pdns-server` with
//! the sqlite3 backend), started here on loopback ports of its own and stopped by its PID:
//! the zone, its name servers and largest TTL, DNSSEC on with the key the server then
//! serves over DNS, off again, and the server's refusals as typed errors; another signer's
//! DNSKEY (RFC 8901 model 2) stored, served beside the zone's own key and signed by it;
//! and the lab's PowerDNS simulator (`dnssec_warden_lab::pdns_sim`, the demo's second
//! act) answering the same sequence of the client's calls as the real server does, and
//! the lab's name servers serving its zones' keys as the real server serves its own.

use std::process::Command;
use std::time::Duration;

use dnssec_warden_test_support::pdns::{PdnsOptions, free_port};

use dnssec_warden::dnssec::Dnskey;
use dnssec_warden::provider::fleet::{Client, Providers};
use dnssec_warden::provider::powerdns::{PowerDnsClient, PowerDnsSettings};
use dnssec_warden::provider::{
    CdsHalves, CdsPublication, ErrorClass, KeyAlgorithm, KeyKind, KeyState, MAX_FOREIGN_DNSKEYS,
    NewKey, PermitAnswer, Provider, ProviderError, ProviderKey,
};
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
        Self::start_with(PdnsOptions::default())
    }

    fn start_with(options: PdnsOptions) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let dns = free_port().expect("a free port");
        let server = dnssec_warden_test_support::pdns::Pdns::start_with(
            dir.path(),
            &[std::net::Ipv4Addr::LOCALHOST],
            dns,
            API_KEY,
            options,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Self {
            server,
            dns,
            _dir: dir,
        }
    }

    fn client(&self, key: &str) -> PowerDnsClient {
        // Room for the server to make an RSA key on a loaded machine: a key's POST that
        // times out is of unknown outcome and never sent again.
        let settings = PowerDnsSettings {
            request_timeout: Duration::from_secs(30),
            max_attempts: 2,
            retry_budget: Duration::from_secs(30),
            ..PowerDnsSettings::new(self.server.base_url().parse().expect("a URL"))
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
        Some(CdsHalves::whole(CdsPublication::Nothing))
    );
    assert!(pdns.served("cds.test.", "CDS").is_empty());

    Provider::set_cds_publication(&client, "cds.test", CdsPublication::Key, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::cds_publication(&client, "cds.test")
            .await
            .unwrap(),
        Some(CdsHalves::whole(CdsPublication::Key))
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
        Some(CdsHalves::whole(CdsPublication::Delete))
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
        Some(CdsHalves::whole(CdsPublication::Nothing))
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

// ---- another signer's DNSKEY (RFC 8901 model 2) ---------------------------------------

const DIRECT: PdnsOptions = PdnsOptions {
    direct_dnskey: true,
    default_algorithm: None,
    zsk_algorithm: None,
};

/// A fresh ECDSA P-256 key (algorithm 13, as PowerDNS's own) with `flags`: a real public
/// key, as another signer would hold.
fn fresh_key(flags: u16) -> Dnskey {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("a key is generated");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("a generated key parses");
    Dnskey {
        flags,
        protocol: 3,
        algorithm: 13,
        // The public point without its 0x04 prefix (RFC 6605 section 4).
        public_key: pair.public_key().as_ref()[1..].to_vec(),
    }
}

/// The apex DNSKEY RRset as the server answers it over DNS (DO set): each key with the
/// TTL served, and which of them sign the RRset validly now, by the check safety rule 4's
/// "serves" rests on (`validator::self_signers`).
struct ServedKeys {
    keys: Vec<(Dnskey, u32)>,
    signers: Vec<Dnskey>,
}

impl ServedKeys {
    fn has(&self, key: &Dnskey) -> bool {
        self.keys.iter().any(|(k, _)| k == key)
    }
}

impl Pdns {
    async fn served_keys(&self, zone: &str) -> ServedKeys {
        use dnssec_warden::dns::wire::{as_dnskey, build_query, dnskey_from, parse_name};
        use dnssec_warden::dns::{Budget, NetTransport, Transport as _, validator};
        use hickory_proto::rr::RecordType;

        let server = std::net::SocketAddr::from(([127, 0, 0, 1], self.dns));
        let name = parse_name(zone).expect("a name");
        let answer = NetTransport::new(Duration::from_secs(2))
            .exchange(server, &build_query(&name, RecordType::DNSKEY, false))
            .await
            .expect("the server answers");
        let keys: Vec<(Dnskey, u32)> = answer
            .answers
            .iter()
            .filter_map(|r| as_dnskey(r).map(|k| (dnskey_from(k), r.ttl)))
            .collect();
        let plain: Vec<Dnskey> = keys.iter().map(|(k, _)| k.clone()).collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs() as u32;
        let signers = validator::self_signers(
            &answer.answers,
            &name,
            &plain,
            now,
            &Budget::new(Default::default()),
        )
        .expect("within the validation budget");
        ServedKeys {
            signers: signers.into_iter().map(|i| plain[i].clone()).collect(),
            keys,
        }
    }
}

#[tokio::test]
async fn foreign_dnskeys_are_supported_exactly_where_the_server_serves_them() {
    let (with, without) = (Pdns::start_with(DIRECT), Pdns::start());
    let key = fresh_key(257);
    for (pdns, served) in [(&with, true), (&without, false)] {
        let client = pdns.client(API_KEY);
        client
            .create_zone("fk.test", &["ns1.pdns.test"])
            .await
            .unwrap();
        Provider::set_dnssec(&client, "fk.test", true, &allowed)
            .await
            .unwrap();
        assert_eq!(
            Provider::foreign_dnskeys_supported(&client, "fk.test")
                .await
                .unwrap(),
            served,
            "direct-dnskey {served}"
        );
        let set = Provider::set_foreign_dnskeys(
            &client,
            "fk.test",
            std::slice::from_ref(&key),
            3600,
            &allowed,
        )
        .await;
        if served {
            set.unwrap();
        } else {
            // 4.7 would store the set and never serve it: refused, and nothing stored.
            assert!(
                matches!(&set, Err(ProviderError::Invalid(m)) if m.contains("direct-dnskey") && m.contains("fk.test.")),
                "{set:?}"
            );
            // Removing is always sent (and a set that is not there removed is no error).
            Provider::set_foreign_dnskeys(&client, "fk.test", &[], 3600, &allowed)
                .await
                .unwrap();
        }
        assert_eq!(
            Provider::foreign_dnskeys(&client, "fk.test").await.unwrap(),
            Some(if served { vec![key.clone()] } else { vec![] })
        );
        assert_eq!(pdns.served_keys("fk.test.").await.has(&key), served);
    }
}

#[tokio::test]
async fn a_foreign_key_is_served_beside_the_zones_own_and_signed_by_it() {
    let pdns = Pdns::start_with(DIRECT);
    let client = pdns.client(API_KEY);
    client
        .create_zone("ms.test", &["ns1.pdns.test"])
        .await
        .unwrap();
    Provider::set_dnssec(&client, "ms.test", true, &allowed)
        .await
        .unwrap();
    let own = Provider::dnssec_key(&client, "ms.test").await.unwrap();
    assert_eq!(
        Provider::foreign_dnskeys(&client, "ms.test").await.unwrap(),
        Some(vec![]),
        "the keystore's own key is no foreign key"
    );
    let before = pdns.served_keys("ms.test.").await;
    assert_eq!(before.signers, vec![own.dnskey.clone()]);

    let foreign = fresh_key(257);
    Provider::set_foreign_dnskeys(
        &client,
        "ms.test",
        std::slice::from_ref(&foreign),
        7200,
        &allowed,
    )
    .await
    .unwrap();
    assert_eq!(
        Provider::foreign_dnskeys(&client, "ms.test").await.unwrap(),
        Some(vec![foreign.clone()])
    );
    // The zone's own key is still the one entry point (the stored record is not a
    // cryptokey), so the DS the daemon announces is unchanged.
    assert_eq!(Provider::dnssec_key(&client, "ms.test").await.unwrap(), own);

    // Over DNS: one RRset with both keys, signed by the zone's own key (not by the
    // foreign one, whose private key the server does not have).
    let served = pdns.served_keys("ms.test.").await;
    assert_eq!(served.keys.len(), 2, "{:?}", served.keys);
    assert!(served.has(&own.dnskey) && served.has(&foreign));
    assert_eq!(served.signers, vec![own.dnskey.clone()]);
    // Served at the TTL of the keystore's keys (the SOA minimum), not the 7200 stored.
    let ttls: Vec<u32> = served.keys.iter().map(|(_, ttl)| *ttl).collect();
    assert!(ttls.iter().all(|t| *t == ttls[0] && *t != 7200), "{ttls:?}");

    // Removed: the own key alone again, still signing.
    Provider::set_foreign_dnskeys(&client, "ms.test", &[], 7200, &allowed)
        .await
        .unwrap();
    assert_eq!(
        Provider::foreign_dnskeys(&client, "ms.test").await.unwrap(),
        Some(vec![])
    );
    let after = pdns.served_keys("ms.test.").await;
    assert!(!after.has(&foreign), "{:?}", after.keys);
    assert_eq!(after.keys.len(), 1);
    assert_eq!(after.signers, vec![own.dnskey.clone()]);
}

#[tokio::test]
async fn setting_the_same_foreign_keys_again_leaves_one_copy_each() {
    let pdns = Pdns::start_with(DIRECT);
    // Through the accounts, as the daemon sends it (rule 13: at the zone's one holder).
    let providers = Providers::new(vec![(
        "pdns".to_string(),
        Client::PowerDns(pdns.client(API_KEY)),
    )]);
    let client = pdns.client(API_KEY);
    client
        .create_zone("id.test", &["ns1.pdns.test"])
        .await
        .unwrap();
    Provider::set_dnssec(&client, "id.test", true, &allowed)
        .await
        .unwrap();
    assert!(
        providers
            .foreign_dnskeys_supported("id.test")
            .await
            .unwrap()
    );
    let (a, b) = (fresh_key(257), fresh_key(256));
    // As read back: in canonical order (by RDATA), whatever order they were given in.
    let mut both = vec![a.clone(), b.clone()];
    both.sort_by_key(Dnskey::rdata);
    for keys in [
        vec![a.clone(), b.clone()],
        vec![b.clone(), a.clone(), b.clone()],
    ] {
        providers
            .set_foreign_dnskeys("id.test", &keys, 3600, &allowed)
            .await
            .unwrap();
        assert_eq!(
            providers.foreign_dnskeys("id.test").await.unwrap(),
            Some(both.clone())
        );
    }
    let served = pdns.served_keys("id.test.").await;
    assert_eq!(
        served.keys.len(),
        3,
        "own, a, b once each: {:?}",
        served.keys
    );
    // Exactly: a set without b drops b.
    providers
        .set_foreign_dnskeys("id.test", std::slice::from_ref(&a), 3600, &allowed)
        .await
        .unwrap();
    assert_eq!(
        providers.foreign_dnskeys("id.test").await.unwrap(),
        Some(vec![a.clone()])
    );
    // A change the caller no longer may send is not sent, and changes nothing.
    let refused = providers
        .set_foreign_dnskeys("id.test", &[], 3600, &denied)
        .await
        .unwrap_err();
    assert!(matches!(refused, ProviderError::NotSent(_)), "{refused:?}");
    assert_eq!(
        providers.foreign_dnskeys("id.test").await.unwrap(),
        Some(vec![a])
    );
}

#[tokio::test]
async fn foreign_keys_no_validator_should_check_are_refused_before_any_request() {
    // Nothing listens at the client's address: a request would be a connect error.
    let nowhere: url::Url = format!("http://127.0.0.1:{}/", free_port().unwrap())
        .parse()
        .unwrap();
    let settings = PowerDnsSettings {
        request_timeout: Duration::from_secs(2),
        max_attempts: 1,
        retry_budget: Duration::from_secs(2),
        ..PowerDnsSettings::new(nowhere.clone())
    };
    let pdns = Client::PowerDns(
        PowerDnsClient::new(&settings, Secret::new(API_KEY.into())).expect("a client"),
    );
    let key = fresh_key(257);
    let not_zone_key = Dnskey {
        flags: 1,
        ..key.clone()
    };
    let unknown_algorithm = Dnskey {
        algorithm: 3,
        ..key.clone()
    };
    let too_many: Vec<Dnskey> = (0..=MAX_FOREIGN_DNSKEYS).map(|_| fresh_key(256)).collect();
    for (keys, why) in [
        (vec![key.clone(), not_zone_key], "not a zone key"),
        (vec![unknown_algorithm], "algorithm"),
        (too_many, "at most 8"),
    ] {
        let refused = Provider::set_foreign_dnskeys(&pdns, "ex.test", &keys, 3600, &allowed)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ProviderError::Invalid(m) if m.contains(why) && m.contains("ex.test")),
            "{why}: {refused:?}"
        );
    }
    // The same set within the cap does try the server (which is not there).
    let sent =
        Provider::set_foreign_dnskeys(&pdns, "ex.test", std::slice::from_ref(&key), 3600, &allowed)
            .await
            .unwrap_err();
    assert!(matches!(sent, ProviderError::Connect(_)), "{sent:?}");

    // A provider whose API cannot (Gcore: the trait's default) is refused, naming the
    // zone, and asks nothing.
    let gcore = Client::Gcore(
        dnssec_warden::provider::gcore::GcoreClient::with_policy(
            nowhere,
            dnssec_warden::provider::gcore::Credentials::ApiKey(Secret::new("k".into())),
            Default::default(),
            Duration::from_secs(2),
        )
        .expect("a client"),
    );
    assert!(
        !Provider::foreign_dnskeys_supported(&gcore, "ex.test")
            .await
            .unwrap()
    );
    assert_eq!(
        Provider::foreign_dnskeys(&gcore, "ex.test").await.unwrap(),
        None
    );
    let refused = Provider::set_foreign_dnskeys(&gcore, "ex.test", &[key], 3600, &allowed)
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        ProviderError::Invalid(
            "the provider's API cannot publish another signer's DNSKEY for ex.test".into()
        )
    );
}

/// The zone metadata of `zone` as the server stores it, each kind's values.
async fn metadata(client: &PowerDnsClient, zone: &str) -> CdsHalves {
    Provider::cds_publication(client, zone)
        .await
        .unwrap_or_else(|e| panic!("the CDS setting of {zone} is read: {e}"))
        .expect("PowerDNS controls the CDS")
}

/// Rule 11 and 14 under a lost answer: the proxy answers 502 after the server applied the
/// first of the two writes of a CDS setting (`PUBLISH-CDS`), so `PUBLISH-CDNSKEY` is
/// never written. The client reads the half-applied setting as such (not as a setting
/// "the daemon does not make"), and the engine, at its next look, says the call was half
/// applied and sets the setting whole again.
#[tokio::test]
async fn a_cds_setting_half_applied_behind_a_lost_answer_is_made_whole() {
    use dnssec_warden::engine::Engine;
    use dnssec_warden::engine::Notifier;
    use dnssec_warden::lifecycle::{Clock, ManualClock, Policy};
    use dnssec_warden_test_support::fake::{FakeWorld, PROVIDER_NS};
    use dnssec_warden_test_support::fault_proxy::{Fault, FaultProxy, Rule};
    use dnssec_warden_test_support::rig::{T0, ZONE};
    use std::sync::Arc;

    let pdns = Pdns::start();
    let direct = pdns.client(API_KEY);
    direct
        .create_zone(ZONE, &PROVIDER_NS)
        .await
        .expect("the zone is created");
    let proxy = FaultProxy::start(pdns.server.base_url().parse().expect("a URL"))
        .await
        .expect("the proxy starts");
    let proxied = PowerDnsClient::new(
        &PowerDnsSettings {
            request_timeout: Duration::from_secs(5),
            max_attempts: 2,
            retry_budget: Duration::from_secs(5),
            ..PowerDnsSettings::new(proxy.url())
        },
        Secret::new(API_KEY.into()),
    )
    .expect("a client");
    let lose_first_write = || {
        proxy.add_fault(
            Rule::new(Fault::AfterForward {
                status: 502,
                delay: Duration::ZERO,
            })
            .on(&format!(
                "/api/v1/servers/localhost/zones/{ZONE}/metadata/PUBLISH-CDS"
            )),
        );
    };

    // The client: the call is of unknown outcome, and the setting reads half applied.
    lose_first_write();
    let lost = Provider::set_cds_publication(&proxied, ZONE, CdsPublication::Key, &allowed)
        .await
        .unwrap_err();
    assert_eq!(lost.class(), ErrorClass::Unknown, "{lost}");
    let read = Provider::cds_publication(&direct, ZONE).await;
    assert_eq!(
        read,
        Ok(Some(CdsHalves {
            cds: CdsPublication::Key,
            cdnskey: CdsPublication::Nothing,
        })),
        "a setting of the daemon's, half applied"
    );
    proxy.clear_faults();
    Provider::set_cds_publication(&direct, ZONE, CdsPublication::Key, &allowed)
        .await
        .unwrap();

    // The engine: a zone without intent at a provider that does not sign wants no CDS;
    // its withdrawal loses its answer after the first write, and the next look settles
    // the call as half applied and withdraws the other half.
    let clock = ManualClock::starting_at(T0);
    let world = FakeWorld::new(ZONE, 2, 2, clock.clone());
    let store = dnssec_warden::store::Store::open_in_memory()
        .await
        .expect("a store");
    store.ensure_zone(ZONE, T0).await.expect("the zone's row");
    let engine = Engine::new(
        store.clone(),
        Arc::new(proxied),
        Arc::new(world),
        Arc::new(clock.clone()),
        Policy::default(),
        Notifier::default(),
    );
    lose_first_write();
    engine.tick().await.expect("a tick");
    assert_eq!(
        metadata(&direct, ZONE).await,
        CdsHalves {
            cds: CdsPublication::Nothing,
            cdnskey: CdsPublication::Key,
        },
        "the withdrawal's first write took effect, its answer lost"
    );
    proxy.clear_faults();
    let next = store.zone(ZONE).await.unwrap().unwrap().next_check_at;
    clock.set(next.max(clock.now()));
    engine.tick().await.expect("a tick");
    assert_eq!(
        metadata(&direct, ZONE).await,
        CdsHalves::whole(CdsPublication::Nothing),
        "made whole at the next look"
    );
    let reasons: Vec<String> = store
        .events(ZONE)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("the call to withdraw the CDS was half applied")),
        "the lost call settled as half applied: {reasons:#?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains(
            "half applied (CDS none, CDNSKEY the key's), a setting of the daemon's whose answer was lost between its two writes: completed, set whole to no CDS or CDNSKEY"
        )),
        "the repair said: {reasons:#?}"
    );
    assert!(
        !reasons
            .iter()
            .any(|r| r.contains("not a setting the daemon makes")),
        "{reasons:#?}"
    );
}

// ---- the zone's keys (rollovers driven at the provider) --------------------------------

const ON: KeyState = KeyState {
    active: true,
    published: true,
};
const PUBLISHED: KeyState = KeyState {
    active: false,
    published: true,
};
const SIGNING_UNPUBLISHED: KeyState = KeyState {
    active: true,
    published: false,
};
const OFF: KeyState = KeyState {
    active: false,
    published: false,
};

fn new_key(kind: KeyKind, algorithm: KeyAlgorithm, state: KeyState) -> NewKey {
    NewKey {
        kind,
        algorithm,
        state,
    }
}

impl Pdns {
    /// The key tags of the RRSIGs over `zone`'s `rtype` the server answers (DO set),
    /// sorted.
    fn rrsig_tags(&self, zone: &str, rtype: &str) -> Vec<u16> {
        let out = Command::new("dig")
            .args([
                "+norec",
                "+dnssec",
                "+noall",
                "+answer",
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
        let mut tags: Vec<u16> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.get(3) == Some(&"RRSIG") && f.get(4) == Some(&rtype))
            .filter_map(|f| f.get(10).and_then(|t| t.parse().ok()))
            .collect();
        tags.sort_unstable();
        tags
    }
}

/// Each key call against the real server, and what its name server then serves: a key
/// published inactive is in the DNSKEY set and signs nothing, an active one signs, an
/// active unpublished one signs with its DNSKEY not served; the key calls answer the
/// keys in the daemon's terms, their tags those the server signs with.
#[tokio::test]
async fn a_zones_keys_are_listed_added_switched_and_deleted_as_the_server_serves_them() {
    const Z: &str = "keys.test.";
    let pdns = Pdns::start();
    let client = pdns.client(API_KEY);
    client.create_zone(Z, &["ns1.pdns.test"]).await.unwrap();
    assert_eq!(Provider::keys(&client, Z).await, Ok(Some(vec![])));
    Provider::set_dnssec(&client, Z, true, &allowed)
        .await
        .unwrap();
    let signing = Provider::dnssec_key(&client, Z).await.unwrap();
    let keys = Provider::keys(&client, Z).await.unwrap().unwrap();
    let [csk] = keys.as_slice() else {
        panic!("one CSK: {keys:?}")
    };
    assert!(csk.is_sep());
    assert_eq!(csk.state, ON);
    assert_eq!(csk.dnskey, signing.dnskey);
    assert_eq!(Some(&csk.id), signing.uuid.as_ref());
    assert_eq!(pdns.rrsig_tags(Z, "SOA"), vec![csk.key_tag()]);

    // A ZSK pre-published: served in the DNSKEY set, signing nothing.
    let zsk = Provider::add_key(
        &client,
        Z,
        new_key(KeyKind::Zsk, KeyAlgorithm::EcdsaP256Sha256, PUBLISHED),
        &allowed,
    )
    .await
    .unwrap();
    assert_eq!((zsk.dnskey.flags, zsk.algorithm()), (256, 13));
    assert_eq!(zsk.state, PUBLISHED);
    assert_eq!(
        Provider::keys(&client, Z).await.unwrap().unwrap(),
        vec![csk.clone(), zsk.clone()]
    );
    let served = pdns.served_keys(Z).await;
    assert!(served.has(&zsk.dnskey) && served.has(&csk.dnskey));
    assert_eq!(pdns.rrsig_tags(Z, "SOA"), vec![csk.key_tag()]);

    // Active: it signs the zone's data, the CSK (a KSK now) only the DNSKEY set.
    Provider::set_key_state(&client, Z, &zsk.id, ON, &allowed)
        .await
        .unwrap();
    assert_eq!(pdns.rrsig_tags(Z, "SOA"), vec![zsk.key_tag()]);
    assert_eq!(pdns.served_keys(Z).await.signers, vec![csk.dnskey.clone()]);

    // An Ed25519 KSK active and unpublished (an algorithm rollover's first step): its
    // signatures served, its DNSKEY not.
    let ed = Provider::add_key(
        &client,
        Z,
        new_key(KeyKind::Ksk, KeyAlgorithm::Ed25519, SIGNING_UNPUBLISHED),
        &allowed,
    )
    .await
    .unwrap();
    assert_eq!((ed.dnskey.flags, ed.algorithm()), (257, 15));
    assert!(!pdns.served_keys(Z).await.has(&ed.dnskey));
    assert!(pdns.rrsig_tags(Z, "DNSKEY").contains(&ed.key_tag()));
    // Published too: a second entry point, which the signing key's read still refuses.
    Provider::set_key_state(&client, Z, &ed.id, ON, &allowed)
        .await
        .unwrap();
    let served = pdns.served_keys(Z).await;
    assert!(served.has(&ed.dnskey));
    assert!(served.signers.contains(&ed.dnskey), "{:?}", served.signers);
    let two = Provider::dnssec_key(&client, Z).await;
    assert!(
        matches!(&two, Err(ProviderError::Invalid(m)) if m.contains("several")),
        "{two:?}"
    );

    // RSA: 2048 bits asked for (exponent 65537, RFC 3110), neither signing nor served.
    let rsa = Provider::add_key(
        &client,
        Z,
        new_key(KeyKind::Zsk, KeyAlgorithm::RsaSha256, OFF),
        &allowed,
    )
    .await
    .unwrap();
    assert_eq!((rsa.dnskey.flags, rsa.algorithm()), (256, 8));
    assert_eq!(rsa.dnskey.public_key.len(), 4 + 256);
    assert!(!pdns.served_keys(Z).await.has(&rsa.dnskey));

    // Deleted: gone from the list and from DNS; a key the server does not have is a
    // definite NotFound; an id that is no PowerDNS id is refused before any request.
    Provider::delete_key(&client, Z, &ed.id, &allowed)
        .await
        .unwrap();
    assert!(!pdns.served_keys(Z).await.has(&ed.dnskey));
    assert!(!pdns.rrsig_tags(Z, "DNSKEY").contains(&ed.key_tag()));
    let ids: Vec<String> = Provider::keys(&client, Z)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(ids, vec![csk.id.clone(), zsk.id.clone(), rsa.id.clone()]);
    for gone in [
        Provider::delete_key(&client, Z, &ed.id, &allowed).await,
        Provider::set_key_state(&client, Z, &ed.id, ON, &allowed).await,
    ] {
        assert!(
            matches!(&gone, Err(ProviderError::NotFound(m)) if m.contains(&ed.id)),
            "{gone:?}"
        );
    }
    let odd = Provider::set_key_state(&client, Z, "7abc", ON, &allowed).await;
    assert!(matches!(odd, Err(ProviderError::Invalid(_))), "{odd:?}");
    // Not permitted: nothing sent, nothing added.
    let held = Provider::add_key(
        &client,
        Z,
        new_key(KeyKind::Csk, KeyAlgorithm::EcdsaP256Sha256, ON),
        &denied,
    )
    .await;
    assert!(matches!(held, Err(ProviderError::NotSent(_))), "{held:?}");
    assert_eq!(Provider::keys(&client, Z).await.unwrap().unwrap().len(), 3);
}

/// A server set up to make RSA keys, as an operator whose zones are to leave RSA has it
/// (`default-ksk-algorithm=rsasha256` needs `default-ksk-size`): the server's default
/// size applies to a key whose POST names none, and an ECDSA or Ed25519 key of 2048 bits
/// is refused (422). Every key is asked for with its algorithm's size.
#[tokio::test]
async fn keys_of_every_algorithm_are_added_where_the_servers_default_is_rsa() {
    const Z: &str = "rsa.test.";
    let pdns = Pdns::start_with(PdnsOptions {
        default_algorithm: Some("rsasha256"),
        ..PdnsOptions::default()
    });
    let client = pdns.client(API_KEY);
    client.create_zone(Z, &["ns1.pdns.test"]).await.unwrap();
    Provider::set_dnssec(&client, Z, true, &allowed)
        .await
        .unwrap();
    let keys = Provider::keys(&client, Z).await.unwrap().unwrap();
    assert_eq!(
        keys.iter().map(|k| k.algorithm()).collect::<Vec<_>>(),
        [8],
        "{keys:?}"
    );
    for (kind, algorithm, number) in [
        (KeyKind::Csk, KeyAlgorithm::EcdsaP256Sha256, 13),
        (KeyKind::Ksk, KeyAlgorithm::Ed25519, 15),
        (KeyKind::Zsk, KeyAlgorithm::EcdsaP256Sha256, 13),
        (KeyKind::Ksk, KeyAlgorithm::RsaSha256, 8),
    ] {
        let added = Provider::add_key(&client, Z, new_key(kind, algorithm, OFF), &allowed).await;
        let added = added.unwrap_or_else(|e| panic!("{kind:?} {algorithm:?}: {e}"));
        assert_eq!(added.algorithm(), number);
    }
}

/// A key's POST whose answer is lost (a gateway's 502 after the server made the key, a
/// timeout, a 503 that never reached it) is of unknown outcome, says so, and is never
/// sent a second time: a second POST would make a second key. The keys, listed, settle
/// it.
#[tokio::test]
async fn a_key_added_behind_a_lost_answer_is_sent_once_and_settled_by_the_listing() {
    use dnssec_warden_test_support::fault_proxy::{Fault, FaultProxy, Rule};
    const Z: &str = "lost.test.";
    let pdns = Pdns::start();
    let direct = pdns.client(API_KEY);
    direct.create_zone(Z, &["ns1.pdns.test"]).await.unwrap();
    Provider::set_dnssec(&direct, Z, true, &allowed)
        .await
        .unwrap();
    let proxy = FaultProxy::start(pdns.server.base_url().parse().expect("a URL"))
        .await
        .expect("the proxy starts");
    let proxied = PowerDnsClient::new(
        &PowerDnsSettings {
            request_timeout: Duration::from_secs(1),
            max_attempts: 3,
            retry_budget: Duration::from_secs(5),
            ..PowerDnsSettings::new(proxy.url())
        },
        Secret::new(API_KEY.into()),
    )
    .expect("a client");
    let path = format!("/api/v1/servers/localhost/zones/{Z}/cryptokeys");
    let key = new_key(KeyKind::Zsk, KeyAlgorithm::EcdsaP256Sha256, PUBLISHED);
    for (fault, made, said) in [
        (
            Fault::AfterForward {
                status: 502,
                delay: Duration::ZERO,
            },
            true,
            "502",
        ),
        (
            Fault::AfterForward {
                status: 504,
                delay: Duration::from_secs(3),
            },
            true,
            "transport",
        ),
        (Fault::Status(503), false, "503"),
    ] {
        let before = Provider::keys(&direct, Z).await.unwrap().unwrap().len();
        let posts = proxy.calls(&path);
        proxy.add_fault(Rule::new(fault.clone()).on(&path).method("POST"));
        let lost = Provider::add_key(&proxied, Z, key, &allowed)
            .await
            .unwrap_err();
        proxy.clear_faults();
        assert_eq!(lost.class(), ErrorClass::Unknown, "{fault:?}: {lost}");
        assert!(
            matches!(&lost, ProviderError::KeyMaybeAdded { zone, .. } if zone == Z),
            "{lost:?}"
        );
        let text = lost.to_string();
        assert!(
            text.contains(said) && text.contains("list the zone's keys"),
            "{text}"
        );
        assert_eq!(proxy.calls(&path), posts + 1, "{fault:?}: sent once");
        let after = Provider::keys(&direct, Z).await.unwrap().unwrap().len();
        assert_eq!(after, before + usize::from(made), "{fault:?}");
    }
    // The same client adds a key as asked once the way is clear.
    let added = Provider::add_key(&proxied, Z, key, &allowed).await.unwrap();
    assert_eq!(added.state, PUBLISHED);
}

/// A client of `pdns` at `base_url` with `server_id`.
fn client_at(base_url: &str, server_id: &str) -> PowerDnsClient {
    let settings = PowerDnsSettings {
        server_id: server_id.into(),
        request_timeout: Duration::from_secs(5),
        max_attempts: 2,
        retry_budget: Duration::from_secs(5),
        ..PowerDnsSettings::new(base_url.parse().expect("a URL"))
    };
    PowerDnsClient::new(&settings, Secret::new(API_KEY.into())).expect("a client")
}

/// What 4.7 answers, found on the real server: for an unknown server id, the plain-text
/// `404 Not Found` for every path under `/api/v1/servers/{id}/` (the zone list, a search
/// by name, a zone, `/config`); for a zone missing on the right server, an empty search
/// (and a 404 only for the zone's own path). The former is the account's configuration,
/// said as such, never a zone missing; the latter stays "not found".
#[tokio::test]
async fn a_server_id_the_api_does_not_know_is_the_accounts_fault_not_a_missing_zone() {
    let pdns = Pdns::start();
    let right = pdns.client(API_KEY);
    right
        .create_zone("there.test", &["ns1.pdns.test"])
        .await
        .unwrap();
    // The right server: a missing zone is not found, the account is fine.
    let missing = Provider::zone(&right, "nothere.test").await.unwrap_err();
    assert!(matches!(missing, ProviderError::NotFound(_)), "{missing:?}");
    right
        .check_server()
        .await
        .expect("the server id is the API's");
    assert!(!right.account_condition().holding());

    let wrong = client_at(&pdns.server.base_url(), "nosuch");
    for (what, err) in [
        ("zone", Provider::zone(&wrong, "there.test").await.err()),
        ("listing", Provider::zone_flags(&wrong).await.err()),
        (
            "key",
            Provider::dnssec_key(&wrong, "there.test").await.err(),
        ),
        (
            "cds",
            Provider::cds_publication(&wrong, "there.test").await.err(),
        ),
        (
            "direct-dnskey",
            Provider::foreign_dnskeys_supported(&wrong, "there.test")
                .await
                .err(),
        ),
        ("server", wrong.check_server().await.err()),
    ] {
        let err = err.unwrap_or_else(|| panic!("{what}: answered under an unknown server id"));
        let ProviderError::Misconfigured { key, message } = &err else {
            panic!("{what}: {err:?}, not the account's misconfiguration");
        };
        assert_eq!(*key, "server_id", "{what}");
        assert!(
            message.contains(r#"has no server "nosuch" (it has "localhost")"#),
            "{what}: {message}"
        );
        assert_eq!(err.class(), ErrorClass::NotPerformed, "{what}");
        assert!(
            err.to_string()
                .starts_with(dnssec_warden::provider::ACCOUNT_MISCONFIGURED),
            "{err}"
        );
        assert!(!err.to_string().contains(API_KEY));
    }
    let condition = wrong.account_condition();
    assert!(condition.holding(), "the daemon-wide condition holds");
    // A switch is never sent: the zone is looked up first.
    let off = Provider::set_dnssec(&wrong, "there.test", true, &allowed)
        .await
        .unwrap_err();
    assert!(
        matches!(off, ProviderError::Misconfigured { .. }),
        "{off:?}"
    );

    // A base URL that is no PowerDNS API at all is the base URL's fault.
    let elsewhere = client_at(&format!("{}nothere/", pdns.server.base_url()), "localhost");
    let err = Provider::zone(&elsewhere, "there.test").await.unwrap_err();
    assert!(
        matches!(
            &err,
            ProviderError::Misconfigured {
                key: "base_url",
                ..
            }
        ),
        "{err:?}"
    );
}

/// The running daemon's engine over an account whose `server_id` the API does not know:
/// the daemon-wide `provider_account_misconfigured` holds, and the zone (adopted before,
/// when the account was right) keeps its state, with no "missing at the provider" (its
/// hold, its critical alert) on it.
#[tokio::test]
async fn a_wrong_server_id_changes_no_zone_and_is_one_condition() {
    use dnssec_warden::engine::{Engine, Notifier};
    use dnssec_warden::lifecycle::{AlertKind, Clock, ManualClock, Policy, State};
    use dnssec_warden_test_support::fake::{FakeWorld, PROVIDER_NS};
    use dnssec_warden_test_support::rig::{T0, ZONE};
    use std::sync::Arc;

    let pdns = Pdns::start();
    let right = pdns.client(API_KEY);
    right.create_zone(ZONE, &PROVIDER_NS).await.unwrap();
    let clock = ManualClock::starting_at(T0);
    let world = FakeWorld::new(ZONE, 2, 2, clock.clone());
    let store = dnssec_warden::store::Store::open_in_memory()
        .await
        .expect("a store");
    store.ensure_zone(ZONE, T0).await.expect("the zone's row");
    let engine = |client: PowerDnsClient| {
        Engine::new(
            store.clone(),
            Arc::new(client),
            Arc::new(world.clone()),
            Arc::new(clock.clone()),
            Policy::default(),
            Notifier::default(),
        )
    };
    engine(right).tick().await.expect("a tick");
    let before = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(before.zone.state, Some(State::Disabled));

    let wrong = client_at(&pdns.server.base_url(), "nosuch");
    let condition = wrong.account_condition();
    let wrong_engine = engine(wrong);
    for _ in 0..3 {
        let next = store.zone(ZONE).await.unwrap().unwrap().next_check_at;
        clock.set(next.max(clock.now()));
        wrong_engine.tick().await.expect("a tick");
    }
    let after = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(after.zone.state, Some(State::Disabled), "no state changed");
    assert!(
        after.last_observed_at > before.last_observed_at,
        "the zone was looked at"
    );
    let held = format!("{:?}", after.zone.facts.wait.held_by);
    assert!(!held.contains("has no zone"), "{held}");
    let alerts = store.open_alerts(Some(ZONE)).await.unwrap();
    assert!(
        alerts
            .iter()
            .all(|a| a.kind != AlertKind::ZoneMissingAtProvider),
        "{alerts:?}"
    );
    assert!(condition.holding(), "provider_account_misconfigured holds");
    let events = store.events(ZONE).await.unwrap();
    assert!(
        events.iter().all(|e| !e.reason.contains("has no zone")),
        "{:?}",
        events.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );
}

/// `check-config` through the real binary asks the PowerDNS account whether its server
/// id is the API's: a wrong one fails the file (exit 2) naming the key of its block and
/// the ids the API has; the right one passes.
#[test]
fn check_config_names_a_server_id_the_api_does_not_know() {
    let pdns = Pdns::start();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, format!("{API_KEY}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let config = dir.path().join("config.toml");
    let write = |server_id: &str| {
        std::fs::write(
            &config,
            format!(
                "[providers.pdns]\nkind = \"powerdns\"\nbase_url = \"{}\"\napi_key_file = {key:?}\n\
                 server_id = \"{server_id}\"\n[database]\npath = {:?}\n[zones]\nnames = [\"ex.test\"]\n",
                pdns.server.base_url(),
                dir.path().join("state.db")
            ),
        )
        .unwrap();
    };
    write("nosuch");
    let (code, out, err) = dnssec_warden_test_support::daemon::run(&config, &["check-config"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("key `providers.pdns.server_id`"), "{err}");
    assert!(
        err.contains(r#"has no server "nosuch" (it has "localhost")"#),
        "{err}"
    );
    write("localhost");
    let (code, out, err) = dnssec_warden_test_support::daemon::run(&config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(": OK"), "{out}");
}

/// The variant of a client error, for comparing the two servers' refusals (their words
/// and addresses differ).
fn variant(e: &ProviderError) -> String {
    let debug = format!("{e:?}");
    debug
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The client's calls the daemon makes, in the order a zone's life and a signed move
/// make them, against one server; each outcome in words that do not depend on the keys
/// the server made (the same sequence must read the same on both servers).
async fn transcript(client: &PowerDnsClient, stranger: &PowerDnsClient) -> Vec<String> {
    const ZONE: &str = "cmp.test";
    let mut t = Vec::new();
    let mut note = |what: &str, outcome: String| t.push(format!("{what}: {outcome}"));
    let shown =
        |r: Result<String, ProviderError>| r.unwrap_or_else(|e| format!("error {}", variant(&e)));
    note(
        "check_server",
        shown(client.check_server().await.map(|()| "ok".into())),
    );
    note(
        "zone before it exists",
        shown(Provider::zone(client, ZONE).await.map(|z| format!("{z:?}"))),
    );
    note(
        "create",
        shown(
            client
                .create_zone(ZONE, &["ns1.pdns.test", "NS2.pdns.test."])
                .await
                .map(|z| format!("{} dnssec {:?}", z.name, z.dnssec)),
        ),
    );
    note(
        "create again",
        shown(
            client
                .create_zone(ZONE, &["ns1.pdns.test"])
                .await
                .map(|z| z.name),
        ),
    );
    note(
        "zone",
        shown(Provider::zone(client, ZONE).await.map(|z| format!("{z:?}"))),
    );
    note(
        "zone_flags",
        shown(Provider::zone_flags(client).await.map(|z| format!("{z:?}"))),
    );
    note(
        "largest_ttl",
        shown(
            Provider::largest_ttl(client, ZONE)
                .await
                .map(|t| format!("{t:?}")),
        ),
    );
    note(
        "dnssec_key while off",
        shown(
            Provider::dnssec_key(client, ZONE)
                .await
                .map(|_| "a key".into()),
        ),
    );
    note(
        "cds_publication while off",
        shown(
            Provider::cds_publication(client, ZONE)
                .await
                .map(|c| format!("{c:?}")),
        ),
    );
    let on = Provider::set_dnssec(client, ZONE, true, &allowed).await;
    let key = Provider::dnssec_key(client, ZONE).await;
    note(
        "set_dnssec on",
        shown(on.map(|s| {
            format!(
                "key given {}, the one dnssec_key reads: {}",
                s.key.is_some(),
                s.key.as_ref() == key.as_ref().ok()
            )
        })),
    );
    note(
        "dnssec_key",
        shown(key.map(|k| {
            format!(
                "{} flags {} alg {} DS digest {}",
                k.zone, k.dnskey.flags, k.dnskey.algorithm, k.ds.digest_type
            )
        })),
    );
    note(
        "zone once signed",
        shown(
            Provider::zone(client, ZONE)
                .await
                .map(|z| format!("{:?}", z.dnssec_enabled)),
        ),
    );
    for to in [
        CdsPublication::Key,
        CdsPublication::Delete,
        CdsPublication::Nothing,
    ] {
        let set = Provider::set_cds_publication(client, ZONE, to, &allowed).await;
        note(
            &format!("set_cds_publication {to:?}"),
            shown(set.map(|()| "ok".into())),
        );
        note(
            "cds_publication",
            shown(
                Provider::cds_publication(client, ZONE)
                    .await
                    .map(|c| format!("{c:?}")),
            ),
        );
    }
    note(
        "foreign_dnskeys_supported",
        shown(
            Provider::foreign_dnskeys_supported(client, ZONE)
                .await
                .map(|s| s.to_string()),
        ),
    );
    let other = fresh_key(257);
    let set =
        Provider::set_foreign_dnskeys(client, ZONE, std::slice::from_ref(&other), 3600, &allowed)
            .await;
    note("set_foreign_dnskeys one", shown(set.map(|()| "ok".into())));
    note(
        "foreign_dnskeys",
        shown(
            Provider::foreign_dnskeys(client, ZONE)
                .await
                .map(|k| format!("the key set: {}", k == Some(vec![other.clone()]))),
        ),
    );
    note(
        "largest_ttl with a stored key",
        shown(
            Provider::largest_ttl(client, ZONE)
                .await
                .map(|t| format!("{t:?}")),
        ),
    );
    note(
        "dnssec_key beside a stored key",
        shown(
            Provider::dnssec_key(client, ZONE)
                .await
                .map(|k| format!("the stored key is not it: {}", k.dnskey != other)),
        ),
    );
    let cleared = Provider::set_foreign_dnskeys(client, ZONE, &[], 3600, &allowed).await;
    note(
        "set_foreign_dnskeys none",
        shown(cleared.map(|()| "ok".into())),
    );
    let again = Provider::set_foreign_dnskeys(client, ZONE, &[], 3600, &allowed).await;
    note(
        "set_foreign_dnskeys none again",
        shown(again.map(|()| "ok".into())),
    );
    note(
        "foreign_dnskeys",
        shown(
            Provider::foreign_dnskeys(client, ZONE)
                .await
                .map(|k| format!("{k:?}")),
        ),
    );
    // The keys of a rollover: each call, then the keys as listed, in words without the
    // key material or the ids (each server makes its own).
    let described = |k: &ProviderKey| {
        format!(
            "flags {} alg {} active {} published {} public key {} bytes",
            k.dnskey.flags,
            k.algorithm(),
            k.state.active,
            k.state.published,
            k.dnskey.public_key.len()
        )
    };
    let listed = |r: Result<Option<Vec<ProviderKey>>, ProviderError>| {
        shown(r.map(|keys| {
            keys.map_or("none".into(), |keys| {
                keys.iter().map(described).collect::<Vec<_>>().join("; ")
            })
        }))
    };
    note("keys", listed(Provider::keys(client, ZONE).await));
    let mut added = Vec::new();
    for (kind, algorithm, state) in [
        (KeyKind::Zsk, KeyAlgorithm::EcdsaP256Sha256, PUBLISHED),
        (KeyKind::Ksk, KeyAlgorithm::Ed25519, SIGNING_UNPUBLISHED),
        (KeyKind::Zsk, KeyAlgorithm::RsaSha256, OFF),
    ] {
        let key = Provider::add_key(client, ZONE, new_key(kind, algorithm, state), &allowed).await;
        note(
            &format!("add_key {kind:?} {algorithm:?} {state:?}"),
            shown(key.as_ref().map(described).map_err(Clone::clone)),
        );
        added.extend(key.ok());
    }
    note("keys", listed(Provider::keys(client, ZONE).await));
    if let [zsk, ed, _] = added.as_slice() {
        let on = Provider::set_key_state(client, ZONE, &zsk.id, ON, &allowed).await;
        note("set_key_state zsk on", shown(on.map(|()| "ok".into())));
        let on = Provider::set_key_state(client, ZONE, &ed.id, ON, &allowed).await;
        note("set_key_state ed25519 on", shown(on.map(|()| "ok".into())));
        note("keys", listed(Provider::keys(client, ZONE).await));
        note(
            "dnssec_key beside a second entry point",
            shown(
                Provider::dnssec_key(client, ZONE)
                    .await
                    .map(|_| "a key".into()),
            ),
        );
        let deleted = Provider::delete_key(client, ZONE, &ed.id, &allowed).await;
        note("delete_key ed25519", shown(deleted.map(|()| "ok".into())));
        let again = Provider::delete_key(client, ZONE, &ed.id, &allowed).await;
        note(
            "delete_key ed25519 again",
            shown(again.map(|()| "ok".into())),
        );
        let gone = Provider::set_key_state(client, ZONE, &ed.id, OFF, &allowed).await;
        note(
            "set_key_state of a deleted key",
            shown(gone.map(|()| "ok".into())),
        );
        note(
            "dnssec_key once it is gone",
            shown(
                Provider::dnssec_key(client, ZONE)
                    .await
                    .map(|k| format!("flags {} alg {}", k.dnskey.flags, k.dnskey.algorithm)),
            ),
        );
    }
    let odd = Provider::delete_key(client, ZONE, "one", &allowed).await;
    note("delete_key of no id", shown(odd.map(|()| "ok".into())));
    let held = Provider::add_key(
        client,
        ZONE,
        new_key(KeyKind::Csk, KeyAlgorithm::EcdsaP256Sha256, ON),
        &denied,
    )
    .await;
    note("add_key, not permitted", shown(held.map(|k| described(&k))));
    note("keys", listed(Provider::keys(client, ZONE).await));
    let denied_call = Provider::set_dnssec(client, ZONE, false, &denied).await;
    note(
        "set_dnssec off, not permitted",
        shown(denied_call.map(|_| "sent".into())),
    );
    let off = Provider::set_dnssec(client, ZONE, false, &allowed).await;
    note(
        "set_dnssec off",
        shown(off.map(|s| format!("key {:?}", s.key))),
    );
    note(
        "dnssec_key once off",
        shown(
            Provider::dnssec_key(client, ZONE)
                .await
                .map(|_| "a key".into()),
        ),
    );
    note("keys once off", listed(Provider::keys(client, ZONE).await));
    note(
        "a zone nobody has",
        shown(
            Provider::zone(client, "nobody.test.")
                .await
                .map(|z| format!("{z:?}")),
        ),
    );
    note(
        "another API key",
        shown(
            Provider::zone(stranger, ZONE)
                .await
                .map(|z| format!("{z:?}")),
        ),
    );
    t
}

#[tokio::test]
async fn the_lab_simulator_answers_the_clients_calls_as_the_real_server_does() {
    use dnssec_warden_lab::pdns_sim::{PdnsOptions as SimOptions, PdnsSim};
    let real = Pdns::start_with(DIRECT);
    let sim = PdnsSim::start(
        "127.0.0.1:0".parse().expect("an address"),
        SimOptions {
            api_key: API_KEY.into(),
            // The lab's pdns.conf: default-ttl 2.
            ttl: 2,
            direct_dnskey: true,
            ..SimOptions::default()
        },
    )
    .await
    .expect("the simulator starts");
    let sim_client = |key: &str, server_id: &str| {
        PowerDnsClient::new(
            &PowerDnsSettings {
                base_url: sim.base_url(),
                server_id: server_id.into(),
                request_timeout: Duration::from_secs(5),
                max_attempts: 2,
                retry_budget: Duration::from_secs(5),
            },
            Secret::new(key.into()),
        )
        .expect("a client")
    };
    let of_real = transcript(&real.client(API_KEY), &real.client("not-the-key")).await;
    let of_sim = transcript(
        &sim_client(API_KEY, "localhost"),
        &sim_client("not-the-key", "localhost"),
    )
    .await;
    assert_eq!(
        of_sim,
        of_real,
        "the simulator (left) and pdns_server (right) differ:\n{}",
        of_sim
            .iter()
            .zip(&of_real)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("  sim:  {a}\n  real: {b}\n"))
            .collect::<String>()
    );
    // An unknown server id: the account's fault at both, naming the key.
    let wrong_real = client_at(&real.server.base_url(), "nope");
    let wrong_sim = sim_client(API_KEY, "nope");
    for client in [&wrong_real, &wrong_sim] {
        let e = Provider::zone(client, "cmp.test.").await;
        assert!(
            matches!(
                &e,
                Err(ProviderError::Misconfigured {
                    key: "server_id",
                    ..
                })
            ),
            "{e:?}"
        );
    }
}

/// What a server answers over DNS for a zone's keys, in words that do not depend on the
/// key material (each server makes its own keys): the DNSKEY RRset, the keys whose RRSIG
/// over the DNSKEY RRset, the SOA and the CDS verifies (by the daemon's own validator, the
/// script's keys named as the script named them), the CDS, and whether the DNSKEY and CDS
/// TTL is the SOA minimum.
async fn served_words(
    server: std::net::SocketAddr,
    zone: &str,
    named: &[(&str, Dnskey)],
) -> String {
    use dnssec_warden::dns::wire::{as_dnskey, build_query, dnskey_from, parse_name, rrsigs};
    use dnssec_warden::dns::{Budget, NetTransport, Transport as _, validator};
    use hickory_proto::dnssec::rdata::DNSSECRData;
    use hickory_proto::rr::{RData, RecordType};

    let name = parse_name(zone).expect("a name");
    let transport = NetTransport::new(Duration::from_secs(2));
    let ask = async |rtype| {
        transport
            .exchange(server, &build_query(&name, rtype, false))
            .await
            .expect("the server answers")
            .answers
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as u32;
    let name_of = |key: &Dnskey| {
        named
            .iter()
            .find(|(_, k)| k == key)
            .map_or("a key the script did not make", |(n, _)| *n)
    };
    let sorted = |mut v: Vec<&str>| {
        v.sort_unstable();
        v.join(",")
    };
    // Which of the script's keys sign (owner, rtype); every RRSIG must be one of theirs.
    let signers = |records: &[hickory_proto::rr::Record], rtype| {
        let signing: Vec<&str> = named
            .iter()
            .filter(|(_, key)| {
                validator::verify_rrset(
                    records,
                    &name,
                    rtype,
                    zone,
                    std::slice::from_ref(key),
                    now,
                    &Budget::new(Default::default()),
                )
                .is_ok()
            })
            .map(|(n, _)| *n)
            .collect();
        let sigs = rrsigs(records, &name, rtype).count();
        let unknown = sigs.saturating_sub(signing.len());
        format!("{} ({unknown} other RRSIGs)", sorted(signing))
    };
    let keys = ask(RecordType::DNSKEY).await;
    let soa = ask(RecordType::SOA).await;
    let cds = ask(RecordType::CDS).await;
    let dnskeys: Vec<&str> = keys
        .iter()
        .filter_map(as_dnskey)
        .map(|k| name_of(&dnskey_from(k)))
        .collect();
    let minimum = soa.iter().find_map(|r| match &r.data {
        RData::SOA(soa) => Some(soa.minimum),
        _ => None,
    });
    let ttl_of = |records: &[hickory_proto::rr::Record], rtype| {
        records
            .iter()
            .find(|r| r.record_type() == rtype)
            .map(|r| r.ttl)
    };
    let cds_tags: Vec<u16> = cds
        .iter()
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::CDS(c)) => Some(c.key_tag()),
            _ => None,
        })
        .collect();
    let cds_keys: Vec<&str> = cds_tags
        .iter()
        .map(|tag| {
            named
                .iter()
                .find(|(_, k)| k.key_tag() == *tag)
                .map_or("a key the script did not make", |(n, _)| *n)
        })
        .collect();
    format!(
        "DNSKEY [{}] signed by {}; SOA signed by {}; CDS [{}] signed by {}; DNSKEY TTL the SOA minimum: {}, CDS TTL too: {}",
        sorted(dnskeys),
        signers(&keys, RecordType::DNSKEY),
        signers(&soa, RecordType::SOA),
        sorted(cds_keys),
        signers(&cds, RecordType::CDS),
        ttl_of(&keys, RecordType::DNSKEY).is_none_or(|t| Some(t) == minimum),
        ttl_of(&cds, RecordType::CDS).is_none_or(|t| Some(t) == minimum),
    )
}

/// The key calls of rollovers against one server, and after each what the name server
/// answering for the zone serves (`served_words`).
async fn served_transcript(
    client: &PowerDnsClient,
    zone: &str,
    server: std::net::SocketAddr,
) -> Vec<String> {
    let mut t = Vec::new();
    let mut named: Vec<(&str, Dnskey)> = Vec::new();
    Provider::set_cds_publication(client, zone, CdsPublication::Key, &allowed)
        .await
        .unwrap();
    Provider::set_dnssec(client, zone, true, &allowed)
        .await
        .unwrap();
    let csk = Provider::keys(client, zone).await.unwrap().unwrap()[0].clone();
    named.push(("csk", csk.dnskey.clone()));
    t.push(format!("on: {}", served_words(server, zone, &named).await));
    let mut ids = vec![("csk", csk.id.clone())];
    let adds = [
        (
            "zsk",
            KeyKind::Zsk,
            KeyAlgorithm::EcdsaP256Sha256,
            PUBLISHED,
        ),
        (
            "ed",
            KeyKind::Ksk,
            KeyAlgorithm::Ed25519,
            SIGNING_UNPUBLISHED,
        ),
        ("rsa", KeyKind::Ksk, KeyAlgorithm::RsaSha256, PUBLISHED),
    ];
    for (n, kind, algorithm, state) in adds {
        let key = Provider::add_key(client, zone, new_key(kind, algorithm, state), &allowed)
            .await
            .unwrap();
        named.push((n, key.dnskey.clone()));
        ids.push((n, key.id.clone()));
        let served = served_words(server, zone, &named).await;
        t.push(format!("{n} added {state:?}: {served}"));
    }
    let id = |n: &str| {
        ids.iter()
            .find(|(m, _)| *m == n)
            .map(|(_, id)| id.clone())
            .expect("a key of the script")
    };
    for (n, state) in [
        ("zsk", ON),
        ("rsa", ON),
        ("ed", ON),
        ("zsk", PUBLISHED),
        ("csk", SIGNING_UNPUBLISHED),
        ("csk", OFF),
        ("rsa", SIGNING_UNPUBLISHED),
    ] {
        Provider::set_key_state(client, zone, &id(n), state, &allowed)
            .await
            .unwrap();
        let served = served_words(server, zone, &named).await;
        t.push(format!("{n} {state:?}: {served}"));
    }
    Provider::delete_key(client, zone, &id("ed"), &allowed)
        .await
        .unwrap();
    t.push(format!(
        "ed deleted: {}",
        served_words(server, zone, &named).await
    ));
    t
}

/// The lab's name servers serve a zone of the simulator as PowerDNS serves it: the same
/// script of key calls (a ZSK pre-published then active, an Ed25519 KSK signing
/// unpublished then published, an RSA KSK, keys switched off and unpublished, one
/// deleted) against the real server and against the simulator, and after each call the
/// same DNSKEY RRset, the same keys signing the DNSKEY RRset, the SOA and the CDS (every
/// signature verified by the daemon's validator), the same CDS, the DNSKEY TTL the SOA
/// minimum at both.
#[tokio::test]
async fn the_lab_serves_the_simulators_keys_as_the_real_server_serves_its_own() {
    use dnssec_warden_lab::dns::{ACCOUNTS, ApexSource, KeySource, LabDns};
    use dnssec_warden_lab::pdns_sim::{PdnsOptions as SimOptions, PdnsSim};
    const Z: &str = "served.test.";
    let real = Pdns::start();
    // The server makes an RSA key on a POST, which a loaded machine can make slow: a
    // key's POST timed out is of unknown outcome, never sent again.
    let client = PowerDnsClient::new(
        &PowerDnsSettings {
            request_timeout: Duration::from_secs(30),
            max_attempts: 2,
            retry_budget: Duration::from_secs(30),
            ..PowerDnsSettings::new(real.server.base_url().parse().expect("a URL"))
        },
        Secret::new(API_KEY.into()),
    )
    .expect("a client");
    client.create_zone(Z, &["ns1.pdns.test"]).await.unwrap();
    let of_real = served_transcript(
        &client,
        Z,
        std::net::SocketAddr::from(([127, 0, 0, 1], real.dns)),
    )
    .await;

    let sim = PdnsSim::start(
        "127.0.0.1:0".parse().expect("an address"),
        SimOptions {
            api_key: API_KEY.into(),
            ..SimOptions::default()
        },
    )
    .await
    .expect("the simulator starts");
    let handle = sim.handle();
    let lab = LabDns::start().await.expect("the lab starts");
    let client = PowerDnsClient::new(
        &PowerDnsSettings::new(sim.base_url()),
        Secret::new(API_KEY.into()),
    )
    .expect("a client");
    client.create_zone(Z, &["ns1.west.test"]).await.unwrap();
    lab.add_account_child(
        "west",
        Z,
        KeySource::pdns(handle.clone()),
        ApexSource::pdns(handle.clone()),
    )
    .expect("the zone at west");
    let west = std::net::SocketAddr::from((ACCOUNTS[0].1[0].1, lab.port()));
    let of_sim = served_transcript(&client, Z, west).await;
    assert_eq!(
        of_sim,
        of_real,
        "the lab (left) and pdns_server (right) serve differently:\n{}",
        of_sim
            .iter()
            .zip(&of_real)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("  sim:  {a}\n  real: {b}\n"))
            .collect::<String>()
    );
    // The entry point (the demo publishes its DS): with no active, published SEP key
    // left, the active key.
    let keys = Provider::keys(&client, Z).await.unwrap().unwrap();
    let entry = handle.signing_key(Z).map(|k| k.dnskey().public_key);
    let rsa = keys
        .iter()
        .find(|k| k.algorithm() == 8)
        .expect("the RSA key");
    assert_eq!(entry, Some(rsa.dnskey.public_key.clone()));
}

/// An algorithm rollover 8 -> 13 at the simulator, the conservative way (RFC 6781 section
/// 4.1.4), served by the lab under its TLD: at every step both the daemon's validator and
/// Unbound (an independent validator, OpenSSL's RSA and ECDSA) find the zone secure from
/// the DS the TLD publishes; the old DS left alone once the old keys are gone is bogus
/// to both. TTLs of one second, each step checked two seconds on (Unbound counts whole
/// seconds), so that no cache carries a step's verdict into the next: each step is
/// checked on its own, a roll's waits are not what is tested here.
#[tokio::test]
async fn an_algorithm_rollover_at_the_simulator_is_secure_for_our_validator_and_unbound() {
    use dnssec_warden::cli::lab::LabSettings as _;
    use dnssec_warden::dns::{DnsObserver, Observer as _, ValidationVerdict};
    use dnssec_warden_lab::DigestType as LabDigest;
    use dnssec_warden_lab::dns::{ApexSource, KeySource, LabDns, LabResolver, TldServers};
    use dnssec_warden_lab::pdns_sim::{PdnsOptions as SimOptions, PdnsSim};
    const Z: &str = "algo.test.";
    let sim = PdnsSim::start(
        "127.0.0.1:0".parse().expect("an address"),
        SimOptions {
            api_key: API_KEY.into(),
            ..SimOptions::default()
        },
    )
    .await
    .expect("the simulator starts");
    let handle = sim.handle();
    let client = PowerDnsClient::new(
        &PowerDnsSettings::new(sim.base_url()),
        Secret::new(API_KEY.into()),
    )
    .expect("a client");
    client.create_zone(Z, &["ns1.west.test"]).await.unwrap();
    let lab = LabDns::start().await.expect("the lab starts");
    lab.add_account_child(
        "west",
        Z,
        KeySource::pdns(handle.clone()),
        ApexSource::pdns(handle.clone()),
    )
    .expect("the zone at west");
    lab.set_account_zone_ttl("west", Z, 1).unwrap();
    lab.set_account_dnskey_ttl("west", Z, 1).unwrap();
    lab.set_ds_ttl(Z, 1).unwrap();
    lab.set_ns_ttl(Z, 1).unwrap();
    let add = async |kind, algorithm, state| {
        Provider::add_key(&client, Z, new_key(kind, algorithm, state), &allowed)
            .await
            .unwrap()
    };
    let old_ksk = add(KeyKind::Ksk, KeyAlgorithm::RsaSha256, ON).await;
    let old_zsk = add(KeyKind::Zsk, KeyAlgorithm::RsaSha256, ON).await;
    let lab_ds = |key: &ProviderKey| {
        dnssec_warden_lab::Dnskey {
            flags: key.dnskey.flags,
            protocol: key.dnskey.protocol,
            algorithm: key.dnskey.algorithm,
            public_key: key.dnskey.public_key.clone(),
        }
        .to_ds(Z, LabDigest::Sha256)
        .expect("a DS")
    };
    lab.set_ds(Z, TldServers::Both, vec![lab_ds(&old_ksk)])
        .unwrap();
    let resolver = LabResolver::start(&lab).await.expect("unbound starts");
    // Unbound walks the lab from the root for each probe (its cache holds a second): a
    // loaded machine needs more than the lab settings' 400 ms for its answer.
    let observer = DnsObserver::new(&dnssec_warden::dns::DnsSettings {
        query_timeout: Duration::from_secs(3),
        ..lab.settings_with_resolvers(&[resolver.addr()])
    })
    .unwrap();
    let verdicts = async |what: &str| {
        // Past every TTL of the step before.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let probes = observer.validation(Z).await;
        assert_eq!(probes.len(), 2, "{what}: {probes:?}");
        (
            probes[0].verdict,
            probes[1].verdict,
            format!("{what}: {probes:?}"),
        )
    };
    let secure = async |what: &str| {
        let (ours, unbound, said) = verdicts(what).await;
        assert_eq!(
            (ours, unbound),
            (ValidationVerdict::Secure, ValidationVerdict::Secure),
            "{said}"
        );
    };
    secure("RSA keys, their DS").await;
    let new_ksk = add(
        KeyKind::Ksk,
        KeyAlgorithm::EcdsaP256Sha256,
        SIGNING_UNPUBLISHED,
    )
    .await;
    let new_zsk = add(
        KeyKind::Zsk,
        KeyAlgorithm::EcdsaP256Sha256,
        SIGNING_UNPUBLISHED,
    )
    .await;
    secure("P-256 keys signing unpublished").await;
    for key in [&new_ksk, &new_zsk] {
        Provider::set_key_state(&client, Z, &key.id, ON, &allowed)
            .await
            .unwrap();
    }
    secure("P-256 keys published").await;
    lab.set_ds(Z, TldServers::Both, vec![lab_ds(&new_ksk)])
        .unwrap();
    secure("DS swapped").await;
    for key in [&old_ksk, &old_zsk] {
        Provider::set_key_state(&client, Z, &key.id, SIGNING_UNPUBLISHED, &allowed)
            .await
            .unwrap();
    }
    secure("RSA keys unpublished").await;
    for key in [&old_ksk, &old_zsk] {
        Provider::delete_key(&client, Z, &key.id, &allowed)
            .await
            .unwrap();
    }
    secure("RSA keys removed").await;
    // The old DS alone now: no served key matches it, bogus to both.
    lab.set_ds(Z, TldServers::Both, vec![lab_ds(&old_ksk)])
        .unwrap();
    let (ours, unbound, said) = verdicts("the old DS alone").await;
    assert_eq!(
        (ours, unbound),
        (ValidationVerdict::Bogus, ValidationVerdict::Bogus),
        "{said}"
    );
}
