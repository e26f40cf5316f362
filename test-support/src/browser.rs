//! A real browser for the web console's tests: Debian's `chromium`, headless, driven over
//! WebDriver by its `chromedriver` (package `chromium-driver`) through [`crate::webdriver`].
//!
//! - [`Chromedriver`] is the driver process on a free loopback port, started in a process
//!   group of its own, with a temporary `HOME` and `TMPDIR`. The chromium it starts
//!   (browser, zygotes, renderers, GPU, network and storage services) is in that group,
//!   and dropping the driver kills the group by its PGID. Chromium's crash handlers
//!   (`chrome_crashpad_handler`, two) are not: they start a session of their own, and exit
//!   by themselves once their browser is gone; the drop waits for that, and kills by PID
//!   any process still naming the driver's home. So a failed test leaves no chromium
//!   behind, and nothing of chromium's outside that home (no `~/.config/chromium`, no
//!   `/tmp/org.chromium.*`).
//! - [`Browser`] is one WebDriver session on it, a fresh profile in the driver's home,
//!   with the helpers a console test uses. [`Browser::close`] ends the session (chromium
//!   exits by itself); dropping it without closing leaves that to the driver's drop.
//! - [`should_run`]: a browser test skips, saying so, when chromedriver is not installed,
//!   unless `DNSSEC_WARDEN_REQUIRE_BROWSER` is set (tests/run.sh sets it: there a missing
//!   browser is a failure).
//!
//! The clipboard, as found with chromium 148 (`--headless=new`, Debian 12): a copy is
//! checked for real, by reading the clipboard back. The page's
//! `navigator.clipboard.writeText` on a WebDriver click (a trusted user gesture) writes
//! the headless platform's clipboard (in the browser process, not X11's), and
//! `navigator.clipboard.readText()` in `execute_async` reads it back. Two things are
//! needed, both done by [`Browser::grant_clipboard`] after the page is loaded (a
//! permission is the current origin's): `clipboard-read` granted by the W3C Set
//! Permission command (`POST /session/{id}/permissions`, which chromedriver implements),
//! and focus emulation (CDP `Emulation.setFocusEmulationEnabled` through chromedriver's
//! `goog/cdp/execute`): a headless window never has the focus, and without it both calls
//! fail with "NotAllowedError: Document is not focused", so a console's button falls back
//! to selecting the text ([`Browser::selected_text`] checks that path).
//!
//! The screenshots ([`Browser::screenshot`]) go to `target/screenshots/`, kept after the
//! run; [`screenshot_shows`] reads one with Tesseract OCR (Debian's `tesseract-ocr` 5.3)
//! and says which of the given texts it does not show. At chromium's default font (DejaVu
//! Sans 16 px) in a 1280-wide viewport it reads body text, links, table cells and `<code>`
//! zone names reliably, with the usual confusions ([`ocr_shows`] forgives them: `1`/`l`,
//! `0`/`o`, `,` for `.`, a space after a `.`). It does not read reliably a button's label
//! beside an input box, nor a 13 px monospace hex digest: for those, assert in the page
//! ([`Browser::in_viewport`], [`Browser::text`]).

use std::fmt::Debug;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::knot::Result;
use crate::pdns::free_port;
use crate::webdriver::{Element, Session};

/// The Debian packages a browser test needs; tests/run.sh installs them, with
/// `tesseract-ocr` for [`screenshot_shows`] and `fonts-dejavu-core`, the fonts the pages
/// are rendered (and read) in.
pub const PACKAGES: &[&str] = &[
    "chromium",
    "chromium-driver",
    "tesseract-ocr",
    "fonts-dejavu-core",
];

pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const TESSERACT: &str = "/usr/bin/tesseract";

/// Set (to anything) where a missing browser must fail a browser test, not skip it.
pub const REQUIRE_ENV: &str = "DNSSEC_WARDEN_REQUIRE_BROWSER";

/// Whether the browser test `test` runs: `Ok(true)` when chromedriver is installed;
/// `Ok(false)` (after saying so on stderr) when it is not and [`REQUIRE_ENV`] is unset;
/// an error when it is not and [`REQUIRE_ENV`] is set.
pub fn should_run(test: &str) -> Result<bool> {
    if Path::new(CHROMEDRIVER).exists() {
        return Ok(true);
    }
    let hint = format!("install `{}` (tests/run.sh does)", PACKAGES.join(" "));
    if std::env::var_os(REQUIRE_ENV).is_some() {
        return Err(format!(
            "{test}: {CHROMEDRIVER} is missing and {REQUIRE_ENV} is set: {hint}"
        ));
    }
    eprintln!(
        "SKIPPED {test}: {CHROMEDRIVER} is missing: {hint}, or set {REQUIRE_ENV} to fail instead"
    );
    Ok(false)
}

/// `chromedriver` on a free port of 127.0.0.1, in its own process group; the group
/// (chromedriver and every chromium it started) is killed by its PGID on drop.
pub struct Chromedriver {
    child: Child,
    pub port: u16,
    /// `HOME`, `TMPDIR` and the XDG directories of the driver and its chromiums, their
    /// profiles, the log: chromium keeps its crash reports under `~/.config/chromium`
    /// whatever its profile, and its shared memory and sockets in `TMPDIR`. Removed after
    /// the kill.
    home: tempfile::TempDir,
}

impl Chromedriver {
    /// Starts the driver and returns once its `GET /status` says it is ready (20 s at most
    /// a try). The free port it is given may be taken by another test's server before the
    /// driver binds it: then it is tried again on another (a few times at most).
    pub fn start() -> Result<Self> {
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::start_on(free_port()?) {
                Err(e) if tries < 5 && e.contains("ERR_ADDRESS_IN_USE") => continue,
                other => return other,
            }
        }
    }

    fn start_on(port: u16) -> Result<Self> {
        let home = tempfile::Builder::new()
            .prefix("chromedriver")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let log = home.path().join("chromedriver.log");
        let stderr = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .arg(format!("--log-path={}", log.display()))
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env("XDG_CACHE_HOME", home.path().join("cache"))
            .env("TMPDIR", home.path())
            // A group of its own (PGID = its PID): what it starts is killed with it.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {CHROMEDRIVER}: {e}"))?;
        let mut driver = Self { child, port, home };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if driver.ready() {
                return Ok(driver);
            }
            if Instant::now() > deadline || !matches!(driver.child.try_wait(), Ok(None)) {
                return Err(format!("chromedriver never became ready\n{}", driver.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The WebDriver endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The driver's PID, which is also its process group's ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its log (`--log-path`): the WebDriver commands and chromium's start.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("chromedriver.log")).unwrap_or_default()
    }

    /// `GET /status` answers `"ready": true`.
    fn ready(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!(
            "GET /status HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str::<Value>(body).is_ok_and(|v| v["value"]["ready"] == Value::Bool(true))
    }

    /// The PIDs of the processes still in the driver's group (`ps`), zombies excluded.
    pub fn group_pids(&self) -> Vec<u32> {
        group_pids(self.pid())
    }

    /// The driver's home directory (`HOME`, `TMPDIR`, `XDG_CONFIG_HOME` under it).
    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// SIGKILL to the whole group, then waits (5 s at most) until none of it is left, nor
    /// any process naming the driver's home: chromium's crash handlers
    /// (`chrome_crashpad_handler`) leave the group (a session of their own) and exit by
    /// themselves when their browser is gone; one still there after 2 s is killed by PID.
    pub fn kill(&mut self) {
        use rustix::process::{Pid, Signal, kill_process, kill_process_group};
        let pgid = self.child.id();
        if let Some(pid) = Pid::from_raw(pgid as i32) {
            let _ = kill_process_group(pid, Signal::KILL);
        }
        let _ = self.child.wait();
        let home = self.home.path().display().to_string();
        let start = Instant::now();
        loop {
            let stragglers = processes_naming(&home);
            if group_pids(pgid).is_empty() && stragglers.is_empty() {
                return;
            }
            if start.elapsed() > Duration::from_secs(5) {
                eprintln!("chromedriver {pgid}: processes left: {stragglers:?}");
                return;
            }
            if start.elapsed() > Duration::from_secs(2) {
                for pid in stragglers.iter().filter_map(|&p| Pid::from_raw(p as i32)) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The live processes (not zombies) whose process group is `pgid`.
pub fn group_pids(pgid: u32) -> Vec<u32> {
    let Ok(out) = Command::new("ps")
        .args(["-e", "-o", "pid=,pgid=,stat="])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse::<u32>().ok()?;
            let group = fields.next()?.parse::<u32>().ok()?;
            let stat = fields.next()?;
            (group == pgid && !stat.starts_with('Z')).then_some(pid)
        })
        .collect()
}

/// The live processes (not zombies) whose command line contains `needle` (a directory
/// of the harness's, such as a profile or the driver's home).
pub fn processes_naming(needle: &str) -> Vec<u32> {
    let Ok(out) = Command::new("ps")
        .args(["-e", "-o", "pid=,stat=,args="])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| line.contains(needle))
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse::<u32>().ok()?;
            let stat = fields.next()?;
            (!stat.starts_with('Z')).then_some(pid)
        })
        .collect()
}

/// The arguments chromium runs with: headless as root (no sandbox), no GPU, `TMPDIR` for
/// shared memory (a container's `/dev/shm` is small), and nothing that reaches out to the
/// network by itself (components, sync, QUIC, background requests: a test machine's
/// network may be closed, and a test has no business there). `--window-size=1280,1000`
/// gives a 1280×861 viewport (the screenshots' size) under chromedriver.
pub fn chromium_args(profile: &Path) -> Vec<String> {
    [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
    ]
    .into_iter()
    .map(String::from)
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// One WebDriver session of headless chromium, on a fresh profile.
pub struct Browser {
    client: Session,
    /// The profile (`--user-data-dir`), in the driver's home: removed with it, once no
    /// chromium writes there.
    profile: PathBuf,
}

/// A screenshot saved by [`Browser::screenshot`].
#[derive(Debug, Clone)]
pub struct Screenshot {
    pub path: PathBuf,
    pub png: Vec<u8>,
}

fn cmd_err(what: impl std::fmt::Display) -> impl FnOnce(String) -> String {
    move |e| format!("{what}: {e}")
}

impl Browser {
    /// A new session of `/usr/bin/chromium` on `driver`.
    pub async fn start(driver: &Chromedriver) -> Result<Self> {
        let profile = tempfile::Builder::new()
            .prefix("profile")
            .tempdir_in(driver.home())
            .map_err(|e| e.to_string())?
            .keep();
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": chromium_args(&profile),
            },
        });
        let client = Session::start(&driver.url(), capabilities)
            .await
            .map_err(|e| format!("no chromium session: {e}\n{}", driver.log()))?;
        Ok(Self { client, profile })
    }

    /// The WebDriver session, for what the helpers do not cover.
    pub fn client(&self) -> &Session {
        &self.client
    }

    /// The profile directory chromium runs on.
    pub fn profile(&self) -> &Path {
        &self.profile
    }

    /// Ends the session: chromium exits (its driver stays).
    pub async fn close(self) -> Result<()> {
        self.client
            .close()
            .await
            .map_err(cmd_err("closing the session"))
    }

    /// Loads `url` and waits for its load event.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.client.goto(url).await.map_err(cmd_err(url))
    }

    pub async fn current_url(&self) -> Result<String> {
        self.client
            .current_url()
            .await
            .map_err(cmd_err("current URL"))
    }

    /// The first element matching the CSS selector, waited for (5 s at most).
    pub async fn find(&self, css: &str) -> Result<Element> {
        self.client
            .wait_for(css, Duration::from_secs(5))
            .await
            .map_err(cmd_err(css))
    }

    /// Every element matching the CSS selector now (none is not an error).
    pub async fn find_all(&self, css: &str) -> Result<Vec<Element>> {
        self.client.find_all(css).await.map_err(cmd_err(css))
    }

    /// A WebDriver click (a trusted user gesture) on the element.
    pub async fn click(&self, css: &str) -> Result<()> {
        self.find(css).await?.click().await.map_err(cmd_err(css))
    }

    /// The rendered text of the element.
    pub async fn text(&self, css: &str) -> Result<String> {
        self.find(css).await?.text().await.map_err(cmd_err(css))
    }

    /// The element's attribute, `None` when it has none.
    pub async fn attr(&self, css: &str, name: &str) -> Result<Option<String>> {
        self.find(css).await?.attr(name).await.map_err(cmd_err(css))
    }

    /// Types `value` into the form field, after clearing it.
    pub async fn fill(&self, css: &str, value: &str) -> Result<()> {
        let field = self.find(css).await?;
        field.clear().await.map_err(cmd_err(css))?;
        field.send_keys(value).await.map_err(cmd_err(css))
    }

    /// Clicks the submit button and waits (10 s at most) until a new document has replaced
    /// the page and finished loading: the form's response (after its redirects).
    pub async fn submit(&self, button_css: &str) -> Result<()> {
        self.client
            .execute("window.__harness_before_submit = true;", vec![])
            .await
            .map_err(cmd_err("marking the page"))?;
        self.click(button_css).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // A new document has no marker (an error while it is being replaced: retry).
            let left = self
                .client
                .execute(
                    "return document.readyState === 'complete' && !window.__harness_before_submit;",
                    vec![],
                )
                .await;
            if matches!(left, Ok(Value::Bool(true))) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("submitting with {button_css}: no new page in 10 s"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The cookies of the current page's origin, as name and value.
    pub async fn cookies(&self) -> Result<Vec<(String, String)>> {
        self.client.cookies().await.map_err(cmd_err("cookies"))
    }

    /// Runs `script` (a function body: `return` gives the value) with `args`.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.client
            .execute(script, args)
            .await
            .map_err(cmd_err("script"))
    }

    /// Runs `script` asynchronously: its value is what it passes to the callback, the last
    /// of `arguments`.
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.client
            .execute_async(script, args)
            .await
            .map_err(cmd_err("async script"))
    }

    /// A screenshot of the viewport (1280×861), saved as `name` (`.png` added) under
    /// [`screenshot_dir`]; an existing file of that name is replaced.
    pub async fn screenshot(&self, name: &str) -> Result<Screenshot> {
        let png = self
            .client
            .screenshot()
            .await
            .map_err(cmd_err("screenshot"))?;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, &png).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Screenshot { path, png })
    }

    /// Sets a permission for the current page's origin (W3C Set Permission, which
    /// chromedriver implements): `name` such as `clipboard-read`, `state` `granted`,
    /// `denied` or `prompt`.
    pub async fn set_permission(&self, name: &str, state: &str) -> Result<()> {
        let body = json!({ "descriptor": { "name": name }, "state": state });
        self.client
            .command(Method::POST, "permissions", Some(body))
            .await
            .map(drop)
            .map_err(cmd_err(format!("permission {name} {state}")))
    }

    /// A Chrome DevTools Protocol command on the current page, through chromedriver's
    /// `goog/cdp/execute`: `Emulation.setFocusEmulationEnabled`, `Browser.grantPermissions`…
    pub async fn cdp(&self, method: &str, params: Value) -> Result<Value> {
        let body = json!({ "cmd": method, "params": params });
        self.client
            .command(Method::POST, "goog/cdp/execute", Some(body))
            .await
            .map_err(cmd_err(format!("CDP {method}")))
    }

    /// Grants the current origin `clipboard-read` and `clipboard-write`, and has the page
    /// behave as focused (a headless window never has the focus, and the clipboard API
    /// refuses an unfocused document: "Document is not focused").
    pub async fn grant_clipboard(&self) -> Result<()> {
        self.set_permission("clipboard-read", "granted").await?;
        self.set_permission("clipboard-write", "granted").await?;
        self.cdp(
            "Emulation.setFocusEmulationEnabled",
            json!({ "enabled": true }),
        )
        .await
        .map(drop)
    }

    /// What the browser's clipboard holds, read by the page with
    /// `navigator.clipboard.readText()` (needs [`Browser::grant_clipboard`] first).
    pub async fn clipboard_text(&self) -> Result<String> {
        let read = self
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 navigator.clipboard.readText().then(
                     (text) => done({ ok: text }),
                     (err) => done({ err: String(err) }));",
                vec![],
            )
            .await?;
        match (&read["ok"], &read["err"]) {
            (Value::String(text), _) => Ok(text.clone()),
            (_, err) => Err(format!("navigator.clipboard.readText(): {err}")),
        }
    }

    /// The text selected in the page (a copy button's fallback selects what it copies).
    pub async fn selected_text(&self) -> Result<String> {
        let selected = self
            .execute("return window.getSelection().toString();", vec![])
            .await?;
        Ok(selected.as_str().unwrap_or_default().to_string())
    }

    /// Puts `text` on the clipboard from the page, to start a check from a known state
    /// (needs [`Browser::grant_clipboard`] first).
    pub async fn set_clipboard_text(&self, text: &str) -> Result<()> {
        let wrote = self
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 navigator.clipboard.writeText(arguments[0]).then(
                     () => done({ ok: true }),
                     (err) => done({ err: String(err) }));",
                vec![Value::String(text.into())],
            )
            .await?;
        match &wrote["ok"] {
            Value::Bool(true) => Ok(()),
            _ => Err(format!("navigator.clipboard.writeText(): {}", wrote["err"])),
        }
    }

    /// Asserts in the page that the element of each selector is displayed and inside the
    /// viewport, the check that stands in for OCR where a text is too small to read.
    pub async fn in_viewport(&self, selectors: &[&str]) -> Result<()> {
        let outside = self
            .execute(
                "return arguments[0].filter((sel) => {
                     const el = document.querySelector(sel);
                     if (!el) return true;
                     const r = el.getBoundingClientRect();
                     const style = getComputedStyle(el);
                     return r.width === 0 || r.height === 0 || style.visibility === 'hidden'
                         || r.top < 0 || r.left < 0
                         || r.bottom > window.innerHeight || r.right > window.innerWidth;
                 });",
                vec![json!(selectors)],
            )
            .await?;
        match outside.as_array() {
            Some(list) if list.is_empty() => Ok(()),
            _ => Err(format!("not displayed inside the viewport: {outside}")),
        }
    }
}

/// Where the screenshots go and stay after the run: `screenshots/` in the target
/// directory (`CARGO_TARGET_DIR`, else the workspace's `target/`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("screenshots")
}

/// The text Tesseract reads in the image (`tesseract IMAGE stdout`).
pub fn ocr(png: &Path) -> Result<String> {
    let out = Command::new(TESSERACT)
        .arg(png)
        .arg("stdout")
        .output()
        .map_err(|e| format!("{TESSERACT}: {e} (install tesseract-ocr)"))?;
    if !out.status.success() {
        return Err(format!(
            "tesseract {}: {}",
            png.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Does the screenshot show every text of `texts`? By OCR ([`ocr_shows`]); `Err` lists
/// the texts it does not show, with what was read.
pub fn screenshot_shows(png: &Path, texts: &[&str]) -> std::result::Result<(), String> {
    let read = ocr(png)?;
    let missing: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|t| !ocr_shows(&read, t))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} does not show {missing:?}; OCR read:\n{read}",
            png.display()
        ))
    }
}

/// OCR's text and a text it should contain, each folded the same way: lower case; the
/// glyphs Tesseract confuses at 16 px as one (`1 l i |` as `l`, `0` as `o`, `,` as `.`,
/// a doubled `.` as one); any run of white space as one space.
fn ocr_fold(s: &str) -> Vec<char> {
    let mut out: Vec<char> = Vec::with_capacity(s.len());
    for c in s.trim().chars().flat_map(char::to_lowercase) {
        let c = match c {
            '1' | 'i' | '|' | '!' => 'l',
            '0' => 'o',
            ',' => '.',
            c if c.is_whitespace() => ' ',
            c => c,
        };
        if !(matches!(c, '.' | ' ') && out.last() == Some(&c)) {
            out.push(c);
        }
    }
    out
}

/// Whether the OCR text `read` shows `text`, both folded ([`ocr_fold`]), a space read
/// beside a `.` or `-` forgiven (it reads `warden. test.`), and as a whole: not inside a
/// longer name (`data.test.` does not show `a.test.`).
pub fn ocr_shows(read: &str, text: &str) -> bool {
    let (read, text) = (ocr_fold(read), ocr_fold(text));
    let name_char = |c: &char| c.is_alphanumeric() || *c == '-';
    // The end of a match of `text` at `read[at..]`, if there is one.
    let match_at = |mut at: usize| -> Option<usize> {
        for (k, c) in text.iter().enumerate() {
            // A space read between this and the text's previous character, one of them a
            // `.` or `-`: skipped.
            let joins = k > 0 && (matches!(c, '.' | '-') || matches!(text[k - 1], '.' | '-'));
            if joins && read.get(at) == Some(&' ') {
                at += 1;
            }
            if read.get(at) != Some(c) {
                return None;
            }
            at += 1;
        }
        Some(at)
    };
    (0..read.len()).any(|at| {
        let before = at.checked_sub(1).and_then(|b| read.get(b));
        !before.is_some_and(|c| name_char(c) || *c == '.')
            && match_at(at).is_some_and(|end| match read.get(end) {
                // `example.test` is shown by `example.test.`, not `shop.example` by
                // `shop.example.test.`
                Some('.') => !read.get(end + 1).is_some_and(name_char),
                next => !next.is_some_and(name_char),
            })
    })
}

impl Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::ocr_shows;

    /// What Tesseract 5.3 read in a chromium screenshot of a table of zones (1280 wide,
    /// DejaVu Sans 16 px).
    const READ: &str = "Fleet\nZone State Since\nexample.test. signed 2025-01-02 10:00\n\
        shop.example.test. waiting-ds\nwarden. test. unsigned\nxn--bcher-kva.test. ds\n\
        mail.corpl..test, removing\nb-L.example.test. signed\n";

    #[test]
    fn ocr_matching_forgives_case_spacing_and_confusable_glyphs() {
        for shown in [
            "example.test.",
            "shop.example.test.",
            "warden.test.",
            "xn--bcher-kva.test.",
            "mail.corp1.test.",
            "b-1.example.test.",
            "EXAMPLE.TEST",
            "Zone State",
        ] {
            assert!(ocr_shows(READ, shown), "{shown}");
        }
        for absent in ["a.test.", "ample.test.", "other.test.", "shop.example"] {
            assert!(!ocr_shows(READ, absent), "{absent}");
        }
    }
}
