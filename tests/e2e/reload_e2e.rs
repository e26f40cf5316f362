//! Through the real binary: a `systemctl reload` (SIGHUP) with a file that parses
//! but cannot run (secret file missing or empty, trust anchor file missing, no
//! `[provider]`) is refused and the daemon keeps running on what it had; and
//! `demo --keep` holds the database lock, so a `run` on its configuration is refused.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use dnssec_warden_test_support::daemon::{Daemon, LabWorld, bin, cli, wait_state};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_could_not_run_keeps_the_running_configuration() {
    let zone = "reload.test.";
    let w = LabWorld::start(zone).await;
    let (sim, lab, dir, config) = (&w.sim, &w.lab, &w.dir, &w.config);
    let key = &w.key_file;
    let rest = w.rest.clone();
    std::fs::write(dir.path().join("empty-key"), "\n").unwrap();
    let good = std::fs::read_to_string(config).unwrap();
    let anchors = lab.trust_anchor_path().display().to_string();
    assert!(good.contains(&anchors));

    let mut daemon = Daemon::start(config, dir.path().join("daemon.log"));
    wait_state(config, zone, "disabled", Duration::from_secs(30), &daemon).await;

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
        std::fs::write(config, text).unwrap();
        daemon.signal("HUP");
        let reported = daemon
            .wait_log("reload failed", i + 1, Duration::from_secs(10))
            .await;
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
    let (ok, _, err) = cli(config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(
        config,
        zone,
        "awaiting_ds",
        Duration::from_secs(40),
        &daemon,
    )
    .await;
    assert!(sim.handle().dnssec_enabled(zone));

    // The good file reloads.
    std::fs::write(config, &good).unwrap();
    daemon.signal("HUP");
    assert!(
        daemon
            .wait_log("configuration reloaded", 1, Duration::from_secs(10))
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
    let mut demo = Daemon {
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
    // The whole demo (both acts) runs before it offers the config.
    let config = rx
        .recv_timeout(Duration::from_secs(150))
        .unwrap_or_else(|_| panic!("demo --keep never offered its config\n{}", demo.log()));
    assert!(demo.alive());

    // A `run` on the demo's config: refused at once, or it is a second engine.
    let second_log = config.with_file_name("second.log");
    let mut second = Daemon {
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
