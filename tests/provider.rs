//! The provider client against the provider simulator, over real HTTP on loopback.

use std::time::{Duration, Instant};

use dnssec_warden::config::Credentials;
use dnssec_warden::lab::{Fault, FaultKind, ProviderSim, SimOptions};
use dnssec_warden::provider::{
    DnssecStatus, GcoreClient, NewZone, Provider, ProviderError, ResourceRecord, RetryPolicy,
    RrsetBody,
};
use dnssec_warden::secret::Secret;
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
        sim.handle().dnskey("signed.example").as_ref()
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
    assert!(matches!(
        c.get_zone("example.com").await,
        Err(ProviderError::Transport(_))
    ));
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
        Provider::get_dnssec(&c, "example.com").await,
        Err(ProviderError::Decode { .. })
    ));
}
