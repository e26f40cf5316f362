//! The Route 53 client against the Route 53 simulator (`lab/src/route53_sim/`), over real
//! HTTP on loopback, every request's SigV4 checked by the simulator's own verifier; its
//! hardening through the fault proxy; its configuration block as config.example.toml
//! shows it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden::config::Settings;
use dnssec_warden::dnssec::DigestType;
use dnssec_warden::provider::fleet::ProviderOptions;
use dnssec_warden::provider::registry::Kind;
use dnssec_warden::provider::route53::{KeyId, Route53Client, Route53Settings};
use dnssec_warden::provider::{ErrorClass, PermitAnswer, Provider, ProviderError, RetryPolicy};
use dnssec_warden::secret::{Secret, SecretSource};
use dnssec_warden_lab::route53_sim::{Route53Options, Route53Sim};
use dnssec_warden_lab::{Fault, FaultKind};
use dnssec_warden_test_support::fault_proxy::{self, FaultProxy, Rule};
use url::Url;

const KEY_ID: &str = "AKIALABEXAMPLE000001";
const SECRET: &str = "lab/Secret+Access+Key/0123456789abcdefghij";
const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/0f1e2d3c-lab";

async fn sim(options: Route53Options) -> Route53Sim {
    let sim = Route53Sim::start(
        "127.0.0.1:0".parse().unwrap(),
        Route53Options {
            credentials: vec![(KEY_ID.into(), SECRET.into())],
            ..options
        },
    )
    .await
    .expect("simulator starts");
    sim.handle().add_kms_key(ARN);
    sim
}

/// Changes `INSYNC` after 200 ms, no rate limit (the rate tests set theirs).
fn quick() -> Route53Options {
    Route53Options {
        change_delay: Duration::from_millis(200),
        rate_limit: None,
        ..Route53Options::default()
    }
}

fn quick_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        budget: Duration::from_secs(20),
        ..RetryPolicy::default()
    }
}

fn settings_at(base: Url) -> Route53Settings {
    Route53Settings {
        kms_key_arn: Some(ARN.into()),
        change_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(5),
        // The tests' own pace: the rate tests set Route 53's five.
        requests_per_second: 5,
        ..Route53Settings::at(base, KEY_ID)
    }
}

fn client_with(settings: &Route53Settings, secret: &str) -> Route53Client {
    Route53Client::with_policy(
        settings,
        Secret::new(KEY_ID.into()),
        Secret::new(secret.into()),
        quick_policy(),
    )
    .unwrap()
}

fn client(sim: &Route53Sim) -> Route53Client {
    client_with(&settings_at(sim.base_url()), SECRET)
}

fn always<'a>() -> PermitAnswer<'a> {
    Box::pin(async { true })
}

/// On: the key-signing key created `ACTIVE` from the configured KMS key, waited to
/// `INSYNC`, then signing enabled, waited; the key answered is the one the lab serves,
/// its DS recomputed. Off: disabled, waited, then the key deactivated and deleted; the
/// lab serves the zone unsigned.
#[tokio::test]
async fn a_zone_through_on_and_off() {
    let sim = sim(Route53Options {
        change_delay: Duration::from_millis(400),
        ..quick()
    })
    .await;
    let h = sim.handle();
    let id = h.add_zone("example.com");
    let c = client(&sim);

    assert_eq!(
        c.dnssec_key("example.com.").await,
        Err(ProviderError::DnssecDisabled)
    );
    let switched = c.set_dnssec("example.com.", true, &always).await.unwrap();
    let key = switched.key.expect("the key of the answer");
    let served = h.signing_key("example.com").expect("the lab signs it");
    assert_eq!(key.dnskey.public_key, served.dnskey().public_key);
    assert_eq!(
        key.ds,
        key.dnskey
            .to_ds("example.com.", DigestType::Sha256)
            .unwrap()
    );
    assert_eq!(c.dnssec_key("example.com").await.unwrap(), key);
    assert_eq!(
        h.dnssec("example.com").unwrap(),
        (
            "SIGNING".to_string(),
            vec![("dnssec_warden_ksk".to_string(), "ACTIVE".to_string())]
        )
    );
    // Asked again: nothing more is sent.
    let before = h.calls().len();
    assert_eq!(
        c.set_dnssec("example.com", true, &always)
            .await
            .unwrap()
            .key,
        Some(key.clone())
    );
    assert_eq!(h.calls().len(), before);

    let off = c.set_dnssec("example.com", false, &always).await.unwrap();
    assert_eq!(off.key, None);
    assert!(h.signing_key("example.com").is_none(), "unsigned now");
    assert_eq!(
        h.dnssec("example.com").unwrap(),
        ("NOT_SIGNING".to_string(), vec![])
    );
    assert_eq!(
        c.dnssec_key("example.com").await,
        Err(ProviderError::DnssecDisabled)
    );

    let calls = h.calls();
    let what: Vec<(String, String, u16)> = calls
        .iter()
        .map(|c| (c.method.clone(), c.path.clone(), c.status))
        .collect();
    let p = |tail: &str| format!("/2013-04-01/{tail}");
    assert_eq!(
        what,
        vec![
            ("POST".into(), p("keysigningkey"), 201),
            (
                "POST".into(),
                p(&format!("hostedzone/{id}/enable-dnssec")),
                200
            ),
            (
                "POST".into(),
                p(&format!("hostedzone/{id}/disable-dnssec")),
                200
            ),
            (
                "POST".into(),
                p(&format!("keysigningkey/{id}/dnssec_warden_ksk/deactivate")),
                200
            ),
            (
                "DELETE".into(),
                p(&format!("keysigningkey/{id}/dnssec_warden_ksk")),
                200
            ),
        ]
    );
    let body = calls[0].body.as_str().unwrap();
    assert!(
        body.starts_with("<CreateKeySigningKeyRequest xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">")
            && body.contains(&format!("<HostedZoneId>{id}</HostedZoneId><KeyManagementServiceArn>{ARN}</KeyManagementServiceArn><Name>dnssec_warden_ksk</Name><Status>ACTIVE</Status>")),
        "{body}"
    );
    // Each step only once the one before was INSYNC.
    for pair in calls.windows(2) {
        let waited = pair[1].at.duration_since(pair[0].at).unwrap_or_default();
        assert!(
            waited >= Duration::from_millis(400),
            "{} {} only {waited:?} after {}",
            pair[1].method,
            pair[1].path,
            pair[0].path
        );
    }
    assert!(
        h.requests()
            .get("GET /2013-04-01/change/{id}")
            .is_some_and(|n| *n >= 5),
        "{:?}",
        h.requests()
    );
    assert!(h.auth_refusals().is_empty(), "{:?}", h.auth_refusals());
}

/// Without `kms_key_arn` a zone with no key-signing key is refused, naming the key, and
/// nothing is sent.
#[tokio::test]
async fn a_missing_kms_key_arn_is_refused_with_the_reason() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client_with(
        &Route53Settings {
            kms_key_arn: None,
            ..settings_at(sim.base_url())
        },
        SECRET,
    );
    let e = c
        .set_dnssec("example.com", true, &always)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Misconfigured { key: "kms_key_arn", message } if message.contains("creates no KMS key")),
        "{e:?}"
    );
    assert_eq!(e.class(), ErrorClass::NotPerformed);
    assert!(h.calls().is_empty(), "nothing sent");

    // An ARN Route 53 does not take is its refusal, named too.
    let c = client_with(
        &Route53Settings {
            kms_key_arn: Some("arn:aws:kms:us-east-1:111122223333:key/unknown".into()),
            ..settings_at(sim.base_url())
        },
        SECRET,
    );
    let e = c
        .set_dnssec("example.com", true, &always)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Misconfigured { key: "kms_key_arn", message } if message.contains("InvalidKMSArn")),
        "{e:?}"
    );
}

/// ListHostedZones is paged by `marker` to the end, private zones left out; a name is
/// found by ListHostedZonesByName and its id kept; two public zones of one name are an
/// error naming both ids; a zone not in the account is "not found".
#[tokio::test]
async fn zones_are_paged_and_found_by_name() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    for i in 0..230 {
        h.add_zone(&format!("z{i:03}.example"));
    }
    h.add_private_zone("z007.example");
    let c = client(&sim);
    let zones = c.zone_flags().await.unwrap();
    assert_eq!(zones.len(), 230);
    assert!(zones.iter().all(|z| z.dnssec_enabled.is_none()));
    assert!(zones.iter().any(|z| z.name == "z007.example"));
    assert_eq!(h.requests().get("GET /2013-04-01/hostedzone"), Some(&3));

    let hosted = c.zone("z007.example.").await.unwrap();
    assert_eq!(hosted.name, "z007.example");
    assert_eq!(hosted.name_servers.as_ref().map(Vec::len), Some(4));
    assert_eq!(
        h.requests().get("GET /2013-04-01/hostedzonesbyname"),
        None,
        "the id was kept from the listing"
    );

    let fresh = client(&sim);
    assert_eq!(
        fresh.dnssec_key("z008.example").await,
        Err(ProviderError::DnssecDisabled)
    );
    fresh.dnssec_key("z008.example").await.unwrap_err();
    assert_eq!(
        h.requests().get("GET /2013-04-01/hostedzonesbyname"),
        Some(&1),
        "found by name once"
    );
    assert!(matches!(
        fresh.dnssec_key("absent.example").await,
        Err(ProviderError::NotFound(_))
    ));

    let first = h.zone_id("z009.example").unwrap();
    let second = h.add_zone("z009.example");
    let e = fresh.dnssec_key("z009.example").await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Misconfigured { message, .. } if message.contains(&first) && message.contains(&second)),
        "{e:?}"
    );
}

/// The largest TTL is the record sets': an alias to a name of the zone counts as that
/// name's, one to anything else (an AWS resource) makes it unknown.
#[tokio::test]
async fn the_largest_ttl_is_the_record_sets() {
    let sim = sim(Route53Options {
        record_ttl: 3600,
        max_items: 2,
        ..quick()
    })
    .await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    assert_eq!(c.largest_ttl("example.com").await.unwrap(), Some(3600));
    h.add_record("example.com", "TXT", "a.example.com", Some(7200), None);
    h.add_record("example.com", "A", "b.example.com", Some(60), None);
    h.add_record(
        "example.com",
        "A",
        "www.example.com",
        None,
        Some("b.example.com"),
    );
    assert_eq!(c.largest_ttl("example.com").await.unwrap(), Some(7200));
    h.add_record(
        "example.com",
        "A",
        "cdn.example.com",
        None,
        Some("d1.cloudfront.net"),
    );
    assert_eq!(c.largest_ttl("example.com").await.unwrap(), None);
}

/// Rule 5: a key whose key tag, digest or DS record disagrees with its public key is
/// never taken; a zone Route 53 reports broken (`ACTION_NEEDED`) is unknown, never
/// "off", and the switch-off sends nothing.
#[tokio::test]
async fn a_key_that_disagrees_or_a_broken_zone_is_never_taken() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    c.set_dnssec("example.com", true, &always).await.unwrap();
    for (field, value) in [
        ("KeyTag", "2371"),
        (
            "DigestValue",
            "00112233445566778899AABBCCDDEEFF00112233445566778899AABBCCDDEEFF",
        ),
        ("DSRecord", "2371 13 2 00"),
    ] {
        h.override_ksk_fields("example.com", &[(field, value)]);
        match c.dnssec_key("example.com").await {
            Err(ProviderError::DnssecMismatch { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected a mismatch, got {other:?}"),
        }
    }
    h.override_ksk_fields("example.com", &[]);
    c.dnssec_key("example.com").await.unwrap();

    h.override_serve_signature("example.com", Some("ACTION_NEEDED"));
    let e = c.dnssec_key("example.com").await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    let before = h.calls().len();
    let e = c
        .set_dnssec("example.com", false, &always)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    assert_eq!(h.calls().len(), before, "nothing sent on ACTION_NEEDED");
}

/// Route 53's own guards are refusals on the way, not faults: Enable while the parent
/// delegates elsewhere (`HostedZonePartiallyDelegated`), Disable while the parent lists
/// the DS (`KeySigningKeyInParentDSRecord`), the zone still signed.
#[tokio::test]
async fn route53s_own_guards_are_refusals() {
    let parent_ds = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ds = parent_ds.clone();
    let delegated = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let to_us = delegated.clone();
    let sim = sim(Route53Options {
        parent_ns: Some(Arc::new(move |_| {
            Some(if to_us.load(std::sync::atomic::Ordering::SeqCst) {
                Route53Options::default().name_servers
            } else {
                vec!["ns1.old.example.".into()]
            })
        })),
        parent_ds: Some(Arc::new(move |_| {
            Some(ds.load(std::sync::atomic::Ordering::SeqCst))
        })),
        ..quick()
    })
    .await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    let e = c
        .set_dnssec("example.com", true, &always)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Conflict(m) if m.contains("HostedZonePartiallyDelegated")),
        "{e:?}"
    );
    assert!(e.is_refusal());
    delegated.store(true, std::sync::atomic::Ordering::SeqCst);
    c.set_dnssec("example.com", true, &always).await.unwrap();

    parent_ds.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = c
        .set_dnssec("example.com", false, &always)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Conflict(m) if m.contains("KeySigningKeyInParentDSRecord")),
        "{e:?}"
    );
    assert!(h.signing_key("example.com").is_some(), "still signed");
    parent_ds.store(false, std::sync::atomic::Ordering::SeqCst);
    c.set_dnssec("example.com", false, &always).await.unwrap();
    assert!(h.signing_key("example.com").is_none());
}

/// Five requests a second per account: the client spaces every request so that a burst
/// of twenty is never throttled, and a `Throttling` (a 400) or `PriorRequestNotComplete`
/// that comes anyway is retried with backoff, not taken as a refusal.
#[tokio::test]
async fn the_rate_limit_and_throttling_are_honoured() {
    let sim = sim(Route53Options {
        rate_limit: Some(5),
        ..quick()
    })
    .await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    c.zone_flags().await.unwrap();
    let started = Instant::now();
    let results = futures::future::join_all((0..20).map(|_| c.dnssec_key("example.com"))).await;
    for r in &results {
        assert_eq!(r, &Err(ProviderError::DnssecDisabled));
    }
    assert_eq!(h.throttled(), 0, "paced below the limit");
    assert!(
        started.elapsed() >= Duration::from_millis(3600),
        "{:?}",
        started.elapsed()
    );

    h.inject(Fault::next(2, FaultKind::RateLimit { retry_after: None }));
    let asked = h.requests().values().sum::<u64>();
    assert_eq!(
        c.dnssec_key("example.com").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert_eq!(
        h.requests().values().sum::<u64>(),
        asked + 3,
        "retried twice"
    );

    // An account whose limit is below the client's pace is throttled, and retries.
    h.set_rate_limit(Some(2));
    let fast = Route53Client::with_policy(
        &settings_at(sim.base_url()),
        Secret::new(KEY_ID.into()),
        Secret::new(SECRET.into()),
        RetryPolicy {
            max_attempts: 30,
            ..quick_policy()
        },
    )
    .unwrap();
    let results = futures::future::join_all((0..6).map(|_| fast.dnssec_key("example.com"))).await;
    assert!(h.throttled() > 0);
    for r in &results {
        assert_eq!(
            r,
            &Err(ProviderError::DnssecDisabled),
            "retried to an answer"
        );
    }
}

/// The key pair: a wrong secret is `SignatureDoesNotMatch` (`check-config` says so and
/// names the clock), the account backs off (the next call not sent); an unknown key id
/// and a wrong signing region are refused too; the secret appears in no error.
#[tokio::test]
async fn signatures_are_checked_and_refusals_back_off() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let bad = client_with(&settings_at(sim.base_url()), "wrong/secret/s3cr3t");
    let e = bad.check_account().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Unauthorized(m) if m.contains("SignatureDoesNotMatch") && m.contains("clock")),
        "{e:?}"
    );
    assert!(bad.auth_condition().holding());
    let asked = h.requests().values().sum::<u64>();
    let e = bad.zone("example.com").await.unwrap_err();
    assert!(matches!(e, ProviderError::AuthBackoff { .. }), "{e:?}");
    assert_eq!(h.requests().values().sum::<u64>(), asked, "not sent");
    assert!(!format!("{e} {e:?}").contains("s3cr3t"));

    let other = Route53Client::with_policy(
        &settings_at(sim.base_url()),
        Secret::new("AKIAUNKNOWN000000001".into()),
        Secret::new(SECRET.into()),
        quick_policy(),
    )
    .unwrap();
    let e = other.check_account().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Unauthorized(m) if m.contains("InvalidClientTokenId")),
        "{e:?}"
    );
    let region = client_with(
        &Route53Settings {
            region: "eu-west-1".into(),
            ..settings_at(sim.base_url())
        },
        SECRET,
    );
    assert!(matches!(
        region.check_account().await,
        Err(ProviderError::Unauthorized(_))
    ));
    let good = client(&sim);
    good.check_account().await.unwrap();
    assert!(!good.auth_condition().holding());
    assert_eq!(h.auth_refusals().values().sum::<u64>(), 3);
}

/// The fault proxy: 5xx on reads are retried; a change whose answer is lost after it
/// took effect is of unknown outcome; garbage XML is a decode error; a hostile huge
/// answer is cut at the cap; a provider that cannot be reached is "not performed".
#[tokio::test]
async fn faults_of_the_way_there() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    let a = h.add_zone("a.example");
    h.add_zone("b.example");
    let proxy = FaultProxy::start(sim.base_url()).await.unwrap();
    h.set_signed_host(Some(proxy.addr().to_string()));
    let c = client_with(&settings_at(proxy.url()), SECRET);
    c.zone_flags().await.unwrap();
    let dnssec = format!("/2013-04-01/hostedzone/{a}/dnssec");

    proxy.add_fault(
        Rule::new(fault_proxy::Fault::Status(503))
            .on(&dnssec)
            .times(2),
    );
    assert_eq!(
        c.dnssec_key("a.example").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert_eq!(proxy.calls(&dnssec), 3);

    proxy.add_fault(
        Rule::new(fault_proxy::Fault::AfterForward {
            status: 502,
            delay: Duration::from_millis(50),
        })
        .on(&format!("/2013-04-01/hostedzone/{a}/enable-dnssec"))
        .times(4),
    );
    let e = c.set_dnssec("a.example", true, &always).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    proxy.clear_faults();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.signing_key("a.example").is_some(), "it took effect");
    // Level-triggered: asked again, it reads the zone signed and sends nothing more.
    let before = h.calls().len();
    c.set_dnssec("a.example", true, &always).await.unwrap();
    assert_eq!(h.calls().len(), before);

    proxy.set_fault(fault_proxy::Fault::Huge(64 << 20));
    let e = c.dnssec_key("b.example").await.unwrap_err();
    assert!(
        matches!(
            e,
            ProviderError::BodyTooLarge { .. } | ProviderError::Transport(_)
        ),
        "{e:?}"
    );
    assert!(
        proxy.streamed_bytes() < 8 << 20,
        "read {} bytes",
        proxy.streamed_bytes()
    );
    proxy.clear_faults();

    h.inject(Fault::next(1, FaultKind::Malformed));
    let e = c.dnssec_key("b.example").await.unwrap_err();
    assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
    h.inject(Fault::next(5, FaultKind::Status(500)));
    let e = c.dnssec_key("b.example").await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Server { status: 500, message } if message.contains("InternalFailure")),
        "{e:?}"
    );
    h.clear_faults();

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let gone = client_with(
        &settings_at(Url::parse(&format!("http://127.0.0.1:{port}")).unwrap()),
        SECRET,
    );
    let e = gone
        .set_dnssec("a.example", true, &always)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::NotPerformed, "{e:?}");
}

/// config.example.toml's Route 53 block, uncommented, is a second account of kind
/// `route53`; a block without a secret, with a KMS key outside us-east-1, with a region
/// for AWS's own endpoint, or with another kind's key is refused naming the key.
#[test]
fn the_example_route53_block_parses_and_bad_ones_name_their_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("# [providers.r53]").expect("the example block");
    let block: String = text[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.starts_with('[') || l.contains(" = "))
        .map(|l| format!("{l}\n"))
        .collect();
    let settings = Settings::parse(&format!("{text}\n{block}"), &path)
        .unwrap_or_else(|e| panic!("{e}\n{block}"));
    let names: Vec<&str> = settings.providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["gcore", "r53"]);
    match &settings.providers[1].options {
        ProviderOptions::Route53(s) => {
            assert_eq!(s.base_url.as_str(), "https://route53.amazonaws.com/");
            assert_eq!(s.region, "us-east-1");
            assert_eq!(s.access_key_id, KeyId::Plain("AKIAIOSFODNN7EXAMPLE".into()));
            assert_eq!(
                s.secret_access_key,
                SecretSource::File("/etc/dnssec-warden/route53-secret-access-key".into())
            );
            assert!(
                s.kms_key_arn
                    .as_deref()
                    .is_some_and(|a| a.contains(":us-east-1:"))
            );
            assert_eq!(Route53Client::KIND, "route53");
        }
        other => panic!("{other:?}"),
    }

    let bad = |keys: &str| {
        let file = format!("{text}\n[providers.r53]\nkind = \"route53\"\n{keys}\n");
        Settings::parse(&file, &path).unwrap_err().to_string()
    };
    let id = "access_key_id = \"AKIAIOSFODNN7EXAMPLE\"";
    let e = bad(id);
    assert!(e.contains("providers.r53.secret_access_key_file"), "{e}");
    let e = bad("secret_access_key_env = \"S\"");
    assert!(e.contains("providers.r53.access_key_id"), "{e}");
    let e = bad(&format!(
        "{id}\nsecret_access_key_env = \"S\"\nkms_key_arn = \"arn:aws:kms:eu-west-1:111122223333:key/x\""
    ));
    assert!(e.contains("kms_key_arn") && e.contains("us-east-1"), "{e}");
    let e = bad(&format!(
        "{id}\nsecret_access_key_env = \"S\"\nregion = \"eu-west-1\""
    ));
    assert!(e.contains("region"), "{e}");
    let e = bad(&format!(
        "{id}\nsecret_access_key_env = \"S\"\napi_token_env = \"T\""
    ));
    assert!(e.contains("api_token_env"), "{e}");
}
