//! `move ZONE --to ACCOUNT` through the real binary, against two real PowerDNS
//! Authoritative servers (Debian's `pdns-server`, `direct-dnskey=yes`) as the two
//! accounts, the zone seeded `active` with intent `enabled` in the database: refused while
//! the target lacks the zone, then declared, and `status` shows the move in its first
//! phase. The command asks the accounts' APIs only, never DNS: each server answers on
//! 127.0.0.1 at a port of its own, in no test's address block.

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use dnssec_warden::lifecycle::facts::LifecycleFacts;
use dnssec_warden::lifecycle::{AuditNote, Decision, Facts, Intent, State, Timestamp};
use dnssec_warden::provider::powerdns::{PowerDnsClient, PowerDnsSettings};
use dnssec_warden::provider::{PermitAnswer, Provider};
use dnssec_warden::secret::Secret;
use dnssec_warden::store::{ObservationText, Store};
use dnssec_warden_test_support::daemon::run;
use dnssec_warden_test_support::pdns::{Pdns, PdnsOptions, free_port};

const ZONE: &str = "m.test.";
const API_KEY: &str = "move-cli-api-key";

fn allowed() -> PermitAnswer<'static> {
    Box::pin(async { true })
}

fn client(pdns: &Pdns) -> PowerDnsClient {
    let settings = PowerDnsSettings {
        request_timeout: std::time::Duration::from_secs(5),
        max_attempts: 2,
        retry_budget: std::time::Duration::from_secs(5),
        ..PowerDnsSettings::new(pdns.base_url().parse().expect("a URL"))
    };
    PowerDnsClient::new(&settings, Secret::new(API_KEY.into())).expect("a client")
}

fn server(dir: &Path, name: &str) -> Pdns {
    let port = free_port().expect("a free port");
    Pdns::start_with(
        &dir.join(name),
        &[Ipv4Addr::LOCALHOST],
        port,
        API_KEY,
        PdnsOptions {
            direct_dnskey: true,
            default_algorithm: None,
            zsk_algorithm: None,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The zone `active` with intent `enabled`, as the daemon would have left it.
async fn seed_active(db: &Path) {
    let store = Store::open(db).await.expect("the database");
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", Timestamp(1_000))
        .await
        .expect("the intent");
    let read = store
        .zone_for_step(ZONE)
        .await
        .expect("a read")
        .expect("the zone");
    let active = Decision {
        state: Some(State::Active),
        facts: Facts {
            lifecycle: LifecycleFacts {
                max_dnskey_ttl: Some(60),
                max_ds_ttl: Some(120),
                ..LifecycleFacts::default()
            },
            ..Facts::default()
        },
        effects: Vec::new(),
        alerts: Vec::new(),
        notes: vec![AuditNote {
            from: None,
            to: Some(State::Active),
            reason: "seeded by the test".into(),
        }],
        // Not due again before the test ends but for the move.
        wake_at: Timestamp(i64::MAX / 2),
    };
    assert!(
        store
            .commit_step(
                &read,
                &active,
                &ObservationText::from_whole("{}"),
                Timestamp(2_000)
            )
            .await
            .expect("the step")
    );
    store.close().await;
}

#[tokio::test]
async fn a_signed_move_between_two_powerdns_accounts_is_declared_and_shown() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (source, target) = (server(dir.path(), "source"), server(dir.path(), "target"));
    let (src, dst) = (client(&source), client(&target));
    src.create_zone(ZONE, &["ns1.src.test.", "ns2.src.test."])
        .await
        .expect("the zone at the source");
    Provider::set_dnssec(&src, ZONE, true, &allowed)
        .await
        .expect("DNSSEC on at the source");

    let key = dir.path().join("api-key");
    std::fs::write(&key, API_KEY).expect("the key file");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("0600");
    let db = dir.path().join("state.db");
    let config = dir.path().join("config.toml");
    let account = |name: &str, pdns: &Pdns| {
        format!(
            "[providers.{name}]\nkind = \"powerdns\"\nbase_url = \"{}\"\napi_key_file = {key:?}\n\
             request_timeout = \"5s\"\nmax_attempts = 2\nretry_budget = \"5s\"\n",
            pdns.base_url()
        )
    };
    std::fs::write(
        &config,
        format!(
            "{}{}[database]\npath = {db:?}\n",
            account("pdns-a", &source),
            account("pdns-b", &target)
        ),
    )
    .expect("the config");
    seed_active(&db).await;

    // The target has no copy of the zone yet: said, and nothing recorded.
    let (code, out, err) = run(&config, &["move", "m.test", "--to", "pdns-b"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(
            "m.test. is at provider pdns-a only: create the zone at provider pdns-b first"
        ),
        "{err}"
    );

    // Created there unsigned, with its own name servers: the move is declared.
    dst.create_zone(ZONE, &["ns1.dst.test.", "ns2.dst.test."])
        .await
        .expect("the zone at the target");
    // The wrong way round: the unsigned copy would be the source.
    let (code, _, err) = run(&config, &["move", "m.test", "--to", "pdns-a"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("provider pdns-b does not sign the zone now"),
        "{err}"
    );
    let (code, out, err) = run(&config, &["move", "m.test", "--to", "pdns-b"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("m.test.: signed move from pdns-a to pdns-b declared"),
        "{out}"
    );

    let (code, out, err) = run(&config, &["status", "m.test", "--json"]);
    assert_eq!(code, 0, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        status["signed_move"],
        serde_json::json!({"phase": "signing_at_target", "source": "pdns-a", "target": "pdns-b"})
    );
    assert_eq!(status["state"], "active");
    let (_, text, _) = run(&config, &["status", "m.test"]);
    assert!(
        text.contains("SIGNED MOVE: pdns-a -> pdns-b, phase signing_at_target"),
        "{text}"
    );
    let (_, history, _) = run(&config, &["history", "m.test"]);
    assert!(
        history.contains(
            "operator declared a signed move from provider pdns-a to provider pdns-b (RFC 8901)"
        ),
        "{history}"
    );

    // The move holds the source's key, and the TTLs the facts knew.
    let store = Store::open(&db).await.expect("the database");
    let row = store.zone(ZONE).await.expect("a read").expect("the zone");
    store.close().await;
    let declared = row.zone.facts.signed_move.expect("the move");
    let source_key = Provider::dnssec_key(&src, ZONE).await.expect("the key");
    assert_eq!(declared.source_key, source_key.dnskey);
    assert_eq!(declared.zone, ZONE);
    assert_eq!((declared.ttls.dnskey, declared.ttls.ds), (60, 120));

    // Declared once.
    let (code, _, err) = run(&config, &["move", "m.test", "--to", "pdns-b"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is declared already"), "{err}");

    // `disable` during the move is refused with the move's phase, its accounts and what
    // to do instead; nothing is recorded (the move would go on and ask for a DS).
    let (code, out, err) = run(&config, &["disable", "m.test"]);
    assert_eq!(code, 1, "{out}{err}");
    for says in [
        "m.test.: `disable` is refused during a signed move (from provider pdns-a to provider pdns-b, phase signing_at_target)",
        "a safe abort of a move is not built",
        "then disable it at provider pdns-b (nothing was recorded)",
    ] {
        assert!(err.contains(says), "{says:?} not in {err}");
    }
    // `enable` is harmless and says so: the intent is enabled throughout a move, and the
    // zone at both accounts is the move, not a zone to delete from one of them.
    let (code, out, err) = run(&config, &["enable", "m.test"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("m.test.: intent enabled already: the zone is in a signed move from provider pdns-a to provider pdns-b (phase signing_at_target)"),
        "{out}"
    );
    assert!(out.contains("nothing was recorded"), "{out}");
    let (_, out, _) = run(&config, &["status", "m.test", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(status["intent"], "enabled");
    assert_eq!(status["signed_move"]["phase"], "signing_at_target");
    let (_, history, _) = run(&config, &["history", "m.test"]);
    assert!(!history.contains("asked to disable"), "{history}");
}
