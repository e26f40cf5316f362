//! The provider client against the provider simulator, over real HTTP on loopback; the
//! hardening tests through the fault proxy of `test-support/src/fault_proxy.rs`.

use std::time::{Duration, Instant};

use dnssec_warden::provider::gcore::Credentials;
use dnssec_warden::provider::gcore::{
    DnssecStatus, GcoreClient, NewZone, ResourceRecord, RrsetBody,
};
use dnssec_warden::provider::{
    ErrorClass, MAX_BODY_BYTES, PROVIDER_REQUESTS_IN_FLIGHT, PermitAnswer, Provider, ProviderError,
    RetryPolicy,
};
use dnssec_warden::secret::Secret;
use dnssec_warden_lab::{Fault, FaultKind, ProviderSim, SimOptions};
use dnssec_warden_test_support::fault_proxy::{self, FaultProxy, Rule};
use serde_json::json;

const KEY: &str = "test-api-key-0123456789";
const USER: &str = "ops@example.com";
const PASSWORD: &str = "correct horse battery staple";

async fn sim(options: SimOptions) -> ProviderSim {
    ProviderSim::start(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            api_keys: vec![KEY.into()],
            users: vec![(USER.into(), PASSWORD.into())],
            ..options
        },
    )
    .await
    .expect("simulator starts")
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

fn client(sim: &ProviderSim, credentials: Credentials) -> GcoreClient {
    GcoreClient::with_policy(
        sim.base_url(),
        credentials,
        quick_policy(),
        Duration::from_secs(5),
    )
    .unwrap()
}

fn api_key_client(sim: &ProviderSim) -> GcoreClient {
    client(sim, Credentials::ApiKey(Secret::new(KEY.into())))
}

fn login_client(sim: &ProviderSim, password: &str) -> GcoreClient {
    client(
        sim,
        Credentials::Login {
            username: USER.into(),
            password: Secret::new(password.into()),
        },
    )
}

fn a_record(addr: &str) -> RrsetBody {
    RrsetBody {
        ttl: 300,
        resource_records: vec![ResourceRecord {
            id: None,
            content: vec![json!(addr)],
            enabled: true,
        }],
    }
}

fn zone(name: &str) -> NewZone {
    NewZone {
        name: name.into(),
        contact: Some("hostmaster@example.com".into()),
        nx_ttl: Some(300),
        ..NewZone::default()
    }
}

#[tokio::test]
async fn zone_and_rrset_calls() {
    let sim = sim(SimOptions::default()).await;
    let c = api_key_client(&sim);

    let created = c.create_zone(&zone("example.com")).await.unwrap();
    assert!(created.id > 0);
    assert!(matches!(
        c.create_zone(&zone("example.com")).await,
        Err(ProviderError::Conflict(m)) if m == "zone is already exists"
    ));

    let z = c.get_zone("example.com.").await.unwrap();
    assert_eq!(z.name, "example.com");
    assert_eq!(z.dnssec_enabled, Some(false));
    assert_eq!(
        z.dnssec_status, None,
        "absent until DNSSEC was first enabled"
    );
    let ns = z.records.iter().find(|r| r.rtype == "NS").expect("apex NS");
    assert_eq!(ns.short_answers.len(), 2);

    let set = c
        .create_rrset(
            "example.com",
            "www.example.com",
            "A",
            &a_record("192.0.2.1"),
        )
        .await
        .unwrap();
    assert_eq!(set.name, "www.example.com");
    assert_eq!(set.resource_records[0].content, vec![json!("192.0.2.1")]);
    assert!(set.resource_records[0].id.is_some());
    assert!(matches!(
        c.create_rrset(
            "example.com",
            "www.example.com.",
            "a",
            &a_record("192.0.2.2")
        )
        .await,
        Err(ProviderError::Conflict(_))
    ));
    assert!(matches!(
        c.create_rrset(
            "example.com",
            "www.example.com",
            "A",
            &a_record("not-an-ip")
        )
        .await,
        Err(ProviderError::Rejected { status: 400, .. })
    ));
    c.put_rrset(
        "example.com",
        "www.example.com",
        "A",
        &a_record("192.0.2.3"),
    )
    .await
    .unwrap();
    let got = c
        .get_rrset("example.com", "www.example.com", "A")
        .await
        .unwrap();
    assert_eq!(got.resource_records[0].content, vec![json!("192.0.2.3")]);
    let all = c.list_rrsets("example.com").await.unwrap();
    assert_eq!(all.len(), 2, "NS and A: {all:?}");
    // The trait speaks the daemon's terms: the apex NS as a comparable set, the largest
    // TTL of every RRset, the listing as names and flags.
    let hosted = Provider::zone(&c, "example.com.").await.unwrap();
    let apex: Vec<String> = ns
        .short_answers
        .iter()
        .filter_map(|v| v.as_str())
        .map(String::from)
        .collect();
    assert_eq!(
        hosted.name_servers,
        Some(dnssec_warden::dns::delegation::ns_set(&apex))
    );
    assert_eq!(hosted.dnssec_enabled, Some(false));
    let largest = all.iter().filter_map(|set| set.ttl).max();
    assert!(largest.is_some());
    assert_eq!(
        Provider::largest_ttl(&c, "example.com").await.unwrap(),
        largest
    );
    let flags = Provider::zone_flags(&c).await.unwrap();
    assert_eq!(flags.len(), 1);
    assert_eq!(
        (flags[0].name.as_str(), flags[0].dnssec_enabled),
        ("example.com", Some(false))
    );
    c.delete_rrset("example.com", "www.example.com", "A")
        .await
        .unwrap();
    assert!(matches!(
        c.get_rrset("example.com", "www.example.com", "A").await,
        Err(ProviderError::NotFound(m)) if m == "record is not found"
    ));

    c.delete_zone("example.com").await.unwrap();
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::NotFound(m)) if m == "zone is not found"
    ));
}

#[tokio::test]
async fn list_zones_follows_every_page() {
    // The server clamps `limit` to 40, below the client's page size: offsets must follow
    // what came back, not what was asked for.
    let sim = sim(SimOptions {
        max_page_limit: 40,
        ..SimOptions::default()
    })
    .await;
    for i in 0..250 {
        assert!(sim.handle().add_zone(&format!("z{i:03}.example")));
    }
    let zones = api_key_client(&sim).list_zones().await.unwrap();
    assert_eq!(zones.len(), 250);
    let mut names: Vec<_> = zones.iter().map(|z| z.name.clone()).collect();
    names.dedup();
    assert_eq!(names.len(), 250, "no zone twice");
}

#[tokio::test]
async fn dnssec_switch_returns_a_checked_real_key() {
    let sim = sim(SimOptions::default()).await;
    let c = api_key_client(&sim);
    c.create_zone(&zone("signed.example")).await.unwrap();
    assert!(matches!(
        c.get_dnssec("signed.example").await,
        Err(ProviderError::DnssecDisabled)
    ));

    let on = c.set_dnssec("signed.example", true).await.unwrap();
    let key = on.key.expect("enabling returns the key");
    assert!(on.message.is_some());
    assert_eq!(key.dnskey.algorithm, 13);
    assert_eq!(key.dnskey.flags, 257);
    assert_eq!(key.dnskey.public_key.len(), 64);
    assert_eq!(
        Some(&key.dnskey),
        sim.handle()
            .dnskey("signed.example")
            .map(dnssec_warden::dnssec::Dnskey::from)
            .as_ref()
    );

    // A GET right after the PATCH gives the same key; so does a second enable.
    let got = c.get_dnssec("signed.example").await.unwrap();
    assert_eq!(got, key);
    let again = c.set_dnssec("signed.example", true).await.unwrap();
    assert_eq!(again.key.as_ref(), Some(&key));
    assert_eq!(
        got.ds_line().to_string(),
        format!(
            "signed.example. 3600 IN DS {} 13 2 {}",
            key.key_tag(),
            dnssec_warden::dnssec::hex_upper(&key.ds.digest)
        )
    );

    let z = c.get_zone("signed.example").await.unwrap();
    assert_eq!(z.dnssec_enabled, Some(true));
    assert_eq!(z.dnssec_status, Some(DnssecStatus::Pending));
    assert!(z.dnssec_status_modified_on.is_some());

    let hint = c.get_parent_ds("signed.example").await.unwrap();
    assert!(!hint.has_valid_parent_ds);
    assert_eq!(hint.parent_zone.as_deref(), Some("example."));
    sim.handle().set_parent_ds_hint("signed.example", true);
    assert!(
        c.get_parent_ds("signed.example")
            .await
            .unwrap()
            .has_valid_parent_ds
    );

    let off = c.set_dnssec("signed.example", false).await.unwrap();
    assert!(off.key.is_none());
    assert!(matches!(
        c.get_dnssec("signed.example").await,
        Err(ProviderError::DnssecDisabled)
    ));
    assert_eq!(
        c.get_zone("signed.example").await.unwrap().dnssec_status,
        Some(DnssecStatus::Disabled)
    );

    // Enabling after a disable makes a new key.
    let renewed = c
        .set_dnssec("signed.example", true)
        .await
        .unwrap()
        .key
        .unwrap();
    assert_ne!(renewed.dnskey, key.dnskey);

    // The simulator logged the switches in order, with their bodies.
    let switches: Vec<bool> = sim
        .handle()
        .calls()
        .iter()
        .filter(|c| c.path == "/dns/v2/zones/signed.example/dnssec")
        .map(|c| c.is_dnssec_on("signed.example"))
        .collect();
    assert_eq!(switches, vec![true, true, false, true]);
    assert!(
        sim.handle()
            .calls()
            .iter()
            .any(|c| c.is_dnssec_off("signed.example."))
    );
}

#[tokio::test]
async fn dnssec_calls_on_a_missing_zone_are_not_found() {
    let sim = sim(SimOptions::default()).await;
    let c = api_key_client(&sim);
    assert!(matches!(
        c.set_dnssec("nowhere.example", true).await,
        Err(ProviderError::NotFound(_))
    ));
    assert!(matches!(
        c.get_dnssec("nowhere.example").await,
        Err(ProviderError::NotFound(_))
    ));
}

#[tokio::test]
async fn the_provider_example_over_http_is_recomputed_exactly() {
    let sim = sim(SimOptions::default()).await;
    let c = api_key_client(&sim);
    c.create_zone(&zone("zxy.com")).await.unwrap();
    c.set_dnssec("zxy.com", true).await.unwrap();
    sim.handle().override_dnssec_fields(
        "zxy.com",
        json!({"algorithm":"13","digest":"135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
         "digest_algorithm":"SHA256","digest_type":"2",
         "ds":"zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
         "flags":257,"key_tag":26191,"key_type":"ECDSAP256SHA256",
         "public_key":"ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA=="}),
    );
    let key = c.get_dnssec("zxy.com").await.unwrap();
    assert_eq!(key.key_tag(), 26191);
    assert_eq!(
        key.ds_line().to_string(),
        "zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07"
    );
}

#[tokio::test]
async fn a_digest_that_does_not_match_the_key_is_a_typed_error() {
    let sim = sim(SimOptions::default()).await;
    let c = api_key_client(&sim);
    c.create_zone(&zone("bad.example")).await.unwrap();
    let key = c
        .set_dnssec("bad.example", true)
        .await
        .unwrap()
        .key
        .unwrap();
    let wrong = "0".repeat(64);
    sim.handle()
        .override_dnssec_fields("bad.example", json!({ "digest": wrong }));
    match c.get_dnssec("bad.example").await {
        Err(ProviderError::DnssecMismatch {
            field,
            provider,
            computed,
        }) => {
            assert_eq!(field, "digest");
            assert_eq!(provider, wrong);
            assert_eq!(computed, dnssec_warden::dnssec::hex_upper(&key.ds.digest));
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    // A `ds` line for another key tag is caught as well.
    sim.handle().override_dnssec_fields(
        "bad.example",
        json!({ "ds": format!("bad.example. 3600 IN DS {} 13 2 {}", key.key_tag().wrapping_add(1), dnssec_warden::dnssec::hex_upper(&key.ds.digest)) }),
    );
    assert!(matches!(
        c.get_dnssec("bad.example").await,
        Err(ProviderError::DnssecMismatch { field: "ds", .. })
    ));
}

#[tokio::test]
async fn wrong_api_key_and_forbidden_zone() {
    let sim = sim(SimOptions::default()).await;
    let wrong = client(
        &sim,
        Credentials::ApiKey(Secret::new("wrong-key-987".into())),
    );
    let err = wrong.get_zone("example.com").await.unwrap_err();
    assert!(matches!(err, ProviderError::Unauthorized(_)), "{err:?}");
    assert!(!err.to_string().contains("wrong-key-987"));
    assert!(!format!("{wrong:?}").contains("wrong-key-987"));

    let c = api_key_client(&sim);
    c.create_zone(&zone("theirs.example")).await.unwrap();
    sim.handle().forbid_zone("theirs.example");
    assert!(matches!(
        c.get_zone("theirs.example").await,
        Err(ProviderError::Forbidden(_))
    ));
}

#[tokio::test]
async fn the_authorization_scheme_is_case_insensitive() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let http = reqwest::Client::new();
    for scheme in ["APIKey", "apikey", "APIKEY"] {
        let status = http
            .get(format!("{}dns/v2/zones/example.com", sim.base_url()))
            .header("Authorization", format!("{scheme} {KEY}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{scheme}");
    }
    let response = http
        .get(format!("{}dns/v2/zones/example.com", sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn login_then_bearer_calls() {
    let sim = sim(SimOptions::default()).await;
    let c = login_client(&sim, PASSWORD);
    c.create_zone(&zone("bearer.example")).await.unwrap();
    c.get_zone("bearer.example").await.unwrap();
    assert_eq!(
        sim.handle().token_counts(),
        (1, 0),
        "one login serves many calls"
    );
}

#[tokio::test]
async fn a_bad_password_is_a_login_failure() {
    let sim = sim(SimOptions::default()).await;
    let c = login_client(&sim, "wrong password");
    match c.get_zone("example.com").await {
        Err(ProviderError::LoginFailed(message)) => {
            assert_eq!(
                message,
                "No active account found with the given credentials."
            );
            assert!(!message.contains("wrong password"));
        }
        other => panic!("expected a login failure, got {other:?}"),
    }
}

#[tokio::test]
async fn an_expired_access_token_is_refreshed_once() {
    let sim = sim(SimOptions {
        access_token_lifetime: Duration::from_millis(300),
        ..SimOptions::default()
    })
    .await;
    sim.handle().add_zone("example.com");
    let c = login_client(&sim, PASSWORD);
    c.get_zone("example.com").await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.get_zone("example.com").await.unwrap();
    assert_eq!(sim.handle().token_counts(), (1, 1));

    // Many requests hit by one expiry renew once, not once each.
    sim.handle().expire_access_tokens();
    let calls = (0..8).map(|_| c.get_zone("example.com"));
    for result in futures::future::join_all(calls).await {
        result.unwrap();
    }
    assert_eq!(sim.handle().token_counts(), (1, 2));
}

#[tokio::test]
async fn a_refused_refresh_falls_back_to_a_new_login() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = login_client(&sim, PASSWORD);
    c.get_zone("example.com").await.unwrap();
    sim.handle().expire_access_tokens();
    sim.handle().expire_refresh_tokens();
    c.get_zone("example.com").await.unwrap();
    assert_eq!(sim.handle().token_counts(), (2, 0));
}

#[tokio::test]
async fn a_refresh_token_works_once() {
    let sim = sim(SimOptions::default()).await;
    let http = reqwest::Client::new();
    let login: serde_json::Value = http
        .post(format!("{}iam/auth/jwt/login", sim.base_url()))
        .json(&json!({"username": USER, "password": PASSWORD}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let refresh = login["refresh"].as_str().unwrap();
    let refresh_url = format!("{}iam/auth/jwt/refresh", sim.base_url());
    let first = http
        .post(&refresh_url)
        .json(&json!({ "refresh": refresh }))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let pair: serde_json::Value = first.json().await.unwrap();
    assert!(pair["access"].is_string() && pair["refresh"].is_string());
    let reused = http
        .post(&refresh_url)
        .json(&json!({ "refresh": refresh }))
        .send()
        .await
        .unwrap();
    assert_eq!(reused.status(), 401);
}

#[tokio::test]
async fn logins_over_five_per_second_get_429() {
    let sim = sim(SimOptions::default()).await;
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = http
            .post(format!("{}iam/auth/jwt/login", sim.base_url()))
            .json(&json!({"username": USER, "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        statuses.push((
            response.status().as_u16(),
            response.headers().get("retry-after").cloned(),
        ));
    }
    assert!(statuses[..5].iter().all(|(s, _)| *s == 200), "{statuses:?}");
    assert_eq!(statuses[5].0, 429);
    assert!(statuses[5].1.is_some(), "429 carries Retry-After");
}

#[tokio::test]
async fn the_client_holds_its_logins_to_five_per_second() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = login_client(&sim, PASSWORD);
    let start = Instant::now();
    for _ in 0..7 {
        sim.handle().expire_access_tokens();
        sim.handle().expire_refresh_tokens();
        c.get_zone("example.com").await.unwrap();
    }
    assert_eq!(sim.handle().token_counts().0, 7);
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "7 logins in {:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn server_errors_are_retried() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    sim.handle().inject(Fault::next(3, FaultKind::Status(503)));
    c.get_zone("example.com").await.unwrap();

    sim.handle().inject(Fault::next(10, FaultKind::Status(502)));
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Server { status: 502, .. })
    ));
    sim.handle().clear_faults();

    sim.handle().inject(Fault::next(1, FaultKind::Status(408)));
    c.get_zone("example.com").await.unwrap();
}

/// A switch is sent, first or again after a failure, only while the caller may (several
/// daemons: its lease on the zone is current); denied, nothing more reaches the provider
/// and the last failure stands.
#[tokio::test]
async fn a_switch_is_sent_only_while_the_caller_may() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    let patches = || {
        sim.handle()
            .calls()
            .iter()
            .filter(|call| call.method == "PATCH")
            .count()
    };
    // Allows the first `allowed` attempts, then denies.
    let asked = AtomicUsize::new(0);
    let allowing = |allowed: usize| {
        asked.store(0, SeqCst);
        let asked = &asked;
        move || -> PermitAnswer<'_> {
            let n = asked.fetch_add(1, SeqCst);
            Box::pin(async move { n < allowed })
        }
    };

    // Denied before the first attempt: not sent at all.
    let permit = allowing(0);
    let denied = Provider::set_dnssec(&c, "example.com", true, &permit).await;
    assert!(
        matches!(denied, Err(ProviderError::NotSent(_))),
        "{denied:?}"
    );
    assert_eq!(denied.unwrap_err().class(), ErrorClass::NotPerformed);
    assert_eq!(asked.load(SeqCst), 1);
    assert!(
        sim.handle().requests().is_empty(),
        "nothing reached the provider: {:?}",
        sim.handle().requests()
    );

    // Allowed once, denied the retry: the first failure stands.
    sim.handle().inject(Fault::next(1, FaultKind::Status(503)));
    let permit = allowing(1);
    let denied = Provider::set_dnssec(&c, "example.com", true, &permit).await;
    assert!(
        matches!(denied, Err(ProviderError::Server { status: 503, .. })),
        "{denied:?}"
    );
    // A retry would have succeeded (the fault hits one request): none was sent.
    assert!(
        !sim.handle().dnssec_enabled("example.com"),
        "not sent again"
    );
    assert_eq!(patches(), 0);
    assert_eq!(asked.load(SeqCst), 2);

    sim.handle().inject(Fault::next(1, FaultKind::Status(503)));
    let permit = allowing(usize::MAX);
    Provider::set_dnssec(&c, "example.com", true, &permit)
        .await
        .unwrap();
    assert_eq!(patches(), 1, "the retry after the failure");
    assert_eq!(asked.load(SeqCst), 2, "asked before each attempt");
    assert!(sim.handle().dnssec_enabled("example.com"));
}

/// The permission is asked once the attempt's turn among the requests in flight has come,
/// the last moment before it leaves: a switch that waited behind hung requests for longer
/// than its lease is not sent at all.
#[tokio::test]
async fn a_switch_asks_to_be_sent_once_its_turn_has_come() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    sim.handle().add_zone("slow.com");
    let c = std::sync::Arc::new(
        GcoreClient::with_policy(
            sim.base_url(),
            Credentials::ApiKey(Secret::new(KEY.into())),
            RetryPolicy {
                max_attempts: 1,
                ..quick_policy()
            },
            Duration::from_millis(600),
        )
        .unwrap(),
    );
    sim.handle()
        .inject(Fault::share(1.0, FaultKind::Hang).on_paths("/dns/v2/zones/slow.com"));
    let hung: Vec<_> = (0..PROVIDER_REQUESTS_IN_FLIGHT)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.get_zone("slow.com").await })
        })
        .collect();
    // Every turn is taken by a request that will time out.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let asked_after = std::sync::Mutex::new(None);
    let deny = || -> PermitAnswer<'_> {
        *asked_after.lock().unwrap() = Some(started.elapsed());
        Box::pin(async { false })
    };
    let denied = Provider::set_dnssec(&*c, "example.com", true, &deny).await;
    assert!(
        matches!(denied, Err(ProviderError::NotSent(_))),
        "{denied:?}"
    );
    let asked_after = asked_after.lock().unwrap().expect("asked");
    assert!(
        asked_after >= Duration::from_millis(300),
        "asked after {asked_after:?}, before its turn had come"
    );
    assert!(!sim.handle().dnssec_enabled("example.com"));
    assert!(
        !sim.handle()
            .requests()
            .keys()
            .any(|k| k.starts_with("PATCH")),
        "{:?}",
        sim.handle().requests()
    );
    for h in hung {
        assert!(h.await.unwrap().is_err(), "the hung request timed out");
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    sim.handle().inject(Fault::next(
        1,
        FaultKind::RateLimit {
            retry_after: Some(1),
        },
    ));
    let start = Instant::now();
    c.get_zone("example.com").await.unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );

    sim.handle()
        .inject(Fault::next(10, FaultKind::RateLimit { retry_after: None }));
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::RateLimited { .. })
    ));
}

#[tokio::test]
async fn other_client_errors_are_not_retried() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    sim.handle().inject(Fault::next(2, FaultKind::Status(422)));
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Rejected { status: 422, .. })
    ));
    // The second injected 422 is still there: the first call made exactly one attempt.
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Rejected { status: 422, .. })
    ));
    c.get_zone("example.com").await.unwrap();
}

#[tokio::test]
async fn a_hanging_provider_times_out_and_is_retried() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = GcoreClient::with_policy(
        sim.base_url(),
        Credentials::ApiKey(Secret::new(KEY.into())),
        quick_policy(),
        Duration::from_millis(300),
    )
    .unwrap();
    sim.handle().inject(Fault::next(1, FaultKind::Hang));
    c.get_zone("example.com").await.unwrap();

    sim.handle().inject(Fault::share(1.0, FaultKind::Hang));
    match c.get_zone("example.com").await {
        Err(ProviderError::Transport(text)) => assert!(text.contains("timed out"), "{text}"),
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_provider_is_a_transport_error() {
    // Bind and drop a listener: nothing answers on that port afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = GcoreClient::with_policy(
        format!("http://127.0.0.1:{port}/").parse().unwrap(),
        Credentials::ApiKey(Secret::new(KEY.into())),
        quick_policy(),
        Duration::from_secs(1),
    )
    .unwrap();
    // Nothing was sent: a definite "not performed", not an unknown outcome.
    match c.get_zone("example.com").await {
        Err(e @ ProviderError::Connect(_)) => {
            assert_eq!(e.class(), ErrorClass::NotPerformed);
            assert!(!e.outcome_unknown());
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_malformed_body_is_a_decode_error_with_an_excerpt() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    sim.handle().inject(Fault::next(1, FaultKind::Malformed));
    match c.get_zone("example.com").await {
        Err(ProviderError::Decode { excerpt, .. }) => {
            assert!(excerpt.starts_with("{\"name\""), "{excerpt}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    // Decoding through the trait object the engine uses gives the same.
    sim.handle().inject(Fault::next(1, FaultKind::Malformed));
    assert!(matches!(
        Provider::dnssec_key(&c, "example.com").await,
        Err(ProviderError::Decode { .. })
    ));
}

// ---- hardening, through the fault proxy -------------------------------------------------

/// A simulator with `zones`, the fault proxy in front of it, and a client of the proxy.
async fn proxied(zones: &[&str]) -> (ProviderSim, FaultProxy) {
    let sim = sim(SimOptions::default()).await;
    for zone in zones {
        assert!(sim.handle().add_zone(zone));
    }
    let proxy = FaultProxy::start(sim.base_url())
        .await
        .expect("proxy starts");
    (sim, proxy)
}

fn proxy_client(proxy: &FaultProxy, credentials: Credentials, policy: RetryPolicy) -> GcoreClient {
    GcoreClient::with_policy(proxy.url(), credentials, policy, Duration::from_secs(5)).unwrap()
}

fn key() -> Credentials {
    Credentials::ApiKey(Secret::new(KEY.into()))
}

fn login() -> Credentials {
    Credentials::Login {
        username: USER.into(),
        password: Secret::new(PASSWORD.into()),
    }
}

/// A second proxy on another loopback address (`127.0.0.2`): where redirects point.
async fn other_host(upstream: &ProviderSim) -> FaultProxy {
    FaultProxy::start_on("127.0.0.2:0".parse().unwrap(), upstream.base_url())
        .await
        .expect("127.0.0.2 is loopback")
}

fn redirect_to(status: u16, target: &FaultProxy) -> fault_proxy::Fault {
    fault_proxy::Fault::Redirect {
        status,
        to: target.url(),
    }
}

/// No redirect is followed: 127.0.0.1 redirects to 127.0.0.2, which redirects to itself
/// once (the hop on which a following client sent the key again). The second host must
/// never see the API key, a bearer token or the password; the client stops at the first
/// 3xx, naming it.
#[tokio::test]
async fn redirects_are_not_followed_and_never_carry_a_credential() {
    let (sim, proxy) = proxied(&["example.com"]).await;
    let second = other_host(&sim).await;
    second.add_fault(Rule::new(redirect_to(307, &second)).times(1));

    // API key.
    proxy.set_fault(redirect_to(302, &second));
    let c = proxy_client(&proxy, key(), quick_policy());
    match c.get_zone("example.com").await {
        Err(e @ ProviderError::Redirected { status: 302, .. }) => {
            assert!(e.to_string().contains("127.0.0.2"), "{e}");
            assert!(e.is_refusal());
        }
        other => panic!("expected a redirect error, got {other:?}"),
    }

    // Login: the DNS call redirected after a good login.
    proxy.clear_faults();
    proxy.add_fault(Rule::new(redirect_to(302, &second)).on("/dns/"));
    let c = proxy_client(&proxy, login(), quick_policy());
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Redirected { .. })
    ));

    // The login call itself, with a 307 that would repeat the POST body with the password.
    proxy.clear_faults();
    proxy.add_fault(Rule::new(redirect_to(307, &second)).on("/iam/"));
    let c = proxy_client(&proxy, login(), quick_policy());
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Redirected { status: 307, .. })
    ));

    for seen in second.requests() {
        for secret in [KEY, PASSWORD, "Bearer", "APIKey"] {
            assert!(
                !seen.carries(secret),
                "{secret:?} reached the second host: {} {}",
                seen.method,
                seen.path
            );
        }
    }
    assert_eq!(second.total_calls(), 0, "no redirect is followed at all");
}

/// A 429 with `Retry-After: 2` for one zone holds every zone's call until then.
#[tokio::test]
async fn a_retry_after_holds_every_call_of_the_client() {
    let zones = ["a.example", "b.example", "c.example", "d.example"];
    let (_sim, proxy) = proxied(&zones).await;
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::retry_after("2"))
            .on("/dns/")
            .times(1),
    );
    let c = proxy_client(&proxy, key(), quick_policy());
    let start = Instant::now();
    let first = async { c.get_zone("a.example").await };
    let others = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let calls = zones[1..].iter().map(|z| c.get_zone(z));
        let results = futures::future::join_all(calls).await;
        (results, start.elapsed())
    };
    let watch = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        proxy.total_calls()
    };
    let (first, (others, others_done), asked_by_1500ms) = tokio::join!(first, others, watch);
    first.unwrap();
    for result in others {
        result.unwrap();
    }
    assert_eq!(
        asked_by_1500ms, 1,
        "while Retry-After holds, no zone asks again"
    );
    assert!(others_done >= Duration::from_secs(2), "{others_done:?}");
    assert_eq!(proxy.total_calls(), 5, "one 429, then each zone once");
}

/// A hold beyond the call's budget (an HTTP-date 30 s ahead) fails at once, as
/// "rate limited until T", without asking the provider.
#[tokio::test]
async fn a_hold_beyond_the_budget_fails_fast_without_asking() {
    let (_sim, proxy) = proxied(&["a.example", "b.example"]).await;
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::retry_after(&fault_proxy::http_date_in(
            30,
        )))
        .on("/dns/")
        .times(1),
    );
    let policy = RetryPolicy {
        budget: Duration::from_secs(2),
        ..quick_policy()
    };
    let c = proxy_client(&proxy, key(), policy);
    assert!(matches!(
        c.get_zone("a.example").await,
        Err(ProviderError::RateLimited { .. })
    ));
    assert_eq!(proxy.total_calls(), 1);
    let start = Instant::now();
    match c.get_zone("b.example").await {
        Err(e @ ProviderError::RateLimitedUntil { .. }) => {
            assert!(e.to_string().contains("until"), "{e}");
            assert_eq!(e.class(), ErrorClass::NotPerformed);
        }
        other => panic!("expected a fast rate-limit error, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(
        proxy.total_calls(),
        1,
        "the gated call never reached the server"
    );
}

/// An endless answer (256 MiB, no Content-Length) stops at the cap, for API calls
/// and for the login call; far less than the whole body is taken from the server.
#[tokio::test]
async fn huge_answers_stop_at_the_cap() {
    let (_sim, proxy) = proxied(&["example.com"]).await;
    proxy.set_fault(fault_proxy::Fault::Huge(256 << 20));
    let c = proxy_client(&proxy, key(), quick_policy());
    match c.get_zone("example.com").await {
        Err(e @ ProviderError::BodyTooLarge { .. }) => {
            assert!(e.to_string().contains(&MAX_BODY_BYTES.to_string()), "{e}");
            assert!(e.outcome_unknown());
        }
        other => panic!("expected the cap error, got {other:?}"),
    }
    assert!(
        proxy.streamed_bytes() < 32 << 20,
        "read {} bytes",
        proxy.streamed_bytes()
    );

    proxy.clear_faults();
    proxy.add_fault(Rule::new(fault_proxy::Fault::Huge(256 << 20)).on("/iam/auth/jwt/login"));
    let c = proxy_client(&proxy, login(), quick_policy());
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::BodyTooLarge { .. })
    ));
}

/// Answers with every optional field `null`, then without them: nothing breaks,
/// and a zone whose `dnssec_enabled` is missing is unknown, not "off".
#[tokio::test]
async fn null_laden_and_missing_fields_do_not_break_us() {
    let (sim, proxy) = proxied(&["a.example", "b.example"]).await;
    let c = proxy_client(&proxy, key(), quick_policy());
    c.create_rrset("a.example", "www.a.example", "A", &a_record("192.0.2.1"))
        .await
        .unwrap();
    c.set_dnssec("b.example", true).await.unwrap();
    let optional = [
        "dnssec_enabled",
        "records",
        "short_answers",
        "warnings",
        "enabled",
        "ttl",
        "updated_at",
        "dnssec_status",
        "resource_records",
    ];
    for (round, fault) in [
        fault_proxy::Fault::null_fields(&optional),
        fault_proxy::Fault::remove_fields(&optional),
    ]
    .into_iter()
    .enumerate()
    {
        proxy.set_fault(fault.clone());
        let zones = c.list_zones().await.unwrap();
        assert_eq!(zones.len(), 2 + round, "{fault:?}");
        assert!(
            zones.iter().all(|z| z.dnssec_enabled.is_none()),
            "{zones:?}"
        );
        let z = c.get_zone("b.example").await.unwrap();
        assert_eq!(z.dnssec_enabled, None, "unknown, never off");
        let sets = c.list_rrsets("a.example").await.unwrap();
        assert!(sets.iter().all(|s| s.ttl.is_none()), "{sets:?}");
        assert_eq!(
            dnssec_warden::provider::gcore::Rrset::largest_ttl(&sets),
            None,
            "an unknown TTL never bounds a wait as 0"
        );
        let set = c
            .get_rrset("a.example", "www.a.example", "A")
            .await
            .unwrap();
        assert_eq!(set.ttl, None);
        let created = c.create_zone(&zone(&format!("n{round}.example"))).await;
        assert!(created.unwrap().warnings.is_empty());
    }
    proxy.clear_faults();
    assert_eq!(
        c.get_zone("b.example").await.unwrap().dnssec_enabled,
        Some(true)
    );
    drop(sim);
}

/// One zone entry that cannot be read (no name) does not hide the others.
#[tokio::test]
async fn one_unreadable_zone_does_not_fail_the_listing() {
    let (_sim, proxy) = proxied(&["a.example", "b.example", "c.example"]).await;
    let c = proxy_client(&proxy, key(), quick_policy());
    // Every `name` nulled: every entry is unreadable, which is an error, not "no zones".
    proxy.set_fault(fault_proxy::Fault::null_fields(&["name"]));
    assert!(matches!(
        c.list_zones().await,
        Err(ProviderError::Decode { .. })
    ));
    // One entry broken: the other two are listed.
    proxy.set_fault(fault_proxy::Fault::Json(
        200,
        json!({"zones": [
            {"name": "a.example", "dnssec_enabled": true},
            {"dnssec_enabled": false},
            {"name": "c.example", "dnssec_enabled": null, "records": null}
        ], "total_amount": 3}),
    ));
    let zones = c.list_zones().await.unwrap();
    let names: Vec<_> = zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["a.example", "c.example"]);
}

/// A refresh answer with `access` alone is used, and the refresh token in hand is
/// kept for the next renewal.
#[tokio::test]
async fn a_refresh_answer_with_access_only_keeps_the_refresh_token() {
    let (sim, proxy) = proxied(&["example.com"]).await;
    let c = proxy_client(&proxy, login(), quick_policy());
    c.get_zone("example.com").await.unwrap();
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::remove_fields(&["refresh"]))
            .on("/iam/auth/jwt/refresh")
            .times(1),
    );
    sim.handle().expire_access_tokens();
    c.get_zone("example.com").await.unwrap();
    assert_eq!(
        sim.handle().token_counts(),
        (1, 1),
        "refreshed, no new login"
    );

    // The next renewal sends the same refresh token again (the simulator, whose tokens
    // are single-use, refuses it, so the client logs in).
    sim.handle().expire_access_tokens();
    c.get_zone("example.com").await.unwrap();
    let refreshes: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.path == "/iam/auth/jwt/refresh")
        .map(|r| r.body)
        .collect();
    assert_eq!(refreshes.len(), 2);
    assert_eq!(refreshes[0], refreshes[1], "the refresh token was kept");
    assert_eq!(sim.handle().token_counts(), (2, 1));
}

/// A refresh answer that cannot be read means a new login, not a failed call.
#[tokio::test]
async fn an_unreadable_refresh_answer_means_a_new_login() {
    let (sim, proxy) = proxied(&["example.com"]).await;
    let c = proxy_client(&proxy, login(), quick_policy());
    c.get_zone("example.com").await.unwrap();
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::Malformed)
            .on("/iam/auth/jwt/refresh")
            .times(1),
    );
    sim.handle().expire_access_tokens();
    c.get_zone("example.com").await.unwrap();
    assert_eq!(sim.handle().token_counts().0, 2, "logged in again");
}

/// Every call says `Accept: application/json`, login and refresh included.
#[tokio::test]
async fn every_call_accepts_json() {
    let (sim, proxy) = proxied(&["example.com"]).await;
    let c = proxy_client(&proxy, login(), quick_policy());
    c.get_zone("example.com").await.unwrap();
    sim.handle().expire_access_tokens();
    c.set_dnssec("example.com", true).await.unwrap();
    c.list_zones().await.unwrap();
    let seen = proxy.requests();
    let paths: Vec<_> = seen.iter().map(|r| r.path.as_str()).collect();
    assert!(paths.contains(&"/iam/auth/jwt/login"), "{paths:?}");
    assert!(paths.contains(&"/iam/auth/jwt/refresh"), "{paths:?}");
    for r in &seen {
        assert_eq!(
            r.headers.get("accept").and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{} {}",
            r.method,
            r.path
        );
    }
}

/// The provider refuses "DNSSEC off" with 409 while its own scan sees a DS. That
/// is a refusal (try again later), never success, and the client never adds
/// `force_disable`.
#[tokio::test]
async fn a_409_on_dnssec_off_is_a_refusal_and_never_forced() {
    let sim = sim(SimOptions {
        refuse_disable_with_parent_ds: true,
        ..SimOptions::default()
    })
    .await;
    let c = api_key_client(&sim);
    c.create_zone(&zone("held.example")).await.unwrap();
    c.set_dnssec("held.example", true).await.unwrap();
    sim.handle().set_parent_ds_hint("held.example", true);
    match c.set_dnssec("held.example", false).await {
        Err(e @ ProviderError::Conflict(_)) => {
            assert_eq!(e.class(), ErrorClass::Refused);
            assert!(e.is_refusal() && !e.outcome_unknown() && !e.is_transient());
        }
        other => panic!("expected a 409 refusal, got {other:?}"),
    }
    assert!(sim.handle().dnssec_enabled("held.example"), "still on");
    let patches: Vec<_> = sim
        .handle()
        .calls()
        .into_iter()
        .filter(|c| c.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 2, "the 409 was not retried");
    assert_eq!(patches[1].status, 409);
    assert_eq!(
        patches[1].body,
        json!({"enabled": false}),
        "no force_disable"
    );
}

/// A 2xx whose body is `{"error": …}` is an error with an unknown outcome, never
/// success; so is a 5xx on the PATCH and malformed JSON in a 2xx; a 404 is "not found".
#[tokio::test]
async fn outcome_classes_of_provider_answers() {
    let (_sim, proxy) = proxied(&["example.com"]).await;
    let c = proxy_client(&proxy, key(), quick_policy());

    proxy.set_fault(fault_proxy::Fault::Json(
        200,
        json!({"error": "internal failure, try later"}),
    ));
    match c.set_dnssec("example.com", false).await {
        Err(e @ ProviderError::ErrorInSuccess { status: 200, .. }) => {
            assert!(e.to_string().contains("internal failure"), "{e}");
            assert!(e.outcome_unknown());
        }
        other => panic!("a 200 with an error is not success: {other:?}"),
    }
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::ErrorInSuccess { .. })
    ));

    proxy.set_fault(fault_proxy::Fault::Status(502));
    let e = c.set_dnssec("example.com", true).await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Server { status: 502, .. }),
        "{e:?}"
    );
    assert!(e.outcome_unknown());

    proxy.set_fault(fault_proxy::Fault::Malformed);
    let e = c.set_dnssec("example.com", true).await.unwrap_err();
    assert!(matches!(e, ProviderError::Decode { .. }), "{e:?}");
    assert!(e.outcome_unknown());

    proxy.set_fault(fault_proxy::Fault::Status(422));
    let e = c.set_dnssec("example.com", true).await.unwrap_err();
    assert!(e.is_refusal(), "{e:?}");

    proxy.clear_faults();
    let e = c.set_dnssec("nowhere.example", false).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::NotFound, "{e:?}");
    assert!(!e.outcome_unknown());
}

/// However many calls wait, the client has at most `PROVIDER_REQUESTS_IN_FLIGHT` requests
/// at the provider at once (the engine steps 64 zones together).
#[tokio::test]
async fn the_client_keeps_its_requests_in_flight_bounded() {
    let (_sim, proxy) = proxied(&["example.com"]).await;
    let policy = RetryPolicy {
        max_attempts: 1,
        ..quick_policy()
    };
    let c = GcoreClient::with_policy(proxy.url(), key(), policy, Duration::from_secs(5)).unwrap();
    proxy.set_fault(fault_proxy::Fault::Hang(Duration::from_millis(300)));
    let calls = (0..3 * PROVIDER_REQUESTS_IN_FLIGHT).map(|_| c.get_zone("example.com"));
    let results = futures::future::join_all(calls).await;
    assert!(
        results.iter().all(Result::is_err),
        "every call met the hang"
    );
    assert_eq!(proxy.total_calls(), 3 * PROVIDER_REQUESTS_IN_FLIGHT);
    assert_eq!(
        proxy.peak_in_flight(),
        PROVIDER_REQUESTS_IN_FLIGHT,
        "no more at once, and that many while calls wait"
    );
}

/// Faults of the proxy the client must survive: a hang and a slow drip end in the
/// client's timeout (outcome unknown), a 401 after N calls is an authorization error.
#[tokio::test]
async fn hangs_drips_and_late_401s() {
    let (_sim, proxy) = proxied(&["example.com"]).await;
    let policy = RetryPolicy {
        max_attempts: 2,
        ..quick_policy()
    };
    let c =
        GcoreClient::with_policy(proxy.url(), key(), policy, Duration::from_millis(400)).unwrap();

    proxy.set_fault(fault_proxy::Fault::Hang(Duration::from_secs(5)));
    let start = Instant::now();
    let e = c.get_zone("example.com").await.unwrap_err();
    assert!(
        matches!(e, ProviderError::Transport(ref t) if t.contains("timed out")),
        "{e:?}"
    );
    assert!(e.outcome_unknown());
    assert!(start.elapsed() < Duration::from_secs(3));

    proxy.set_fault(fault_proxy::Fault::SlowDrip(Duration::from_millis(50)));
    let e = c.get_zone("example.com").await.unwrap_err();
    assert!(matches!(e, ProviderError::Transport(_)), "{e:?}");
    assert!(e.outcome_unknown());
    assert!(proxy.streamed_bytes() < 40, "{}", proxy.streamed_bytes());

    proxy.set_fault(fault_proxy::Fault::UnauthorizedAfter(2));
    c.get_zone("example.com").await.unwrap();
    c.get_zone("example.com").await.unwrap();
    let e = c.get_zone("example.com").await.unwrap_err();
    assert!(matches!(e, ProviderError::Unauthorized(_)), "{e:?}");
    assert_eq!(proxy.calls("/dns/v2/zones/example.com"), 7);
}

/// The "flipped behind the daemon's back" helper switches the simulator directly.
#[tokio::test]
async fn dnssec_flipped_behind_the_clients_back() {
    let (sim, proxy) = proxied(&["example.com"]).await;
    assert_eq!(
        proxy
            .flip_dnssec_upstream(KEY, "example.com.", true)
            .await
            .unwrap(),
        200
    );
    assert!(sim.handle().dnssec_enabled("example.com"));
    assert_eq!(proxy.total_calls(), 0, "not through the proxy");
    let c = proxy_client(&proxy, key(), quick_policy());
    c.get_dnssec("example.com").await.unwrap();
    fault_proxy::flip_dnssec(&sim.base_url(), KEY, "example.com", false)
        .await
        .unwrap();
    assert!(matches!(
        c.get_dnssec("example.com").await,
        Err(ProviderError::DnssecDisabled)
    ));
}

/// API requests (not logins or refreshes) the simulator has had.
fn dns_requests(sim: &ProviderSim) -> u64 {
    sim.handle()
        .requests()
        .iter()
        .filter(|(k, _)| k.contains("/dns/"))
        .map(|(_, n)| n)
        .sum()
}

/// An account revoked while the client runs (every call, refresh and
/// login refused) is asked with exponential backoff, not at the login limit: calls meanwhile
/// fail at once, unsent, and the daemon-wide condition holds until an answer accepts the
/// credentials again.
#[tokio::test]
async fn a_revoked_account_is_asked_with_backoff() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = login_client(&sim, PASSWORD);
    c.get_zone("example.com").await.unwrap();
    assert!(!c.auth_condition().holding());
    sim.handle().revoke_user(USER);
    sim.handle().reset_requests();
    let (logins_before, refreshes_before) = sim.handle().auth_attempts();
    let start = Instant::now();
    let (mut unsent, mut refused) = (0, 0);
    // As fast as a busy engine asks, for 3.5 s.
    while start.elapsed() < Duration::from_millis(3500) {
        match c.get_zone("example.com").await {
            Err(ProviderError::AuthBackoff { .. }) => unsent += 1,
            Err(ProviderError::Unauthorized(_) | ProviderError::LoginFailed(_)) => refused += 1,
            other => panic!("{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (logins, refreshes) = sim.handle().auth_attempts();
    let (logins, refreshes) = (logins - logins_before, refreshes - refreshes_before);
    let api: u64 = dns_requests(&sim);
    // Tried at 0, 1 and 3 s (waits of 1, 2, 4 s): the first try one call, one refresh
    // and one login; each later one a login.
    assert!(refused <= 3, "{refused} tries");
    assert!(logins <= 3, "{logins} logins in 3.5 s");
    assert!(refreshes <= 1, "{refreshes} refreshes in 3.5 s");
    assert!(api <= 1, "{api} API calls in 3.5 s");
    assert!(unsent > 100, "calls meanwhile fail at once ({unsent})");
    assert!(c.auth_condition().holding());
    match c.get_zone("example.com").await {
        Err(e @ ProviderError::AuthBackoff { .. }) => {
            assert_eq!(e.class(), ErrorClass::NotPerformed);
            assert!(e.to_string().contains("refuses this account"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

/// The same with an API key that the provider stops accepting: one 401, then backoff; an
/// accepted answer ends it at once.
#[tokio::test]
async fn a_refused_api_key_is_asked_with_backoff_and_recovers() {
    let sim = sim(SimOptions::default()).await;
    sim.handle().add_zone("example.com");
    let c = api_key_client(&sim);
    sim.handle()
        .inject(Fault::share(1.0, FaultKind::Status(401)).on_paths("/dns/"));
    sim.handle().reset_requests();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        let _ = c.get_zone("example.com").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let api = dns_requests(&sim);
    assert!(api <= 2, "{api} API calls in 1.5 s");
    assert!(c.auth_condition().holding());
    sim.handle().clear_faults();
    tokio::time::sleep(Duration::from_secs(3)).await;
    c.get_zone("example.com").await.unwrap();
    assert!(!c.auth_condition().holding());
}

/// Safety rule 11: a PATCH forwarded to the provider (it took effect)
/// and answered 502; before the retry, another zone's 429 arms the shared `Retry-After`
/// hold beyond the call's budget. The call must stay "outcome unknown", never "not
/// sent"; so must one whose retry is refused (409) after a 502, for neither proves the
/// first attempt took no effect. A read keeps its own answer.
#[tokio::test]
async fn an_attempt_that_was_sent_keeps_the_call_unknown_whatever_follows() {
    let (sim, proxy) = proxied(&["a.example", "b.example"]).await;
    let policy = RetryPolicy {
        budget: Duration::from_secs(5),
        ..quick_policy()
    };
    let c = proxy_client(&proxy, key(), policy);
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::AfterForward {
            status: 502,
            delay: Duration::from_millis(600),
        })
        .on("/dns/v2/zones/a.example/dnssec")
        .times(1),
    );
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::retry_after("30"))
            .on("/dns/v2/zones/b.example")
            .times(1),
    );
    let switch = c.set_dnssec("a.example", true);
    let other = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.get_zone("b.example").await
    };
    let (switched, other) = tokio::join!(switch, other);
    assert!(
        matches!(other, Err(ProviderError::RateLimited { .. })),
        "{other:?}"
    );
    let e = switched.expect_err("the answer was a 502, the retry held");
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    assert!(e.outcome_unknown() && !e.is_refusal(), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("502") && !text.contains("not sent"), "{text}");
    assert!(sim.handle().dnssec_enabled("a.example"), "it took effect");
    assert_eq!(proxy.calls("/dns/v2/zones/a.example/dnssec"), 1);

    // A 409 on the retry after a 502 (the hold has not passed: a client of its own).
    let c = proxy_client(&proxy, key(), quick_policy());
    proxy.clear_faults();
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::AfterForward {
            status: 502,
            delay: Duration::ZERO,
        })
        .on("/dns/v2/zones/a.example/dnssec")
        .times(1),
    );
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::Status(409))
            .on("/dns/v2/zones/a.example/dnssec")
            .times(1),
    );
    let e = c.set_dnssec("a.example", false).await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unknown, "{e:?}");
    assert!(e.to_string().contains("409"), "{e}");
    assert!(!sim.handle().dnssec_enabled("a.example"), "it took effect");

    // A read has no effect to keep unknown: a 404 after a 502 is "not found".
    proxy.add_fault(
        Rule::new(fault_proxy::Fault::Status(502))
            .on("/dns/v2/zones/nowhere.example")
            .times(1),
    );
    let e = c.get_zone("nowhere.example").await.unwrap_err();
    assert_eq!(e.class(), ErrorClass::NotFound, "{e:?}");
}

/// The Gcore API exposes no keys: a rollover there is the provider's own. The key calls
/// are refused with that reason before any request through the account's client (and its
/// dispatch); the listing says "none" without asking. Through the fleet, only the zone's
/// holder is looked up first (reads), as for every change (rule 13).
#[tokio::test]
async fn the_key_calls_are_refused_before_any_request() {
    use dnssec_warden::provider::fleet::{Client, Providers};
    use dnssec_warden::provider::{KeyAlgorithm, KeyKind, KeyState, NewKey};
    fn allowed() -> PermitAnswer<'static> {
        Box::pin(async { true })
    }
    let sim = sim(SimOptions::default()).await;
    let proxy = FaultProxy::start(sim.base_url()).await.unwrap();
    let gcore = GcoreClient::with_policy(
        proxy.url(),
        Credentials::ApiKey(Secret::new(KEY.into())),
        quick_policy(),
        Duration::from_secs(5),
    )
    .unwrap();
    let key = NewKey {
        kind: KeyKind::Csk,
        algorithm: KeyAlgorithm::EcdsaP256Sha256,
        state: KeyState {
            active: true,
            published: true,
        },
    };
    let refused = |zone: &str, r: Result<(), ProviderError>| {
        let e = r.unwrap_err();
        assert!(
            matches!(&e, ProviderError::Invalid(m) if m.contains("the Gcore API exposes no keys") && m.contains(zone)),
            "{e:?}"
        );
        assert_eq!(e.class(), ErrorClass::NotPerformed);
    };
    let client = Client::from(gcore);
    let zone = "ex.test";
    assert_eq!(Provider::keys(&client, zone).await, Ok(None));
    refused(
        zone,
        Provider::add_key(&client, zone, key, &allowed)
            .await
            .map(drop),
    );
    refused(
        zone,
        Provider::set_key_state(&client, zone, "1", key.state, &allowed).await,
    );
    refused(
        zone,
        Provider::delete_key(&client, zone, "1", &allowed).await,
    );
    assert_eq!(proxy.total_calls(), 0, "nothing asked of the provider");

    let fleet = Providers::new(vec![("gcore".to_string(), client)]);
    let zone = "keys.test.";
    assert!(sim.handle().add_zone(zone));
    refused(
        zone,
        Provider::add_key(&fleet, zone, key, &allowed)
            .await
            .map(drop),
    );
    let methods: Vec<String> = proxy.requests().into_iter().map(|r| r.method).collect();
    assert!(methods.iter().all(|m| m == "GET"), "{methods:?}");
}
