//! The Cloudflare client against the Cloudflare simulator (`lab/src/cloudflare_sim/`),
//! over real HTTP on loopback; its hardening through the fault proxy; its configuration
//! block as config.example.toml shows it.

use std::path::Path;
use std::time::{Duration, Instant};

use dnssec_warden::config::Settings;
use dnssec_warden::dnssec::DigestType;
use dnssec_warden::provider::cloudflare::CloudflareClient;
use dnssec_warden::provider::fleet::ProviderOptions;
use dnssec_warden::provider::registry::Kind;
use dnssec_warden::provider::{
    ErrorClass, KeyAlgorithm, KeyKind, KeyState, NewKey, PermitAnswer, Provider, ProviderError,
    RetryPolicy,
};
use dnssec_warden::secret::{Secret, SecretSource};
use dnssec_warden_lab::cloudflare_sim::{CloudflareOptions, CloudflareSim, RateLimit};
use dnssec_warden_lab::{Fault, FaultKind};
use dnssec_warden_test_support::fault_proxy::{self, FaultProxy, Rule};
use url::Url;

const TOKEN: &str = "cf-test-token-0123456789abcdef";

async fn sim(options: CloudflareOptions) -> CloudflareSim {
    CloudflareSim::start(
        "127.0.0.1:0".parse().unwrap(),
        CloudflareOptions {
            tokens: vec![TOKEN.into()],
            ..options
        },
    )
    .await
    .expect("simulator starts")
}

/// Cloudflare's statuses moving at once: each check may move them.
fn quick() -> CloudflareOptions {
    CloudflareOptions {
        status_delay: Duration::ZERO,
        ..CloudflareOptions::default()
    }
}

/// Retries fast, so that tests of the retry path take milliseconds.
fn quick_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        budget: Duration::from_secs(20),
        ..RetryPolicy::default()
    }
}

fn client_at(base: Url, token: &str, policy: RetryPolicy, timeout: Duration) -> CloudflareClient {
    CloudflareClient::with_policy(base, Secret::new(token.into()), policy, timeout).unwrap()
}

fn client(sim: &CloudflareSim) -> CloudflareClient {
    client_at(
        sim.base_url(),
        TOKEN,
        quick_policy(),
        Duration::from_secs(5),
    )
}

/// The proxy's base URL with Cloudflare's path.
fn through(proxy: &FaultProxy) -> Url {
    proxy.url().join("client/v4").unwrap()
}

fn always<'a>() -> PermitAnswer<'a> {
    Box::pin(async { true })
}

/// A zone through the whole switch: on (`pending`, the key the lab serves, its DS
/// recomputed), `active`, asked off while Cloudflare still sees the DS (refused, still
/// signed, `pending-disabled`), then off once it is `disabled`: DELETE, unsigned.
#[tokio::test]
async fn a_zone_through_on_active_and_off() {
    let sim = sim(CloudflareOptions {
        status_delay: Duration::from_millis(300),
        ..CloudflareOptions::default()
    })
    .await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);

    assert_eq!(
        c.dnssec_key("example.com.").await,
        Err(ProviderError::DnssecDisabled),
        "never on: disabled, modified_on null"
    );
    let switched = c.set_dnssec("example.com.", true, &always).await.unwrap();
    let key = switched.key.expect("the key of the answer");
    assert_eq!(h.dnssec_status("example.com").as_deref(), Some("pending"));
    let served = h.signing_key("example.com").expect("the lab signs it");
    assert_eq!(key.dnskey.public_key, served.dnskey().public_key);
    let ours = key
        .dnskey
        .to_ds("example.com.", DigestType::Sha256)
        .unwrap();
    assert_eq!(key.ds, ours, "the DS is recomputed from the key");
    assert_eq!(c.dnssec_key("example.com").await.unwrap(), key);

    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(h.dnssec_status("example.com").as_deref(), Some("active"));
    assert_eq!(c.dnssec_key("example.com").await.unwrap(), key);

    let e = c
        .set_dnssec("example.com", false, &always)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Conflict(m) if m.contains("pending-disabled")),
        "{e:?}"
    );
    assert!(e.is_refusal());
    assert_eq!(
        h.dnssec_status("example.com").as_deref(),
        Some("pending-disabled")
    );
    assert!(h.signing_key("example.com").is_some(), "still signed");
    assert_eq!(
        c.dnssec_key("example.com").await.unwrap(),
        key,
        "pending-disabled is not off"
    );
    // Asked again while it still sees the DS: no second PATCH, no DELETE.
    assert!(c.set_dnssec("example.com", false, &always).await.is_err());

    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(h.dnssec_status("example.com").as_deref(), Some("disabled"));
    assert_eq!(
        c.dnssec_key("example.com").await.unwrap(),
        key,
        "disabled but not deleted: still signed"
    );
    let off = c.set_dnssec("example.com", false, &always).await.unwrap();
    assert_eq!(off.key, None);
    assert!(h.signing_key("example.com").is_none(), "unsigned now");
    assert_eq!(
        c.dnssec_key("example.com").await,
        Err(ProviderError::DnssecDisabled)
    );

    let calls: Vec<(String, String)> = h
        .calls()
        .into_iter()
        .map(|c| (c.method, c.body.to_string()))
        .collect();
    let id = h.zone_id("example.com").unwrap();
    assert_eq!(
        calls,
        vec![
            ("PATCH".into(), r#"{"status":"active"}"#.into()),
            ("PATCH".into(), r#"{"status":"disabled"}"#.into()),
            ("DELETE".into(), r#""""#.into()),
        ],
        "zone {id}"
    );
}

/// Switching on again after a delete gives the same key: Cloudflare's one key.
#[tokio::test]
async fn every_zone_has_cloudflares_one_key() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("a.example");
    h.add_zone("b.example");
    let c = client(&sim);
    let a = c
        .set_dnssec("a.example", true, &always)
        .await
        .unwrap()
        .key
        .unwrap();
    let b = c
        .set_dnssec("b.example", true, &always)
        .await
        .unwrap()
        .key
        .unwrap();
    assert_eq!(a.dnskey, b.dnskey);
    assert_eq!(a.key_tag(), b.key_tag());
    assert_ne!(a.ds.digest, b.ds.digest, "the DS covers the owner name");
}

/// The zone list is paged by `page`/`per_page` up to `total_pages`; the ids it gives are
/// kept (no search by name afterwards); a zone not in the account is "not found"; a zone
/// deleted and added again is found again under its new id.
#[tokio::test]
async fn zones_are_paged_found_by_name_and_their_ids_kept() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    for i in 0..120 {
        h.add_zone(&format!("z{i:03}.example"));
    }
    let c = client(&sim);
    let zones = c.zone_flags().await.unwrap();
    assert_eq!(zones.len(), 120);
    assert!(
        zones.iter().all(|z| z.dnssec_enabled.is_none()),
        "unknown, not off"
    );
    assert_eq!(h.requests().get("GET /client/v4/zones"), Some(&3));

    let hosted = c.zone("z007.example.").await.unwrap();
    assert_eq!(hosted.name, "z007.example");
    assert_eq!(
        hosted.name_servers,
        Some(vec![
            "ada.ns.cloudflare.com.".into(),
            "bob.ns.cloudflare.com.".into()
        ])
    );
    assert_eq!(
        h.requests().get("GET /client/v4/zones"),
        Some(&3),
        "the id was kept from the listing"
    );

    let fresh = client(&sim);
    fresh.dnssec_key("z008.example").await.unwrap_err();
    assert_eq!(
        h.requests().get("GET /client/v4/zones"),
        Some(&4),
        "found by name once"
    );
    fresh.dnssec_key("z008.example").await.unwrap_err();
    assert_eq!(h.requests().get("GET /client/v4/zones"), Some(&4));

    assert!(matches!(
        c.dnssec_key("absent.example").await,
        Err(ProviderError::NotFound(_))
    ));

    let old = h.zone_id("z009.example").unwrap();
    h.remove_zone("z009.example");
    h.add_zone("z009.example");
    assert_ne!(h.zone_id("z009.example").unwrap(), old);
    c.set_dnssec("z009.example", true, &always).await.unwrap();
    assert_eq!(h.dnssec_status("z009.example").as_deref(), Some("active"));

    h.remove_zone("z010.example");
    assert!(matches!(
        c.zone("z010.example").await,
        Err(ProviderError::NotFound(_))
    ));
}

/// The largest TTL is the records' (automatic is 300 s).
#[tokio::test]
async fn the_largest_ttl_is_the_records() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    assert_eq!(c.largest_ttl("example.com").await.unwrap(), Some(300));
    h.add_record("example.com", "TXT", "example.com", "v=spf1 -all", 7200);
    assert_eq!(c.largest_ttl("example.com").await.unwrap(), Some(7200));
}

/// Rule 5: a DNSSEC object whose fields disagree with its key is never taken, and a
/// status that says nothing of signing (`error`) is unknown, never "off": the switch-off
/// sends nothing.
#[tokio::test]
async fn a_key_that_disagrees_or_an_error_status_is_never_taken() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    c.set_dnssec("example.com", true, &always).await.unwrap();
    h.override_dnssec_fields("example.com", serde_json::json!({"key_tag": 2371}));
    assert!(matches!(
        c.dnssec_key("example.com").await,
        Err(ProviderError::DnssecMismatch {
            field: "key_tag",
            ..
        })
    ));
    h.override_dnssec_fields("example.com", serde_json::json!({}));

    h.set_dnssec_error("example.com", true);
    let e = c.dnssec_key("example.com").await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    let before = h.calls().len();
    let e = c
        .set_dnssec("example.com", false, &always)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    assert_eq!(h.calls().len(), before, "nothing sent on an error status");
}

/// The credentials: a token Cloudflare refuses is `Unauthorized` (`check-config`'s try
/// says so) and the account backs
/// off (the next call not even sent); a zone the token may not touch is a refusal; the
/// key calls are refused before any request; the token appears in no error.
#[tokio::test]
async fn refused_tokens_forbidden_zones_and_key_calls() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    h.add_zone("other.example");

    let bad = client_at(
        sim.base_url(),
        "wrong-token-s3cr3t",
        quick_policy(),
        Duration::from_secs(5),
    );
    let e = bad.check_account().await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Unauthorized(m) if m.contains("10000")),
        "{e:?}"
    );
    assert!(bad.auth_condition().holding());
    let asked = h.requests().values().sum::<u64>();
    let e = bad.zone("example.com").await.unwrap_err();
    assert!(matches!(e, ProviderError::AuthBackoff { .. }), "{e:?}");
    assert_eq!(h.requests().values().sum::<u64>(), asked, "not sent");
    assert!(!e.to_string().contains("s3cr3t"));

    let c = client(&sim);
    c.check_account().await.unwrap();
    c.zone_flags().await.unwrap();
    h.forbid_zone("other.example");
    let e = c.dnssec_key("other.example").await.unwrap_err();
    assert!(matches!(e, ProviderError::Forbidden(_)), "{e:?}");
    assert!(e.is_refusal());
    assert!(
        !c.auth_condition().holding(),
        "the token itself is accepted"
    );

    let asked = h.requests().values().sum::<u64>();
    let key = NewKey {
        kind: KeyKind::Csk,
        algorithm: KeyAlgorithm::EcdsaP256Sha256,
        state: KeyState {
            active: true,
            published: true,
        },
    };
    let e = c.add_key("example.com", key, &always).await.unwrap_err();
    assert!(
        matches!(&e, ProviderError::Invalid(m) if m.contains("Cloudflare manages its own key")),
        "{e:?}"
    );
    assert!(
        c.set_key_state("example.com", "1", key.state, &always)
            .await
            .is_err()
    );
    assert!(c.delete_key("example.com", "1", &always).await.is_err());
    assert_eq!(c.keys("example.com").await, Ok(None));
    assert_eq!(h.requests().values().sum::<u64>(), asked, "nothing asked");
}

/// Cloudflare's own rate limit: every 429's `Retry-After` holds every call of the
/// account, so a burst past the bucket costs one 429 per refill, never a hammering.
#[tokio::test]
async fn the_rate_limit_is_honoured() {
    let sim = sim(CloudflareOptions {
        rate_limit: Some(RateLimit {
            capacity: 3,
            window: Duration::from_secs(3),
        }),
        ..quick()
    })
    .await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    c.zone_flags().await.unwrap();
    let started = Instant::now();
    let calls = (0..5).map(|_| c.dnssec_key("example.com"));
    let results = futures::future::join_all(calls).await;
    for r in &results {
        assert_eq!(r, &Err(ProviderError::DnssecDisabled));
    }
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let limited = h.rate_limited();
    assert!(
        (1..=6).contains(&limited),
        "{limited} answers 429 for 6 requests past a bucket of 3"
    );
}

/// The fault proxy: 5xx and 429 bursts on reads are retried (the `Retry-After` waited);
/// a PATCH whose answer is lost after it took effect, or which hangs past the timeout, is
/// of unknown outcome; slow answers end in the timeout; a provider that cannot be reached
/// is "not performed".
#[tokio::test]
async fn faults_of_the_way_there() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("a.example");
    h.add_zone("b.example");
    let proxy = FaultProxy::start(Url::parse(&format!("http://{}/", sim.addr())).unwrap())
        .await
        .unwrap();
    let c = client_at(
        through(&proxy),
        TOKEN,
        quick_policy(),
        Duration::from_millis(800),
    );
    c.zone_flags().await.unwrap();
    let a = format!(
        "/client/v4/zones/{}/dnssec",
        h.zone_id("a.example").unwrap()
    );

    proxy.add_fault(Rule::new(fault_proxy::Fault::Status(503)).on(&a).times(2));
    assert_eq!(
        c.dnssec_key("a.example").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert_eq!(proxy.calls(&a), 3);

    proxy.add_fault(
        Rule::new(fault_proxy::Fault::retry_after("1"))
            .on(&a)
            .times(2),
    );
    let started = Instant::now();
    assert_eq!(
        c.dnssec_key("a.example").await,
        Err(ProviderError::DnssecDisabled)
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    proxy.add_fault(
        Rule::new(fault_proxy::Fault::AfterForward {
            status: 502,
            delay: Duration::from_millis(50),
        })
        .on(&a)
        .method("PATCH")
        .times(4),
    );
    let e = c.set_dnssec("a.example", true, &always).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    assert!(h.signing_key("a.example").is_some(), "it took effect");
    proxy.clear_faults();

    let b = format!(
        "/client/v4/zones/{}/dnssec",
        h.zone_id("b.example").unwrap()
    );
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::Hang(Duration::from_secs(5)))
            .on(&b)
            .method("PATCH"),
    );
    let e = c.set_dnssec("b.example", true, &always).await.unwrap_err();
    assert!(e.outcome_unknown(), "{e:?}");
    proxy.clear_faults();

    proxy.set_fault(fault_proxy::Fault::SlowDrip(Duration::from_millis(50)));
    let e = c.dnssec_key("b.example").await.unwrap_err();
    assert!(matches!(e, ProviderError::Transport(_)), "{e:?}");
    proxy.clear_faults();

    proxy.set_fault(fault_proxy::Fault::Json(
        200,
        serde_json::json!({"success": false, "errors": [{"code": 1000, "message": "odd"}], "result": null}),
    ));
    let e = c.set_dnssec("b.example", true, &always).await.unwrap_err();
    assert!(matches!(e, ProviderError::ErrorInSuccess { .. }), "{e:?}");
    assert!(e.outcome_unknown());
    proxy.clear_faults();

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let gone = client_at(
        Url::parse(&format!("http://127.0.0.1:{port}/client/v4")).unwrap(),
        TOKEN,
        quick_policy(),
        Duration::from_millis(800),
    );
    let e = gone
        .set_dnssec("a.example", true, &always)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::NotPerformed, "{e:?}");
}

/// The simulator's own faults reach the client as the proxy's do.
#[tokio::test]
async fn the_simulators_faults() {
    let sim = sim(quick()).await;
    let h = sim.handle();
    h.add_zone("example.com");
    let c = client(&sim);
    h.inject(Fault::next(2, FaultKind::Status(502)));
    c.zone_flags().await.unwrap();
    h.inject(Fault::next(1, FaultKind::Malformed));
    let e = c.dnssec_key("example.com").await.unwrap_err();
    assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
}

/// config.example.toml's Cloudflare block, uncommented, is a second account of kind
/// `cloudflare`; a block without a token, with two token sources, or with another
/// kind's key is refused naming the key.
#[test]
fn the_example_cloudflare_block_parses_and_bad_ones_name_their_key() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("# [providers.cf]").expect("the example block");
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
    assert_eq!(names, ["gcore", "cf"]);
    match &settings.providers[1].options {
        ProviderOptions::Cloudflare(s) => {
            assert_eq!(s.base_url.as_str(), "https://api.cloudflare.com/client/v4");
            assert_eq!(
                s.api_token,
                SecretSource::File("/etc/dnssec-warden/cloudflare-token".into())
            );
            assert_eq!(s.max_attempts, 5);
        }
        other => panic!("{other:?}"),
    }

    let bad = |keys: &str| {
        let file = format!("{text}\n[providers.cf]\nkind = \"cloudflare\"\n{keys}\n");
        Settings::parse(&file, &path).unwrap_err().to_string()
    };
    let e = bad("");
    assert!(e.contains("providers.cf.api_token_file"), "{e}");
    let e = bad("api_token_file = \"/a\"\napi_token_env = \"CF_TOKEN\"");
    assert!(e.contains("api_token_file"), "{e}");
    let e = bad("api_token_env = \"CF_TOKEN\"\napi_key_file = \"/a\"");
    assert!(e.contains("api_key_file"), "{e}");
    let e = bad("api_token_env = \"CF_TOKEN\"\nzone_id = \"x\"");
    assert!(e.contains("zone_id"), "{e}");
}
