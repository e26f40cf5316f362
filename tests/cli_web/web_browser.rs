//! The web console in a real browser, through the real binary: `dnssec-warden
//! run` with a `[web]` block, over the provider simulator and the lab DNS hierarchy
//! (test-support's `LabWorld`, in-process: no Knot, no block of its own), driven by
//! headless Debian chromium over WebDriver (test-support/src/browser.rs). One browser
//! session for the whole story:
//!
//! 1. the login page; the operator logs in; the fleet lists both zones (in the page, and
//!    read by OCR in a screenshot); the search narrows it;
//! 2. the operator opens a zone and enables DNSSEC through the confirmation page (which
//!    states the consequence); the intent is recorded naming the web user; once the zone
//!    awaits its DS the page shows it, and the copy buttons put the DS (as
//!    `status --json` says it) and the DNSKEY on the clipboard, read back; the "Waiting on
//!    me" facet finds the zone; the zone page's screenshot is read by OCR (and is
//!    `docs/console-zone.png` when `DNSSEC_WARDEN_UPDATE_DOCS` is set);
//! 3. the operator disables it, confirming, the history naming the user again;
//! 4. a POST without the form's token, from the page itself, is refused (403), nothing
//!    recorded;
//! 5. the operator logs out (the console then sends to the login page); a viewer sees no
//!    switch, and the switch's URL is a 403 page; nothing recorded.
//!
//! Skips (saying so) without /usr/bin/chromedriver, unless DNSSEC_WARDEN_REQUIRE_BROWSER
//! is set (tests/run.sh sets it).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dnssec_warden::web::auth::hash_password;
use dnssec_warden_lab::dns::KeySource;
use dnssec_warden_test_support::browser::{self, Browser, Chromedriver, screenshot_shows};
use dnssec_warden_test_support::daemon::{Daemon, LabWorld, cli, status, wait_state, wait_status};
use dnssec_warden_test_support::pdns::free_port;
use serde_json::{Value, json};

const SHOP: &str = "shop.test.";
const BLOG: &str = "blog.test.";
const ALICE: &str = "correct horse battery";
const VICTOR: &str = "viewer's own password";
/// Every wait on the daemon: it moves in well under a second a step with these timings.
const LONG: Duration = Duration::from_secs(60);
/// Every wait on a page.
const SHORT: Duration = Duration::from_secs(10);

/// Set (to anything) to have the test write the zone page's screenshot to
/// `docs/console-zone.png`, the README's picture.
const UPDATE_DOCS_ENV: &str = "DNSSEC_WARDEN_UPDATE_DOCS";

/// Polls `check` every 200 ms until it gives `Some`; fails after `within`, saying `what`
/// and the last thing seen.
pub(crate) async fn eventually<T>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let until = Instant::now() + within;
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(last) => last,
        };
        assert!(
            Instant::now() < until,
            "{what}: not within {within:?}; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The intent events of the zone's history (`history --json`), their reasons.
pub(crate) fn intent_events(config: &Path, zone: &str) -> Vec<String> {
    let (ok, out, err) = cli(config, &["history", zone, "--json"]);
    assert!(ok, "history: {err}");
    let history: Value = serde_json::from_str(&out).unwrap();
    history["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "intent")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The zone names in the `#zones` table, as its links show them.
pub(crate) async fn listed(b: &Browser) -> Vec<String> {
    let mut names = Vec::new();
    for link in b.find_all("#zones a.zone").await.unwrap() {
        names.push(link.text().await.unwrap());
    }
    names.sort();
    names
}

/// `fetch` from the page (same origin, the session's cookie): the status and the body.
async fn fetch(b: &Browser, path: &str, init: Value) -> (u64, String) {
    let got = b
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(arguments[0], arguments[1]).then(
                 (r) => r.text().then((body) => done({ status: r.status, body })),
                 (err) => done({ err: String(err) }));",
            vec![json!(path), init],
        )
        .await
        .unwrap();
    assert!(got["err"].is_null(), "fetch {path}: {}", got["err"]);
    (
        got["status"].as_u64().unwrap(),
        got["body"].as_str().unwrap_or_default().to_string(),
    )
}

/// Clicks a copy button and returns what the clipboard then holds.
pub(crate) async fn copy(b: &Browser, button: &str) -> String {
    b.set_clipboard_text("not the record").await.unwrap();
    b.click(button).await.unwrap();
    let copied = eventually("the copy button finishing", SHORT, async || {
        match b.attr(button, "data-copied").await? {
            Some(v) => Ok(v),
            None => Err(format!("label {:?}", b.text(button).await?)),
        }
    })
    .await;
    assert_eq!(copied, "true", "{button}: the copy fell back");
    b.clipboard_text().await.unwrap()
}

fn write_users(path: &Path) {
    let text = format!(
        "# the console's users\nalice:operator:{}\nvictor:viewer:{}\n",
        hash_password(ALICE).unwrap(),
        hash_password(VICTOR).unwrap()
    );
    std::fs::write(path, text).unwrap();
}

/// Logs in from the login page (the current page must be it).
pub(crate) async fn log_in(b: &Browser, user: &str, password: &str) {
    b.fill("form.login input[name=user]", user).await.unwrap();
    b.fill("form.login input[name=password]", password)
        .await
        .unwrap();
    b.submit("form.login button[type=submit]").await.unwrap();
}

fn docs_picture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console-zone.png")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_switches_dnssec_in_a_browser_and_a_viewer_cannot() {
    if !browser::should_run("web_browser").unwrap() {
        return;
    }
    let started = Instant::now();

    // The world: two zones at the simulated provider, delegated from the lab's `test.`.
    let mut w = LabWorld::start(SHOP).await;
    assert!(w.sim.handle().add_zone(BLOG));
    w.lab
        .add_child(BLOG, KeySource::provider(w.sim.handle()))
        .unwrap();
    w.lab.set_ds_ttl(BLOG, 2).unwrap();
    w.lab.set_zone_ttl(BLOG, 1).unwrap();
    w.lab.set_dnskey_ttl(BLOG, 1).unwrap();
    let users = w.dir.path().join("web-users");
    write_users(&users);
    let port = free_port().unwrap();
    let zones_line = format!("names = [\"{SHOP}\"]\n");
    assert!(w.rest.contains(&zones_line), "{}", w.rest);
    w.rest = w.rest.replacen(
        &zones_line,
        &format!("names = [\"{SHOP}\", \"{BLOG}\"]\n"),
        1,
    );
    w.rest.push_str(&format!(
        "[web]\nlisten = \"127.0.0.1:{port}\"\nusers = {users:?}\n"
    ));
    w.write_config(w.sim.base_url().as_str());
    let config = w.config.clone();
    let mut daemon = Daemon::start(&config, w.dir.path().join("daemon.log"));
    wait_state(&config, SHOP, "disabled", LONG, &daemon).await;
    wait_state(&config, BLOG, "disabled", LONG, &daemon).await;
    let base = format!("http://127.0.0.1:{port}");
    eprintln!("world and daemon up in {:?}", started.elapsed());

    let driver = Chromedriver::start().unwrap();
    let b = Browser::start(&driver).await.unwrap();
    eprintln!("chromium up in {:?}", started.elapsed());

    // 1. Not logged in: the console sends to its login page.
    b.goto(&format!("{base}/zones")).await.unwrap();
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/login"));
    assert_eq!(b.text("h1").await.unwrap(), "Log in");
    // A wrong password is said, and no session is made.
    log_in(&b, "alice", "not her password").await;
    assert!(
        b.text("p.error")
            .await
            .unwrap()
            .contains("Wrong user name or password"),
        "{}",
        b.text("main").await.unwrap()
    );
    log_in(&b, "alice", ALICE).await;
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/zones"));
    assert!(
        b.text("header .who")
            .await
            .unwrap()
            .contains("alice (operator)"),
        "{}",
        b.text("header").await.unwrap()
    );
    let table = b.text("#zones").await.unwrap();
    assert!(table.contains(SHOP) && table.contains(BLOG), "{table}");
    assert_eq!(listed(&b).await, [BLOG, SHOP]);
    b.in_viewport(&["#zones"]).await.unwrap();
    let fleet = b.screenshot("fleet").await.unwrap();
    screenshot_shows(&fleet.path, &[SHOP, BLOG]).unwrap();

    // The search, through its form.
    b.fill("form.filters input[name=q]", "shop").await.unwrap();
    b.submit("form.filters button[type=submit]").await.unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones?q=shop")
    );
    assert_eq!(listed(&b).await, [SHOP]);
    b.goto(&format!("{base}/zones?q=nothing-like-it"))
        .await
        .unwrap();
    assert_eq!(listed(&b).await, Vec::<String>::new());
    assert_eq!(
        b.text("main p.muted:last-of-type").await.unwrap(),
        "No zone matches."
    );

    // 2. Enable through the console: the zone's page, its switch, the confirmation.
    b.goto(&format!("{base}/zones")).await.unwrap();
    b.submit(&format!("#zones a.zone[href=\"/zones/{SHOP}\"]"))
        .await
        .unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{SHOP}")
    );
    assert!(b.text("h1").await.unwrap().starts_with(SHOP));
    assert!(b.find_all("#enter").await.unwrap().is_empty(), "no DS yet");
    b.submit("#switch a[href$=\"/switch?to=enable\"]")
        .await
        .unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{SHOP}/switch?to=enable")
    );
    let consequence = b.text("#consequence").await.unwrap();
    assert!(
        consequence.contains("entered at the registrar"),
        "{consequence}"
    );
    assert!(
        intent_events(&config, SHOP).is_empty(),
        "nothing before the yes"
    );
    b.submit("button[name=confirm][value=yes]").await.unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{SHOP}?recorded=enable")
    );
    let notice = b.text("p.notice").await.unwrap();
    assert!(notice.contains("Intent enabled recorded"), "{notice}");
    assert_eq!(status(&config, SHOP)["intent"], "enabled");
    assert_eq!(
        intent_events(&config, SHOP),
        ["operator alice (web console) asked to enable DNSSEC"]
    );
    assert_eq!(
        status(&config, BLOG)["intent"],
        "none",
        "the other zone untouched"
    );

    // The daemon acts: DNSSEC on at the provider, then the DS to enter.
    let s = wait_status(&config, SHOP, LONG, &daemon, |s| {
        s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
    })
    .await;
    let ds = s["ds_to_enter"].as_str().unwrap().to_string();
    let key = w
        .sim
        .handle()
        .dnskey(SHOP)
        .expect("DNSSEC on at the provider");
    assert!(ds.contains(&format!(" DS {} 13 2 ", key.key_tag())), "{ds}");
    eprintln!("{SHOP} awaiting its DS at {:?}", started.elapsed());

    // The zone's page shows it (the page, polled: no script refreshes it).
    eventually("the zone page showing the DS", SHORT, async || {
        b.goto(&format!("{base}/zones/{SHOP}")).await?;
        match b.find_all("section#enter #ds-line").await?.first() {
            Some(line) => Ok(line.text().await.map_err(|e| e.to_string())?),
            None => Err(b.text("table.facts").await?),
        }
    })
    .await;
    assert_eq!(b.text("#ds-line").await.unwrap(), ds);
    assert_eq!(b.text("h1 .state").await.unwrap(), "awaiting_ds");
    // The picture: the page as loaded (the copy buttons not yet clicked).
    b.in_viewport(&["h1", "#ds-line", "button[data-copy=\"ds-line\"]"])
        .await
        .unwrap();
    let zone_shot = b.screenshot("zone").await.unwrap();
    screenshot_shows(&zone_shot.path, &[SHOP, "Enter at the registrar"]).unwrap();
    if std::env::var_os(UPDATE_DOCS_ENV).is_some() {
        std::fs::copy(&zone_shot.path, docs_picture()).unwrap();
        eprintln!("wrote {}", docs_picture().display());
    }
    // The copy buttons, for real: the clipboard read back.
    b.grant_clipboard().await.unwrap();
    assert_eq!(copy(&b, "button[data-copy=\"ds-line\"]").await, ds);
    let dnskey_lines = b.find_all("#dnskey-line").await.unwrap();
    assert_eq!(
        dnskey_lines.len(),
        1,
        "the DNSKEY form is shown with the DS"
    );
    let dnskey = b.text("#dnskey-line").await.unwrap();
    assert!(
        dnskey.starts_with(SHOP) && dnskey.contains("DNSKEY 257 3 13 "),
        "{dnskey}"
    );
    assert_eq!(copy(&b, "button[data-copy=\"dnskey-line\"]").await, dnskey);
    // The switches that apply now: disable, and its never-submitted form; no enable.
    let switches: Vec<String> = {
        let mut hrefs = Vec::new();
        for a in b.find_all("#switch a").await.unwrap() {
            hrefs.push(a.attr("href").await.unwrap().unwrap_or_default());
        }
        hrefs
    };
    assert_eq!(
        switches,
        [
            format!("/zones/{SHOP}/switch?to=disable"),
            format!("/zones/{SHOP}/switch?to=disable-never-submitted"),
        ]
    );
    let history = b.text("#history").await.unwrap();
    assert!(
        history.contains("operator alice (web console) asked to enable DNSSEC"),
        "{history}"
    );
    b.find(".timeline svg").await.unwrap();

    // The fleet's "Waiting on me": the zone awaiting its DS (the registrar's step is the
    // operator's), not the other (the fleet's snapshot may be 5 s old).
    eventually("the zone waiting on me", SHORT, async || {
        b.goto(&format!("{base}/zones")).await?;
        b.submit("p.facets a[href=\"/zones?on=me\"]").await?;
        let shown = listed(&b).await;
        if shown == [SHOP] {
            Ok(())
        } else {
            Err(format!("{shown:?}"))
        }
    })
    .await;
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones?on=me")
    );
    // The facet is marked on, with its count; its link now turns it off.
    assert_eq!(b.text("p.facets a.on").await.unwrap(), "Waiting on me 1");
    assert_eq!(
        b.attr("p.facets a.on", "href").await.unwrap().as_deref(),
        Some("/zones")
    );

    // 3. Disable through the console, confirming.
    b.goto(&format!("{base}/zones/{SHOP}")).await.unwrap();
    b.submit("#switch a[href$=\"/switch?to=disable\"]")
        .await
        .unwrap();
    let consequence = b.text("#consequence").await.unwrap();
    assert!(
        consequence
            .to_lowercase()
            .contains("remove the ds at the registrar first"),
        "{consequence}"
    );
    b.submit("button[name=confirm][value=yes]").await.unwrap();
    assert_eq!(
        b.current_url().await.unwrap(),
        format!("{base}/zones/{SHOP}?recorded=disable")
    );
    let notice = b.text("p.notice").await.unwrap();
    assert!(notice.contains("Intent disabled recorded"), "{notice}");
    assert_eq!(status(&config, SHOP)["intent"], "disabled");
    let recorded = [
        "operator alice (web console) asked to enable DNSSEC",
        "operator alice (web console) asked to disable DNSSEC",
    ];
    assert_eq!(intent_events(&config, SHOP), recorded);

    // 4. A POST without the form's token, from the console's own page (same origin, the
    // session's cookie): refused, nothing recorded.
    let (code, body) = fetch(
        &b,
        &format!("/zones/{SHOP}/switch"),
        json!({
            "method": "POST",
            "headers": { "Content-Type": "application/x-www-form-urlencoded" },
            "body": "to=enable&confirm=yes",
        }),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("token"), "{body}");
    assert_eq!(status(&config, SHOP)["intent"], "disabled");
    assert_eq!(intent_events(&config, SHOP), recorded);

    // 5. Log out: the console sends to its login page again.
    b.submit("header form[action=\"/logout\"] button[type=submit]")
        .await
        .unwrap();
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/login"));
    b.goto(&format!("{base}/zones/{SHOP}")).await.unwrap();
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/login"));

    // A viewer: no switch on the zone's page, and its URL is refused.
    log_in(&b, "victor", VICTOR).await;
    assert_eq!(b.current_url().await.unwrap(), format!("{base}/zones"));
    assert!(
        b.text("header .who")
            .await
            .unwrap()
            .contains("victor (viewer)")
    );
    b.goto(&format!("{base}/zones/{SHOP}")).await.unwrap();
    assert!(b.text("h1").await.unwrap().starts_with(SHOP));
    assert!(b.find_all("#switch").await.unwrap().is_empty());
    assert!(
        b.find_all("a[href*=\"/switch\"]").await.unwrap().is_empty(),
        "a switch link for a viewer"
    );
    b.goto(&format!("{base}/zones/{SHOP}/switch?to=enable"))
        .await
        .unwrap();
    assert_eq!(b.text("h1").await.unwrap(), "Not allowed");
    let said = b.text("p.error").await.unwrap();
    assert!(said.contains("Only an operator"), "{said}");
    assert!(b.find_all("#consequence").await.unwrap().is_empty());
    let (code, _) = fetch(
        &b,
        &format!("/zones/{SHOP}/switch?to=enable"),
        json!({ "method": "GET" }),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(status(&config, SHOP)["intent"], "disabled");
    assert_eq!(intent_events(&config, SHOP), recorded);
    eprintln!("the browser's part done at {:?}", started.elapsed());

    // The end: chromium and its driver, then the daemon, by PID.
    b.close().await.unwrap();
    drop(driver);
    daemon.signal("TERM");
    let exit = daemon
        .wait_exit(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert!(exit.success(), "{}", daemon.log());
    eprintln!("all done in {:?}", started.elapsed());
}
