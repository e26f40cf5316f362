//! `dnssec-warden check` through the real binary, against the lab hierarchy, with a
//! temporary config file: the verdicts, the exit status, and the provider section.

use std::path::{Path, PathBuf};

use dnssec_warden_lab::dns::{Fault, KeySource, LabDns, LabResolver, TLD_B, TldServers};
use dnssec_warden_lab::keys::LabKey;
use dnssec_warden_lab::{ProviderSim, SimOptions};
use serde_json::Value;

fn config(dir: &Path, lab: &LabDns, extra: &str) -> PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[database]\npath = \"{}\"\n{}{extra}",
        dir.join("state.db").display(),
        lab.config_section()
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn check(config: &Path, zone: &str) -> (i32, Value) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
        .arg("--config")
        .arg(config)
        .args(["check", zone, "--json"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_gives_each_verdict_and_exit_status() {
    let lab = LabDns::start().await.unwrap();
    let key = LabKey::generate(257).unwrap();
    let other = LabKey::generate(257).unwrap();
    lab.add_child("secure.test", KeySource::Static(key.clone()))
        .unwrap();
    lab.publish_ds("secure.test", TldServers::Both, &key.dnskey())
        .unwrap();
    lab.add_child("plain.test", KeySource::Unsigned).unwrap();
    lab.add_child("halfway.test", KeySource::Static(key.clone()))
        .unwrap();
    lab.publish_ds("halfway.test", TldServers::A, &key.dnskey())
        .unwrap();
    lab.add_child("wrong.test", KeySource::Static(key.clone()))
        .unwrap();
    lab.publish_ds("wrong.test", TldServers::Both, &other.dnskey())
        .unwrap();
    lab.add_child("signed.test", KeySource::Static(key.clone()))
        .unwrap();
    let resolver = LabResolver::start(&lab).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = config(dir.path(), &lab, "[zones]\nnames = []\n");
    // Point the validating resolver setting at the lab's Unbound.
    let text = std::fs::read_to_string(&conf).unwrap().replace(
        "validating_resolvers = []",
        &format!("validating_resolvers = [\"{}\"]", resolver.addr()),
    );
    std::fs::write(&conf, text).unwrap();

    for (zone, parent_ds, validation, ok) in [
        ("secure.test", "all_match", "secure", true),
        ("plain.test", "all_absent", "insecure", true),
        ("signed.test", "all_absent", "insecure", true),
        // Our validator asks both TLD servers and finds them disagreeing (unknown); the
        // resolver's verdict depends on which TLD server it asked.
        ("halfway.test", "partial", "secure|insecure|unknown", false),
        ("wrong.test", "mismatch", "bogus", false),
    ] {
        let (code, json) = check(&conf, zone).await;
        assert_eq!(json["parent_ds"], parent_ds, "{zone}: {json:#}");
        let got = json["validation"].as_str().unwrap_or_default();
        assert!(validation.split('|').any(|v| v == got), "{zone}: {json:#}");
        assert_eq!(code == 0, ok, "{zone}: exit {code}");
        assert_eq!(json["parent"]["answers"].as_array().unwrap().len(), 2);
        assert_eq!(json["child"]["answers"].as_array().unwrap().len(), 2);
        assert_eq!(json["validation_probes"].as_array().unwrap().len(), 2);
        assert!(!json["advice"].as_array().unwrap().is_empty());
    }

    // A TLD server that stays silent: unknown, never all_absent, and a failing exit.
    lab.set_fault(TLD_B.into(), Some(Fault::Drop));
    let (code, json) = check(&conf, "plain.test").await;
    assert_eq!(json["parent_ds"], "unknown", "{json:#}");
    assert_ne!(code, 0);
    let answers = json["parent"]["answers"].as_array().unwrap();
    assert!(
        answers
            .iter()
            .any(|a| a["answer"]["kind"] == "unknown" && a["answer"]["reason"] == "timeout"),
        "{json:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_the_provider_and_text_advice() {
    let lab = LabDns::start().await.unwrap();
    let sim = ProviderSim::start(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            api_keys: vec!["check-key".into()],
            name_servers: dnssec_warden_lab::dns::NAME_SERVERS
                .map(String::from)
                .to_vec(),
            ..SimOptions::default()
        },
    )
    .await
    .unwrap();
    let handle = sim.handle();
    handle.add_zone("shop.test");
    lab.add_child("shop.test", KeySource::provider(handle.clone()))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api-key"), "check-key\n").unwrap();
    let provider = format!(
        "[provider]\nbase_url = \"{}\"\napi_key_file = \"{}\"\nrequest_timeout = \"2s\"\nmax_attempts = 1\n",
        sim.base_url(),
        dir.path().join("api-key").display()
    );
    let conf = config(dir.path(), &lab, &provider);

    let (code, json) = check(&conf, "shop.test").await;
    assert_eq!(code, 0, "{json:#}");
    assert_eq!(json["provider"]["dnssec_enabled"], false, "{json:#}");

    // DNSSEC on at the provider: the lab's servers sign with its key at once.
    let client = reqwest::Client::new();
    let status = client
        .patch(
            sim.base_url()
                .join("dns/v2/zones/shop.test/dnssec")
                .unwrap(),
        )
        .header("Authorization", "APIKey check-key")
        .json(&serde_json::json!({"enabled": true}))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success());
    let (code, json) = check(&conf, "shop.test").await;
    assert_eq!(json["provider"]["dnssec_enabled"], true, "{json:#}");
    assert_eq!(json["provider"]["served_everywhere"], true, "{json:#}");
    let tag = handle.dnskey("shop.test.").unwrap().key_tag();
    assert_eq!(json["provider"]["key_tag"], tag);
    assert_eq!(json["parent_ds"], "all_absent");
    assert_eq!(json["validation"], "insecure");
    assert_eq!(code, 0);

    // The registrar publishes the provider's DS: secure.
    lab.publish_ds(
        "shop.test",
        TldServers::Both,
        &handle.dnskey("shop.test.").unwrap(),
    )
    .unwrap();
    let (code, json) = check(&conf, "shop.test").await;
    assert_eq!(
        (json["parent_ds"].as_str(), code),
        (Some("all_match"), 0),
        "{json:#}"
    );
    assert_eq!(json["provider"]["parent_points_at_it"], true);

    // Switched off behind everyone's back: an outage, and the text says so.
    handle.force_dnssec_off("shop.test");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
        .arg("--config")
        .arg(&conf)
        .args(["check", "shop.test"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0));
    assert!(text.contains("parent_ds: mismatch"), "{text}");
    assert!(text.contains("OUTAGE"), "{text}");
    assert!(text.contains("DNSSEC off"), "{text}");

    // A provider that cannot be reached is reported, not fatal.
    drop(sim);
    let (_, json) = check(&conf, "shop.test").await;
    assert!(json["provider"]["error"].is_string(), "{json:#}");
    assert_eq!(json["parent_ds"], "mismatch");
}

/// `check` says how the DS reaches the parent: by NOTIFY(CDS) to the target of the DSYNC
/// record every parent address serves, or as configured in `[parents."NAME"]`; the JSON
/// has it as `parent_path`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_the_parents_way_for_the_ds() {
    use dnssec_warden_test_support::scripted_dns::{ScriptedDns, Servers, ZONE, check_json};
    let dns = ScriptedDns::start().await;
    dns.add_host(
        "notify.registry.test.",
        std::net::Ipv4Addr::new(127, 0, 72, 9),
    );
    let rdata = dnssec_warden::dns::wire::dsync_rdata(&dnssec_warden::dns::wire::Dsync {
        rrtype: 59,
        scheme: 1,
        port: 5359,
        target: "notify.registry.test.".into(),
    })
    .unwrap();
    dns.set_dsync(Servers::Tld, &[("*._dsync.test.", rdata)]);
    let dir = tempfile::tempdir().unwrap();
    let conf = dns.config_file(dir.path());
    let text = |conf: PathBuf| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
            .arg("--config")
            .arg(&conf)
            .args(["check", ZONE])
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
            .await
            .expect("check finished within a minute")
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let out = text(conf.clone()).await;
    assert!(
        out.contains(
            "parent test.: DS by NOTIFY(CDS) to notify.registry.test. port 5359 (127.0.72.9), from DSYNC at child._dsync.test.\n"
        ),
        "{out}"
    );
    let (_, json) = check_json(&conf, ZONE).await;
    let path = &json["parent_path"];
    assert_eq!(path["parent"], "test.", "{json:#}");
    assert_eq!(path["path"]["kind"], "notify", "{json:#}");
    assert_eq!(path["path"]["target"], "notify.registry.test.");
    assert_eq!(path["path"]["port"], 5359);
    assert_eq!(path["path"]["addrs"][0], "127.0.72.9");
    assert_eq!(path["reason"]["kind"], "dsync");
    assert_eq!(path["reason"]["owner"], "child._dsync.test.");
    assert_eq!(json["dsync"]["answers"].as_array().map(Vec::len), Some(2));

    // Configured, the operator's word beats the DSYNC record.
    let conf = dns.config_file_with(
        dir.path(),
        "[parents.\"test.\"]\nds_path = \"cds-scan\"\nscan_period = \"2d\"\n",
    );
    let out = text(conf.clone()).await;
    assert!(
        out.contains(
            "parent test.: the registry scans CDS every 2d (configured in [parents.\"test.\"])\n"
        ),
        "{out}"
    );
    let (_, json) = check_json(&conf, ZONE).await;
    assert_eq!(json["parent_path"]["path"]["kind"], "cds_scan", "{json:#}");
    assert_eq!(json["parent_path"]["reason"]["kind"], "configured");
    assert_eq!(json["parent_path"]["scan_period"], 172_800);

    // Configured NOTIFY to a target named by host: its address looked up for the line.
    let conf = dns.config_file_with(
        dir.path(),
        "[parents.\"test.\"]\nds_path = \"notify\"\nnotify_target = \"notify.registry.test\"\nnotify_port = 5300\n",
    );
    let out = text(conf).await;
    assert!(
        out.contains(
            "parent test.: DS by NOTIFY(CDS) to notify.registry.test. port 5300 (127.0.72.9) (configured in [parents.\"test.\"])\n"
        ),
        "{out}"
    );

    // No DSYNC, nothing known of the registry: the registrar, by default.
    dns.set_dsync(Servers::Tld, &[]);
    let out = text(dns.config_file(dir.path())).await;
    assert!(
        out.contains("parent test.: DS entered at the registrar (default)\n"),
        "{out}"
    );
}

/// A registrar's NS change that reached one TLD server only: TLD server A delegates to
/// the provider's servers (the new key, whose DS both TLD servers publish), B still to
/// the old provider's servers, which serve the old key. Every resolver that follows B's
/// referral fails validation; `check` asks the servers each parent address delegates
/// to, says the split (which parent server sends where, which key each set serves, what
/// it means and what is safe) and exits non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_a_half_done_ns_change_that_breaks_one_referral() {
    use dnssec_warden_lab::dns::{NAME_SERVERS, OLD_NAME_SERVERS};
    let lab = LabDns::start().await.unwrap();
    let old = LabKey::generate(257).unwrap();
    let new = LabKey::generate(257).unwrap();
    lab.add_moving_child("split.test", &old, KeySource::Static(new.clone()))
        .unwrap();
    lab.delegate("split.test", TldServers::A, &NAME_SERVERS)
        .unwrap();
    lab.publish_ds("split.test", TldServers::Both, &new.dnskey())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let conf = config(dir.path(), &lab, "");

    let (code, json) = check(&conf, "split.test").await;
    assert_ne!(
        code, 0,
        "a split that fails one referral is no consistent chain: {json:#}"
    );
    assert_eq!(json["consistent"], false, "{json:#}");
    let split = &json["delegation_split"];
    let paths = split["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("{json:#}"));
    assert_eq!(paths.len(), 2, "{json:#}");
    let path = |ns: &str| {
        paths
            .iter()
            .find(|p| p["ns"][0] == ns)
            .unwrap_or_else(|| panic!("no path to {ns}: {json:#}"))
    };
    let (to_new, to_old) = (path(NAME_SERVERS[0]), path(OLD_NAME_SERVERS[0]));
    assert_eq!(to_new["parents"][0]["server"], "a.nic.test.", "{json:#}");
    assert_eq!(to_old["parents"][0]["server"], "b.nic.test.", "{json:#}");
    assert_eq!(to_new["key_tags"][0], new.dnskey().key_tag(), "{json:#}");
    assert_eq!(to_old["key_tags"][0], old.dnskey().key_tag(), "{json:#}");
    assert_eq!(to_new["outcome"], "validates", "{json:#}");
    assert_eq!(to_old["outcome"], "fails", "{json:#}");

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
        .arg("--config")
        .arg(&conf)
        .args(["check", "split.test"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_ne!(out.status.code(), Some(0), "{text}");
    let tag = old.dnskey().key_tag();
    assert!(
        text.contains(&format!(
            "  b.nic.test. 127.0.53.3 -> ns1.old.test., ns2.old.test.: serves key tag {tag}; the DS there names none of its keys: resolvers following this referral FAIL validation"
        )),
        "{text}"
    );
    assert!(text.contains("OUTAGE"), "{text}");
    assert!(text.contains("keep both"), "{text}");
    assert!(!text.contains("Nothing to do"), "{text}");
}
