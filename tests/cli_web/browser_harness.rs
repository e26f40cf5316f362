//! The browser harness (test-support/src/browser.rs) proven on a page of its own, before
//! the console's tests rely on it: headless Debian chromium over chromedriver loads a page
//! served under the console's Content-Security-Policy, copies a DS with a button of an
//! external script and the clipboard is read back, submits a form with a hidden token that
//! the server receives, and screenshots of both pages are read by OCR to show the zone
//! names. No chromium outlives the test.
//!
//! Skips (saying so) without /usr/bin/chromedriver, unless DNSSEC_WARDEN_REQUIRE_BROWSER
//! is set (tests/run.sh sets it).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Form, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::Value;

use dnssec_warden_test_support::browser::{
    self, Browser, Chromedriver, group_pids, processes_naming, screenshot_shows,
};

/// The console's policy: no inline script, nothing from elsewhere, never framed.
const CSP: &str = "default-src 'self'; script-src 'self'; frame-ancestors 'none'";
const TOKEN: &str = "t0k3n-5f2c9a";
const DS: &str = "24013 13 2 5B0D86D2C4D8F4A3B2E1F0A9C8D7E6F5A4B3C2D1E0F9A8B7C6D5E4F3A2B1C0D9";
const ZONES: &[&str] = &["example.test.", "shop.example.test.", "warden.test."];

const FORM_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>example.test.</title></head>
<body>
<h1>example.test.</h1>
<p>DS <code id="ds">24013 13 2 5B0D86D2C4D8F4A3B2E1F0A9C8D7E6F5A4B3C2D1E0F9A8B7C6D5E4F3A2B1C0D9</code>
<button type="button" id="copy" data-copy="ds">Copy</button></p>
<form method="post" action="/submit">
<input type="hidden" name="token" value="t0k3n-5f2c9a">
<label>Note <input name="note" id="note"></label>
<button type="submit" id="send">Send</button>
</form>
<script>document.body.dataset.inline = "ran";</script>
<script src="/copy.js"></script>
</body></html>
"#;

/// The copy button as the console's will be: the clipboard, else the text selected.
const COPY_JS: &str = r#"document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  const text = source.textContent.trim();
  const select = () => {
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.setAttribute("data-copied", "selected");
  };
  if (navigator.clipboard && navigator.clipboard.writeText) {
    navigator.clipboard.writeText(text).then(
      () => button.setAttribute("data-copied", "true"),
      select);
  } else {
    select();
  }
});
"#;

#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, String)>>>);

#[derive(serde::Deserialize)]
struct Submitted {
    token: String,
    note: String,
}

fn with_csp(content_type: &'static str, body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
        ],
        body,
    )
        .into_response()
}

async fn serve() -> (Received, SocketAddr) {
    let received = Received::default();
    let zones_page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Zones</title>\
         </head><body><h1>Zones</h1><ul>{}</ul></body></html>\n",
        ZONES
            .iter()
            .map(|z| format!("<li class=\"zone\">{z}</li>"))
            .collect::<String>()
    );
    let app = axum::Router::new()
        .route(
            "/",
            get(|| async {
                let mut page = with_csp("text/html; charset=utf-8", FORM_PAGE.into());
                page.headers_mut().insert(
                    header::SET_COOKIE,
                    "session=s3ss10n; Path=/; HttpOnly; SameSite=Strict"
                        .parse()
                        .unwrap(),
                );
                page
            }),
        )
        .route(
            "/copy.js",
            get(|| async { with_csp("text/javascript", COPY_JS.into()) }),
        )
        .route(
            "/zones",
            get(move || async move { with_csp("text/html; charset=utf-8", zones_page) }),
        )
        .route(
            "/submit",
            axum::routing::post(
                |State(received): State<Received>, Form(form): Form<Submitted>| async move {
                    received.0.lock().unwrap().push((form.token, form.note));
                    Redirect::to("/zones")
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (received, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_copies_submits_and_screenshots_under_the_console_csp() {
    if !browser::should_run("browser_harness").unwrap() {
        return;
    }
    let started = Instant::now();
    let (received, addr) = serve().await;
    let base = format!("http://{addr}");

    let driver = Chromedriver::start().unwrap();
    let pgid = driver.pid();
    let home = driver.home().display().to_string();
    let browser = Browser::start(&driver).await.unwrap();
    let profile = browser.profile().display().to_string();
    eprintln!("chromium session up in {:?}", started.elapsed());

    browser.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(browser.text("#ds").await.unwrap(), DS);
    // The CSP is in force: the inline script did not run (WebDriver's own scripts do).
    let inline = browser
        .execute("return document.body.dataset.inline || null;", vec![])
        .await
        .unwrap();
    assert_eq!(inline, Value::Null, "the inline script ran despite the CSP");
    assert!(
        browser
            .cookies()
            .await
            .unwrap()
            .contains(&("session".into(), "s3ss10n".into()))
    );

    // The copy, for real: the clipboard starts elsewhere and holds the DS after the click.
    browser.grant_clipboard().await.unwrap();
    browser.set_clipboard_text("not the DS").await.unwrap();
    assert_eq!(browser.clipboard_text().await.unwrap(), "not the DS");
    browser.click("#copy").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while browser
        .attr("#copy", "data-copied")
        .await
        .unwrap()
        .is_none()
    {
        assert!(Instant::now() < deadline, "the copy button never finished");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        browser
            .attr("#copy", "data-copied")
            .await
            .unwrap()
            .as_deref(),
        Some("true"),
        "the copy fell back to selecting the text"
    );
    assert_eq!(browser.clipboard_text().await.unwrap(), DS);

    browser
        .in_viewport(&["h1", "#ds", "#copy", "#note", "#send"])
        .await
        .unwrap();
    let form_shot = browser.screenshot("harness-form").await.unwrap();
    assert!(form_shot.png.starts_with(b"\x89PNG"));

    // The form: the hidden token and the typed note reach the server, which redirects.
    browser.fill("#note", "hello warden").await.unwrap();
    browser.submit("#send").await.unwrap();
    assert_eq!(
        browser.current_url().await.unwrap(),
        format!("{base}/zones")
    );
    assert_eq!(
        *received.0.lock().unwrap(),
        vec![(TOKEN.to_string(), "hello warden".to_string())]
    );

    let shown: Vec<String> = futures::future::join_all(
        browser
            .find_all("li.zone")
            .await
            .unwrap()
            .iter()
            .map(|li| li.text()),
    )
    .await
    .into_iter()
    .map(Result::unwrap)
    .collect();
    assert_eq!(shown, ZONES);
    browser.in_viewport(&["li.zone:last-child"]).await.unwrap();
    let zones_shot = browser.screenshot("harness-zones").await.unwrap();
    eprintln!("screenshots at {:?}", started.elapsed());

    // What the screenshots show, read by OCR.
    screenshot_shows(&zones_shot.path, ZONES).unwrap();
    // Body text only: a button's label beside an input box, or a 13 px monospace digest,
    // is not read reliably (their presence is checked in the page, `in_viewport`).
    screenshot_shows(&form_shot.path, &["example.test.", "DS 24013 13 2"]).unwrap();
    // And the check can fail: the form page does not show the zone list.
    let missing = screenshot_shows(&form_shot.path, &["shop.example.test."]).unwrap_err();
    assert!(missing.contains("shop.example.test."), "{missing}");
    eprintln!("OCR done at {:?}", started.elapsed());

    // No chromium survives: the session ends, then the driver's group is killed.
    browser.close().await.unwrap();
    drop(driver);
    assert_eq!(
        group_pids(pgid),
        Vec::<u32>::new(),
        "chromedriver's group survived"
    );
    assert_eq!(
        processes_naming(&profile),
        Vec::<u32>::new(),
        "a chromium survived"
    );
    assert_eq!(
        processes_naming(&home),
        Vec::<u32>::new(),
        "a crash handler survived"
    );
    eprintln!("all done in {:?}", started.elapsed());
}
