//! The HTTP client for Amazon Route 53's API (docs/providers/route53.md).
//!
//! One private path, [`Route53Client::call`], carries every request: each attempt signed
//! with Signature Version 4 by AWS's own signer (`aws-sigv4`) right before it leaves,
//! every attempt of the account spaced to its request rate (five a second), `Throttling`
//! and `PriorRequestNotComplete` (400s) retried with the shared backoff, errors classed
//! by their `Code`, never by their status or message.
//!
//! Paths name a zone by its hosted-zone id; the client finds it by name
//! (ListHostedZonesByName, which starts a listing at the name), keeps it, and forgets it
//! when Route 53 says it names nothing. Every change answers `PENDING` and is waited on
//! to `INSYNC` (GetChange) before the next step.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::time::Instant;
use url::Url;

use super::settings::{KeyId, Route53Settings};
use super::types::{
    ApiError, ByNamePage, ChangeInfo, Dnssec, HostedZone, Ksk, RecordPage, Xml, ZonePage,
    create_ksk_body, largest_ttl, zone_with_servers,
};
use crate::condition::Condition;
use crate::dnssec::DnssecKey;
use crate::provider::gcore::AuthBackoff;
use crate::provider::http::{Http, MAX_BODY_BYTES, Reply, Request};
use crate::provider::{
    Attempts, DnssecSwitched, HostedZone as DaemonZone, ListedZone, Provider, ProviderError,
    SendPermit,
};
use crate::retry::RetryPolicy;
use crate::secret::{Secret, redact};

/// Hosted zones a page: Route 53's largest.
pub const MAX_ITEMS: usize = 100;
/// Record sets a page: Route 53's largest.
const RECORD_ITEMS: usize = 300;
/// The most pages one listing takes.
pub const MAX_PAGES: usize = 10_000;
/// The longest one listing pages on.
pub const PAGED_BUDGET: Duration = Duration::from_secs(600);
/// The most pages of ListHostedZonesByName read to find one name (all its entries are
/// on the first unless an account holds a hundred zones of that name).
const BY_NAME_PAGES: usize = 5;
/// Longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 160;
/// The signing name of the service.
const SERVICE: &str = "route53";
/// Who refuses the key calls.
const KEYS_API: &str = "Route 53's API through this version (its key-signing key is the daemon's one, its zone-signing key Route 53's own)";
/// Codes that say "ask again later": the rate, a request still in progress, another
/// request on the same object.
const AGAIN_CODES: [&str; 4] = [
    "Throttling",
    "ThrottlingException",
    "PriorRequestNotComplete",
    "ConcurrentModification",
];
/// Codes that refuse the key pair itself.
const CREDENTIAL_CODES: [&str; 7] = [
    "SignatureDoesNotMatch",
    "InvalidClientTokenId",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "RequestExpired",
    "InvalidSignatureException",
    "UnrecognizedClientException",
];
/// Codes where Route 53 keeps its own order (the parent's DS, the delegation, the keys'
/// states): refused now, asked again at the next step.
const NOT_NOW_CODES: [&str; 8] = [
    "HostedZonePartiallyDelegated",
    "KeySigningKeyInParentDSRecord",
    "KeySigningKeyInUse",
    "InvalidSigningStatus",
    "InvalidKeySigningKeyStatus",
    "KeySigningKeyWithActiveStatusNotFound",
    "KeySigningKeyAlreadyExists",
    "TooManyKeySigningKeys",
];

pub struct Route53Client {
    http: Http,
    base: Url,
    region: String,
    credentials: aws_credential_types::Credentials,
    /// The secret access key alone, to redact.
    secret: Secret,
    backoff: AuthBackoff,
    kms_key_arn: Option<String>,
    ksk_name: String,
    change_timeout: Duration,
    /// Hosted-zone ids by name (lower case, no trailing dot).
    ids: Mutex<HashMap<String, String>>,
    /// A change a call left `PENDING`, by zone: the next call waits on it first.
    pending: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Route53Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route53Client")
            .field("base", &self.base.as_str())
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Route53Client {
    pub fn new(
        settings: &Route53Settings,
        access_key_id: Secret,
        secret_access_key: Secret,
    ) -> Result<Self, ProviderError> {
        let retry = RetryPolicy {
            max_attempts: settings.max_attempts,
            budget: settings.retry_budget,
            ..RetryPolicy::default()
        };
        Self::with_policy(settings, access_key_id, secret_access_key, retry)
    }

    pub fn with_policy(
        settings: &Route53Settings,
        access_key_id: Secret,
        secret_access_key: Secret,
        retry: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        let id = access_key_id.expose().trim().to_string();
        let secret = secret_access_key.expose().trim().to_string();
        let bad = |s: &str| s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control());
        if bad(&id) || bad(&secret) {
            return Err(ProviderError::Invalid(
                "the Route 53 access key id or secret access key is empty or holds whitespace"
                    .into(),
            ));
        }
        let interval = Duration::from_secs(1) / settings.requests_per_second.max(1);
        Ok(Self {
            http: Http::new(retry, settings.request_timeout)?.paced(interval),
            base: settings.base_url.clone(),
            region: settings.region.clone(),
            credentials: aws_credential_types::Credentials::new(
                id,
                secret.clone(),
                None,
                None,
                "dnssec-warden",
            ),
            secret: Secret::new(secret),
            backoff: AuthBackoff::new(),
            kms_key_arn: settings.kms_key_arn.clone(),
            ksk_name: settings.ksk_name.clone(),
            change_timeout: settings.change_timeout,
            ids: Mutex::default(),
            pending: Mutex::default(),
        })
    }

    /// Whether Route 53 refuses the account's key pair (the daemon-wide
    /// `provider_auth_failing`).
    pub fn auth_condition(&self) -> Arc<Condition> {
        self.backoff.refused.clone()
    }

    // ---- zones ---------------------------------------------------------------------------

    /// Every public hosted zone of the account (ListHostedZones, paged by `marker`), each
    /// id kept; a name held by two public zones is kept by neither (a search says so).
    pub async fn list_zones(&self) -> Result<Vec<HostedZone>, ProviderError> {
        let started = Instant::now();
        let mut all: Vec<HostedZone> = Vec::new();
        let mut marker: Option<String> = None;
        for page in 1..=MAX_PAGES {
            let mut query = vec![("maxitems", MAX_ITEMS.to_string())];
            if let Some(m) = &marker {
                query.push(("marker", m.clone()));
            }
            let bytes = self
                .call(Method::GET, &["hostedzone"], &query, None, None, true)
                .await?;
            let page_read = self.read(&bytes, ZonePage::read)?;
            all.extend(page_read.zones.into_iter().filter(|z| !z.private));
            match page_read.next_marker {
                None => {
                    self.keep_ids(&all);
                    return Ok(all);
                }
                Some(next) if marker.as_ref() == Some(&next) => {
                    return Err(ProviderError::Listing(format!(
                        "page {page} names the marker it was asked with ({next}) as the next"
                    )));
                }
                Some(next) => marker = Some(next),
            }
            if started.elapsed() >= PAGED_BUDGET {
                return Err(ProviderError::Listing(format!(
                    "it did not end within {page} pages and {} s",
                    started.elapsed().as_secs()
                )));
            }
        }
        Err(ProviderError::Listing(format!(
            "it did not end within {MAX_PAGES} pages"
        )))
    }

    fn keep_ids(&self, zones: &[HostedZone]) {
        let mut seen: HashMap<String, Vec<&str>> = HashMap::new();
        for z in zones {
            seen.entry(api_name(&z.name)).or_default().push(&z.id);
        }
        let mut ids = self.lock(&self.ids);
        for (name, found) in seen {
            match found.as_slice() {
                [one] => {
                    ids.insert(name, one.to_string());
                }
                _ => {
                    ids.remove(&name);
                }
            }
        }
    }

    /// The first page of the hosted zones alone (`check-config`'s read-only try of the
    /// key pair).
    pub async fn first_zones(&self) -> Result<Vec<HostedZone>, ProviderError> {
        let query = [("maxitems", MAX_ITEMS.to_string())];
        let bytes = self
            .call(Method::GET, &["hostedzone"], &query, None, None, true)
            .await?;
        Ok(self.read(&bytes, ZonePage::read)?.zones)
    }

    /// The zone's hosted-zone id: kept, or found by its exact name.
    pub async fn zone_id(&self, zone: &str) -> Result<String, ProviderError> {
        let name = api_name(zone);
        if let Some(id) = self.lock(&self.ids).get(&name) {
            return Ok(id.clone());
        }
        self.find_zone(&name).await
    }

    /// ListHostedZonesByName from `name`: the public zones named exactly so, one of
    /// them or an error naming both.
    async fn find_zone(&self, name: &str) -> Result<String, ProviderError> {
        let mut found: Vec<String> = Vec::new();
        let mut start: (String, Option<String>) = (name.to_string(), None);
        for _ in 0..BY_NAME_PAGES {
            let mut query = vec![
                ("dnsname", start.0.clone()),
                ("maxitems", MAX_ITEMS.to_string()),
            ];
            if let Some(id) = &start.1 {
                query.push(("hostedzoneid", id.clone()));
            }
            let bytes = self
                .call(
                    Method::GET,
                    &["hostedzonesbyname"],
                    &query,
                    None,
                    None,
                    true,
                )
                .await?;
            let page = self.read(&bytes, ByNamePage::read)?;
            let past = page.zones.iter().any(|z| api_name(&z.name) != name);
            found.extend(
                page.zones
                    .into_iter()
                    .filter(|z| api_name(&z.name) == name && !z.private)
                    .map(|z| z.id),
            );
            match page.next {
                Some((next_name, next_id)) if !past && api_name(&next_name) == name => {
                    start = (next_name, Some(next_id));
                }
                _ => break,
            }
        }
        found.dedup();
        let id = match found.as_slice() {
            [] => {
                return Err(ProviderError::NotFound(format!(
                    "no public hosted zone {name} in the AWS account of this key pair"
                )));
            }
            [one] => one.clone(),
            many => {
                return Err(ProviderError::Misconfigured {
                    key: "access_key_id",
                    message: format!(
                        "{} public hosted zones named {name} (ids {}): delete the one not delegated to",
                        many.len(),
                        many.join(", ")
                    ),
                });
            }
        };
        self.lock(&self.ids).insert(name.to_string(), id.clone());
        Ok(id)
    }

    /// A zone call's error: an id Route 53 no longer knows is forgotten (found again by
    /// name at the next call).
    fn forget_on_not_found<T>(
        &self,
        zone: &str,
        result: Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        if let Err(ProviderError::NotFound(_)) = &result {
            self.lock(&self.ids).remove(&api_name(zone));
        }
        result
    }

    /// GetHostedZone: the zone and its name servers.
    pub async fn get_zone(&self, zone: &str) -> Result<(HostedZone, Vec<String>), ProviderError> {
        let id = self.zone_id(zone).await?;
        let result = self
            .call(Method::GET, &["hostedzone", &id], &[], None, None, true)
            .await;
        let bytes = self.forget_on_not_found(zone, result)?;
        self.read(&bytes, zone_with_servers)
    }

    /// GetDNSSEC.
    pub async fn get_dnssec(&self, zone: &str) -> Result<Dnssec, ProviderError> {
        let id = self.zone_id(zone).await?;
        let result = self
            .call(
                Method::GET,
                &["hostedzone", &id, "dnssec"],
                &[],
                None,
                None,
                true,
            )
            .await;
        let bytes = self.forget_on_not_found(zone, result)?;
        self.read(&bytes, Dnssec::read)
    }

    /// Every record set of the zone (ListResourceRecordSets, paged).
    pub async fn list_records(
        &self,
        zone: &str,
    ) -> Result<Vec<super::types::RecordSet>, ProviderError> {
        let id = self.zone_id(zone).await?;
        let started = Instant::now();
        let mut all = Vec::new();
        let mut next: Option<(String, Option<String>, Option<String>)> = None;
        for page in 1..=MAX_PAGES {
            let mut query = vec![("maxitems", RECORD_ITEMS.to_string())];
            if let Some((name, rtype, identifier)) = &next {
                query.push(("name", name.clone()));
                if let Some(t) = rtype {
                    query.push(("type", t.clone()));
                }
                if let Some(i) = identifier {
                    query.push(("identifier", i.clone()));
                }
            }
            let result = self
                .call(
                    Method::GET,
                    &["hostedzone", &id, "rrset"],
                    &query,
                    None,
                    None,
                    true,
                )
                .await;
            let bytes = self.forget_on_not_found(zone, result)?;
            let read = self.read(&bytes, RecordPage::read)?;
            all.extend(read.sets);
            match read.next {
                None => return Ok(all),
                Some(n) if next.as_ref() == Some(&n) => {
                    return Err(ProviderError::Listing(format!(
                        "page {page} names the start it was asked with as the next"
                    )));
                }
                Some(n) => next = Some(n),
            }
            if started.elapsed() >= PAGED_BUDGET {
                return Err(ProviderError::Listing(format!(
                    "it did not end within {page} pages and {} s",
                    started.elapsed().as_secs()
                )));
            }
        }
        Err(ProviderError::Listing(format!(
            "it did not end within {MAX_PAGES} pages"
        )))
    }

    // ---- changes -------------------------------------------------------------------------

    /// A call that changes something, its `ChangeInfo` waited on to `INSYNC`.
    #[allow(clippy::too_many_arguments)]
    async fn change(
        &self,
        zone: &str,
        method: Method,
        segments: &[&str],
        body: Option<String>,
        root: &str,
        may_send: Option<SendPermit<'_>>,
        repeatable: bool,
    ) -> Result<(), ProviderError> {
        let result = self
            .call(method, segments, &[], body, may_send, repeatable)
            .await;
        let bytes = self.forget_on_not_found(zone, result)?;
        let info = self.read(&bytes, |x| ChangeInfo::read(x, root))?;
        self.wait_insync(zone, info).await
    }

    /// GetChange until the change is `INSYNC`, within the change timeout; past it, the
    /// change is kept for the next call to wait on, and the call is of unknown outcome
    /// (it took effect and has not yet reached every Route 53 server).
    async fn wait_insync(&self, zone: &str, info: ChangeInfo) -> Result<(), ProviderError> {
        let started = Instant::now();
        let mut status = info;
        let mut pause = Duration::from_millis(250);
        // Bounded: every pass sleeps, and the timeout ends it.
        loop {
            if status.insync() {
                self.lock(&self.pending).remove(&api_name(zone));
                return Ok(());
            }
            if started.elapsed() >= self.change_timeout {
                self.lock(&self.pending)
                    .insert(api_name(zone), status.id.clone());
                return Err(ProviderError::ErrorInSuccess {
                    status: 200,
                    message: format!(
                        "Route 53 took change {} for {} and it is still PENDING after {} s (not yet on every Route 53 server); waited on again at the next step",
                        status.id,
                        api_name(zone),
                        started.elapsed().as_secs()
                    ),
                });
            }
            tokio::time::sleep(pause.min(self.change_timeout.saturating_sub(started.elapsed())))
                .await;
            pause = (pause * 2).min(Duration::from_secs(10));
            let bytes = self
                .call(Method::GET, &["change", &status.id], &[], None, None, true)
                .await?;
            status = self.read(&bytes, |x| ChangeInfo::read(x, "GetChangeResponse"))?;
        }
    }

    /// The change an earlier call left `PENDING`, waited on.
    async fn settle_pending(&self, zone: &str) -> Result<(), ProviderError> {
        let kept = self.lock(&self.pending).get(&api_name(zone)).cloned();
        match kept {
            None => Ok(()),
            Some(id) => {
                let info = ChangeInfo {
                    id,
                    status: "PENDING".into(),
                };
                self.wait_insync(zone, info).await
            }
        }
    }

    async fn create_ksk(
        &self,
        zone: &str,
        id: &str,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let Some(arn) = &self.kms_key_arn else {
            return Err(ProviderError::Misconfigured {
                key: "kms_key_arn",
                message: format!(
                    "{} has no key-signing key and the block names no KMS key to create one from: set kms_key_arn (an ECC_NIST_P256 sign/verify key in us-east-1 that dnssec-route53.amazonaws.com may use); the daemon creates no KMS key",
                    api_name(zone)
                ),
            });
        };
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let reference = format!("dnssec-warden-{id}-{nanos}");
        let body = create_ksk_body(&reference, id, arn, &self.ksk_name, "ACTIVE");
        // Not repeated once it may have taken effect: a lost answer is settled by the
        // next GetDNSSEC (the key's name is ours).
        self.change(
            zone,
            Method::POST,
            &["keysigningkey"],
            Some(body),
            "CreateKeySigningKeyResponse",
            may_send,
            false,
        )
        .await
    }

    async fn ksk_call(
        &self,
        zone: &str,
        id: &str,
        ksk: &Ksk,
        action: &str,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let (method, segments, root): (Method, Vec<&str>, &str) = match action {
            "activate" => (
                Method::POST,
                vec!["keysigningkey", id, ksk.name(), "activate"],
                "ActivateKeySigningKeyResponse",
            ),
            "deactivate" => (
                Method::POST,
                vec!["keysigningkey", id, ksk.name(), "deactivate"],
                "DeactivateKeySigningKeyResponse",
            ),
            _ => (
                Method::DELETE,
                vec!["keysigningkey", id, ksk.name()],
                "DeleteKeySigningKeyResponse",
            ),
        };
        self.change(zone, method, &segments, None, root, may_send, true)
            .await
    }

    /// Switches signing on or off, level-triggered: each call reads GetDNSSEC and takes
    /// the steps still missing, each waited on to `INSYNC`.
    ///
    /// On: a key-signing key from `kms_key_arn` (created `ACTIVE`) or the zone's
    /// `INACTIVE` one activated, then EnableHostedZoneDNSSEC; the key answered is checked
    /// (rule 5). Off, asked only once the lifecycle has seen the DS gone and its TTL
    /// passed: DisableHostedZoneDNSSEC, then every key-signing key deactivated and deleted
    /// (the KMS key stays the operator's). A zone or key Route 53 reports broken
    /// (`ACTION_NEEDED`, `INTERNAL_FAILURE`, an unknown status) changes nothing.
    pub async fn set_dnssec_with(
        &self,
        zone: &str,
        enabled: bool,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.settle_pending(zone).await?;
        let id = self.zone_id(zone).await?;
        let now = self.get_dnssec(zone).await?;
        if let Some(e) = now.failing_key(zone) {
            return Err(e);
        }
        let reading = now.reading();
        if reading.signs.is_none() {
            return Err(now.unknown(zone, "nothing is changed while it is so"));
        }
        if reading.settling {
            return Err(ProviderError::Conflict(format!(
                "Route 53 is still removing the signing of {} (DELETING); asked again at the next step",
                api_name(zone)
            )));
        }
        if enabled {
            if reading.signs == Some(true) && now.active().len() == 1 {
                let key = now.signing_key(zone)?;
                return Ok(DnssecSwitched {
                    message: Some("Route 53 signs the zone".into()),
                    key: Some(key),
                });
            }
            if now.active().is_empty() {
                match now.ksks.iter().find(|k| k.status() == "INACTIVE") {
                    Some(k) => self.ksk_call(zone, &id, k, "activate", may_send).await?,
                    None => self.create_ksk(zone, &id, may_send).await?,
                }
            }
            if reading.signs == Some(false) {
                self.change(
                    zone,
                    Method::POST,
                    &["hostedzone", &id, "enable-dnssec"],
                    None,
                    "EnableHostedZoneDNSSECResponse",
                    may_send,
                    true,
                )
                .await?;
            }
            let key = self.get_dnssec(zone).await?.signing_key(zone)?;
            return Ok(DnssecSwitched {
                message: Some("Route 53 DNSSEC signing enabled (INSYNC)".into()),
                key: Some(key),
            });
        }
        let mut now = now;
        if reading.signs == Some(true) {
            match self
                .change(
                    zone,
                    Method::POST,
                    &["hostedzone", &id, "disable-dnssec"],
                    None,
                    "DisableHostedZoneDNSSECResponse",
                    may_send,
                    true,
                )
                .await
            {
                // No DNSSEC resources: already off.
                Ok(()) | Err(ProviderError::DnssecDisabled) => {}
                Err(e) => return Err(e),
            }
            now = self.get_dnssec(zone).await?;
            if now.reading().signs != Some(false) {
                return Err(now.unknown(zone, "still signed after DisableHostedZoneDNSSEC"));
            }
        }
        for ksk in &now.ksks {
            if ksk.status() == "ACTIVE" {
                self.ksk_call(zone, &id, ksk, "deactivate", may_send)
                    .await?;
            }
            match self.ksk_call(zone, &id, ksk, "delete", may_send).await {
                Ok(()) | Err(ProviderError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(DnssecSwitched {
            message: Some(
                "Route 53 DNSSEC signing disabled and its key-signing keys deleted (the KMS key stays)"
                    .into(),
            ),
            key: None,
        })
    }

    // ---- plumbing ------------------------------------------------------------------------

    fn lock<'m, T>(&self, m: &'m Mutex<T>) -> std::sync::MutexGuard<'m, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn secrets(&self) -> Vec<String> {
        vec![self.secret.expose().to_string()]
    }

    /// An answer's body read as XML by `read`.
    fn read<T>(
        &self,
        bytes: &[u8],
        read: impl FnOnce(&Xml<'_>) -> Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        let text = std::str::from_utf8(bytes).map_err(|e| ProviderError::Decode {
            what: format!("not UTF-8: {e}"),
            excerpt: excerpt(bytes, &self.secrets()),
        })?;
        let xml = Xml::parse(text).map_err(|e| match e {
            ProviderError::Decode { what, .. } => ProviderError::Decode {
                what,
                excerpt: excerpt(bytes, &self.secrets()),
            },
            other => other,
        })?;
        read(&xml)
    }

    /// Signs one attempt (SigV4: `host;x-amz-date`, the body's hash, no
    /// `X-Amz-Content-Sha256`, as botocore sends it) and sets its body.
    fn sign(&self, request: &mut reqwest::Request, body: &[u8]) -> Result<(), ProviderError> {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let refused = |e: &dyn std::fmt::Display| {
            ProviderError::Invalid(format!("cannot sign the Route 53 request: {e}"))
        };
        let identity = self.credentials.clone().into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| refused(&e))?
            .into();
        let signable = SignableRequest::new(
            request.method().as_str(),
            request.url().as_str(),
            std::iter::empty(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| refused(&e))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| refused(&e))?
            .into_parts();
        for (name, value) in instructions.headers() {
            let name = HeaderName::from_str(name).map_err(|e| refused(&e))?;
            let value = HeaderValue::from_str(value).map_err(|e| refused(&e))?;
            request.headers_mut().insert(name, value);
        }
        if !body.is_empty() {
            *request.body_mut() = Some(body.to_vec().into());
        }
        Ok(())
    }

    /// One call: signed per attempt, the shared HTTP layer, the backoff on refused
    /// credentials. A call that changes something is unknown once an attempt may have
    /// taken effect (rule 11), whatever later attempts give.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<String>,
        may_send: Option<SendPermit<'_>>,
        repeatable: bool,
    ) -> Result<bytes::Bytes, ProviderError> {
        self.backoff.gate()?;
        let url = self.url(segments, query)?;
        let mut attempts = (!method.is_safe()).then(Attempts::default);
        let body = body.unwrap_or_default();
        let finish = |r: &mut reqwest::Request| self.sign(r, body.as_bytes());
        let again = |reply: &Reply| {
            reply.status.as_u16() == 400
                && ApiError::read(&reply.body)
                    .code
                    .is_some_and(|c| AGAIN_CODES.contains(&c.as_str()))
        };
        let request = Request {
            method: &method,
            url: &url,
            body: None,
            credential: None,
            may_send,
            repeatable,
            finish: Some(&finish),
            retry_answer: Some(&again),
        };
        let result = match self
            .http
            .send(&request, attempts.as_mut(), &|reply| self.check(reply))
            .await
        {
            Ok(reply) => self.check(reply),
            Err(e) => Err(e),
        };
        let result = result.map_err(|e| match &attempts {
            Some(attempts) => attempts.outcome(e),
            None => e,
        });
        self.backoff.record(&result);
        result
    }

    /// A final reply's body, or its error by its `Code`.
    fn check(&self, reply: Reply) -> Result<bytes::Bytes, ProviderError> {
        let secrets = self.secrets();
        let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
        let status = reply.status.as_u16();
        if reply.truncated {
            return Err(ProviderError::BodyTooLarge {
                status,
                limit: MAX_BODY_BYTES,
            });
        }
        if reply.status.is_success() {
            return Ok(reply.body);
        }
        if reply.status.is_redirection() {
            return Err(reply.redirected(&refs));
        }
        let error = ApiError::read(&reply.body);
        let message = match (&error.code, &error.message) {
            (Some(code), Some(m)) => redact(&format!("{code}: {m}"), &refs),
            (Some(code), None) => code.clone(),
            _ => excerpt(&reply.body, &secrets),
        };
        let Some(code) = error.code.as_deref() else {
            return Err(reply.status_error(message));
        };
        Err(match code {
            c if AGAIN_CODES[..3].contains(&c) => ProviderError::RateLimited { retry_after: None },
            "ConcurrentModification" => ProviderError::Conflict(message),
            "NoSuchHostedZone" | "NoSuchKeySigningKey" | "NoSuchChange" => {
                ProviderError::NotFound(message)
            }
            "DNSSECNotFound" => ProviderError::DnssecDisabled,
            "SignatureDoesNotMatch" | "RequestExpired" => ProviderError::Unauthorized(format!(
                "{message} (check this host's clock: AWS refuses a request more than five minutes off)"
            )),
            c if CREDENTIAL_CODES.contains(&c) => ProviderError::Unauthorized(message),
            "AccessDenied" | "AccessDeniedException" => ProviderError::Forbidden(message),
            "InvalidKMSArn" => ProviderError::Misconfigured {
                key: "kms_key_arn",
                message,
            },
            "InvalidKeySigningKeyName" => ProviderError::Misconfigured {
                key: "ksk_name",
                message,
            },
            c if NOT_NOW_CODES.contains(&c) => ProviderError::Conflict(message),
            _ if status == 404 => ProviderError::NotFound(message),
            _ if (500..=599).contains(&status) => ProviderError::Server { status, message },
            _ => ProviderError::Rejected { status, message },
        })
    }

    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|_| ProviderError::Invalid("base_url cannot carry a path".into()))?;
            path.pop_if_empty();
            path.push("2013-04-01");
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        Ok(url)
    }
}

impl Provider for Route53Client {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<DaemonZone, ProviderError> {
        let (z, servers) = self.get_zone(zone).await?;
        let name_servers = Some(crate::dns::delegation::ns_set(servers)).filter(|s| !s.is_empty());
        Ok(DaemonZone {
            name: api_name(&z.name),
            // GetHostedZone says nothing of DNSSEC: the key decides.
            dnssec_enabled: None,
            name_servers,
        })
    }
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        Ok(self
            .list_zones()
            .await?
            .into_iter()
            .map(|z| ListedZone {
                name: api_name(&z.name),
                dnssec_enabled: None,
            })
            .collect())
    }
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.set_dnssec_with(zone, enabled, Some(may_send)).await
    }
    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.get_dnssec(zone).await?.signing_key(zone)
    }
    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        Ok(largest_ttl(zone, &self.list_records(zone).await?))
    }
    // Route 53's second key-signing key (its KSK roll) is not driven by this version: a
    // rollover there is refused before any request.
    fn keys_api(&self) -> &'static str {
        KEYS_API
    }
}

impl Route53Settings {
    /// The settings of a block with only `base_url` and a written access key id, the
    /// rest at their defaults (the secret access key's source is a placeholder: the
    /// client is built with the key given to it). For tests and the lab.
    pub fn at(base_url: Url, access_key_id: &str) -> Self {
        Self {
            region: super::settings::signing_region_of(&base_url)
                .unwrap_or(super::settings::DEFAULT_REGION)
                .to_string(),
            base_url,
            access_key_id: KeyId::Plain(access_key_id.to_string()),
            secret_access_key: crate::secret::SecretSource::Env("AWS_SECRET_ACCESS_KEY".into()),
            kms_key_arn: None,
            ksk_name: super::settings::DEFAULT_KSK_NAME.to_string(),
            requests_per_second: super::settings::DEFAULT_REQUESTS_PER_SECOND,
            change_timeout: super::settings::DEFAULT_CHANGE_TIMEOUT,
            request_timeout: crate::provider::registry::DEFAULT_REQUEST_TIMEOUT,
            max_attempts: crate::provider::registry::DEFAULT_MAX_ATTEMPTS,
            retry_budget: crate::provider::registry::DEFAULT_RETRY_BUDGET,
        }
    }
}

/// Zone names as the daemon writes them to Route 53's listings: lower case, no trailing
/// dot.
fn api_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The start of `body`, redacted before it is cut (a cut secret would escape redaction).
fn excerpt(body: &[u8], secrets: &[String]) -> String {
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    redact(&String::from_utf8_lossy(body), &refs)
        .chars()
        .take(EXCERPT_CHARS)
        .collect()
}
