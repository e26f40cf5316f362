//! The console's HTTP: our own accept loop (a connection cap, timeouts, TLS when
//! configured, the peer's address for the login limiter and the proxy rule) around an
//! axum router; every response carries the security headers.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::FormRejection;
use axum::extract::{
    ConnectInfo, DefaultBodyLimit, Form, FromRequestParts, Path, Query, Request, State,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Deserialize;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::auth::{self, LoginLimiter, ProxyAuth, Role, Session, Sessions, Users};
use super::fleet::{Filter, Fleet};
use super::pages::{self, Switch, Viewer, ZonePage};
use super::{WebSettings, timeline, tls};
use crate::intent::{self, Operator};
use crate::lifecycle::{Clock, Policy};
use crate::provider::fleet::ProviderConfig;
use crate::store::{Store, StoreError, host_ipv6};
use crate::zone_name::ZoneName;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("web: cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("web: {0}")]
    Users(#[from] auth::AuthError),
}

/// Connections served at once, and how long each may take.
const MAX_CONNECTIONS: usize = 256;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(300);
/// Password checks at once.
const MAX_VERIFYING: usize = 2;
/// Sessions held at once (the oldest ends first).
const MAX_SESSIONS: usize = 10_000;
/// A form is a few fields; nothing larger is read.
const MAX_BODY: usize = 16 * 1024;
/// Events drawn and listed on a zone's page (the newest).
const MAX_EVENTS: usize = 2_000;

/// The console's policy: no script but our own file, no frames, forms only to us.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What a reload may change: the settings, the users file, the lifecycle's timings and
/// the provider accounts (for an enable's check).
struct Live {
    settings: WebSettings,
    users: Users,
    proxy: Option<ProxyAuth>,
    policy: Policy,
    providers: Vec<ProviderConfig>,
}

pub struct App {
    store: Store,
    clock: Arc<dyn Clock>,
    live: RwLock<Arc<Live>>,
    /// Sessions of a password login.
    sessions: Sessions,
    /// Sessions made for the trusted proxy's users (apart: a proxy's header never finds
    /// a password login's session, nor the reverse).
    proxied: Sessions,
    limiter: LoginLimiter,
    /// Password checks at once: each may take the users file's memory cost (up to
    /// 256 MiB) and a core.
    verifying: Semaphore,
    fleet: Arc<Fleet>,
    tls: Option<tls::Reloadable>,
}

impl App {
    /// What a reload may change, as it stands (a lock poisoned by a panic still holds a
    /// whole value: it is only ever swapped).
    fn live(&self) -> Arc<Live> {
        self.live
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The running console.
pub struct WebServer {
    pub addr: SocketAddr,
    app: Arc<App>,
    task: JoinHandle<()>,
}

impl WebServer {
    /// Re-reads the users file and the certificate (SIGHUP), with the reloaded timings and
    /// accounts. On an error nothing changes and the error says why.
    pub fn reload(
        &self,
        settings: &WebSettings,
        policy: &Policy,
        providers: &[ProviderConfig],
    ) -> Result<(), WebError> {
        let live = load_live(settings, policy, providers)?;
        if let (Some(tls), Some(files)) = (&self.app.tls, &settings.tls) {
            tls.reload(files)?;
        }
        let users = &live.users;
        // A user removed from the file, or whose role changed, is logged out.
        self.app
            .sessions
            .retain(|user, role| users.role_of(user) == Some(role));
        *self
            .app
            .live
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(live);
        Ok(())
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn load_live(
    settings: &WebSettings,
    policy: &Policy,
    providers: &[ProviderConfig],
) -> Result<Live, WebError> {
    let users = match &settings.users {
        Some(path) => Users::load(path)?,
        None => Users::parse("", "(no users file)")?,
    };
    let proxy = settings.proxy.as_ref().map(|p| ProxyAuth {
        addresses: p.addresses.clone(),
        user_header: p.user_header.clone(),
        default_role: if p.default_role == "operator" {
            Role::Operator
        } else {
            Role::Viewer
        },
    });
    Ok(Live {
        settings: settings.clone(),
        users,
        proxy,
        policy: policy.clone(),
        providers: providers.to_vec(),
    })
}

/// Checks what the console would load (the users file, the certificate) without serving:
/// `check-config` and the daemon's start.
pub fn check(settings: &WebSettings) -> Result<(), WebError> {
    if let Some(path) = &settings.users {
        Users::load(path)?;
    }
    if let Some(files) = &settings.tls {
        tls::load(files)?;
    }
    Ok(())
}

/// Binds and serves the console in a background task.
pub async fn serve(
    settings: &WebSettings,
    store: Store,
    clock: Arc<dyn Clock>,
    policy: &Policy,
    providers: &[ProviderConfig],
) -> Result<WebServer, WebError> {
    let live = load_live(settings, policy, providers)?;
    let tls = settings
        .tls
        .as_ref()
        .map(tls::Reloadable::new)
        .transpose()?;
    let bind_error = |error| WebError::Bind {
        addr: settings.listen,
        error,
    };
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let app = Arc::new(App {
        store,
        clock,
        sessions: Sessions::new(
            settings.session_lifetime,
            settings.session_idle,
            MAX_SESSIONS,
        ),
        proxied: Sessions::new(
            settings.session_lifetime,
            settings.session_idle,
            MAX_SESSIONS,
        ),
        limiter: LoginLimiter::new(),
        verifying: Semaphore::new(MAX_VERIFYING),
        fleet: Arc::new(Fleet::default()),
        tls,
        live: RwLock::new(Arc::new(live)),
    });
    let scheme = if app.tls.is_some() { "https" } else { "http" };
    let task = tokio::spawn(accept_loop(listener, app.clone()));
    tracing::info!(%addr, "web console at {scheme}://{addr}/");
    Ok(WebServer { addr, app, task })
}

/// The router with its state: every route, the body limit, the headers.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/zones") }))
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/zones", get(fleet_page))
        .route("/zones/{zone}", get(zone_page))
        .route("/zones/{zone}/switch", get(confirm_page).post(switch))
        .route("/zones/{zone}/move", get(move_page).post(move_zone))
        .route("/static/style.css", get(style))
        .route("/static/copy.js", get(script))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

async fn accept_loop(listener: tokio::net::TcpListener, app: Arc<App>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let router = router(app.clone());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "web console cannot accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let acceptor = app.tls.as_ref().and_then(tls::Reloadable::acceptor);
        let router = router.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let mut request = request.map(Body::new);
                    request.extensions_mut().insert(ConnectInfo(peer));
                    let mut router = router.clone();
                    tower_service::Service::call(&mut router, request)
                },
            );
            let builder = {
                let mut b = hyper::server::conn::http1::Builder::new();
                b.timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT);
                b
            };
            let served = async {
                match acceptor {
                    Some(acceptor) => {
                        let Ok(Ok(stream)) =
                            tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        else {
                            return;
                        };
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                    None => {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
            };
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, served).await;
            drop(permit);
        });
    }
}

/// Every response: the security headers. Every state-changing request: from our own
/// origin (a browser says so in `Origin` and `Sec-Fetch-Site`).
async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let headers = request.headers();
        let cross_site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v != "same-origin" && v != "none");
        let foreign_origin = match (
            headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
            headers.get(header::HOST).and_then(|v| v.to_str().ok()),
        ) {
            (Some(origin), Some(host)) => origin.split_once("://").map(|(_, h)| h) != Some(host),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if cross_site || foreign_origin {
            return refused(
                StatusCode::FORBIDDEN,
                "Refused",
                "This request did not come from the console's own pages (another site's origin).",
            );
        }
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Not `no-referrer`: under it a browser sends `Origin: null` on its own forms' POSTs,
    // which the origin check above refuses. `same-origin` still sends nothing elsewhere.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    if app.tls.is_some() {
        set(
            headers,
            header::STRICT_TRANSPORT_SECURITY,
            "max-age=31536000",
        );
    }
    response
}

fn html(status: StatusCode, body: String) -> Response {
    (status, Html(body)).into_response()
}

fn refused(status: StatusCode, title: &str, message: &str) -> Response {
    html(status, pages::error(None, title, message))
}

/// The user of this request: a live session (its cookie), or the trusted proxy's header
/// (a session is made for it, so that its forms carry a token too).
struct Authed {
    session: Session,
    /// A new session's cookie to set.
    cookie: Option<String>,
}

impl Authed {
    fn viewer(&self) -> Viewer<'_> {
        Viewer {
            user: &self.session.user,
            role: self.session.role.as_str(),
            operator: self.session.role == Role::Operator,
            csrf: &self.session.csrf,
        }
    }

    /// An error page for this user.
    fn page(&self, status: StatusCode, title: &str, message: &str) -> Response {
        self.respond(html(
            status,
            pages::error(Some(&self.viewer()), title, message),
        ))
    }

    /// The database could not be read: a page saying so, in the store's words.
    fn store_failed(&self, store: &Store, e: StoreError) -> Response {
        self.page(
            StatusCode::SERVICE_UNAVAILABLE,
            "The database cannot be read",
            &store.explain(e).to_string(),
        )
    }

    fn no_such_zone(&self, zone: &ZoneName) -> Response {
        self.page(
            StatusCode::NOT_FOUND,
            "No such zone",
            &format!("The daemon does not watch {zone}."),
        )
    }

    /// The response, with the new session's cookie if one was made.
    fn respond(&self, response: Response) -> Response {
        let mut response = response;
        if let Some(cookie) = &self.cookie
            && let Ok(value) = HeaderValue::from_str(cookie)
        {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        response
    }
}

/// A handler that takes an `Authed` runs only for a logged-in user; anyone else gets the
/// login form (a page) or a refusal.
impl FromRequestParts<Arc<App>> for Authed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Response> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| *peer);
        peer.and_then(|peer| authed(app, &parts.headers, peer))
            .ok_or_else(|| login_first(&parts.method))
    }
}

/// A logged-in user's request about the zone its path names (normalised as the CLI
/// does; a bad name is a page naming why).
struct ZoneRequest {
    a: Authed,
    zone: ZoneName,
}

impl FromRequestParts<Arc<App>> for ZoneRequest {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self, Response> {
        let a = Authed::from_request_parts(parts, app).await?;
        let raw = match Path::<String>::from_request_parts(parts, app).await {
            Ok(Path(raw)) => raw,
            Err(e) => {
                return Err(a.page(StatusCode::BAD_REQUEST, "Not a zone name", &e.body_text()));
            }
        };
        match ZoneName::parse(&raw) {
            Ok(zone) => Ok(ZoneRequest { a, zone }),
            Err(e) => Err(a.page(
                StatusCode::BAD_REQUEST,
                "Not a zone name",
                &format!("{raw:?}: {e}"),
            )),
        }
    }
}

fn authed(app: &App, headers: &HeaderMap, peer: SocketAddr) -> Option<Authed> {
    let now = app.clock.now();
    let live = app.live();
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| auth::cookie_value(c, auth::SESSION_COOKIE));
    if let Some(proxy) = &live.proxy {
        let named = headers
            .get(proxy.user_header.as_str())
            .and_then(|v| v.to_str().ok());
        if let Some((user, role)) = proxy.proxy_user(peer.ip(), named, &live.users) {
            if let Some(session) = token
                .and_then(|t| app.proxied.get(t, now))
                .filter(|s| s.user == user && s.role == role)
            {
                return Some(Authed {
                    session,
                    cookie: None,
                });
            }
            let session = app.proxied.create(&user, role, now).ok()?;
            let cookie = auth::session_cookie(&session.token, live.settings.session_lifetime);
            return Some(Authed {
                session,
                cookie: Some(cookie),
            });
        }
    }
    token
        .and_then(|t| app.sessions.get(t, now))
        .map(|session| Authed {
            session,
            cookie: None,
        })
}

/// Not logged in: a page goes to the login form; anything else is refused.
fn login_first(method: &Method) -> Response {
    if method == Method::GET {
        Redirect::to("/login").into_response()
    } else {
        refused(StatusCode::FORBIDDEN, "Not logged in", "Log in first.")
    }
}

async fn login_form(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if authed(&app, &headers, peer).is_some() {
        return Redirect::to("/zones").into_response();
    }
    html(StatusCode::OK, pages::login(None))
}

#[derive(Deserialize)]
struct LoginForm {
    user: String,
    password: String,
}

async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return html(
            StatusCode::BAD_REQUEST,
            pages::login(Some("The form needs a user and a password.")),
        );
    };
    let now = app.clock.now();
    // What the log says of a name typed at the form: only a valid user name, as typed
    // (no line breaks or escapes from the network reach the log).
    let said = if auth::valid_user_name(&form.user) {
        form.user.as_str()
    } else {
        "(not a user name)"
    };
    if let Err(wait) = app.limiter.check(&form.user, peer.ip(), now) {
        let mut response = html(
            StatusCode::TOO_MANY_REQUESTS,
            pages::login(Some(&format!(
                "Too many login attempts: try again in {} s.",
                wait.as_secs().max(1)
            ))),
        );
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    }
    let live = app.live();
    // argon2id is work by design: off the async threads.
    let (user, password) = (form.user.clone(), form.password);
    let checked = {
        let live = live.clone();
        let Ok(_permit) = app.verifying.acquire().await else {
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "Error",
                "The console is stopping.",
            );
        };
        tokio::task::spawn_blocking(move || live.users.verify(&user, &password)).await
    };
    match checked {
        Ok(Some(role)) => {
            app.limiter.succeeded(&form.user, peer.ip());
            let Ok(session) = app.sessions.create(&form.user, role, now) else {
                return refused(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Error",
                    "No session could be made (the system's random source failed).",
                );
            };
            tracing::info!(user = said, role = role.as_str(), %peer, "web: logged in");
            let mut response = Redirect::to("/zones").into_response();
            if let Ok(v) = HeaderValue::from_str(&auth::session_cookie(
                &session.token,
                live.settings.session_lifetime,
            )) {
                response.headers_mut().insert(header::SET_COOKIE, v);
            }
            response
        }
        _ => {
            app.limiter.failed(&form.user, peer.ip(), now);
            tracing::warn!(user = said, %peer, "web: login refused");
            html(
                StatusCode::UNAUTHORIZED,
                pages::login(Some("Wrong user name or password.")),
            )
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    csrf: String,
}

async fn logout(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let Some(a) = authed(&app, &headers, peer) else {
        return login_first(&Method::POST);
    };
    if !form.is_ok_and(|Form(f)| a.session.csrf_ok(&f.csrf)) {
        return bad_token(&a);
    }
    app.sessions.remove(&a.session.token);
    app.proxied.remove(&a.session.token);
    let mut response = Redirect::to("/login").into_response();
    if let Ok(v) = HeaderValue::from_str(&auth::cleared_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

fn bad_token(a: &Authed) -> Response {
    a.page(
        StatusCode::FORBIDDEN,
        "Refused",
        "The form's token is missing or does not match this session: reload the page and try again. Nothing was changed.",
    )
}

#[derive(Deserialize)]
struct FleetQuery {
    state: Option<String>,
    on: Option<String>,
    alert: Option<String>,
    q: Option<String>,
    page: Option<String>,
}

async fn fleet_page(
    State(app): State<Arc<App>>,
    a: Authed,
    query: Result<Query<FleetQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let filter = match query {
        Ok(Query(q)) => Filter::parse(
            q.state.as_deref(),
            q.on.as_deref(),
            q.alert.as_deref(),
            q.q.as_deref(),
            q.page.as_deref(),
        ),
        Err(e) => Err(e.body_text()),
    };
    let filter = match filter {
        Ok(f) => f,
        Err(e) => return a.page(StatusCode::BAD_REQUEST, "Bad filter", &e),
    };
    let live = app.live();
    let now = app.clock.now();
    match app.fleet.get(&app.store, &live.policy, now).await {
        Ok(snapshot) => {
            let selection = snapshot.select(&filter);
            a.respond(html(
                StatusCode::OK,
                pages::fleet(&a.viewer(), &snapshot, &filter, &selection, now),
            ))
        }
        Err(e) => a.store_failed(&app.store, e),
    }
}

#[derive(Deserialize)]
struct ZoneQuery {
    recorded: Option<String>,
}

async fn zone_page(
    State(app): State<Arc<App>>,
    ZoneRequest { a, zone }: ZoneRequest,
    query: Result<Query<ZoneQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let live = app.live();
    let store = &app.store;
    let read = async {
        let row = store.zone(zone.as_str()).await?;
        let alerts = store.open_alerts(Some(zone.as_str())).await?;
        let mut events = store.events(zone.as_str()).await?;
        let daemon = store.daemon_alerts_open().await?;
        if events.len() > MAX_EVENTS {
            events.drain(..events.len() - MAX_EVENTS);
        }
        Ok::<_, crate::store::StoreError>((row, alerts, events, daemon))
    };
    let (row, alerts, events, daemon) = match read.await {
        Ok(read) => read,
        Err(e) => return a.store_failed(store, e),
    };
    let Some(row) = row else {
        return a.no_such_zone(&zone);
    };
    let now = app.clock.now();
    let notice = query
        .ok()
        .and_then(|Query(q)| q.recorded)
        .and_then(|s| match s.as_str() {
            "move" => Some(
                "Signed move declared; the daemon takes it from here (the phase and what it waits for are below)."
                    .to_string(),
            ),
            _ => Switch::parse(&s).map(|s| {
                format!(
                    "Intent {} recorded; the daemon acts on it within seconds.",
                    s.intent().as_str()
                )
            }),
        });
    let accounts = account_names(&live.providers);
    let timeline = timeline::render(&timeline::TimelineInput {
        zone: &row,
        events: &events,
        policy: &live.policy,
        now,
    });
    let page = ZonePage {
        row: &row,
        waiting: row.waiting(&live.policy, host_ipv6(&daemon)),
        alerts: &alerts,
        events: &events,
        timeline,
        notice,
        now,
        accounts: &accounts,
    };
    a.respond(html(StatusCode::OK, pages::zone(&a.viewer(), &page)))
}

#[derive(Deserialize)]
struct SwitchQuery {
    to: Option<String>,
}

fn account_names(providers: &[ProviderConfig]) -> Vec<String> {
    providers.iter().map(|p| p.name.clone()).collect()
}

/// A viewer asking for what only an operator may do: refused, naming it.
fn operator_only(a: &Authed, what: &str) -> Result<(), Box<Response>> {
    if a.session.role == Role::Operator {
        return Ok(());
    }
    Err(Box::new(a.page(
        StatusCode::FORBIDDEN,
        "Not allowed",
        &format!("Only an operator may {what}; you are a viewer. Nothing was changed."),
    )))
}

/// The switch asked for, if the user may use it on this zone as it stands.
fn switch_of(a: &Authed, to: Option<&str>) -> Result<Switch, Box<Response>> {
    operator_only(a, "switch DNSSEC")?;
    to.and_then(Switch::parse).ok_or_else(|| {
        Box::new(a.page(
            StatusCode::BAD_REQUEST,
            "No such switch",
            "The switch is one of enable, disable, disable-never-submitted. Nothing was changed.",
        ))
    })
}

async fn confirm_page(
    State(app): State<Arc<App>>,
    ZoneRequest { a, zone }: ZoneRequest,
    query: Result<Query<SwitchQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let switch = match switch_of(&a, query.ok().and_then(|Query(q)| q.to).as_deref()) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match app.store.zone(zone.as_str()).await {
        Ok(Some(row)) => a.respond(html(
            StatusCode::OK,
            pages::confirm(&a.viewer(), zone.as_str(), row.zone.state, switch),
        )),
        Ok(None) => a.no_such_zone(&zone),
        Err(e) => a.store_failed(&app.store, e),
    }
}

/// The console's state-changing forms (the switch, the move): the session's token, what
/// to do, and the confirmation.
#[derive(Deserialize)]
struct ConfirmForm {
    csrf: String,
    to: String,
    confirm: Option<String>,
}

/// A state-changing form as read: refused, changing nothing, when too large, unreadable
/// or without its session's token; then only an operator's, and only confirmed.
fn confirmed_form(
    a: &Authed,
    form: Result<Form<ConfirmForm>, FormRejection>,
    what: &str,
) -> Result<ConfirmForm, Box<Response>> {
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(Box::new(a.page(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                "The form is larger than the console reads. Nothing was changed.",
            )));
        }
        Err(_) => return Err(Box::new(bad_token(a))),
    };
    if !a.session.csrf_ok(&form.csrf) {
        return Err(Box::new(bad_token(a)));
    }
    operator_only(a, what)?;
    if form.confirm.as_deref() != Some("yes") {
        return Err(Box::new(a.page(
            StatusCode::BAD_REQUEST,
            "Not confirmed",
            &format!("The request to {what} was not confirmed. Nothing was changed."),
        )));
    }
    Ok(form)
}

async fn switch(
    State(app): State<Arc<App>>,
    ZoneRequest { a, zone }: ZoneRequest,
    form: Result<Form<ConfirmForm>, FormRejection>,
) -> Response {
    let form = match confirmed_form(&a, form, "switch DNSSEC") {
        Ok(form) => form,
        Err(r) => return *r,
    };
    let switch = match switch_of(&a, Some(&form.to)) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    match app.store.zone(zone.as_str()).await {
        Ok(Some(_)) => {}
        Ok(None) => return a.no_such_zone(&zone),
        Err(e) => return a.store_failed(&app.store, e),
    }
    let live = app.live();
    let recorded = intent::record(
        &app.store,
        &live.providers,
        zone.as_str(),
        switch.intent(),
        switch == Switch::DisableNeverSubmitted,
        Operator::Web(&a.session.user),
        app.clock.now(),
    )
    .await;
    match recorded {
        Ok(intent::Recorded {
            unchanged: Some(why),
            ..
        }) => a.page(
            StatusCode::OK,
            "Nothing to record",
            &format!("Intent {} already: {why}.", switch.intent().as_str()),
        ),
        Ok(_) => {
            app.fleet.invalidate();
            tracing::info!(zone = %zone, user = %a.session.user, intent = switch.intent().as_str(), "web: intent recorded");
            let to = format!(
                "/zones/{}?recorded={}",
                url::form_urlencoded::byte_serialize(zone.as_str().as_bytes()).collect::<String>(),
                switch.as_str()
            );
            a.respond(Redirect::to(&to).into_response())
        }
        Err(e) => a.page(
            StatusCode::CONFLICT,
            "Not recorded",
            &format!("{e}. Nothing was changed."),
        ),
    }
}

async fn move_page(State(app): State<Arc<App>>, ZoneRequest { a, zone }: ZoneRequest) -> Response {
    if let Err(r) = operator_only(&a, "move a zone") {
        return *r;
    }
    let accounts = account_names(&app.live().providers);
    match app.store.zone(zone.as_str()).await {
        Ok(Some(row)) if pages::move_offered(&row, &accounts) => a.respond(html(
            StatusCode::OK,
            pages::move_confirm(&a.viewer(), zone.as_str(), row.zone.state, &accounts),
        )),
        Ok(Some(_)) => a.page(
            StatusCode::CONFLICT,
            "No move from here",
            "A signed move starts from an active zone with DNSSEC wanted, no move under way, and another provider account configured. Nothing was changed.",
        ),
        Ok(None) => a.no_such_zone(&zone),
        Err(e) => a.store_failed(&app.store, e),
    }
}

async fn move_zone(
    State(app): State<Arc<App>>,
    ZoneRequest { a, zone }: ZoneRequest,
    form: Result<Form<ConfirmForm>, FormRejection>,
) -> Response {
    let form = match confirmed_form(&a, form, "move a zone") {
        Ok(form) => form,
        Err(r) => return *r,
    };
    let live = app.live();
    let declared = intent::declare_move(
        &app.store,
        &live.providers,
        zone.as_str(),
        &form.to,
        Operator::Web(&a.session.user),
        app.clock.now(),
    )
    .await;
    match declared {
        Ok(d) => {
            app.fleet.invalidate();
            tracing::info!(zone = %zone, user = %a.session.user, from = d.source.as_str(), to = d.target.as_str(), "web: signed move declared");
            let to = format!(
                "/zones/{}?recorded=move",
                url::form_urlencoded::byte_serialize(zone.as_str().as_bytes()).collect::<String>(),
            );
            a.respond(Redirect::to(&to).into_response())
        }
        Err(e) => a.page(
            StatusCode::CONFLICT,
            "Not declared",
            &format!("{e}. Nothing was changed."),
        ),
    }
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/style.css"))
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/copy.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn not_found() -> Response {
    refused(StatusCode::NOT_FOUND, "Not found", "There is no such page.")
}
