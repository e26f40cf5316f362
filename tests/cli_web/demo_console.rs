//! `demo --keep` opens the product's web console on its world, through the real binary:
//! the printed address, user and password work, and nothing else of them is left behind.
//!
//! - in chromium (test-support/src/browser.rs): the one-time operator logs in, sees the
//!   fleet with the demo's five zones (and by OCR), opens the zone that moved in and its
//!   timeline, presses the switch on a zone the demo turned off and confirms: the intent
//!   is recorded in the demo's database, the demo's engine acts on it, and the zone's DS
//!   to enter shows with its copy button (the clipboard read back); Ctrl-C (SIGINT, by
//!   PID) ends the demo with status 0, the users file and the console gone. Skips (saying so) without
//!   /usr/bin/chromedriver, unless DNSSEC_WARDEN_REQUIRE_BROWSER is set;
//! - over plain HTTP, on `--console-port`: the password logs in, a wrong one does not,
//!   the password is printed once and nowhere else, the users file is 0600 in a 0700
//!   directory; SIGTERM ends the demo cleanly too.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dnssec_warden_test_support::browser::{self, Browser, Chromedriver, screenshot_shows};
use dnssec_warden_test_support::daemon::{Daemon, bin, cli, wait_status};
use dnssec_warden_test_support::pdns::free_port;

use super::web_browser::{copy, eventually, intent_events, listed, log_in};

/// The demo's zones: act one's three, act two's two, as the fleet sorts them.
const ZONES: [&str; 5] = [
    "alpha.test.",
    "beta.test.",
    "delta.test.",
    "echo.test.",
    "gamma.test.",
];
/// The demo's story takes well under a minute (its own deadline is 55 s).
const STORY: Duration = Duration::from_secs(120);
const SHORT: Duration = Duration::from_secs(10);

/// What `demo --keep` printed once its world stays up.
struct Printed {
    /// `http://127.0.0.1:PORT`, without the final slash.
    base: String,
    user: String,
    password: String,
    config: PathBuf,
}

/// A running `demo --keep`, its stdout collected as it comes.
struct Demo {
    process: Daemon,
    stdout: Arc<Mutex<String>>,
    printed: Printed,
}

impl Demo {
    /// Starts `demo --keep` with `args` and waits for its console's lines.
    fn start(args: &[&str]) -> Self {
        let log = tempfile::NamedTempFile::new().unwrap();
        let (_, log) = log.keep().unwrap();
        let mut process = Daemon {
            child: bin()
                .args(["demo", "--keep"])
                .args(args)
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("the demo starts"),
            log,
        };
        let stdout = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let pipe = process.child.stdout.take().unwrap();
            let stdout = stdout.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let said = {
                        let mut all = stdout.lock().unwrap();
                        all.push_str(&line);
                        all.push('\n');
                        all.clone()
                    };
                    if line.contains("dnssec-warden status --config ") {
                        let _ = tx.send(said);
                    }
                }
            });
        }
        let said = rx.recv_timeout(STORY).unwrap_or_else(|_| {
            panic!(
                "demo --keep never offered its console\n{}\n--- stderr ---\n{}",
                stdout.lock().unwrap(),
                process.log()
            )
        });
        let field = |name: &str| -> String {
            said.lines()
                .find_map(|l| l.trim_start().strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("no {name:?} line:\n{said}"))
                .to_string()
        };
        let url = field("console ");
        let base = url
            .strip_suffix('/')
            .unwrap_or_else(|| panic!("{url:?} is not a URL ending in /"))
            .to_string();
        assert!(
            base.starts_with("http://127.0.0.1:"),
            "not loopback: {base}"
        );
        let printed = Printed {
            base,
            user: field("user "),
            password: field("password "),
            config: PathBuf::from(field("dnssec-warden status --config ")),
        };
        assert!(process.alive());
        Self {
            process,
            stdout,
            printed,
        }
    }

    fn dir(&self) -> &Path {
        self.printed.config.parent().unwrap()
    }

    fn users_file(&self) -> PathBuf {
        self.dir().join("web-users")
    }

    fn said(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    /// Signals the demo by PID; it must exit 0 within a few seconds, its users file and
    /// its console gone.
    fn stop(&mut self, signal: &str) {
        let addr = self.printed.base.trim_start_matches("http://").to_string();
        self.process.signal(signal);
        let status = self
            .process
            .wait_exit(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("demo --keep did not end on SIG{signal}"));
        assert!(
            status.success(),
            "SIG{signal}: {status}\n{}\n--- stderr ---\n{}",
            self.said(),
            self.process.log()
        );
        assert!(
            !self.users_file().exists(),
            "the one-time users file outlived the demo"
        );
        assert!(
            std::net::TcpStream::connect(&addr).is_err(),
            "the console still answers at {addr}"
        );
    }

    /// The password: once in what the demo printed, in no other output, and neither it
    /// nor its hash anywhere but the users file.
    fn check_the_password_is_said_once(&self) {
        let p = &self.printed.password;
        assert_eq!(
            self.said().matches(p.as_str()).count(),
            1,
            "{}",
            self.said()
        );
        assert!(!self.process.log().contains(p.as_str()), "in stderr");
        let config = std::fs::read_to_string(&self.printed.config).unwrap();
        assert!(!config.contains(p.as_str()) && !config.contains("$argon2id$"));
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        // Killed by PID if still running (the Daemon's drop), then the directory the demo
        // leaves behind and the stderr file.
        let _ = self.process.child.kill();
        let _ = self.process.child.wait();
        let dir = self.dir().to_path_buf();
        if dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("dnssec-warden-demo-"))
        {
            let _ = std::fs::remove_dir_all(dir);
        }
        let _ = std::fs::remove_file(&self.process.log);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_keep_serves_the_console_to_a_browser_until_ctrl_c() {
    if !browser::should_run("demo_console").unwrap() {
        return;
    }
    let started = Instant::now();
    let mut demo = Demo::start(&[]);
    let Printed {
        base,
        user,
        password,
        config,
    } = &demo.printed;
    eprintln!("demo kept at {:?}: {base}", started.elapsed());
    assert_eq!(user, "demo");

    let driver = Chromedriver::start().unwrap();
    let b = Browser::start(&driver).await.unwrap();

    // The login page first; the printed password logs the operator in.
    b.goto(&format!("{base}/zones")).await.unwrap();
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/login"));
    log_in(&b, user, password).await;
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones"),
        "the printed password did not log in: {}",
        b.text("main").await.unwrap_or_default()
    );
    let who = b.text("header .who").await.unwrap();
    assert!(who.contains("demo (operator)"), "{who}");

    // The fleet: the demo's five zones.
    assert_eq!(listed(&b).await, ZONES);
    b.in_viewport(&["#zones"]).await.unwrap();
    let fleet = b.screenshot("demo-fleet").await.unwrap();
    screenshot_shows(&fleet.path, &ZONES).unwrap();

    // The zone that moved in: active, its page with its timeline.
    let gamma = "gamma.test.";
    b.submit(&format!("#zones a.zone[href=\"/zones/{gamma}\"]"))
        .await
        .unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{gamma}")
    );
    assert_eq!(b.text("h1 .state").await.unwrap(), "active");
    b.find(".timeline svg").await.unwrap();
    let history = b.text("#history").await.unwrap();
    assert!(history.contains("awaiting_delegation"), "{history}");

    // The switch: the demo turned alpha off; the operator turns it on again, confirming.
    let alpha = "alpha.test.";
    let before = intent_events(config, alpha);
    b.goto(&format!("{base}/zones/{alpha}")).await.unwrap();
    assert_eq!(b.text("h1 .state").await.unwrap(), "disabled");
    b.submit("#switch a[href$=\"/switch?to=enable\"]")
        .await
        .unwrap();
    let consequence = b.text("#consequence").await.unwrap();
    assert!(
        consequence.contains("entered at the registrar"),
        "{consequence}"
    );
    assert_eq!(
        intent_events(config, alpha),
        before,
        "nothing before the yes"
    );
    b.submit("button[name=confirm][value=yes]").await.unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{alpha}?recorded=enable")
    );
    let notice = b.text("p.notice").await.unwrap();
    assert!(notice.contains("Intent enabled recorded"), "{notice}");
    let after = intent_events(config, alpha);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert_eq!(
        after.last().map(String::as_str),
        Some("operator demo (web console) asked to enable DNSSEC")
    );

    // The demo's own engine acts on it: DNSSEC on at its provider, then the DS to enter,
    // shown on the zone's page with its copy button (the clipboard read back).
    let s = wait_status(config, alpha, STORY, &demo.process, |s| {
        s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
    })
    .await;
    let ds = s["ds_to_enter"].as_str().unwrap().to_string();
    eventually("the zone page showing the DS", SHORT, async || {
        b.goto(&format!("{base}/zones/{alpha}")).await?;
        match b.find_all("section#enter #ds-line").await?.first() {
            Some(_) => Ok(()),
            None => Err(b.text("table.facts").await?),
        }
    })
    .await;
    assert_eq!(b.text("#ds-line").await.unwrap(), ds);
    b.in_viewport(&["h1", "#ds-line", "button[data-copy=\"ds-line\"]"])
        .await
        .unwrap();
    let zone_shot = b.screenshot("demo-zone").await.unwrap();
    screenshot_shows(&zone_shot.path, &[alpha, "Enter at the registrar"]).unwrap();
    b.grant_clipboard().await.unwrap();
    assert_eq!(copy(&b, "button[data-copy=\"ds-line\"]").await, ds);
    eprintln!("the browser's part done at {:?}", started.elapsed());
    b.close().await.unwrap();
    drop(driver);

    demo.check_the_password_is_said_once();
    demo.stop("INT");
    eprintln!("all done in {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_keep_console_port_takes_the_printed_password_only_and_ends_on_sigterm() {
    // --console-port without --keep: a usage error, nothing started.
    let out = bin()
        .args(["demo", "--console-port", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let port = free_port().unwrap();
    let mut demo = Demo::start(&["--console-port", &port.to_string()]);
    let p = &demo.printed;
    assert_eq!(p.base, format!("http://127.0.0.1:{port}"));

    // The users file: the user's alone, one operator line, in a directory of its own.
    let users = demo.users_file();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&users), 0o600);
    assert_eq!(mode(demo.dir()), 0o700);
    let text = std::fs::read_to_string(&users).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("demo:operator:$argon2id$"),
        "not a hash line"
    );
    // The config names what is served: check-config reads it as `run` would.
    let (ok, out, err) = cli(&p.config, &["check-config"]);
    assert!(ok, "{out}{err}");

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = async |user: &str, password: &str| {
        http.post(format!("{}/login", p.base))
            .form(&[("user", user), ("password", password)])
            .send()
            .await
            .unwrap()
    };
    let wrong = login("demo", "not-the-printed-password").await;
    assert_eq!(wrong.status(), reqwest::StatusCode::UNAUTHORIZED);
    let right = login(&p.user, &p.password).await;
    assert_eq!(right.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(right.headers()["location"], "/zones");
    let cookie = right.headers()["set-cookie"].to_str().unwrap();
    let session = cookie.split(';').next().unwrap().to_string();
    let fleet = http
        .get(format!("{}/zones", p.base))
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    assert_eq!(fleet.status(), reqwest::StatusCode::OK);
    let page = fleet.text().await.unwrap();
    for zone in ZONES {
        assert!(page.contains(&format!("href=\"/zones/{zone}\"")), "{page}");
    }

    demo.check_the_password_is_said_once();
    demo.stop("TERM");
}
