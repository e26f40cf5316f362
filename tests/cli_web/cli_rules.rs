//! The command line's rules through the real binary, no network: one zone-name rule for the
//! file and the command line, one exit-code rule for every command, warnings about
//! world-readable secrets, and relative paths resolved against the configuration file's
//! directory.
//!
//! Exit codes: 0 done; 1 the command ran and the answer is "no" or it failed at run time
//! (an unknown zone, an inconsistent chain, a database or provider failure, a daemon
//! already running); 2 what was given cannot be used (command line, zone name, config).

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;

use dnssec_warden::web::auth::{Role, Users};
use dnssec_warden_test_support::daemon::{self, run, run_in};

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

/// A config with a provider on a closed loopback port, an API key file (0600), the
/// database in the directory and `zones`.
fn setup(zones: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {key:?}\n\
             [database]\npath = {:?}\n[zones]\n{zones}\n",
            dir.path().join("state.db")
        ),
    )
    .unwrap();
    Setup { dir, config }
}

#[test]
fn a_unicode_zone_name_is_its_a_label_everywhere() {
    let s = setup("names = [\"Bücher.Example\"]");
    let (code, out, err) = run(&s.config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    // The CLI takes either form and stores the A-label.
    let (code, out, err) = run(&s.config, &["enable", "bücher.example"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("xn--bcher-kva.example."), "{out}");
    let (code, out, err) = run(&s.config, &["status", "XN--BCHER-KVA.example.", "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["zone"], "xn--bcher-kva.example.");
    assert_eq!(json["intent"], "enabled");
    let (code, out, err) = run(&s.config, &["history", "BÜCHER.example"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("operator asked to enable DNSSEC"), "{out}");
}

#[test]
fn both_forms_of_one_name_in_the_file_are_a_duplicate() {
    let s = setup("names = [\"bücher.example\", \"example.org\", \"xn--bcher-kva.example\"]");
    let (code, _, err) = run(&s.config, &["check-config"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("zones.names[2]"), "{err}");
    assert!(err.contains("bücher.example"), "{err}");
    assert!(err.contains("xn--bcher-kva.example"), "{err}");
}

#[test]
fn names_that_are_no_host_names_are_refused_with_the_reason() {
    let s = setup("names = [\"example.com\"]");
    for (name, says) in [
        (
            "a/b.example",
            "label \"a/b\" has a character not allowed in a host name: '/'",
        ),
        ("a?b.example", "'?'"),
        ("a#b.example", "'#'"),
        ("*.example", "'*'"),
        ("127.0.0.1", "IP address"),
        (".", "root"),
        ("com", "two labels"),
        ("a-.example", "hyphen"),
        ("a..example", "empty label"),
    ] {
        let (code, out, err) = run(&s.config, &["enable", name]);
        assert_eq!(code, 2, "enable {name:?}: {out}{err}");
        assert!(err.contains(says), "enable {name:?}: {err}");
        assert!(err.contains(&format!("zone name {name:?}")), "{err}");
        for cmd in ["disable", "status", "history"] {
            let (code, _, err) = run(&s.config, &[cmd, name]);
            assert_eq!(code, 2, "{cmd} {name:?}: {err}");
        }
    }
    // The same rule in the file; a NUL only fits there.
    for name in ["a\\u0000b.example", "a/b.example", "127.0.0.1", "*.example"] {
        let s = setup(&format!("names = [\"example.com\", \"{name}\"]"));
        let (code, _, err) = run(&s.config, &["check-config"]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains("zones.names[1]"), "{name}: {err}");
    }
}

#[test]
fn exit_codes_follow_one_rule() {
    let s = setup("names = [\"example.com\"]");
    // 0: done.
    assert_eq!(run(&s.config, &["enable", "example.com"]).0, 0);
    assert_eq!(run(&s.config, &["status", "example.com"]).0, 0);
    assert_eq!(run(&s.config, &["history", "example.com"]).0, 0);
    // 1: a zone the database does not know, for `status` and `history` alike.
    let (code, _, err) = run(&s.config, &["status", "unknown.example"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown.example. is not known"), "{err}");
    let (code, _, err) = run(&s.config, &["history", "unknown.example"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown.example. is not known"), "{err}");
    // 2: the command line.
    assert_eq!(run(&s.config, &["enable"]).0, 2);
    assert_eq!(
        run(&s.config, &["lab", "provider", "--user", "nocolon"]).0,
        2
    );
    // 2: the configuration, for every command that reads it.
    let bad = s.dir.path().join("bad.toml");
    std::fs::write(&bad, "[timing]\npoll_waiting = \"soon\"\n").unwrap();
    for args in [
        &["check-config"][..],
        &["run"],
        &["status"],
        &["enable", "example.com"],
        &["history", "example.com"],
        &["check", "example.com"],
    ] {
        let (code, _, err) = run(&bad, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("timing.poll_waiting"), "{args:?}: {err}");
    }
    // 2: a file that parses but cannot run: `run` and `check-config` refuse it alike.
    let missing = s.dir.path().join("missing-key.toml");
    std::fs::write(
        &missing,
        format!(
            "[provider]\napi_key_file = {:?}\n[database]\npath = {:?}\n",
            s.dir.path().join("no-such-key"),
            s.dir.path().join("other.db")
        ),
    )
    .unwrap();
    for cmd in ["check-config", "run"] {
        let (code, _, err) = run(&missing, &[cmd]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(err.contains("no-such-key"), "{cmd}: {err}");
    }
    let anchors = s.dir.path().join("bad-anchor.toml");
    std::fs::write(
        &anchors,
        format!(
            "[provider]\napi_key_file = {:?}\n[database]\npath = {:?}\n[dns]\ntrust_anchor_file = {:?}\n",
            s.dir.path().join("api-key"),
            s.dir.path().join("other.db"),
            s.dir.path().join("no-such-anchors"),
        ),
    )
    .unwrap();
    let (code, _, err) = run(&anchors, &["check-config"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no-such-anchors"), "{err}");
    let no_provider = s.dir.path().join("no-provider.toml");
    std::fs::write(&no_provider, "[zones]\nnames = [\"example.com\"]\n").unwrap();
    let (code, _, err) = run(&no_provider, &["check-config"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[provider]"), "{err}");
}

/// `move ZONE --to ACCOUNT` refused (exit 1, as `enable`'s refusals) before any provider
/// is asked: an account not configured (the configured ones listed), a zone the database
/// does not know, one not `active`; nothing is recorded.
#[test]
fn a_move_is_refused_with_the_reason_before_asking_anyone() {
    let s = setup("names = [\"example.com\"]");
    let (code, out, err) = run(&s.config, &["move", "example.com", "--to", "elsewhere"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("no provider account is named elsewhere; the configured ones: gcore"),
        "{err}"
    );
    let (code, _, err) = run(&s.config, &["move", "example.com", "--to", "gcore"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("zone example.com. is not in the database"),
        "{err}"
    );
    assert_eq!(run(&s.config, &["enable", "example.com"]).0, 0);
    let (code, _, err) = run(&s.config, &["move", "EXAMPLE.com", "--to", "gcore"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("a signed move starts from state active with intent enabled"),
        "{err}"
    );
    let (_, history, _) = run(&s.config, &["history", "example.com"]);
    assert!(!history.contains("signed move"), "{history}");
    let (_, status, _) = run(&s.config, &["status", "example.com", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert!(status["signed_move"].is_null(), "{status:#}");
    // What was given: a name that is none, the account left out.
    assert_eq!(
        run(&s.config, &["move", "a/b.example", "--to", "gcore"]).0,
        2
    );
    assert_eq!(run(&s.config, &["move", "example.com"]).0, 2);
}

/// `roll ZONE` where no configured provider's API exposes keys (Gcore): refused with the
/// reason (exit 1) before any request, nothing recorded; an abort with no roll under way
/// likewise; a kind or an algorithm not offered is what was given (exit 2).
#[test]
fn a_roll_at_a_provider_without_keys_is_refused_with_the_reason() {
    let s = setup("names = [\"example.com\"]");
    let (code, _, err) = run(&s.config, &["roll", "example.com"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("zone example.com. is not in the database"),
        "{err}"
    );
    assert_eq!(run(&s.config, &["enable", "example.com"]).0, 0);
    for args in [
        &["roll", "example.com"][..],
        &["roll", "EXAMPLE.com", "--kind", "zsk"],
        &["roll", "example.com", "--algorithm", "15"],
    ] {
        let (code, out, err) = run(&s.config, args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(
            err.contains("provider gcore (gcore): its API exposes no keys: a key rollover is the provider's own there (nothing was recorded)"),
            "{args:?}: {err}"
        );
    }
    let (code, _, err) = run(&s.config, &["roll", "example.com", "--abort"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no key rollover is under way"), "{err}");
    let (_, history, _) = run(&s.config, &["history", "example.com"]);
    assert!(!history.contains("key rollover"), "{history}");
    let (_, status, _) = run(&s.config, &["status", "example.com", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert!(status.get("key_roll").is_none(), "{status:#}");
    // What was given: a kind or an algorithm not offered, an abort with a kind.
    for args in [
        &["roll", "example.com", "--kind", "psk"][..],
        &["roll", "example.com", "--algorithm", "5"],
        &["roll", "example.com", "--abort", "--kind", "zsk"],
    ] {
        assert_eq!(run(&s.config, args).0, 2, "{args:?}");
    }
}

#[test]
fn a_world_readable_secret_is_warned_about() {
    let s = setup("names = [\"example.com\"]");
    let key = s.dir.path().join("api-key");
    let (code, out, err) = run(&s.config, &["check-config"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(out.contains("OK"), "{out}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, out, err) = run(&s.config, &["check-config"]);
    assert_eq!(code, 0, "a warning, not an error: {err}");
    assert!(out.contains("OK"), "{out}");
    assert!(err.contains("warning"), "{err}");
    assert!(err.contains(&key.display().to_string()), "{err}");
    assert!(err.contains("0644"), "{err}");
    assert!(err.contains("readable by every user"), "{err}");
    assert!(!err.contains("k-123456"), "{err}");
}

#[test]
fn relative_paths_are_relative_to_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    std::fs::write(etc.join("api-key"), "k-123456\n").unwrap();
    std::fs::set_permissions(etc.join("api-key"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        etc.join("anchors"),
        ". 3600 IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D\n",
    )
    .unwrap();
    let config = etc.join("config.toml");
    std::fs::write(
        &config,
        "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = \"api-key\"\n\
         [database]\npath = \"state/state.db\"\n[dns]\ntrust_anchor_file = \"anchors\"\n\
         [zones]\nnames = [\"example.com\"]\n",
    )
    .unwrap();
    // Run from elsewhere: the working directory has no say.
    let (code, out, err) = run_in(&config, &["check-config"], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = run_in(&config, &["enable", "example.com"], dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(etc.join("state").join("state.db").exists());
    assert!(!dir.path().join("state").exists());
}

/// A host without IPv6 is said once, not as every zone unknown: with IPv6 in
/// `dns.address_families` (the default) on a host without an IPv6 route, `check-config`
/// says so and names the key to set; with IPv4 only it says nothing. The test host may well
/// have IPv6, so the missing route is forced by the test builds'
/// `DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE` (which stands in for the routing table's answer only:
/// the message and the rule are the product's).
#[test]
fn check_config_says_a_host_without_ipv6_and_the_key_to_set() {
    let s = setup("names = [\"example.org\"]");
    let check = |config: &std::path::Path| {
        let out = daemon::bin()
            .args(["check-config", "--config"])
            .arg(config)
            .env("DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = check(&s.config);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("this host has no IPv6 route"), "{err}");
    assert!(
        err.contains("set dns.address_families = [\"ipv4\"]"),
        "{err}"
    );
    let text = std::fs::read_to_string(&s.config).unwrap();
    std::fs::write(
        &s.config,
        format!("{text}[dns]\naddress_families = [\"ipv4\"]\n"),
    )
    .unwrap();
    let (code, err) = check(&s.config);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("IPv6"), "{err}");
}

/// `web-user NAME [--role ROLE]`, the password piped in: (exit code, stdout, stderr).
fn web_user(args: &[&str], password: &[u8]) -> (i32, String, String) {
    let mut child = daemon::bin()
        .arg("web-user")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(password).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `web-user` prints a line the console's users file takes, whose hash is the
/// password piped in (its line end dropped); a name, role or password that cannot be used
/// exits 2 saying why, and never repeats the password.
#[test]
fn web_user_prints_a_users_file_line_for_the_password_piped_in() {
    let (code, out, err) = web_user(&["alice", "--role", "operator"], b"correct horse battery\n");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("alice:operator:$argon2id$v=19$m=19456,t=2,p=1$"),
        "{out}"
    );
    let users = Users::parse(&out, "web-user's output").unwrap();
    assert_eq!(
        users.verify("alice", "correct horse battery"),
        Some(Role::Operator)
    );
    assert_eq!(users.verify("alice", "correct horse battery\n"), None);
    // The role is viewer unless asked; a CRLF line end or none at all is no part of it.
    for piped in [&b"another long password\r\n"[..], b"another long password"] {
        let (code, out, err) = web_user(&["bob.smith@example"], piped);
        assert_eq!(code, 0, "{err}");
        let users = Users::parse(&out, "web-user's output").unwrap();
        assert_eq!(
            users.verify("bob.smith@example", "another long password"),
            Some(Role::Viewer)
        );
    }
    let long = vec![b'x'; 2_000];
    for (args, piped, said) in [
        (
            &["al ice"][..],
            &b"correct horse battery\n"[..],
            "user name",
        ),
        (
            &["alice", "--role", "admin"],
            b"correct horse battery\n",
            "unknown role \"admin\"",
        ),
        (&["alice"], b"eleven char\n", "shorter than 12 characters"),
        (&["alice"], b"", "no password"),
        (&["alice"], &long, "longer than 1024 bytes"),
        (&["alice"], b"\xffcorrect horse battery\n", "UTF-8"),
    ] {
        let (code, out, err) = web_user(args, piped);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(!err.contains("horse") && !err.contains("eleven"), "{err}");
    }
}
