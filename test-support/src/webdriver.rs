//! The few W3C WebDriver commands the browser harness ([`crate::browser`]) sends to
//! Debian's chromedriver on loopback: a session, navigation, elements by CSS selector,
//! scripts, cookies, screenshots, and the extension commands chromedriver adds. Each is
//! one JSON request over the HTTP client the harness already has (reqwest): a WebDriver
//! crate (fantoccini) brought a second copy of ICU and of `time` into every test build,
//! and features no other crate of the build asks for, so that the daemon's own build
//! without the default feature could not reuse a single one of its dependencies.
//!
//! The wire protocol: <https://www.w3.org/TR/webdriver2/> (each command's endpoint and
//! body), every answer `{"value": ...}`, an error `{"value": {"error", "message"}}` with
//! an HTTP status of 4xx or 5xx.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::Method;
use serde_json::{Value, json};

/// The key under which the W3C protocol names a web element's id.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long one command may take: a navigation waits for the page's load event.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What a failed command says: the command, and the driver's error and message (or
/// why there was no answer).
pub type Error = String;
type Result<T> = std::result::Result<T, Error>;

/// One session of the driver. Cheap to clone: elements keep one.
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// `{driver}/session/{id}`.
    base: String,
}

impl Session {
    /// `POST /session` at `driver` (its base URL) with `capabilities` as `alwaysMatch`.
    pub async fn start(driver: &str, capabilities: Value) -> Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let driver = driver.trim_end_matches('/');
        let value = call(
            &http,
            Method::POST,
            &format!("{driver}/session"),
            Some(json!({ "capabilities": { "alwaysMatch": capabilities } })),
        )
        .await
        .map_err(|e| format!("new session: {e}"))?;
        let Some(id) = value["sessionId"].as_str() else {
            return Err(format!("new session: no sessionId in {value}"));
        };
        Ok(Self {
            inner: Arc::new(Inner {
                base: format!("{driver}/session/{id}"),
                http,
            }),
        })
    }

    /// One command of this session: `path` below `/session/{id}` (empty for the session
    /// itself); `body` for a POST.
    pub async fn command(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value> {
        let url = if path.is_empty() {
            self.inner.base.clone()
        } else {
            format!("{}/{path}", self.inner.base)
        };
        call(&self.inner.http, method, &url, body).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.command(Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Result<Value> {
        self.command(Method::GET, path, None).await
    }

    /// Ends the session (`DELETE /session/{id}`): the browser exits.
    pub async fn close(&self) -> Result<()> {
        self.command(Method::DELETE, "", None).await.map(drop)
    }

    /// Navigates to `url`; the driver answers once the page's load event has fired.
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("url", json!({ "url": url })).await.map(drop)
    }

    pub async fn current_url(&self) -> Result<String> {
        let value = self.get("url").await?;
        string(value, "current URL")
    }

    /// The first element matching `css` now (`no such element` is an error).
    pub async fn find(&self, css: &str) -> Result<Element> {
        let value = self
            .post("element", json!({ "using": "css selector", "value": css }))
            .await?;
        self.element(&value)
    }

    /// The first element matching `css`, asked again until it appears or `wait` passes.
    pub async fn wait_for(&self, css: &str, wait: Duration) -> Result<Element> {
        let deadline = Instant::now() + wait;
        loop {
            match self.find(css).await {
                Ok(element) => return Ok(element),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("not found within {wait:?}: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Every element matching `css` now (none is not an error).
    pub async fn find_all(&self, css: &str) -> Result<Vec<Element>> {
        let value = self
            .post("elements", json!({ "using": "css selector", "value": css }))
            .await?;
        match value {
            Value::Array(list) => list.iter().map(|v| self.element(v)).collect(),
            other => Err(format!("elements: not a list: {other}")),
        }
    }

    fn element(&self, value: &Value) -> Result<Element> {
        match value[ELEMENT_KEY].as_str() {
            Some(id) => Ok(Element {
                session: self.clone(),
                id: id.to_string(),
            }),
            None => Err(format!("not an element reference: {value}")),
        }
    }

    /// Runs `script` (a function body) with `args`: what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    /// Runs `script` asynchronously: what it passes to its callback (its last argument).
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("execute/async", json!({ "script": script, "args": args }))
            .await
    }

    /// Every cookie of the current page's origin, as name and value.
    pub async fn cookies(&self) -> Result<Vec<(String, String)>> {
        match self.get("cookie").await? {
            Value::Array(list) => list
                .iter()
                .map(|c| match (c["name"].as_str(), c["value"].as_str()) {
                    (Some(name), Some(value)) => Ok((name.to_string(), value.to_string())),
                    _ => Err(format!("a cookie without name or value: {c}")),
                })
                .collect(),
            other => Err(format!("cookies: not a list: {other}")),
        }
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let encoded = string(self.get("screenshot").await?, "screenshot")?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("screenshot: not base64: {e}"))
    }
}

/// An element of the page, by the id the driver gave it.
pub struct Element {
    session: Session,
    id: String,
}

impl Element {
    async fn post(&self, what: &str, body: Value) -> Result<Value> {
        self.session
            .post(&format!("element/{}/{what}", self.id), body)
            .await
    }

    async fn get(&self, what: &str) -> Result<Value> {
        self.session
            .get(&format!("element/{}/{what}", self.id))
            .await
    }

    /// A WebDriver click: a trusted user gesture.
    pub async fn click(&self) -> Result<()> {
        self.post("click", json!({})).await.map(drop)
    }

    /// The rendered text.
    pub async fn text(&self) -> Result<String> {
        string(self.get("text").await?, "text")
    }

    /// The attribute `name`, `None` when the element has none.
    pub async fn attr(&self, name: &str) -> Result<Option<String>> {
        match self.get(&format!("attribute/{name}")).await? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(format!("attribute {name}: not a string: {other}")),
        }
    }

    /// Empties a form field.
    pub async fn clear(&self) -> Result<()> {
        self.post("clear", json!({})).await.map(drop)
    }

    /// Types `text` into the element.
    pub async fn send_keys(&self, text: &str) -> Result<()> {
        self.post("value", json!({ "text": text })).await.map(drop)
    }
}

fn string(value: Value, what: &str) -> Result<String> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(format!("{what}: not a string: {other}")),
    }
}

/// One request: the answer's `value`, or the driver's error named.
async fn call(
    http: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value> {
    let mut request = http.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("{method} {url}: {e}"))?;
    let status = response.status();
    let mut answer: Value = response
        .json()
        .await
        .map_err(|e| format!("{method} {url}: HTTP {status}, not JSON: {e}"))?;
    let value = answer["value"].take();
    if status.is_success() {
        Ok(value)
    } else {
        Err(format!(
            "{method} {url}: HTTP {status}: {} ({})",
            value["error"].as_str().unwrap_or("no error code"),
            value["message"].as_str().unwrap_or_default()
        ))
    }
}
