//! Issue 11, through the real binary: a `systemctl reload` (SIGHUP) with a file that parses
//! but cannot run (secret file missing or empty, trust anchor file missing, no
//! `[provider]`) is refused and the daemon keeps running on what it had; and
//! `demo --keep` holds the database lock, so a `run` on its configuration is refused.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dnssec_warden::lab::dns::{KeySource, LabDns};
use dnssec_warden::lab::{ProviderSim, SimOptions};
use serde_json::Value;

const KEY: &str = "reload-api-key-123456";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
}

/// A child process, killed by PID when the test ends, however it ends.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = bin()
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn wait_state(config: &Path, zone: &str, want: &str, within: Duration, daemon: &Proc) {
    let until = Instant::now() + within;
    loop {
        let (ok, out, _) = cli(config, &["status", zone, "--json"]);
        let s: Value = if ok {
            serde_json::from_str(&out).unwrap_or_default()
        } else {
            Value::Null
        };
        if s["state"] == want {
            return;
        }
        assert!(
            Instant::now() < until,
            "{zone} never reached {want}; now {s}\n--- daemon log ---\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the log holds `n` lines containing `needle`; false after `within`.
async fn wait_log(daemon: &Proc, needle: &str, n: usize, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if daemon.log().matches(needle).count() >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_could_not_run_keeps_the_running_configuration() {
    let zone = "reload.test.";
    let sim = ProviderSim::start(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            api_keys: vec![KEY.into()],
            ds_ttl: 2,
            name_server_ttl: 1,
            ..SimOptions::default()
        },
    )
    .await
    .unwrap();
    let lab = LabDns::start().await.unwrap();
    assert!(sim.handle().add_zone(zone));
    lab.add_child(zone, KeySource::provider(sim.handle()))
        .unwrap();
    lab.set_ds_ttl(zone, 2).unwrap();
    lab.set_zone_ttl(zone, 1).unwrap();
    lab.set_dnskey_ttl(zone, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, format!("{KEY}\n")).unwrap();
    std::fs::write(dir.path().join("empty-key"), "\n").unwrap();
    let config = dir.path().join("config.toml");
    let provider = format!(
        "[provider]\nbase_url = \"{}\"\napi_key_file = {:?}\nrequest_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n",
        sim.base_url(),
        key,
    );
    let rest = format!(
        "[database]\npath = {:?}\n\
         {}\
         [timing]\npoll_waiting = \"300ms\"\npoll_active = \"2s\"\npropagation_margin = \"1s\"\n\
         ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\n\
         [zones]\nnames = [\"{zone}\"]\n",
        dir.path().join("state.db"),
        lab.config_section(),
    );
    let good = format!("{provider}{rest}");
    std::fs::write(&config, &good).unwrap();
    let anchors = lab.trust_anchor_path().display().to_string();
    assert!(good.contains(&anchors));

    let log = dir.path().join("daemon.log");
    let mut daemon = Proc {
        child: bin()
            .args(["run", "--config"])
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the daemon starts"),
        log,
    };
    wait_state(&config, zone, "disabled", Duration::from_secs(30), &daemon).await;

    // Each file parses; none of them could run. Each is refused, naming why.
    let variants = [
        (
            "the API key file is missing",
            good.replace(
                &format!("{key:?}"),
                &format!("{:?}", dir.path().join("no-such-key")),
            ),
            "no-such-key",
        ),
        (
            "the API key file is empty",
            good.replace(
                &format!("{key:?}"),
                &format!("{:?}", dir.path().join("empty-key")),
            ),
            "empty",
        ),
        (
            "the trust anchor file is missing",
            good.replace(
                &anchors,
                &dir.path().join("no-such-anchors").display().to_string(),
            ),
            "no-such-anchors",
        ),
        ("[provider] is gone", rest.clone(), "[provider]"),
    ];
    for (i, (what, text, cause)) in variants.iter().enumerate() {
        assert_ne!(text, &good, "{what}: the variant differs");
        std::fs::write(&config, text).unwrap();
        daemon.signal("HUP");
        let reported = wait_log(&daemon, "reload failed", i + 1, Duration::from_secs(10)).await;
        // Give a daemon that took the file a moment to fall over.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(daemon.alive(), "{what}: the daemon died\n{}", daemon.log());
        assert!(reported, "{what}: no \"reload failed\"\n{}", daemon.log());
        let line = daemon
            .log()
            .lines()
            .filter(|l| l.contains("reload failed"))
            .nth(i)
            .unwrap_or_default()
            .to_string();
        assert!(line.contains("ERROR"), "{what}: logged at error: {line}");
        assert!(line.contains(cause), "{what}: the cause {cause:?}: {line}");
        assert!(
            !daemon.log().contains("configuration reloaded"),
            "{what}\n{}",
            daemon.log()
        );
    }

    // It still works on the configuration it had, the file without [provider] still on
    // disk (`enable` needs only [database]): an intent is acted on at the provider.
    let (ok, _, err) = cli(&config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(
        &config,
        zone,
        "awaiting_ds",
        Duration::from_secs(40),
        &daemon,
    )
    .await;
    assert!(sim.handle().dnssec_enabled(zone));

    // The good file reloads.
    std::fs::write(&config, &good).unwrap();
    daemon.signal("HUP");
    assert!(
        wait_log(
            &daemon,
            "configuration reloaded",
            1,
            Duration::from_secs(10)
        )
        .await,
        "{}",
        daemon.log()
    );
    assert!(daemon.alive());

    daemon.signal("TERM");
    let status = daemon
        .wait_exit(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{}", daemon.log());
}

#[test]
fn demo_keep_holds_the_lock_against_a_second_engine() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut demo = Proc {
        child: bin()
            .args(["demo", "--keep"])
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("the demo starts"),
        log: log.path().to_path_buf(),
    };
    // The demo prints the commands to try, naming its config, once the world stays up.
    let stdout = demo.child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.trim().strip_prefix("dnssec-warden status --config ") {
                let _ = tx.send(PathBuf::from(rest.trim()));
            }
        }
    });
    let config = rx
        .recv_timeout(Duration::from_secs(90))
        .unwrap_or_else(|_| panic!("demo --keep never offered its config\n{}", demo.log()));
    assert!(demo.alive());

    // A `run` on the demo's config: refused at once, or it is a second engine.
    let second_log = config.with_file_name("second.log");
    let mut second = Proc {
        child: bin()
            .args(["run", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&second_log).unwrap())
            .spawn()
            .unwrap(),
        log: second_log,
    };
    let status = second.wait_exit(Duration::from_secs(15));
    let stderr = second.log();
    assert!(
        status.is_some_and(|s| !s.success()),
        "a second engine started on the demo's database:\n{stderr}"
    );
    assert!(stderr.contains("already running"), "{stderr}");

    // Ctrl-C ends the demo; it leaves its directory behind on purpose, the test cleans up.
    demo.signal("INT");
    let _ = demo.wait_exit(Duration::from_secs(15));
    if let Some(dir) = config.parent()
        && dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("dnssec-warden-demo-"))
    {
        let _ = std::fs::remove_dir_all(dir);
    }
}
