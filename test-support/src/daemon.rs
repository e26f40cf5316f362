//! The real binary in end-to-end tests: a daemon child process (stopped by PID when the
//! test ends, however it ends), one-shot CLI calls, and a lab world (the provider
//! simulator and the lab DNS hierarchy) with a configuration file for them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dnssec_warden_lab::dns::{KeySource, LabDns};
use dnssec_warden_lab::{ProviderSim, SimOptions};
use serde_json::Value;

pub const KEY: &str = "e2e-api-key-123456";

/// The `dnssec-warden` binary under test. Cargo puts its path in
/// `CARGO_BIN_EXE_dnssec-warden` when it builds an integration test or a benchmark (the
/// `env!` those use) and when it runs one; this crate is neither, so it reads the variable
/// at run time, and else finds the binary where Cargo puts it, beside the `deps/` folder
/// of the running test (a test binary started by hand).
pub fn exe() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_dnssec-warden") {
        return path.into();
    }
    let test = std::env::current_exe().expect("the test's own path");
    let mut dir = test
        .parent()
        .expect("the test binary's folder")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join("dnssec-warden");
    assert!(
        path.exists(),
        "no dnssec-warden binary at {} (CARGO_BIN_EXE_dnssec-warden unset): run the tests with cargo",
        path.display()
    );
    path
}

pub fn bin() -> Command {
    Command::new(exe())
}

/// A daemon child process, killed by PID when the test ends, however it ends.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    pub fn start(config: &Path, log: PathBuf) -> Self {
        Self::start_with_env(config, log, &[])
    }

    pub fn start_with_env(config: &Path, log: PathBuf, env: &[(&str, String)]) -> Self {
        let file = std::fs::File::create(&log).unwrap();
        let child = bin()
            .args(["run", "--config"])
            .arg(config)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("the daemon starts");
        Self { child, log }
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `n` lines containing `needle`; false after `within`.
    pub async fn wait_log(&self, needle: &str, n: usize, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.log().matches(needle).count() >= n {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The peak resident set of the process, from /proc (kB).
    pub fn peak_rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one command in `cwd`; (exit code, stdout, stderr), -1 for a signal.
pub fn run_in(config: &Path, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = bin()
        .args(args)
        .arg("--config")
        .arg(config)
        .current_dir(cwd)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs one command from `/` (a relative path cannot resolve by accident).
pub fn run(config: &Path, args: &[&str]) -> (i32, String, String) {
    run_in(config, args, Path::new("/"))
}

/// Runs one command; (success, stdout, stderr).
pub fn cli(config: &Path, args: &[&str]) -> (bool, String, String) {
    let (code, out, err) = run(config, args);
    (code == 0, out, err)
}

pub fn try_status(config: &Path, zone: &str) -> Option<Value> {
    let (ok, out, _) = cli(config, &["status", zone, "--json"]);
    ok.then(|| serde_json::from_str(&out).unwrap())
}

pub fn status(config: &Path, zone: &str) -> Value {
    try_status(config, zone).expect("status works")
}

pub async fn wait_state(config: &Path, zone: &str, want: &str, within: Duration, daemon: &Daemon) {
    wait_status(config, zone, within, daemon, |s| s["state"] == want).await;
}

/// Waits until the zone's `status --json` satisfies `done`; fails the test after `within`.
pub async fn wait_status(
    config: &Path,
    zone: &str,
    within: Duration,
    daemon: &Daemon,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let until = Instant::now() + within;
    loop {
        // Until the daemon's first pass the zone may not be in the database yet.
        let s = try_status(config, zone).unwrap_or_default();
        if done(&s) {
            return s;
        }
        assert!(
            Instant::now() < until,
            "{zone}: the awaited status never came; now {s}\n--- daemon log ---\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The provider simulator and the lab DNS hierarchy with one child zone, and a
/// configuration file for them with compressed timings.
pub struct LabWorld {
    pub sim: ProviderSim,
    pub lab: LabDns,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub key_file: PathBuf,
    /// Everything of the file after `[provider]`.
    pub rest: String,
}

impl LabWorld {
    pub async fn start(zone: &str) -> Self {
        let sim = ProviderSim::start(
            "127.0.0.1:0".parse().unwrap(),
            SimOptions {
                api_keys: vec![KEY.into()],
                ds_ttl: 2,
                name_server_ttl: 1,
                name_servers: dnssec_warden_lab::dns::NAME_SERVERS
                    .map(String::from)
                    .to_vec(),
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
        let key_file = dir.path().join("api-key");
        std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
        let config = dir.path().join("config.toml");
        let rest = format!(
            "[database]\npath = {:?}\n\
             {}\
             [timing]\npoll_waiting = \"300ms\"\npoll_active = \"2s\"\npropagation_margin = \"1s\"\n\
             ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\n\
             [zones]\nnames = [\"{zone}\"]\n",
            dir.path().join("state.db"),
            lab.config_section(),
        );
        let world = Self {
            sim,
            lab,
            dir,
            config,
            key_file,
            rest,
        };
        world.write_config(world.sim.base_url().as_str());
        world
    }

    /// The `[provider]` section for `base_url`, with short timeouts.
    pub fn provider_section(&self, base_url: &str) -> String {
        format!(
            "[provider]\nbase_url = \"{}\"\napi_key_file = {:?}\nrequest_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n",
            base_url.trim_end_matches('/'),
            self.key_file,
        )
    }

    /// Writes the configuration with the provider at `base_url` (a fault proxy, say).
    pub fn write_config(&self, base_url: &str) {
        let text = format!("{}{}", self.provider_section(base_url), self.rest);
        std::fs::write(&self.config, text).unwrap();
    }
}
