//! The provider's paged zone listing (`GET /dns/v2/zones`), fetched once and shared: the
//! engine reads each settled zone's `dnssec_enabled` from it (so a steady poll needs no
//! per-zone call), and with `zones.all` the daemon's zone keeper finds new zones of the
//! account in the same copy instead of paging through the account again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::condition::Condition;
use crate::lifecycle::{AlertKind, Timestamp};
use crate::provider::Provider;

/// One listing: every zone by its name in the store's form (lower case, trailing dot)
/// with its `dnssec_enabled` (absent in the answer: `None`).
#[derive(Debug, Default)]
pub struct Listed {
    pub zones: HashMap<String, Option<bool>>,
    /// Names the provider listed that are not domain names at all (logged by the keeper).
    pub unreadable: Vec<String>,
}

struct Fetched {
    at: Timestamp,
    result: Result<Arc<Listed>, String>,
}

/// The listing as last fetched, or its failure, and whether it is said to fail (the
/// daemon-wide `zone_listing_failing`).
pub struct ZoneListing {
    copy: std::sync::Mutex<Option<Arc<Fetched>>>,
    /// Held by the one caller fetching.
    fetching: Arc<tokio::sync::Mutex<()>>,
    failing: Arc<Condition>,
    /// The listing is how new zones are found (`zones.all`): its failure is said.
    watched: bool,
}

impl Default for ZoneListing {
    fn default() -> Self {
        Self {
            copy: std::sync::Mutex::default(),
            fetching: Arc::default(),
            failing: Arc::new(Condition::new(AlertKind::ZoneListingFailing)),
            watched: false,
        }
    }
}

impl ZoneListing {
    /// A listing that finds the account's zones (`zones.all`): its failure is the
    /// daemon-wide `zone_listing_failing`. Otherwise it only spares settled zones a call
    /// each, and its failure costs those calls, nothing else.
    pub fn watched() -> Self {
        Self {
            watched: true,
            ..Self::default()
        }
    }

    /// Whether the listing fails (said once per episode in the log when watched).
    pub fn condition(&self) -> Arc<Condition> {
        self.failing.clone()
    }

    /// The listing, fetched again once it is `max_age` old (a failure once it is `retry`
    /// old, so that a failing provider is not paged through at every step). Callers at
    /// the same time wait for one fetch.
    pub async fn get<P: Provider + ?Sized>(
        &self,
        provider: &P,
        now: Timestamp,
        max_age: Duration,
        retry: Duration,
    ) -> Result<Arc<Listed>, String> {
        let copy = self.copy();
        if !stale(&copy, now, max_age, retry) {
            return copy.map_or_else(|| Err("no listing".into()), |f| f.result.clone());
        }
        let _turn = self.fetching.lock().await;
        // Fetched by another caller while this one waited for its turn.
        let copy = self.copy();
        if !stale(&copy, now, max_age, retry) {
            return copy.map_or_else(|| Err("no listing".into()), |f| f.result.clone());
        }
        self.fetch(provider, now).await
    }

    /// [`get`](Self::get) for a step, which never waits for a listing: the copy in hand
    /// (stale or not), a fetch started in the background when it is due and none runs.
    /// Steps that waited for a listing that never ended stopped every settled zone.
    pub fn get_now<P: Provider + 'static>(
        self: &Arc<Self>,
        provider: &Arc<P>,
        now: Timestamp,
        max_age: Duration,
        retry: Duration,
    ) -> Result<Arc<Listed>, String> {
        let copy = self.copy();
        if stale(&copy, now, max_age, retry)
            && let Ok(turn) = self.fetching.clone().try_lock_owned()
        {
            let (listing, provider) = (self.clone(), provider.clone());
            tokio::spawn(async move {
                // Kept, and said by its condition when it fails.
                let _ = listing.fetch(provider.as_ref(), now).await;
                drop(turn);
            });
        }
        copy.map_or_else(
            || Err("the zone listing is being fetched".into()),
            |f| f.result.clone(),
        )
    }

    /// Whether a fetch ever ended (with the listing or its failure).
    pub fn fetched_once(&self) -> bool {
        self.copy().is_some()
    }

    fn copy(&self) -> Option<Arc<Fetched>> {
        self.copy.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Pages through the listing (the caller holds the fetching turn) and keeps it.
    async fn fetch<P: Provider + ?Sized>(
        &self,
        provider: &P,
        now: Timestamp,
    ) -> Result<Arc<Listed>, String> {
        let result = provider
            .zone_flags()
            .await
            .map(|list| {
                let mut listed = Listed::default();
                for zone in list {
                    match crate::dnssec::fqdn(&zone.name) {
                        Ok(name) => {
                            listed.zones.insert(name, zone.dnssec_enabled);
                        }
                        Err(_) => listed.unreadable.push(zone.name),
                    }
                }
                Arc::new(listed)
            })
            .map_err(|e| e.to_string());
        match &result {
            _ if !self.watched => {}
            Ok(_) => self.failing.clear(),
            Err(e) => self.failing.holds(format!(
                "the provider's zone listing fails ({e}); the zones already known are \
                 still watched, new zones of the account are not found until it works"
            )),
        }
        *self.copy.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Fetched {
            at: now,
            result: result.clone(),
        }));
        result
    }
}

/// Whether `copy` is due to be fetched again.
fn stale(copy: &Option<Arc<Fetched>>, now: Timestamp, max_age: Duration, retry: Duration) -> bool {
    match copy.as_deref() {
        None => true,
        // A clock that went back: the copy's age is unknown.
        Some(f) if f.at > now => true,
        Some(Fetched { at, result: Ok(_) }) => now.since(*at) >= max_age,
        Some(Fetched { at, result: Err(_) }) => now.since(*at) >= retry,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::dnssec::DnssecKey;
    use crate::provider::{DnssecSwitched, HostedZone, ListedZone, ProviderError, SendPermit};

    /// Counts listings; fails them while `failing`.
    #[derive(Default)]
    struct Counting {
        listings: AtomicUsize,
        failing: AtomicBool,
    }

    fn unused<T>() -> Result<T, ProviderError> {
        Err(ProviderError::Invalid("not used by the listing".into()))
    }

    impl Provider for Counting {
        type Account = Self;
        fn account_named(&self, _name: &str) -> Option<&Self> {
            None
        }
        async fn zone(&self, _: &str) -> Result<HostedZone, ProviderError> {
            unused()
        }
        async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
            self.listings.fetch_add(1, Ordering::SeqCst);
            if self.failing.load(Ordering::SeqCst) {
                return Err(ProviderError::Invalid("listing down".into()));
            }
            let zone = |name: &str, dnssec_enabled| ListedZone {
                name: name.into(),
                dnssec_enabled,
            };
            Ok(vec![
                zone("Example.COM", Some(true)),
                zone("b.example", None),
                zone("", Some(false)),
            ])
        }
        async fn set_dnssec(
            &self,
            _: &str,
            _: bool,
            _: SendPermit<'_>,
        ) -> Result<DnssecSwitched, ProviderError> {
            unused()
        }
        async fn dnssec_key(&self, _: &str) -> Result<DnssecKey, ProviderError> {
            unused()
        }
        async fn largest_ttl(&self, _: &str) -> Result<Option<u32>, ProviderError> {
            unused()
        }
    }

    const AGE: Duration = Duration::from_secs(900);
    const RETRY: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn one_listing_serves_every_caller_until_it_is_old() {
        let provider = Counting::default();
        let listing = ZoneListing::default();
        let t0 = Timestamp(1_000_000);
        let first = listing.get(&provider, t0, AGE, RETRY).await.unwrap();
        assert_eq!(first.zones.get("example.com."), Some(&Some(true)));
        assert_eq!(first.zones.get("b.example."), Some(&None));
        assert_eq!(first.unreadable, vec![String::new()]);
        // The keeper and the engine asking within the age: the same copy, no new paging.
        listing
            .get(&provider, t0.plus(AGE / 2), AGE, RETRY)
            .await
            .unwrap();
        assert_eq!(provider.listings.load(Ordering::SeqCst), 1);
        listing
            .get(&provider, t0.plus(AGE), AGE, RETRY)
            .await
            .unwrap();
        assert_eq!(provider.listings.load(Ordering::SeqCst), 2);
        // A clock that went back: fetched again.
        listing.get(&provider, t0, AGE, RETRY).await.unwrap();
        assert_eq!(provider.listings.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_failed_listing_is_tried_again_after_the_retry_time_only() {
        let provider = Counting::default();
        provider.failing.store(true, Ordering::SeqCst);
        let listing = ZoneListing::default();
        let t0 = Timestamp(1_000_000);
        assert!(listing.get(&provider, t0, AGE, RETRY).await.is_err());
        assert!(
            listing
                .get(&provider, t0.plus(RETRY / 2), AGE, RETRY)
                .await
                .is_err()
        );
        assert_eq!(provider.listings.load(Ordering::SeqCst), 1);
        provider.failing.store(false, Ordering::SeqCst);
        assert!(
            listing
                .get(&provider, t0.plus(RETRY), AGE, RETRY)
                .await
                .is_ok()
        );
        assert_eq!(provider.listings.load(Ordering::SeqCst), 2);
    }
}
