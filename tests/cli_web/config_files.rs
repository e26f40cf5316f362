//! Every configuration file we ship parses, and `check-config` through the real binary
//! accepts good files and names the bad key.

use std::path::Path;
use std::process::Command;

use dnssec_warden::config::{Settings, ZoneSelection};
use dnssec_warden::provider::gcore::CredentialSource;
use dnssec_warden::secret::SecretSource;
use dnssec_warden::zone_name::ZoneName;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
}

#[test]
fn the_example_config_parses_with_its_documented_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let example = Settings::load(&path).expect("config.example.toml is valid");
    let defaults = Settings::parse(
        "[provider]\napi_key_file = \"/etc/dnssec-warden/api-key\"\n[zones]\nnames = [\"example.com\"]",
        &path,
    )
    .unwrap();
    // The example documents the defaults: both must agree, option for option.
    assert_eq!(example.dns, defaults.dns);
    assert_eq!(example.timing, defaults.timing);
    assert_eq!(example.database, defaults.database);
    assert_eq!(example.alerts, defaults.alerts);
    assert_eq!(
        example.zones,
        ZoneSelection::Names(vec![ZoneName::parse("example.com").unwrap()])
    );
    let gcore = |s: &Settings| s.providers[0].gcore().cloned().unwrap();
    let (p, d) = (gcore(&example), gcore(&defaults));
    assert_eq!(p.base_url, d.base_url);
    assert_eq!(p.request_timeout, d.request_timeout);
    assert_eq!(p.max_attempts, d.max_attempts);
    assert_eq!(p.retry_budget, d.retry_budget);
    assert_eq!(
        p.credentials,
        CredentialSource::ApiKey(SecretSource::File("/etc/dnssec-warden/api-key".into()))
    );
}

/// What one observation may spend (a hostile delegation must not exhaust the daemon), as
/// `[dns]` keys.
#[test]
fn the_observation_budget_is_configured_in_the_dns_section() {
    let path = Path::new("budget.toml");
    let settings = Settings::parse(
        "[dns]\nobservation_timeout = \"30s\"\nmax_queries_per_observation = 200\n\
         max_host_lookups = 16\nmax_ns_per_delegation = 13\nmax_addresses_per_server = 4\n",
        path,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let budget = settings.dns.budget;
    assert_eq!(budget.timeout, std::time::Duration::from_secs(30));
    assert_eq!(budget.max_queries, 200);
    assert_eq!(budget.max_host_lookups, 16);
    assert_eq!(budget.max_ns_per_delegation, 13);
    assert_eq!(budget.max_addresses_per_server, 4);
    // Unset: the defaults, as documented in config.example.toml.
    let defaults = Settings::parse("", path).unwrap().dns.budget;
    assert_eq!(defaults, dnssec_warden::dns::ObservationBudget::default());
    assert_eq!(defaults.timeout, std::time::Duration::from_secs(60));
    assert_eq!(
        (
            defaults.max_queries,
            defaults.max_host_lookups,
            defaults.max_ns_per_delegation,
            defaults.max_addresses_per_server
        ),
        (500, 64, 20, 8)
    );
}

#[test]
fn every_shipped_toml_file_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = 0;
    for dir in [root.to_path_buf(), root.join("tests").join("configs")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".toml") && name != "Cargo.toml" {
                Settings::load(&path).unwrap_or_else(|e| panic!("{e}"));
                found += 1;
            }
        }
    }
    assert!(found >= 1);
}

#[test]
fn check_config_accepts_a_good_file() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\napi_key_file = {:?}\n[zones]\nnames = [\"example.com\"]\n",
            key
        ),
    )
    .unwrap();
    let out = bin()
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK"));
}

#[test]
fn check_config_runs_the_start_up_checks_of_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(dir.path().join("empty-key"), "\n").unwrap();
    for (text, says) in [
        // Parses, but `run` could not start with it.
        ("[zones]\nnames = [\"example.com\"]\n", "[provider]"),
        (
            "[provider]\napi_key_file = \"no-such-key\"\n",
            "no-such-key",
        ),
        ("[provider]\napi_key_file = \"empty-key\"\n", "is empty"),
        (
            "[provider]\napi_key_env = \"DNSSEC_WARDEN_TEST_UNSET\"\n",
            "DNSSEC_WARDEN_TEST_UNSET",
        ),
        (
            "[provider]\napi_key_file = \"empty-key\"\n[dns]\ntrust_anchor_file = \"no-anchors\"\n",
            "is empty",
        ),
        (
            "[zones]\nnames = [\"bücher.example\", \"xn--bcher-kva.example\"]\n",
            "zones.names[1]",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = bin()
            .args(["check-config", "--config"])
            .arg(&config)
            .env_remove("DNSSEC_WARDEN_TEST_UNSET")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(says), "{text}: {stderr}");
        assert!(stderr.contains(&config.display().to_string()), "{stderr}");
    }
    std::fs::write(dir.path().join("key"), "k-123\n").unwrap();
    std::fs::write(
        &config,
        "[provider]\napi_key_file = \"key\"\n[dns]\ntrust_anchor_file = \"no-anchors\"\n",
    )
    .unwrap();
    let out = bin()
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&dir.path().join("no-anchors").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn check_config_names_the_bad_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    for (text, key) in [
        (
            "[timing]\npoll_waiting = \"5 minutes\"\n",
            "timing.poll_waiting",
        ),
        ("[timing]\npoll_wating = \"5m\"\n", "poll_wating"),
        ("[dns]\nqueries_per_server = 0\n", "dns.queries_per_server"),
        ("[dns]\nqueries_per_server = 65\n", "dns.queries_per_server"),
        ("[dns]\nmax_qps_per_server = 0\n", "dns.max_qps_per_server"),
        (
            "[dns]\nmax_qps_per_server = 100001\n",
            "dns.max_qps_per_server",
        ),
        (
            "[dns]\nobservation_timeout = \"5m\"\n",
            "dns.observation_timeout",
        ),
        (
            "[dns]\nmax_queries_per_observation = 0\n",
            "dns.max_queries_per_observation",
        ),
        ("[dns]\nmax_host_lookups = 0\n", "dns.max_host_lookups"),
        (
            "[dns]\nmax_ns_per_delegation = 0\n",
            "dns.max_ns_per_delegation",
        ),
        (
            "[dns]\nmax_addresses_per_server = 0\n",
            "dns.max_addresses_per_server",
        ),
        ("[dns]\nmax_ns_per_delgation = 13\n", "max_ns_per_delgation"),
        (
            "[dns]\nvalidating_resolvers = [\"1.1.1.1\", \"resolver\"]\n",
            "dns.validating_resolvers[1]",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = bin()
            .args(["check-config", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(stderr.contains(&config.display().to_string()), "{stderr}");
    }
}

#[test]
fn check_config_reads_the_secret_but_never_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[provider]\napi_key_credential = \"gcore-api-key\"\n",
    )
    .unwrap();
    // No $CREDENTIALS_DIRECTORY: a clear error.
    let out = bin()
        .args(["check-config", "--config"])
        .arg(&config)
        .env_remove("CREDENTIALS_DIRECTORY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CREDENTIALS_DIRECTORY"));
    // With it, as systemd's LoadCredential= sets it up.
    std::fs::write(dir.path().join("gcore-api-key"), "very-secret-key\n").unwrap();
    let out = bin()
        .args(["check-config", "--config"])
        .arg(&config)
        .env("CREDENTIALS_DIRECTORY", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("very-secret-key"));
}

/// The `[providers.NAME]` block config.example.toml shows, uncommented, parses into a
/// second account beside `[provider]`.
#[test]
fn the_example_second_provider_parses_once_uncommented() {
    use dnssec_warden::provider::fleet::ProviderOptions;
    use dnssec_warden::provider::powerdns::PowerDnsAccount;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("# [providers.pdns]").expect("the example block");
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
    assert_eq!(names, ["gcore", "pdns"]);
    match &settings.providers[1].options {
        ProviderOptions::PowerDns(PowerDnsAccount { settings, .. }) => {
            assert_eq!(settings.base_url.as_str(), "http://127.0.0.1:8081/");
            assert_eq!(settings.server_id, "localhost");
        }
        other => panic!("{other:?}"),
    }
}

/// The `[parents."NAME"]` block config.example.toml shows, uncommented, parses into the
/// lifecycle's settings for that parent.
#[test]
fn the_example_parent_block_parses_once_uncommented() {
    use dnssec_warden::lifecycle::parent_way::DsPathSetting;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("# [parents.\"ch.\"]").expect("the example block");
    let block: String = text[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.starts_with('[') || l.contains(" = "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(block.lines().count() >= 5, "{block}");
    let settings = Settings::parse(&format!("{text}\n{block}"), &path)
        .unwrap_or_else(|e| panic!("{e}\n{block}"));
    let ch = &settings.timing.parents.parents["ch."];
    assert_eq!(ch.ds_path, DsPathSetting::CdsScan);
    assert_eq!(ch.scan_period, Some(std::time::Duration::from_secs(86_400)));
    assert_eq!(ch.accepts_first_ds, Some(true));
    assert_eq!(
        ch.first_ds_after,
        Some(std::time::Duration::from_secs(3 * 86_400))
    );
    assert!(!ch.call_registrar_hook);
    // Commented out, the example configures no parent.
    assert!(
        Settings::parse(&text, &path)
            .unwrap()
            .timing
            .parents
            .parents
            .is_empty()
    );
}

/// The `[web]` block config.example.toml shows, uncommented, parses into the console's
/// settings (with its proxy block).
#[test]
fn the_example_web_block_parses_once_uncommented() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("\n[web]\n").expect("the [web] block");
    let (before, web) = text.split_at(start);
    let uncommented: String = web
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(l) if l.starts_with('[') || l.contains(" = ") => format!("{l}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let settings = Settings::parse(&format!("{before}{uncommented}"), &path)
        .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    let web = settings.web.expect("the console is on");
    assert_eq!(web.listen.to_string(), "127.0.0.1:8440");
    assert!(web.users.is_some_and(|u| u.ends_with("web-users")));
    assert!(web.tls.is_some());
    let proxy = web.proxy.expect("the proxy block");
    assert_eq!(proxy.user_header, "x-remote-user");
    // Commented out, the console is off.
    assert!(Settings::parse(&text, &path).unwrap().web.is_none());
}
