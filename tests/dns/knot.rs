//! `check --json` on zones under a real Knot DNS parent on loopback (Debian's `knot`,
//! which tests/run.sh installs) gives the verdicts an operator reads off `kdig` by hand.
//!
//! Two knotd processes on one free port: 127.0.54.1 serves `.` and `test.` (so discovery
//! meets a parent and child on one server), 127.0.54.2 serves the child zones. Keys come
//! from `keymgr`; Knot signs. Both processes are stopped by PID, also when a test fails.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dnssec_warden::dns::DnsSettings;
use dnssec_warden::dns::proof::{Proof, prove_ds};
use dnssec_warden::dns::wire::{build_query, parse_name};
use dnssec_warden::dns::{DnsObserver, DsAnswer, Evidence, NetTransport, Observer, Transport};
use dnssec_warden::dnssec::{DigestType, DsLine};
use dnssec_warden_lab::keys::LabKey;
use hickory_proto::rr::RecordType;
use serde_json::Value;

const PARENT: &str = "127.0.54.1";
const CHILD: &str = "127.0.54.2";

/// Kills the knotd processes by PID when dropped.
struct Knots(Vec<Child>);

impl Drop for Knots {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_port() -> u16 {
    for _ in 0..50 {
        let port = std::net::UdpSocket::bind(format!("{PARENT}:0"))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let free = [PARENT, CHILD].iter().all(|ip| {
            std::net::UdpSocket::bind(format!("{ip}:{port}")).is_ok()
                && std::net::TcpListener::bind(format!("{ip}:{port}")).is_ok()
        });
        if free {
            return port;
        }
    }
    panic!("no free port");
}

fn conf(dir: &Path, listen: &str, port: u16, zones: &[(&str, bool)]) -> PathBuf {
    let zones: Vec<(&str, Denial)> = zones
        .iter()
        .map(|(z, signed)| {
            (
                *z,
                if *signed {
                    Denial::Nsec
                } else {
                    Denial::Unsigned
                },
            )
        })
        .collect();
    conf_with(dir, listen, port, &zones)
}

/// How Knot signs a zone (keys from `keymgr`, policy `manual`) and denies names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Denial {
    Unsigned,
    Nsec,
    /// NSEC3, every delegation in the chain (salt of 8 bytes, 1 iteration).
    Nsec3,
    /// NSEC3 with opt-out: unsigned delegations are left out of the chain.
    Nsec3OptOut,
}

fn conf_with(dir: &Path, listen: &str, port: u16, zones: &[(&str, Denial)]) -> PathBuf {
    let mut text = format!(
        "server:\n    rundir: \"{run}\"\n    listen: {listen}@{port}\n\
         database:\n    storage: \"{db}\"\n\
         log:\n  - target: stderr\n    any: warning\n\
         policy:\n  - id: manual\n    manual: on\n\
         \x20 - id: nsec3\n    manual: on\n    nsec3: on\n    nsec3-iterations: 1\n    nsec3-salt-length: 8\n\
         \x20 - id: nsec3optout\n    manual: on\n    nsec3: on\n    nsec3-opt-out: on\n    nsec3-iterations: 0\n    nsec3-salt-length: 0\n\
         template:\n  - id: default\n    storage: \"{dir}\"\n    semantic-checks: off\n\
         zone:\n",
        run = dir.join("run").display(),
        db = dir.join("db").display(),
        dir = dir.display(),
    );
    for (zone, denial) in zones {
        let file = if *zone == "." {
            "root".to_string()
        } else {
            zone.trim_end_matches('.').to_string()
        };
        text.push_str(&format!(
            "  - domain: \"{zone}\"\n    file: \"{file}.zone\"\n"
        ));
        let policy = match denial {
            Denial::Unsigned => None,
            Denial::Nsec => Some("manual"),
            Denial::Nsec3 => Some("nsec3"),
            Denial::Nsec3OptOut => Some("nsec3optout"),
        };
        if let Some(policy) = policy {
            text.push_str(&format!(
                "    dnssec-signing: on\n    dnssec-policy: {policy}\n"
            ));
        }
    }
    std::fs::create_dir_all(dir.join("run")).unwrap();
    std::fs::create_dir_all(dir.join("db")).unwrap();
    let path = dir.join("knot.conf");
    std::fs::write(&path, text).unwrap();
    path
}

/// A CSK for `zone` in the KASP database of `conf`; returns its DS line.
fn keymgr_csk(conf: &Path, zone: &str) -> String {
    let out = Command::new("keymgr")
        .arg("-c")
        .arg(conf)
        .args([zone, "generate", "algorithm=13", "ksk=yes", "zsk=yes"])
        .output()
        .expect("keymgr runs (Debian package knot)");
    assert!(
        out.status.success(),
        "keymgr generate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("keymgr")
        .arg("-c")
        .arg(conf)
        .args([zone, "ds"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "keymgr ds: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // The SHA-256 line: "zone. DS tag 13 2 HEX".
    text.lines()
        .find(|l| l.split_whitespace().nth(4) == Some("2"))
        .map(|l| l.split_whitespace().skip(2).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| panic!("no SHA-256 DS from keymgr: {text}"))
}

fn knotd(conf: &Path) -> Child {
    Command::new("knotd")
        .arg("-c")
        .arg(conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("knotd runs (Debian package knot)")
}

/// Waits until `server` answers `zone SOA` authoritatively (Knot signs on load).
async fn wait_for(server: SocketAddr, zone: &str) {
    let transport = NetTransport::new(Duration::from_millis(200));
    let query = build_query(&parse_name(zone).unwrap(), RecordType::SOA, false);
    for _ in 0..50 {
        if let Ok(m) = transport.exchange(server, &query).await
            && m.metadata.authoritative
            && !m.answers.is_empty()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("knotd at {server} never served {zone}");
}

/// What `kdig` shows: (status, aa flag, DS rdata as `tag alg type HEX`).
fn kdig_ds(server: &str, port: u16, zone: &str) -> (String, bool, Vec<String>) {
    let out = Command::new("kdig")
        .args([
            &format!("@{server}"),
            "-p",
            &port.to_string(),
            "+norec",
            "+dnssec",
            zone,
            "DS",
        ])
        .output()
        .expect("kdig runs (Debian package knot-dnsutils)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = text
        .split("status: ")
        .nth(1)
        .and_then(|s| s.split([',', ';', '\n']).next())
        .unwrap_or_default()
        .to_string();
    let aa = text
        .lines()
        .any(|l| l.contains("Flags:") && l.contains(" aa"));
    let ds = text
        .lines()
        .filter(|l| !l.starts_with(';'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[3] == "DS").then(|| {
                DsLine::parse(&format!("{} 0 IN DS {}", f[0], f[4..].join(" ")))
                    .unwrap()
                    .ds
                    .to_string()
            })
        })
        .collect();
    (status, aa, ds)
}

/// Key tags of the SEP keys `kdig` shows at the child.
fn kdig_sep_tags(server: &str, port: u16, zone: &str) -> Vec<u16> {
    let out = Command::new("kdig")
        .args([
            &format!("@{server}"),
            "-p",
            &port.to_string(),
            "+norec",
            zone,
            "DNSKEY",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter(|l| !l.starts_with(';'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 || f[3] != "DNSKEY" || f[4] != "257" {
                return None;
            }
            use base64::Engine;
            let key = dnssec_warden::dnssec::Dnskey {
                flags: 257,
                protocol: 3,
                algorithm: f[6].parse().ok()?,
                public_key: base64::engine::general_purpose::STANDARD
                    .decode(f[7..].concat())
                    .ok()?,
            };
            Some(key.key_tag())
        })
        .collect()
}

/// The verdict an operator draws from kdig: every DS tag served as a SEP key, etc.
fn verdict_by_hand(ds: &(String, bool, Vec<String>), sep_tags: &[u16]) -> &'static str {
    let (status, aa, records) = ds;
    if !aa || !(status == "NOERROR" || status == "NXDOMAIN") {
        return "unknown";
    }
    if records.is_empty() {
        return "all_absent";
    }
    let matches = records.iter().any(|r| {
        r.split_whitespace()
            .next()
            .and_then(|t| t.parse::<u16>().ok())
            .is_some_and(|t| sep_tags.contains(&t))
    });
    if matches { "all_match" } else { "mismatch" }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_agrees_with_kdig_under_a_knot_parent() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let parent_dir = dir.path().join("parent");
    let child_dir = dir.path().join("child");
    std::fs::create_dir_all(&parent_dir).unwrap();
    std::fs::create_dir_all(&child_dir).unwrap();
    let parent_conf = conf(&parent_dir, PARENT, port, &[(".", true), ("test.", true)]);
    let child_conf = conf(
        &child_dir,
        CHILD,
        port,
        &[
            ("signed.test.", true),
            ("wrong.test.", true),
            ("plain.test.", false),
        ],
    );
    let root_ds = keymgr_csk(&parent_conf, ".");
    let test_ds = keymgr_csk(&parent_conf, "test.");
    let signed_ds = keymgr_csk(&child_conf, "signed.test.");
    keymgr_csk(&child_conf, "wrong.test.");
    let stranger = dnssec_warden::dnssec::Dnskey::from(LabKey::generate(257).unwrap().dnskey())
        .to_ds("wrong.test.", DigestType::Sha256)
        .unwrap();
    let soa = |ns: &str| format!("@ 3600 SOA {ns} hostmaster.test. 1 3600 600 86400 60\n");
    std::fs::write(
        parent_dir.join("root.zone"),
        format!(
            "$ORIGIN .\n{}@ 3600 NS ns.test.\ntest. 3600 NS ns.test.\ntest. 3600 DS {test_ds}\nns.test. 3600 A {PARENT}\n",
            soa("ns.test.")
        ),
    )
    .unwrap();
    std::fs::write(
        parent_dir.join("test.zone"),
        format!(
            "$ORIGIN test.\n{}@ 3600 NS ns.test.\nns 3600 A {PARENT}\nns2 3600 A {CHILD}\n\
             signed 3600 NS ns2.test.\nsigned 7200 DS {signed_ds}\n\
             wrong 3600 NS ns2.test.\nwrong 3600 DS {stranger}\n\
             plain 3600 NS ns2.test.\n",
            soa("ns.test.")
        ),
    )
    .unwrap();
    for zone in ["signed", "wrong", "plain"] {
        std::fs::write(
            child_dir.join(format!("{zone}.test.zone")),
            format!(
                "$ORIGIN {zone}.test.\n{}@ 3600 NS ns2.test.\nwww 300 A 192.0.2.1\n",
                soa("ns2.test.")
            ),
        )
        .unwrap();
    }
    let anchor = dir.path().join("root.ds");
    std::fs::write(&anchor, format!(". 3600 IN DS {root_ds}\n")).unwrap();

    let _knots = Knots(vec![knotd(&parent_conf), knotd(&child_conf)]);
    let parent_addr: SocketAddr = format!("{PARENT}:{port}").parse().unwrap();
    let child_addr: SocketAddr = format!("{CHILD}:{port}").parse().unwrap();
    wait_for(parent_addr, ".").await;
    wait_for(parent_addr, "test.").await;
    for zone in ["signed.test.", "wrong.test.", "plain.test."] {
        wait_for(child_addr, zone).await;
    }

    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[database]\npath = \"{}\"\n[dns]\nroot_hints = [\"{PARENT}\"]\nport = {port}\ntrust_anchor_file = \"{}\"\nvalidating_resolvers = []\nquery_timeout = \"1s\"\nquery_attempts = 2\n",
            dir.path().join("state.db").display(),
            anchor.display()
        ),
    )
    .unwrap();

    for (zone, validation) in [
        ("signed.test.", "secure"),
        ("wrong.test.", "bogus"),
        ("plain.test.", "insecure"),
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
            .arg("--config")
            .arg(&config)
            .args(["check", zone, "--json"])
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let json: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
        let by_hand_ds = kdig_ds(PARENT, port, zone);
        let tags = kdig_sep_tags(CHILD, port, zone);
        let expected = verdict_by_hand(&by_hand_ds, &tags);
        assert_eq!(
            json["parent_ds"], expected,
            "{zone}: kdig {by_hand_ds:?} tags {tags:?}\n{json:#}"
        );
        assert_eq!(json["validation"], validation, "{zone}: {json:#}");
        let answers = json["parent"]["answers"].as_array().unwrap();
        assert_eq!(answers.len(), 1, "{json:#}");
        let ours: Vec<String> = answers[0]["answer"]["ds"]
            .as_array()
            .map(|a| a.iter().map(|d| d.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        assert_eq!(ours, by_hand_ds.2, "{zone}: the DS set equals kdig's");
        if zone == "signed.test." {
            // Knot signs the DS with the original TTL of the zone file.
            assert_eq!(answers[0]["answer"]["ttl"], 7200, "{json:#}");
        }
        assert_eq!(
            out.status.code() == Some(0),
            validation != "bogus",
            "{zone}"
        );
    }
}

/// A Knot hierarchy for validated parent answers (safety rule 10): `.` (NSEC) and `test.`
/// (signed as `tld`, or unsigned with no DS at the root) at 127.0.54.1; `signed.test.`
/// (with its DS), `pending.test.` (signed, no DS yet) and `plain.test.` (unsigned, no DS)
/// at 127.0.54.2. Returns what keeps it alive and the observer's settings.
async fn knot_tld(tld: Denial) -> (tempfile::TempDir, Knots, u16, DnsSettings) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let parent_dir = dir.path().join("parent");
    let child_dir = dir.path().join("child");
    std::fs::create_dir_all(&parent_dir).unwrap();
    std::fs::create_dir_all(&child_dir).unwrap();
    let parent_conf = conf_with(
        &parent_dir,
        PARENT,
        port,
        &[(".", Denial::Nsec), ("test.", tld)],
    );
    let child_conf = conf_with(
        &child_dir,
        CHILD,
        port,
        &[
            ("signed.test.", Denial::Nsec),
            ("pending.test.", Denial::Nsec),
            ("plain.test.", Denial::Unsigned),
        ],
    );
    let root_ds = keymgr_csk(&parent_conf, ".");
    let test_ds = (tld != Denial::Unsigned).then(|| keymgr_csk(&parent_conf, "test."));
    let signed_ds = keymgr_csk(&child_conf, "signed.test.");
    keymgr_csk(&child_conf, "pending.test.");
    let soa = |ns: &str| format!("@ 3600 SOA {ns} hostmaster.test. 1 3600 600 86400 60\n");
    let test_ds_line = test_ds
        .map(|ds| format!("test. 3600 DS {ds}\n"))
        .unwrap_or_default();
    std::fs::write(
        parent_dir.join("root.zone"),
        format!(
            "$ORIGIN .\n{}@ 3600 NS ns.test.\ntest. 3600 NS ns.test.\n{test_ds_line}ns.test. 3600 A {PARENT}\n",
            soa("ns.test.")
        ),
    )
    .unwrap();
    std::fs::write(
        parent_dir.join("test.zone"),
        format!(
            "$ORIGIN test.\n{}@ 3600 NS ns.test.\nns 3600 A {PARENT}\nns2 3600 A {CHILD}\n\
             signed 3600 NS ns2.test.\nsigned 3600 DS {signed_ds}\n\
             pending 3600 NS ns2.test.\nplain 3600 NS ns2.test.\n",
            soa("ns.test.")
        ),
    )
    .unwrap();
    for zone in ["signed", "pending", "plain"] {
        std::fs::write(
            child_dir.join(format!("{zone}.test.zone")),
            format!(
                "$ORIGIN {zone}.test.\n{}@ 3600 NS ns2.test.\nwww 300 A 192.0.2.1\n",
                soa("ns2.test.")
            ),
        )
        .unwrap();
    }
    let anchor = dir.path().join("root.ds");
    std::fs::write(&anchor, format!(". 3600 IN DS {root_ds}\n")).unwrap();
    let knots = Knots(vec![knotd(&parent_conf), knotd(&child_conf)]);
    let parent_addr: SocketAddr = format!("{PARENT}:{port}").parse().unwrap();
    let child_addr: SocketAddr = format!("{CHILD}:{port}").parse().unwrap();
    wait_for(parent_addr, ".").await;
    wait_for(parent_addr, "test.").await;
    for zone in ["signed.test.", "pending.test.", "plain.test."] {
        wait_for(child_addr, zone).await;
    }
    let settings = DnsSettings {
        root_hints: vec![PARENT.parse().unwrap()],
        port,
        trust_anchor_file: Some(anchor),
        validating_resolvers: Vec::new(),
        query_timeout: Duration::from_secs(1),
        query_attempts: 2,
        ..DnsSettings::default()
    };
    (dir, knots, port, settings)
}

/// The TLD's DNSKEY set as its server gives it (for the direct NXDOMAIN proofs).
async fn tld_keys(server: SocketAddr) -> Vec<dnssec_warden::dnssec::Dnskey> {
    let transport = NetTransport::new(Duration::from_secs(1));
    let query = build_query(&parse_name("test.").unwrap(), RecordType::DNSKEY, false);
    let answer = transport.exchange(server, &query).await.expect("DNSKEY");
    answer
        .answers
        .iter()
        .filter_map(dnssec_warden::dns::wire::as_dnskey)
        .map(dnssec_warden::dns::wire::dnskey_from)
        .collect()
}

/// Validated parent answers (safety rule 10) against Knot: the TLD signed with NSEC, with
/// NSEC3, with NSEC3 opt-out: "present" (signed.test.) and "absent" (plain.test.) validated
/// at the parent; an NXDOMAIN's proof (NSEC cover and wildcard, or the NSEC3
/// closest-encloser proof) valid for its name; and an unsigned TLD gives the answers as
/// `insecure` evidence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validated_parent_views_under_knot_tlds() {
    for tld in [
        Denial::Nsec,
        Denial::Nsec3,
        Denial::Nsec3OptOut,
        Denial::Unsigned,
    ] {
        let (_dir, _knots, port, settings) = knot_tld(tld).await;
        let observer = DnsObserver::new(&settings).expect("observer");
        let signed = observer
            .parent_validated("signed.test.")
            .await
            .unwrap_or_else(|e| panic!("{tld:?}: {e}"));
        let plain = observer
            .parent_validated("plain.test.")
            .await
            .unwrap_or_else(|e| panic!("{tld:?}: {e}"));
        let pending = observer
            .parent_validated("pending.test.")
            .await
            .unwrap_or_else(|e| panic!("{tld:?}: {e}"));
        assert!(pending.all_absent(), "{tld:?}: {pending:?}");
        assert_eq!(pending.evidence, plain.evidence, "{tld:?}");
        assert!(
            signed
                .answers
                .iter()
                .all(|a| matches!(a.answer, DsAnswer::Present { .. })),
            "{tld:?}: {signed:?}"
        );
        assert!(plain.all_absent(), "{tld:?}: {plain:?}");
        if tld == Denial::Unsigned {
            for view in [&signed, &plain] {
                assert!(
                    matches!(&view.evidence, Evidence::Insecure(why) if why.contains("no DS for test.")),
                    "{view:?}"
                );
            }
            continue;
        }
        assert_eq!(signed.evidence, Evidence::Validated, "{tld:?}");
        assert_eq!(plain.evidence, Evidence::Validated, "{tld:?}");
        assert_eq!(observer.key_cache_stats().fetches, 1, "{tld:?}");

        // NXDOMAIN, proven with the TLD's keys; and that proof is for its own name only.
        let server: SocketAddr = format!("{PARENT}:{port}").parse().unwrap();
        let keys = tld_keys(server).await;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as u32;
        let missing = parse_name("nonexistent.test.").unwrap();
        let budget = dnssec_warden::dns::Budget::new(Default::default());
        let transport = NetTransport::new(Duration::from_secs(1));
        let answer = transport
            .exchange(server, &build_query(&missing, RecordType::DS, false))
            .await
            .expect("NXDOMAIN answer");
        let proof = prove_ds(&answer, &missing, "test.", &keys, now, &budget);
        let expected = if tld == Denial::Nsec {
            Proof::NsecNxdomain
        } else {
            Proof::Nsec3Nxdomain
        };
        assert_eq!(proof, Ok(expected), "{tld:?}: {answer:?}");
        // The NODATA for the unsigned delegation, proven the way the TLD denies.
        let plain_name = parse_name("plain.test.").unwrap();
        let answer_nodata = transport
            .exchange(server, &build_query(&plain_name, RecordType::DS, false))
            .await
            .expect("NODATA answer");
        let expected = match tld {
            Denial::Nsec3 => Proof::Nsec3Nodata,
            Denial::Nsec3OptOut => Proof::Nsec3OptOut,
            _ => Proof::NsecNodata,
        };
        assert_eq!(
            prove_ds(&answer_nodata, &plain_name, "test.", &keys, now, &budget),
            Ok(expected),
            "{tld:?}: {answer_nodata:?}"
        );
        if tld == Denial::Nsec {
            let other = parse_name("zzz.test.").unwrap();
            assert!(prove_ds(&answer, &other, "test.", &keys, now, &budget).is_err());
        }
        // Signatures outside their window at the time of the look fail.
        let proof = prove_ds(
            &answer,
            &missing,
            "test.",
            &keys,
            now + 400 * 86400,
            &budget,
        );
        assert!(
            matches!(&proof, Err(e) if e.to_string().contains("validity window")),
            "{tld:?}: {proof:?}"
        );
    }
}
