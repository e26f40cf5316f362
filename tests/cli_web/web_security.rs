//! The web console as a production admin surface, over real HTTP: every
//! security rule, against the console served in-process on loopback with its own store
//! and a clock the test moves. The browser's view is `tests/cli_web/web_browser.rs`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use dnssec_warden::lifecycle::{Intent, Policy, Timestamp};
use dnssec_warden::store::Store;
use dnssec_warden::time::ManualClock;
use dnssec_warden::web::auth::hash_password;
use dnssec_warden::web::server::{WebServer, serve};
use dnssec_warden::web::{ProxySettings, TlsFiles, WebSettings};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

pub(crate) const ZONE: &str = "shop.test.";
pub(crate) const T0: Timestamp = Timestamp(1_800_000_000_000);
pub(crate) const ALICE: &str = "correct horse battery";
const VICTOR: &str = "viewer's own password";

pub(crate) struct Console {
    server: WebServer,
    pub(crate) store: Store,
    clock: ManualClock,
    http: reqwest::Client,
    base: String,
    dir: tempfile::TempDir,
}

fn settings(dir: &Path) -> WebSettings {
    WebSettings {
        listen: "127.0.0.1:0".parse().unwrap(),
        users: Some(dir.join("web-users")),
        ..WebSettings::default()
    }
}

fn write_users(dir: &Path) {
    let text = format!(
        "# the console's users\nalice:operator:{}\nvictor:viewer:{}\n",
        hash_password(ALICE).unwrap(),
        hash_password(VICTOR).unwrap()
    );
    std::fs::write(dir.join("web-users"), text).unwrap();
}

async fn console_with(edit: impl FnOnce(&mut WebSettings, &Path)) -> Console {
    let dir = tempfile::tempdir().unwrap();
    write_users(dir.path());
    let mut web = settings(dir.path());
    edit(&mut web, dir.path());
    let store = Store::open_in_memory().await.unwrap();
    store.ensure_zone(ZONE, T0).await.unwrap();
    let clock = ManualClock::starting_at(T0);
    let server = serve(
        &web,
        store.clone(),
        Arc::new(clock.clone()),
        &Policy::default(),
        &[],
    )
    .await
    .unwrap();
    let scheme = if web.tls.is_some() { "https" } else { "http" };
    let base = format!("{scheme}://{}", server.addr);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Console {
        server,
        store,
        clock,
        http,
        base,
        dir,
    }
}

pub(crate) async fn console() -> Console {
    console_with(|_, _| {}).await
}

/// The session cookie's `name=value` from a login's response.
fn session_of(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| {
            c.starts_with(&format!("{}=", dnssec_warden::web::auth::SESSION_COOKIE))
                && !c.contains("Max-Age=0")
        })
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
}

/// The CSRF token a page's forms carry.
fn csrf_in(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no token in {page}"));
    let rest = &page[at + "name=\"csrf\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

impl Console {
    async fn login(&self, user: &str, password: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/login", self.base))
            .form(&[("user", user), ("password", password)])
            .send()
            .await
            .unwrap()
    }

    /// Logs in; the session cookie and the token of its forms.
    pub(crate) async fn session(&self, user: &str, password: &str) -> (String, String) {
        let response = self.login(user, password).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let cookie = session_of(&response).expect("a session cookie");
        let page = self.get(&format!("/zones/{ZONE}"), Some(&cookie)).await;
        assert_eq!(page.status(), StatusCode::OK);
        let csrf = csrf_in(&page.text().await.unwrap());
        (cookie, csrf)
    }

    pub(crate) async fn get(&self, path: &str, cookie: Option<&str>) -> reqwest::Response {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(c) = cookie {
            request = request.header(COOKIE, c);
        }
        request.send().await.unwrap()
    }

    async fn post(
        &self,
        path: &str,
        cookie: Option<&str>,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self.http.post(format!("{}{path}", self.base)).form(form);
        if let Some(c) = cookie {
            request = request.header(COOKIE, c);
        }
        request.send().await.unwrap()
    }

    /// A confirmed disable with the session's token, as a browser sends it from a page of
    /// `origin` (and its `Sec-Fetch-Site`).
    async fn disable_from(
        &self,
        switch: &str,
        cookie: &str,
        csrf: &str,
        origin: &str,
        fetch_site: Option<&str>,
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}{switch}", self.base))
            .header(COOKIE, cookie)
            .header("Origin", origin)
            .form(&[("to", "disable"), ("confirm", "yes"), ("csrf", csrf)]);
        if let Some(site) = fetch_site {
            request = request.header("Sec-Fetch-Site", site);
        }
        request.send().await.unwrap()
    }

    async fn intent(&self) -> Intent {
        self.store.zone(ZONE).await.unwrap().unwrap().zone.intent
    }

    async fn intent_events(&self) -> Vec<String> {
        self.store
            .events(ZONE)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind.as_str() == "intent")
            .map(|e| e.reason)
            .collect()
    }
}

#[tokio::test]
async fn nothing_is_shown_or_changed_without_a_login() {
    let c = console().await;
    for path in [
        "/zones",
        &format!("/zones/{ZONE}"),
        &format!("/zones/{ZONE}/switch?to=enable"),
    ] {
        let r = c.get(path, None).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(r.headers()[LOCATION], "/login", "{path}");
    }
    let r = c
        .post(
            &format!("/zones/{ZONE}/switch"),
            None,
            &[("to", "enable"), ("confirm", "yes"), ("csrf", "x")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // A forged cookie is no session.
    let r = c
        .get(
            "/zones",
            Some(&format!(
                "{}=forged",
                dnssec_warden::web::auth::SESSION_COOKIE
            )),
        )
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(c.intent().await, Intent::None);
    assert!(c.intent_events().await.is_empty());
}

#[tokio::test]
async fn a_login_makes_a_strict_http_only_secure_session_and_logout_ends_it() {
    let c = console().await;
    let wrong = c.login("alice", "not her password").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(session_of(&wrong).is_none());
    let unknown = c.login("mallory", ALICE).await;
    assert_eq!(unknown.status(), StatusCode::UNAUTHORIZED);

    let ok = c.login("alice", ALICE).await;
    assert_eq!(ok.status(), StatusCode::SEE_OTHER);
    let set = ok.headers()[SET_COOKIE].to_str().unwrap().to_string();
    for attribute in [
        "HttpOnly",
        "Secure",
        "SameSite=Strict",
        "Path=/",
        "Max-Age=28800",
    ] {
        assert!(set.contains(attribute), "{attribute} missing: {set}");
    }
    let cookie = session_of(&ok).unwrap();
    let page = c.get("/zones", Some(&cookie)).await;
    assert_eq!(page.status(), StatusCode::OK);
    let text = page.text().await.unwrap();
    assert!(text.contains(ZONE) && text.contains("alice"), "{text}");

    // Logout needs the token too, then the session is gone.
    let csrf = csrf_in(&text);
    let r = c.post("/logout", Some(&cookie), &[("csrf", "wrong")]).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        c.get("/zones", Some(&cookie)).await.status(),
        StatusCode::OK
    );
    let r = c.post("/logout", Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert!(
        r.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    assert_eq!(
        c.get("/zones", Some(&cookie)).await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn sessions_expire_after_their_lifetime_and_when_idle() {
    let c = console().await;
    let (cookie, _) = c.session("alice", ALICE).await;
    c.clock.advance(Duration::from_secs(59 * 60));
    assert_eq!(
        c.get("/zones", Some(&cookie)).await.status(),
        StatusCode::OK
    );
    // Idle past the hour: gone.
    c.clock.advance(Duration::from_secs(61 * 60));
    assert_eq!(
        c.get("/zones", Some(&cookie)).await.status(),
        StatusCode::SEE_OTHER
    );

    // Used every 50 minutes, it still ends 8 hours after the login.
    let (cookie, _) = c.session("alice", ALICE).await;
    for _ in 0..12 {
        c.clock.advance(Duration::from_secs(50 * 60));
        let status = c.get("/zones", Some(&cookie)).await.status();
        if status != StatusCode::OK {
            assert_eq!(status, StatusCode::SEE_OTHER);
            return;
        }
    }
    panic!("a session used every 50 minutes outlived its 8 hours");
}

#[tokio::test]
async fn the_switch_needs_the_token_the_origin_the_role_and_the_confirmation() {
    let c = console().await;
    let switch = format!("/zones/{ZONE}/switch");
    let (cookie, csrf) = c.session("alice", ALICE).await;

    // A forged POST: no token, a wrong one, another site's origin with the right one.
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[("to", "disable"), ("confirm", "yes")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[("to", "disable"), ("confirm", "yes"), ("csrf", "0000")],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = c
        .disable_from(&switch, &cookie, &csrf, "https://evil.example", None)
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // An opaque origin (a sandboxed frame, a data: page) is no origin of ours either.
    let r = c.disable_from(&switch, &cookie, &csrf, "null", None).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Not confirmed, or an unknown switch: refused, saying so.
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[("to", "disable"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("not confirmed"));
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[("to", "rm -rf"), ("confirm", "yes"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // disable --ds-never-submitted applies only in awaiting_ds, as on the command line.
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[
                ("to", "disable-never-submitted"),
                ("confirm", "yes"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("awaiting_ds"));
    assert_eq!(c.intent().await, Intent::None);
    assert!(c.intent_events().await.is_empty(), "nothing recorded");

    // A viewer sees the zone, never the switch.
    let (vcookie, vcsrf) = c.session("victor", VICTOR).await;
    let page = c
        .get(&format!("/zones/{ZONE}"), Some(&vcookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(!page.contains("/switch?to="), "{page}");
    assert_eq!(
        c.get(&format!("{switch}?to=disable"), Some(&vcookie))
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    let r = c
        .post(
            &switch,
            Some(&vcookie),
            &[("to", "disable"), ("confirm", "yes"), ("csrf", &vcsrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // Another session's token is not this one's.
    let r = c
        .post(
            &switch,
            Some(&cookie),
            &[("to", "disable"), ("confirm", "yes"), ("csrf", &vcsrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(c.intent().await, Intent::None);

    // The operator, confirmed, with the token: recorded as the CLI records it, by name.
    let confirm = c
        .get(&format!("{switch}?to=disable"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        confirm.contains("remove the DS at the registrar first")
            || confirm.contains("Remove the DS at the registrar first"),
        "{confirm}"
    );
    // As a browser sends it from the console's own page: its origin, same-origin.
    let r = c
        .disable_from(&switch, &cookie, &csrf, &c.base, Some("same-origin"))
        .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(c.intent().await, Intent::Disabled);
    assert_eq!(
        c.intent_events().await,
        ["operator alice (web console) asked to disable DNSSEC"]
    );
}

/// The signed move's form (`/zones/ZONE/move`): the token, an operator, the
/// confirmation, then `intent::declare_move`'s own checks; a refusal changes nothing.
#[tokio::test]
async fn a_move_needs_the_token_the_role_the_confirmation_and_a_known_account() {
    let c = console().await;
    let moving = format!("/zones/{ZONE}/move");
    let (cookie, csrf) = c.session("alice", ALICE).await;
    let facts = || async {
        c.store
            .zone(ZONE)
            .await
            .unwrap()
            .unwrap()
            .zone
            .facts
            .signed_move
    };
    let r = c
        .post(&moving, Some(&cookie), &[("to", "b"), ("confirm", "yes")])
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = c
        .post(&moving, Some(&cookie), &[("to", "b"), ("csrf", &csrf)])
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("not confirmed"));
    let (vcookie, vcsrf) = c.session("victor", VICTOR).await;
    assert_eq!(
        c.get(&moving, Some(&vcookie)).await.status(),
        StatusCode::FORBIDDEN
    );
    let r = c
        .post(
            &moving,
            Some(&vcookie),
            &[("to", "b"), ("confirm", "yes"), ("csrf", &vcsrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // No second account configured: no move offered, and one asked for is refused with
    // the reason `move` gives on the command line.
    let page = c
        .get(&format!("/zones/{ZONE}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(!page.contains("id=\"move\""), "{page}");
    assert_eq!(
        c.get(&moving, Some(&cookie)).await.status(),
        StatusCode::CONFLICT
    );
    let r = c
        .post(
            &moving,
            Some(&cookie),
            &[("to", "b"), ("confirm", "yes"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let text = r.text().await.unwrap();
    assert!(text.contains("Nothing was changed"), "{text}");
    assert_eq!(facts().await, None);
    assert!(c.intent_events().await.is_empty(), "nothing recorded");
}

#[tokio::test]
async fn logins_are_rate_limited_with_back_off_per_user_and_address() {
    let c = console().await;
    let mut limited = None;
    for attempt in 0..8 {
        let r = c.login("alice", "guess").await;
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(r.headers().contains_key("retry-after"));
            limited = Some(attempt);
            break;
        }
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    }
    let limited = limited.expect("a run of wrong passwords is slowed down");
    assert!(limited <= 5, "limited only after {limited} attempts");
    // While it lasts, even the right password is not tried.
    let r = c.login("alice", ALICE).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(session_of(&r).is_none());
    // The back-off ends by itself.
    c.clock.advance(Duration::from_secs(16 * 60));
    let r = c.login("alice", ALICE).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_no_secret() {
    let c = console().await;
    let (cookie, _) = c.session("alice", ALICE).await;
    let hashes = std::fs::read_to_string(c.dir.path().join("web-users")).unwrap();
    let hash = hashes
        .lines()
        .nth(1)
        .unwrap()
        .rsplit_once(":$")
        .unwrap()
        .1
        .to_string();
    for (path, session) in [
        ("/login", None),
        ("/nowhere", None),
        ("/zones", Some(cookie.as_str())),
        (&format!("/zones/{ZONE}") as &str, Some(cookie.as_str())),
        (
            &format!("/zones/{ZONE}/switch?to=enable"),
            Some(cookie.as_str()),
        ),
        ("/static/copy.js", None),
    ] {
        let r = c.get(path, session).await;
        let h = r.headers().clone();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{path}: {csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        // Not `no-referrer`: under it chromium sends `Origin: null` on the console's own
        // forms, which the same-origin check must refuse (tests/cli_web/web_browser.rs found it).
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        let body = r.text().await.unwrap();
        assert!(
            !body.contains(&hash) && !body.contains("$argon2id$"),
            "{path}"
        );
        assert!(!body.contains(ALICE), "{path}");
        // No inline script anywhere: the CSP would block it, and none is needed.
        assert!(!body.contains("<script>"), "{path}");
    }
}

#[tokio::test]
async fn bad_input_gets_a_clear_page_and_changes_nothing() {
    let c = console().await;
    let (cookie, csrf) = c.session("alice", ALICE).await;
    let r = c.get("/zones?state=bogus", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("&quot;bogus&quot; is not a state")
    );
    let r = c.get("/zones?page=0", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = c
        .get("/zones/%3Cscript%3Ealert(1)%3C%2Fscript%3E", Some(&cookie))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let text = r.text().await.unwrap();
    assert!(!text.contains("<script>alert"), "escaped: {text}");
    let r = c.get("/zones/unknown.test.", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A name the CLI would normalise is the same zone.
    let r = c.get("/zones/SHOP.test", Some(&cookie)).await;
    assert_eq!(r.status(), StatusCode::OK);
    // An oversized form is not read.
    let big = "x".repeat(64 * 1024);
    let r = c
        .post(
            &format!("/zones/{ZONE}/switch"),
            Some(&cookie),
            &[
                ("to", "disable"),
                ("confirm", "yes"),
                ("csrf", &csrf),
                ("pad", &big),
            ],
        )
        .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let r = c.login(&"a".repeat(10_000), "x").await;
    assert!(r.status().is_client_error());
    assert_eq!(c.intent().await, Intent::None);
}

#[tokio::test]
async fn a_proxy_header_is_believed_only_from_the_proxy() {
    let proxy = |addresses: &[&str]| {
        let addresses = addresses.iter().map(|a| a.parse().unwrap()).collect();
        move |w: &mut WebSettings, _: &Path| {
            w.proxy = Some(ProxySettings {
                addresses,
                user_header: "x-remote-user".into(),
                default_role: "viewer".into(),
            })
        }
    };
    // The test connects from 127.0.0.1: not the configured proxy.
    let c = console_with(proxy(&["127.0.0.2"])).await;
    let r = c
        .http
        .get(format!("{}/zones", c.base))
        .header("X-Remote-User", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::SEE_OTHER,
        "a header from anyone is no login"
    );

    let c = console_with(proxy(&["127.0.0.1"])).await;
    let as_user = |user: &'static str| {
        c.http
            .get(format!("{}/zones/{ZONE}", c.base))
            .header("X-Remote-User", user)
            .send()
    };
    let r = as_user("alice").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.text().await.unwrap().contains("/switch?to="),
        "alice is an operator in the file"
    );
    let r = as_user("someone").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        !r.text().await.unwrap().contains("/switch?to="),
        "unlisted: the default role"
    );
    let r = as_user("bad name").await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

/// A self-signed certificate for `localhost` by Debian's openssl.
fn certificate(dir: &Path, name: &str) -> TlsFiles {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(status.success());
    TlsFiles {
        certificate: cert,
        key,
    }
}

fn trusting(files: &TlsFiles) -> reqwest::Client {
    let pem = std::fs::read(&files.certificate).unwrap();
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn tls_is_served_and_a_new_certificate_is_taken_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let first = certificate(dir.path(), "first");
    let c = console_with(|w, _| w.tls = Some(first.clone())).await;
    let url = format!("{}/login", c.base);
    let r = trusting(&first).get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["strict-transport-security"]
            .to_str()
            .unwrap()
            .contains("max-age=")
    );

    // A renewed certificate: the reload takes it for new connections.
    let second = certificate(dir.path(), "second");
    let trusts_second = trusting(&second);
    assert!(trusts_second.get(&url).send().await.is_err());
    let mut web = settings(c.dir.path());
    web.tls = Some(second.clone());
    c.server.reload(&web, &Policy::default(), &[]).unwrap();
    let r = trusting(&second).get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A certificate file that does not load keeps the running one.
    std::fs::write(&second.certificate, "not a certificate").unwrap();
    let error = c.server.reload(&web, &Policy::default(), &[]).unwrap_err();
    assert!(error.to_string().contains("second.pem"), "{error}");
    let r = trusts_second.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// Through the real binary: `check-config` and `run` load the users file and the
/// certificate, and refuse one that does not load (exit 2), naming the line and what is
/// wrong, never the hash.
#[test]
fn a_users_file_or_certificate_that_does_not_load_stops_the_start() {
    use dnssec_warden_test_support::daemon::run;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    let config = dir.path().join("config.toml");
    let write = |web: &str| {
        std::fs::write(
            &config,
            format!(
                "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {key:?}\n\
                 [database]\npath = {:?}\n[zones]\nnames = [\"shop.test\"]\n[web]\n{web}\n",
                dir.path().join("state.db")
            ),
        )
        .unwrap();
    };
    write_users(dir.path());
    write("users = \"web-users\"");
    let users = dir.path().join("web-users");
    let mode = |m| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(m)).unwrap();
    };
    mode(0o644);
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("web users file") && err.contains("readable by every user"),
        "{out}{err}"
    );
    mode(0o640);
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !format!("{out}{err}").contains("web users file"),
        "{out}{err}"
    );

    let hash = hash_password(ALICE).unwrap();
    let weak = hash.replace("m=19456", "m=4194304");
    std::fs::write(
        dir.path().join("web-users"),
        format!("alice:operator:{hash}\nbob:admin:{hash}\ncarol:viewer:{weak}\n"),
    )
    .unwrap();
    for command in ["check-config", "run"] {
        let (code, _, err) = run(&config, &[command]);
        assert_eq!(code, 2, "{command}: {err}");
        assert!(
            err.contains("web-users") && err.contains("line 2"),
            "{command}: {err}"
        );
        assert!(
            !err.contains(&hash) && !err.contains("$argon2id$"),
            "{command}: {err}"
        );
    }

    write_users(dir.path());
    write("users = \"web-users\"\ntls_certificate = \"missing.pem\"\ntls_key = \"missing.key\"");
    let (code, _, err) = run(&config, &["check-config"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("missing.pem"), "{err}");
}
