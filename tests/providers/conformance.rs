//! The Cloudflare and Route 53 clients against their simulators, every body of the
//! lifecycle recorded both ways (the client's requests, the simulator's answers) and held
//! to the providers' own published definitions by lab/conformance's checkers: the official
//! `cloudflare` library's models and botocore's Route 53 service model, installed by
//! lab/conformance/setup.sh.
//!
//! `DNSSEC_WARDEN_CONFORMANCE_PYTHON` names the venv's python; without it these tests skip
//! and say so, unless `DNSSEC_WARDEN_REQUIRE_CONFORMANCE` is set (tests/run.sh sets both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use dnssec_warden::provider::cloudflare::CloudflareClient;
use dnssec_warden::provider::route53::{Route53Client, Route53Settings};
use dnssec_warden::provider::{PermitAnswer, Provider, RetryPolicy};
use dnssec_warden::secret::Secret;
use dnssec_warden_lab::cloudflare_sim::{CloudflareOptions, CloudflareSim};
use dnssec_warden_lab::exchange_log::Exchange;
use dnssec_warden_lab::route53_sim::{Route53Options, Route53Sim};
use dnssec_warden_lab::{Fault, FaultKind};
use tokio::io::AsyncWriteExt;

const CF_TOKEN: &str = "cf-test-token-0123456789abcdef";
const KEY_ID: &str = "AKIALABEXAMPLE000001";
const SECRET: &str = "lab/Secret+Access+Key/0123456789abcdefghij";
const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/0f1e2d3c-lab";

/// The venv's python, or `None` (the test skips) when none is named and none required.
fn python() -> Option<PathBuf> {
    let required = std::env::var_os("DNSSEC_WARDEN_REQUIRE_CONFORMANCE").is_some();
    match std::env::var_os("DNSSEC_WARDEN_CONFORMANCE_PYTHON") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.exists(),
                "DNSSEC_WARDEN_CONFORMANCE_PYTHON names {}, which does not exist (bash lab/conformance/setup.sh VENV makes it)",
                path.display()
            );
            Some(path)
        }
        _ => {
            assert!(
                !required,
                "DNSSEC_WARDEN_REQUIRE_CONFORMANCE is set but DNSSEC_WARDEN_CONFORMANCE_PYTHON names no python (bash lab/conformance/setup.sh VENV, then VENV/bin/python)"
            );
            eprintln!(
                "skipped: DNSSEC_WARDEN_CONFORMANCE_PYTHON is not set (bash lab/conformance/setup.sh VENV makes the checkers' venv)"
            );
            None
        }
    }
}

fn checker(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("lab/conformance")
        .join(name)
}

/// Runs a checker with `args`, `body` on its stdin: its exit status and its lines.
async fn run_checker(python: &Path, script: &str, args: &[String], body: &[u8]) -> (i32, String) {
    let mut child = tokio::process::Command::new(python)
        .arg(checker(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} {script} starts: {e}", python.display()));
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(body).await.expect("the body is written");
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{script} {args:?} answers within 120 s"))
        .expect("the checker runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

/// One body to check: the checker's arguments and the body.
struct Check {
    args: Vec<String>,
    body: Vec<u8>,
    what: String,
}

/// Checks each of `checks`, the first and the last distinct body of each argument list
/// (a paged list's first and last page; one run of the checker costs about a second of
/// CPU), and fails naming every body that does not conform.
async fn check_all(python: &Path, script: &str, checks: Vec<Check>) {
    let mut by_args: BTreeMap<Vec<String>, Vec<Check>> = BTreeMap::new();
    for check in checks {
        let same = by_args.entry(check.args.clone()).or_default();
        if !same.iter().any(|c| c.body == check.body) {
            same.push(check);
        }
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for (args, mut same) in by_args {
        let keep: Vec<Check> = if same.len() > 2 {
            let last = same.pop().expect("more than two");
            vec![same.swap_remove(0), last]
        } else {
            same
        };
        for check in keep {
            let (status, lines) = run_checker(python, script, &args, &check.body).await;
            checked += 1;
            if status != 0 {
                failures.push(format!(
                    "{script} {} (exit {status}) on {}:\n{lines}\nbody: {}",
                    args.join(" "),
                    check.what,
                    String::from_utf8_lossy(&check.body)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} bodies do not conform:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("{script}: {checked} bodies conform");
}

async fn self_test(python: &Path, script: &str) {
    let (status, lines) = run_checker(python, script, &["--self-test".into()], b"").await;
    assert_eq!(status, 0, "{script} --self-test:\n{lines}");
}

fn always<'a>() -> PermitAnswer<'a> {
    Box::pin(async { true })
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

fn what(e: &Exchange) -> String {
    match &e.query {
        Some(q) => format!("{} {}?{q} ({})", e.method, e.path, e.status),
        None => format!("{} {} ({})", e.method, e.path, e.status),
    }
}

// ---- Cloudflare ----------------------------------------------------------------------

/// The checker's operation for a Cloudflare exchange, by method and path shape.
fn cloudflare_operation(e: &Exchange) -> Option<&'static str> {
    let rest = e.path.strip_prefix("/client/v4/zones")?;
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    Some(match (e.method.as_str(), parts.as_slice()) {
        ("GET", []) => "zones.list",
        ("GET", [_]) => "zones.get",
        ("GET", [_, "dnssec"]) => "dnssec.get",
        ("PATCH", [_, "dnssec"]) => "dnssec.edit",
        ("DELETE", [_, "dnssec"]) => "dnssec.delete",
        ("GET", [_, "dns_records"]) => "dns_records.list",
        _ => return None,
    })
}

/// Every body of the lifecycle: zones listed over pages and found by name, DNSSEC read,
/// switched on and off (PATCH and DELETE), records read, and failures (a refused DELETE,
/// a zone the token may not touch, an injected 500), each held to the library's models.
#[tokio::test]
async fn cloudflare_bodies_both_ways_conform() {
    let Some(python) = python() else { return };
    self_test(&python, "cloudflare_check.py").await;

    let sim = CloudflareSim::start(
        "127.0.0.1:0".parse().unwrap(),
        CloudflareOptions {
            tokens: vec![CF_TOKEN.into()],
            status_delay: Duration::ZERO,
            ..CloudflareOptions::default()
        },
    )
    .await
    .expect("simulator starts");
    let h = sim.handle();
    h.record_exchanges();
    for i in 0..45 {
        h.add_zone(&format!("z{i:02}.example"));
    }
    h.add_zone("example.com");
    h.add_zone("forbidden.example");
    h.forbid_zone("forbidden.example");
    let c = CloudflareClient::with_policy(
        sim.base_url(),
        Secret::new(CF_TOKEN.into()),
        quick_policy(),
        Duration::from_secs(5),
    )
    .unwrap();

    // Outcomes are other tests' business: here every body is.
    let _ = c.zone_flags().await;
    let fresh = CloudflareClient::with_policy(
        sim.base_url(),
        Secret::new(CF_TOKEN.into()),
        quick_policy(),
        Duration::from_secs(5),
    )
    .unwrap();
    let _ = fresh.dnssec_key("example.com.").await;
    let _ = fresh.get_zone("example.com").await;
    let _ = fresh.largest_ttl("example.com").await;
    let _ = fresh.set_dnssec("example.com", true, &always).await;
    let _ = fresh.dnssec_key("example.com").await;
    // Refused outside `disabled`: an error envelope.
    let _ = fresh.delete_dnssec("example.com", Some(&always)).await;
    let _ = fresh.set_dnssec("example.com", false, &always).await;
    let _ = fresh.set_dnssec("example.com", false, &always).await;
    let _ = fresh.dnssec_key("forbidden.example").await;
    h.inject(Fault::next(1, FaultKind::Status(500)));
    let _ = fresh.dnssec_key("example.com").await;

    let exchanges = h.exchanges();
    let mut checks = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for e in &exchanges {
        let Some(operation) = cloudflare_operation(e) else {
            panic!("an exchange no operation names: {}", what(e));
        };
        let answer = if (200..300).contains(&e.status) {
            operation
        } else {
            "error"
        };
        seen.insert(answer);
        checks.push(Check {
            args: vec![answer.into()],
            body: e.response_body.clone(),
            what: what(e),
        });
        if !e.request_body.is_empty() {
            let request = format!("{operation}:request");
            seen.insert(if operation == "dnssec.edit" {
                "dnssec.edit:request"
            } else {
                "another request"
            });
            checks.push(Check {
                args: vec![request],
                body: e.request_body.clone(),
                what: what(e),
            });
        }
    }
    for kind in [
        "zones.list",
        "zones.get",
        "dnssec.get",
        "dnssec.edit",
        "dnssec.edit:request",
        "dnssec.delete",
        "dns_records.list",
        "error",
    ] {
        assert!(seen.contains(kind), "no {kind} body was recorded: {seen:?}");
    }
    let pages = exchanges
        .iter()
        .filter(|e| cloudflare_operation(e) == Some("zones.list") && e.status == 200)
        .count();
    assert!(pages > 1, "the zones were listed over pages ({pages})");
    check_all(&python, "cloudflare_check.py", checks).await;
}

// ---- Route 53 ------------------------------------------------------------------------

/// botocore's operation for a Route 53 exchange, by method and path shape.
fn route53_operation(e: &Exchange) -> Option<&'static str> {
    let rest = e.path.strip_prefix("/2013-04-01/")?;
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    Some(match (e.method.as_str(), parts.as_slice()) {
        ("GET", ["hostedzone"]) => "ListHostedZones",
        ("GET", ["hostedzonesbyname"]) => "ListHostedZonesByName",
        ("GET", ["hostedzone", _]) => "GetHostedZone",
        ("GET", ["hostedzone", _, "dnssec"]) => "GetDNSSEC",
        ("GET", ["hostedzone", _, "rrset"]) => "ListResourceRecordSets",
        ("POST", ["hostedzone", _, "enable-dnssec"]) => "EnableHostedZoneDNSSEC",
        ("POST", ["hostedzone", _, "disable-dnssec"]) => "DisableHostedZoneDNSSEC",
        ("POST", ["keysigningkey"]) => "CreateKeySigningKey",
        ("POST", ["keysigningkey", _, _, "activate"]) => "ActivateKeySigningKey",
        ("POST", ["keysigningkey", _, _, "deactivate"]) => "DeactivateKeySigningKey",
        ("DELETE", ["keysigningkey", _, _]) => "DeleteKeySigningKey",
        ("GET", ["change", _]) => "GetChange",
        _ => return None,
    })
}

/// Every body of the lifecycle: zones listed over pages and found by name, DNSSEC read,
/// a key-signing key created and signing enabled (each change waited), signing disabled
/// and the key deactivated (its deletion not permitted), activated again, then disabled,
/// deactivated and deleted, records read, and errors (a throttled
/// request, an injected 500), each held to botocore's model with its HTTP status; every
/// request body too (an operation without body members must be sent with none).
#[tokio::test]
async fn route53_bodies_both_ways_conform() {
    let Some(python) = python() else { return };
    self_test(&python, "route53_check.py").await;

    let sim = Route53Sim::start(
        "127.0.0.1:0".parse().unwrap(),
        Route53Options {
            credentials: vec![(KEY_ID.into(), SECRET.into())],
            change_delay: Duration::from_millis(100),
            rate_limit: None,
            ..Route53Options::default()
        },
    )
    .await
    .expect("simulator starts");
    let h = sim.handle();
    h.add_kms_key(ARN);
    h.record_exchanges();
    for i in 0..120 {
        h.add_zone(&format!("z{i:03}.example"));
    }
    h.add_zone("example.com");
    let settings = Route53Settings {
        kms_key_arn: Some(ARN.into()),
        change_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(5),
        requests_per_second: 50,
        ..Route53Settings::at(sim.base_url(), KEY_ID)
    };
    let client = || {
        Route53Client::with_policy(
            &settings,
            Secret::new(KEY_ID.into()),
            Secret::new(SECRET.into()),
            quick_policy(),
        )
        .unwrap()
    };

    // Outcomes are other tests' business: here every body is.
    let _ = client().zone_flags().await;
    let c = client();
    let _ = c.dnssec_key("example.com.").await;
    let _ = c.zone("example.com").await;
    let _ = c.largest_ttl("example.com").await;
    let _ = c.set_dnssec("example.com", true, &always).await;
    let _ = c.dnssec_key("example.com").await;
    // Off with the last send (DeleteKeySigningKey) not permitted: the key stays INACTIVE,
    // and on again activates it.
    let sent = std::sync::atomic::AtomicU32::new(0);
    let two_sends = || -> PermitAnswer<'_> {
        let permitted = sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2;
        Box::pin(async move { permitted })
    };
    let _ = c.set_dnssec("example.com", false, &two_sends).await;
    let _ = c.set_dnssec("example.com", true, &always).await;
    let _ = c.set_dnssec("example.com", false, &always).await;
    h.inject(Fault::next(1, FaultKind::RateLimit { retry_after: None }));
    let _ = c.dnssec_key("example.com").await;
    h.inject(Fault::next(1, FaultKind::Status(500)));
    let _ = c.dnssec_key("example.com").await;

    let exchanges = h.exchanges();
    let mut checks = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for e in &exchanges {
        let Some(operation) = route53_operation(e) else {
            panic!("an exchange no operation names: {}", what(e));
        };
        let status = e.status.to_string();
        let mut args = vec![operation.to_string()];
        if (200..300).contains(&e.status) {
            seen.insert(operation.to_string());
        } else {
            seen.insert("an error".to_string());
            args.push("--error".into());
        }
        args.extend(["--status".to_string(), status]);
        checks.push(Check {
            args,
            body: e.response_body.clone(),
            what: what(e),
        });
        checks.push(Check {
            args: vec![operation.to_string(), "--request".into()],
            body: e.request_body.clone(),
            what: what(e),
        });
    }
    for kind in [
        "ListHostedZones",
        "ListHostedZonesByName",
        "GetDNSSEC",
        "CreateKeySigningKey",
        "ActivateKeySigningKey",
        "DeactivateKeySigningKey",
        "DeleteKeySigningKey",
        "EnableHostedZoneDNSSEC",
        "DisableHostedZoneDNSSEC",
        "GetChange",
        "an error",
    ] {
        assert!(seen.contains(kind), "no {kind} body was recorded: {seen:?}");
    }
    let pages = exchanges
        .iter()
        .filter(|e| route53_operation(e) == Some("ListHostedZones") && e.status == 200)
        .count();
    assert!(pages > 1, "the zones were listed over pages ({pages})");
    check_all(&python, "route53_check.py", checks).await;
}
