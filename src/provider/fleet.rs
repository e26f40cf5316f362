//! Several provider accounts in one daemon: each configured account by its name, and
//! [`Providers`], the one [`Provider`] the engine talks to, which hands each call about a
//! zone to the account that holds it.
//!
//! A zone belongs to the account that lists it. Which one that is comes from the
//! accounts' zone listings (fetched anyway for the settled zones' flags), and for a zone
//! not in them (created since, or an account whose listing fails) from asking each
//! account for the zone. A zone no account has is "not found", as from one provider; a
//! zone two accounts list, or one whose holder cannot be told (an account that cannot be
//! asked), is a [`ProviderError::Owner`] that is never sent anywhere: a switch sent to
//! the wrong account would be the worst kind of wrong. A declared signed move asks each
//! of its two accounts by name ([`Provider::account_named`], `engine::moving`), never
//! through the holder.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::future::join_all;

use super::gcore::{GcoreClient, ProviderSettings};
use super::registry::{Kind, SetupError};
pub use super::{Client, ProviderOptions};
use super::{
    DnssecSwitched, HostedZone, KeyState, ListedZone, NewKey, Provider, ProviderError, ProviderKey,
    Registered, SendPermit, foreign_dnskey_set,
};
use crate::condition::Condition;
use crate::dnssec::{CdsHalves, CdsPublication, Dnskey, DnssecKey, fqdn};
use crate::secret::{SecretError, SecretSource};

/// One configured provider account: `[provider]` (named after its kind) or
/// `[providers.NAME]`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// How status, check, the log and the alerts name the account.
    pub name: String,
    /// The configuration block it comes from (`provider`, `providers.NAME`): where its
    /// keys are named.
    pub block: String,
    pub options: ProviderOptions,
}

/// Why an account's client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ProviderSetupError {
    #[error("provider {name}: {error}")]
    Secret { name: String, error: SecretError },
    #[error("provider {name}: {error}")]
    Client { name: String, error: ProviderError },
}

impl ProviderOptions {
    /// The `kind` as the configuration writes it.
    pub fn kind(&self) -> &'static str {
        on_options!(self, |_s: K| K::KIND)
    }

    /// Why an account of this kind cannot publish another signer's DNSKEY, when it says
    /// it cannot: what a refused signed move tells the operator.
    pub fn foreign_dnskeys_why(&self) -> &'static str {
        on_options!(self, |_s: K| K::FOREIGN_DNSKEYS_WHY)
    }

    /// Where the account's secrets live.
    pub fn secret_sources(&self) -> Vec<&SecretSource> {
        on_options!(self, |s: K| K::secret_sources(s))
    }

    /// The account's client, its secrets read.
    fn build(&self) -> Result<Client, SetupError> {
        on_options!(self, |s: K| K::build(s).map(Client::from))
    }
}

impl ProviderConfig {
    /// The settings of an account of kind `K` (`None`: it is of another kind).
    pub fn settings<K: Registered>(&self) -> Option<&K::Settings> {
        K::settings_in(&self.options)
    }

    /// The Gcore settings, for an account of that kind.
    pub fn gcore(&self) -> Option<&ProviderSettings> {
        self.settings::<GcoreClient>()
    }

    /// Secret files any user of the machine can read (see
    /// [`SecretSource::exposure_warning`]), each naming the account.
    pub fn exposure_warnings(&self) -> Vec<String> {
        self.options
            .secret_sources()
            .into_iter()
            .filter_map(SecretSource::exposure_warning)
            .map(|w| format!("provider {}: {w}", self.name))
            .collect()
    }

    /// The account's client, its secrets read.
    pub fn client(&self) -> Result<Client, ProviderSetupError> {
        let name = self.name.clone();
        self.options.build().map_err(|e| match e {
            SetupError::Secret(error) => ProviderSetupError::Secret { name, error },
            SetupError::Client(error) => ProviderSetupError::Client { name, error },
        })
    }
}

impl Provider for Client {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        on_client!(self, |c| Provider::zone(c, zone).await)
    }
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        on_client!(self, |c| Provider::zone_flags(c).await)
    }
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        on_client!(self, |c| Provider::set_dnssec(c, zone, enabled, may_send)
            .await)
    }
    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        on_client!(self, |c| Provider::dnssec_key(c, zone).await)
    }
    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        on_client!(self, |c| Provider::largest_ttl(c, zone).await)
    }
    async fn cds_publication(&self, zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        on_client!(self, |c| Provider::cds_publication(c, zone).await)
    }
    async fn set_cds_publication(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        on_client!(self, |c| Provider::set_cds_publication(
            c, zone, to, may_send
        )
        .await)
    }
    async fn foreign_dnskeys_supported(&self, zone: &str) -> Result<bool, ProviderError> {
        on_client!(self, |c| Provider::foreign_dnskeys_supported(c, zone).await)
    }
    async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
        on_client!(self, |c| Provider::foreign_dnskeys(c, zone).await)
    }
    async fn set_foreign_dnskeys(
        &self,
        zone: &str,
        keys: &[Dnskey],
        ttl: u32,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        on_client!(self, |c| {
            Provider::set_foreign_dnskeys(c, zone, keys, ttl, may_send).await
        })
    }
    async fn keys(&self, zone: &str) -> Result<Option<Vec<ProviderKey>>, ProviderError> {
        on_client!(self, |c| Provider::keys(c, zone).await)
    }
    async fn add_key(
        &self,
        zone: &str,
        key: NewKey,
        may_send: SendPermit<'_>,
    ) -> Result<ProviderKey, ProviderError> {
        on_client!(self, |c| Provider::add_key(c, zone, key, may_send).await)
    }
    async fn set_key_state(
        &self,
        zone: &str,
        id: &str,
        state: KeyState,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        on_client!(self, |c| {
            Provider::set_key_state(c, zone, id, state, may_send).await
        })
    }
    async fn delete_key(
        &self,
        zone: &str,
        id: &str,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        on_client!(self, |c| Provider::delete_key(c, zone, id, may_send).await)
    }
}

impl Client {
    /// The account's daemon-wide conditions: the provider refusing its credentials, for
    /// the kinds that log in; its configuration naming what the provider does not have
    /// (a PowerDNS `server_id` the API does not know).
    pub fn account_conditions(&self) -> Vec<Arc<Condition>> {
        on_client!(self, |c| Kind::account_conditions(c))
    }

    /// What the provider says of the account's configuration, where its API can say it
    /// without a zone (`check-config`): `Misconfigured` names the key at fault. Other
    /// failures (a provider that cannot be reached) say nothing of the file.
    pub async fn check_account(&self) -> Result<(), ProviderError> {
        on_client!(self, |c| Kind::check_account(c).await)
    }
}

/// The configured accounts, and which of them holds each zone.
pub struct Providers<P = Client> {
    accounts: Vec<(String, P)>,
    /// Each account's zones at its last listing that worked (`None`: none has yet).
    listed: Mutex<Vec<Option<Arc<HashSet<String>>>>>,
    /// The holder found by asking every account, for zones no listing settles.
    asked: Mutex<HashMap<String, usize>>,
    /// The account each zone was last read at: where its look was made, and so the only
    /// one a switch decided on that look may go to.
    looked: Mutex<HashMap<String, usize>>,
}

impl<P> std::fmt::Debug for Providers<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.accounts.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Providers<Client> {
    /// Every configured account's client, secrets read; the first failure stops.
    pub fn build(configs: &[ProviderConfig]) -> Result<Self, ProviderSetupError> {
        let accounts = configs
            .iter()
            .map(|c| Ok((c.name.clone(), c.client()?)))
            .collect::<Result<Vec<_>, ProviderSetupError>>()?;
        Ok(Self::new(accounts))
    }

    /// Each account's daemon-wide conditions (its credentials refused, its
    /// configuration wrong), with its name.
    pub fn account_conditions(&self) -> Vec<(String, Arc<Condition>)> {
        self.accounts
            .iter()
            .flat_map(|(name, c)| {
                c.account_conditions()
                    .into_iter()
                    .map(move |condition| (name.clone(), condition))
            })
            .collect()
    }

    /// Each account asked what its provider says of its configuration
    /// ([`Client::check_account`]), with its name.
    pub async fn check_accounts(&self) -> Vec<(String, Result<(), ProviderError>)> {
        let checked = join_all(self.accounts.iter().map(|(_, c)| c.check_account())).await;
        self.names().map(str::to_string).zip(checked).collect()
    }
}

impl<P: Provider> Providers<P> {
    pub fn new(accounts: Vec<(String, P)>) -> Self {
        let listed = Mutex::new(vec![None; accounts.len()]);
        Self {
            accounts,
            listed,
            asked: Mutex::default(),
            looked: Mutex::default(),
        }
    }

    /// The accounts' names, in the configuration's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.accounts.iter().map(|(name, _)| name.as_str())
    }

    /// The name of the account that holds `zone` as far as is known without asking
    /// (the listings, an earlier answer): what status and the log name.
    pub fn holder_known(&self, zone: &str) -> Option<&str> {
        if let [(only, _)] = self.accounts.as_slice() {
            return Some(only.as_str());
        }
        let name = fqdn(zone).ok()?;
        let i = match self.listed_by(&name) {
            Listed::By(found) if found.len() == 1 => found[0],
            Listed::By(found) if found.len() > 1 => return None,
            _ => *self.asked().get(&name)?,
        };
        Some(self.accounts[i].0.as_str())
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Which accounts list `name` (store form): `Unsure` while an account has no listing.
    fn listed_by(&self, name: &str) -> Listed {
        let listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = Vec::new();
        for (i, set) in listed.iter().enumerate() {
            match set {
                None => return Listed::Unsure,
                Some(set) if set.contains(name) => found.push(i),
                Some(_) => {}
            }
        }
        Listed::By(found)
    }

    /// The account that holds `zone`. One account: always it. Otherwise the listings
    /// decide; where they cannot (not listed anywhere, or an account without a listing),
    /// every account is asked for the zone, unless an earlier asking found it (`fresh`
    /// asks again).
    async fn holder(&self, zone: &str, fresh: bool) -> Result<usize, ProviderError> {
        if self.accounts.len() == 1 {
            return Ok(0);
        }
        let name = fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        if !fresh {
            match self.listed_by(&name) {
                Listed::By(found) if found.len() == 1 => return Ok(found[0]),
                Listed::By(found) if found.len() > 1 => return Err(self.several(&name, &found)),
                _ => {}
            }
            if let Some(&i) = self.asked().get(&name) {
                return Ok(i);
            }
        }
        let Asked {
            found,
            silent,
            unknown,
        } = self.ask_every_account(zone).await;
        self.learn(&name, &found, &silent);
        match (found.as_slice(), unknown.is_empty()) {
            (&[i], true) => {
                self.asked().insert(name, i);
                Ok(i)
            }
            ([_, _, ..], _) => Err(self.several(&name, &found)),
            (_, false) => Err(ProviderError::Owner(format!(
                "which provider holds {name} cannot be told now ({})",
                unknown.join("; ")
            ))),
            ([], true) => {
                self.asked().remove(&name);
                Err(ProviderError::NotFound(format!(
                    "no configured provider ({}) has the zone {name}",
                    self.names().collect::<Vec<_>>().join(", ")
                )))
            }
        }
    }

    /// Every account asked for the zone: which have it, and what the others that could
    /// not say answered.
    pub async fn ask_every_account(&self, zone: &str) -> Asked {
        let answers = join_all(self.accounts.iter().map(|(_, c)| c.zone(zone))).await;
        let mut asked = Asked::default();
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(_) => asked.found.push(i),
                Err(ProviderError::NotFound(_)) => {}
                Err(e) => {
                    asked.silent.push(i);
                    asked.unknown.push(format!("{}: {e}", self.accounts[i].0));
                }
            }
        }
        asked
    }

    /// The name of the account at `index` (from [`Asked::found`]).
    pub fn name(&self, index: usize) -> &str {
        &self.accounts[index].0
    }

    /// What asking every account taught: the listings' view follows it (the zone added
    /// where it was found, removed where an account said it has none), so that a later
    /// listing-based answer does not contradict the latest word.
    fn learn(&self, name: &str, found: &[usize], silent: &[usize]) {
        let mut listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        for (i, set) in listed.iter_mut().enumerate() {
            let Some(set) = set else { continue };
            let has = found.contains(&i);
            if silent.contains(&i) || set.contains(name) == has {
                continue;
            }
            let mut changed = HashSet::clone(set);
            if has {
                changed.insert(name.to_string());
            } else {
                changed.remove(name);
            }
            *set = Arc::new(changed);
        }
    }

    fn several(&self, name: &str, found: &[usize]) -> ProviderError {
        let names: Vec<&str> = found.iter().map(|&i| self.accounts[i].0.as_str()).collect();
        ProviderError::Owner(format!(
            "{name} is at more than one provider ({}): nothing is sent to either until it \
             is deleted from all but one, or a signed move between them is declared \
             (`dnssec-warden move`)",
            names.join(" and ")
        ))
    }

    /// `call` at the zone's account; a zone its account says it does not have (gone
    /// from it since the listing) is looked for at every account once more.
    async fn at_holder<'a, T, F, Fut>(&'a self, zone: &str, call: F) -> Result<T, ProviderError>
    where
        F: Fn(&'a P) -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let mut i = self.holder(zone, false).await?;
        let mut result = call(&self.accounts[i].1).await;
        if matches!(result, Err(ProviderError::NotFound(_))) && self.accounts.len() > 1 {
            i = self.holder(zone, true).await?;
            result = call(&self.accounts[i].1).await;
        }
        if result.is_ok()
            && self.accounts.len() > 1
            && let Ok(name) = fqdn(zone)
        {
            self.looked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name, i);
        }
        result
    }

    /// The account a change to `zone` may go to: the one its look was made at, asked
    /// again with every other right before (as the guard looks at the parent again), and
    /// only if it is still the one account holding the zone, never on to another
    /// (DESIGN.md rule 13).
    async fn switch_holder(&self, zone: &str) -> Result<usize, ProviderError> {
        let looked = match self.looked_at(zone) {
            Some(i) => i,
            None => self.holder(zone, false).await?,
        };
        let now = self.holder(zone, true).await?;
        if now != looked {
            return Err(ProviderError::Owner(format!(
                "{zone} moved from provider {} to {} since it was looked at; not sent until \
                 it is looked at there",
                self.accounts[looked].0, self.accounts[now].0
            )));
        }
        Ok(now)
    }

    /// The account `zone` was last read at, if any.
    fn looked_at(&self, zone: &str) -> Option<usize> {
        let name = fqdn(zone).ok()?;
        let looked = self.looked.lock().unwrap_or_else(|p| p.into_inner());
        looked.get(&name).copied()
    }
}

/// What asking every account for a zone found.
#[derive(Debug, Default)]
pub struct Asked {
    /// The accounts that have the zone.
    pub found: Vec<usize>,
    /// The accounts that could not say.
    pub silent: Vec<usize>,
    /// Each of those, named, with its error.
    pub unknown: Vec<String>,
}

enum Listed {
    /// An account has not listed its zones yet.
    Unsure,
    By(Vec<usize>),
}

impl<P: Provider> Provider for Providers<P> {
    type Account = P;
    fn account_named(&self, name: &str) -> Option<&P> {
        self.accounts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        self.at_holder(zone, |c| c.zone(zone)).await
    }

    /// Every account's zones. A zone two accounts list is left out (its calls are
    /// refused, [`ProviderError::Owner`]); an account whose listing fails fails the whole
    /// (a partial listing would read as zones gone), naming the account.
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        // One account: its listing as it is (no holder to tell).
        if let [(_, only)] = self.accounts.as_slice() {
            return only.zone_flags().await;
        }
        let lists = join_all(self.accounts.iter().map(|(_, c)| c.zone_flags())).await;
        let mut all: Vec<ListedZone> = Vec::new();
        let mut failed = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, list) in lists.into_iter().enumerate() {
            match list {
                Ok(list) => {
                    let names: HashSet<String> =
                        list.iter().filter_map(|z| fqdn(&z.name).ok()).collect();
                    for zone in list {
                        if let Ok(name) = fqdn(&zone.name) {
                            *seen.entry(name).or_default() += 1;
                        }
                        all.push(zone);
                    }
                    self.listed.lock().unwrap_or_else(|p| p.into_inner())[i] =
                        Some(Arc::new(names));
                }
                Err(e) => failed.push((i, e)),
            }
        }
        if let Some((i, e)) = failed.into_iter().next() {
            return Err(ProviderError::Listing(format!(
                "provider {}: {e}",
                self.accounts[i].0
            )));
        }
        all.retain(|z| fqdn(&z.name).map_or(true, |n| seen.get(&n) == Some(&1)));
        Ok(all)
    }

    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        let now = self.switch_holder(zone).await?;
        self.accounts[now]
            .1
            .set_dnssec(zone, enabled, may_send)
            .await
    }

    async fn cds_publication(&self, zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        self.at_holder(zone, |c| c.cds_publication(zone)).await
    }

    async fn set_cds_publication(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        // As a switch (rule 13): only at the account the zone was looked at, still its
        // one holder.
        let now = self.switch_holder(zone).await?;
        self.accounts[now]
            .1
            .set_cds_publication(zone, to, may_send)
            .await
    }

    async fn foreign_dnskeys_supported(&self, zone: &str) -> Result<bool, ProviderError> {
        self.at_holder(zone, |c| c.foreign_dnskeys_supported(zone))
            .await
    }

    async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
        self.at_holder(zone, |c| c.foreign_dnskeys(zone)).await
    }

    async fn set_foreign_dnskeys(
        &self,
        zone: &str,
        keys: &[Dnskey],
        ttl: u32,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        // Keys no provider may publish are refused before the holder is asked again.
        foreign_dnskey_set(zone, keys)?;
        // As a switch (rule 13): only at the account the zone was looked at, still its
        // one holder.
        let now = self.switch_holder(zone).await?;
        self.accounts[now]
            .1
            .set_foreign_dnskeys(zone, keys, ttl, may_send)
            .await
    }

    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.at_holder(zone, |c| c.dnssec_key(zone)).await
    }

    async fn keys(&self, zone: &str) -> Result<Option<Vec<ProviderKey>>, ProviderError> {
        self.at_holder(zone, |c| c.keys(zone)).await
    }

    // Each key change as a switch (rule 13): only at the account the zone was looked at,
    // still its one holder.
    async fn add_key(
        &self,
        zone: &str,
        key: NewKey,
        may_send: SendPermit<'_>,
    ) -> Result<ProviderKey, ProviderError> {
        let now = self.switch_holder(zone).await?;
        self.accounts[now].1.add_key(zone, key, may_send).await
    }

    async fn set_key_state(
        &self,
        zone: &str,
        id: &str,
        state: KeyState,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        let now = self.switch_holder(zone).await?;
        self.accounts[now]
            .1
            .set_key_state(zone, id, state, may_send)
            .await
    }

    async fn delete_key(
        &self,
        zone: &str,
        id: &str,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        let now = self.switch_holder(zone).await?;
        self.accounts[now].1.delete_key(zone, id, may_send).await
    }

    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        self.at_holder(zone, |c| c.largest_ttl(zone)).await
    }

    fn account(&self, zone: &str) -> Option<String> {
        self.holder_known(zone).map(str::to_string)
    }

    fn accounts(&self) -> usize {
        self.accounts.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::provider::PermitAnswer;

    /// An account holding `zones`; counts what it is asked.
    #[derive(Default)]
    struct Fake {
        zones: Mutex<Vec<String>>,
        listing_fails: AtomicBool,
        unreachable: AtomicBool,
        zone_calls: AtomicUsize,
        /// Reads answered with the zone.
        served: AtomicUsize,
        switches: AtomicUsize,
        /// The foreign DNSKEYs set, at any zone.
        foreign: Mutex<Vec<Dnskey>>,
    }

    impl Fake {
        fn with(zones: &[&str]) -> Self {
            let fake = Self::default();
            *fake.zones.lock().unwrap() = zones.iter().map(|z| z.to_string()).collect();
            fake
        }
        fn has(&self, zone: &str) -> Result<(), ProviderError> {
            if self.unreachable.load(Ordering::SeqCst) {
                return Err(ProviderError::Connect("refused".into()));
            }
            let name = fqdn(zone).unwrap();
            match self.zones.lock().unwrap().contains(&name) {
                true => Ok(()),
                false => Err(ProviderError::NotFound(zone.into())),
            }
        }
    }

    impl Provider for Fake {
        type Account = Self;
        fn account_named(&self, _name: &str) -> Option<&Self> {
            None
        }
        async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
            self.zone_calls.fetch_add(1, Ordering::SeqCst);
            self.has(zone)?;
            self.served.fetch_add(1, Ordering::SeqCst);
            Ok(HostedZone {
                name: zone.into(),
                dnssec_enabled: Some(false),
                name_servers: None,
            })
        }
        async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
            if self.listing_fails.load(Ordering::SeqCst) {
                return Err(ProviderError::Server {
                    status: 503,
                    message: "down".into(),
                });
            }
            Ok(self
                .zones
                .lock()
                .unwrap()
                .iter()
                .map(|name| ListedZone {
                    name: name.clone(),
                    dnssec_enabled: Some(false),
                })
                .collect())
        }
        async fn set_dnssec(
            &self,
            zone: &str,
            enabled: bool,
            _: SendPermit<'_>,
        ) -> Result<DnssecSwitched, ProviderError> {
            self.has(zone)?;
            self.switches.fetch_add(1, Ordering::SeqCst);
            Ok(DnssecSwitched {
                message: Some(format!("{zone} {enabled}")),
                key: None,
            })
        }
        async fn dnssec_key(&self, _: &str) -> Result<DnssecKey, ProviderError> {
            Err(ProviderError::DnssecDisabled)
        }
        async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
            self.has(zone)?;
            Ok(Some(300))
        }
        async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
            self.has(zone)?;
            Ok(Some(self.foreign.lock().unwrap().clone()))
        }
        async fn set_foreign_dnskeys(
            &self,
            zone: &str,
            keys: &[Dnskey],
            _: u32,
            _: SendPermit<'_>,
        ) -> Result<(), ProviderError> {
            self.has(zone)?;
            self.switches.fetch_add(1, Ordering::SeqCst);
            *self.foreign.lock().unwrap() = keys.to_vec();
            Ok(())
        }
    }

    fn yes() -> PermitAnswer<'static> {
        Box::pin(async { true })
    }

    fn two(a: &[&str], b: &[&str]) -> Providers<Fake> {
        Providers::new(vec![
            ("gcore".into(), Fake::with(a)),
            ("pdns".into(), Fake::with(b)),
        ])
    }

    fn at<'a>(p: &'a Providers<Fake>, name: &str) -> &'a Fake {
        &p.accounts.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[tokio::test]
    async fn each_zone_goes_to_the_account_that_lists_it() {
        let p = two(&["a.test."], &["b.test."]);
        let listed = p.zone_flags().await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(p.account("A.test"), Some("gcore".into()));
        assert_eq!(p.account("b.test."), Some("pdns".into()));
        // The listings decide a read: only the holder is asked.
        p.zone("a.test.").await.unwrap();
        assert_eq!(at(&p, "pdns").zone_calls.load(Ordering::SeqCst), 0);
        assert_eq!(at(&p, "gcore").zone_calls.load(Ordering::SeqCst), 1);
        // A switch: every account asked again right before, then only the holder.
        p.set_dnssec("b.test.", true, &yes).await.unwrap();
        assert_eq!(at(&p, "pdns").switches.load(Ordering::SeqCst), 1);
        assert_eq!(at(&p, "gcore").switches.load(Ordering::SeqCst), 0);
        assert_eq!(at(&p, "pdns").zone_calls.load(Ordering::SeqCst), 1);
        assert_eq!(at(&p, "gcore").zone_calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_zone_at_two_accounts_is_never_sent_anywhere() {
        let p = two(&["a.test.", "both.test."], &["both.test."]);
        let listed = p.zone_flags().await.unwrap();
        assert_eq!(
            listed.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(),
            ["a.test."],
            "a zone two accounts list is left out of the listing"
        );
        for result in [
            p.set_dnssec("both.test.", false, &yes).await.map(drop),
            p.zone("both.test.").await.map(drop),
        ] {
            let err = result.unwrap_err();
            assert!(matches!(err, ProviderError::Owner(_)), "{err}");
            assert!(err.to_string().contains("gcore and pdns"), "{err}");
            assert_eq!(err.class(), crate::provider::ErrorClass::NotPerformed);
        }
        assert_eq!(at(&p, "gcore").switches.load(Ordering::SeqCst), 0);
        assert_eq!(at(&p, "pdns").switches.load(Ordering::SeqCst), 0);
        assert_eq!(p.account("both.test."), None);
        // Without listings too: found by asking, still refused.
        let p = two(&["both.test."], &["both.test."]);
        let err = p.set_dnssec("both.test.", true, &yes).await.unwrap_err();
        assert!(matches!(err, ProviderError::Owner(_)), "{err}");
        assert_eq!(at(&p, "gcore").switches.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn foreign_dnskeys_are_set_only_at_the_zones_one_holder() {
        let key = crate::dnssec::test_key();
        let p = two(&["a.test.", "both.test."], &["b.test.", "both.test."]);
        p.zone_flags().await.unwrap();
        // Keys no provider may publish: refused before any account is asked.
        let not_zone_key = Dnskey {
            flags: 257 & !crate::dnssec::FLAG_ZONE_KEY,
            ..key.clone()
        };
        let err = p
            .set_foreign_dnskeys("b.test.", &[not_zone_key], 300, &yes)
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Invalid(_)), "{err}");
        for name in ["gcore", "pdns"] {
            assert_eq!(at(&p, name).zone_calls.load(Ordering::SeqCst), 0);
        }
        // As a switch: every account asked again right before, then only the holder.
        p.set_foreign_dnskeys("b.test.", std::slice::from_ref(&key), 300, &yes)
            .await
            .unwrap();
        assert_eq!(*at(&p, "pdns").foreign.lock().unwrap(), vec![key.clone()]);
        assert_eq!(at(&p, "gcore").switches.load(Ordering::SeqCst), 0);
        assert_eq!(at(&p, "gcore").zone_calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            p.foreign_dnskeys("b.test.").await.unwrap(),
            Some(vec![key.clone()])
        );
        assert_eq!(p.foreign_dnskeys("a.test.").await.unwrap(), Some(vec![]));
        // The trait's default where the fake has none: unsupported, asking nothing.
        assert!(!p.foreign_dnskeys_supported("a.test.").await.unwrap());
        // A zone at two accounts: never sent anywhere.
        let err = p
            .set_foreign_dnskeys("both.test.", &[], 300, &yes)
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Owner(_)), "{err}");
        assert_eq!(at(&p, "gcore").switches.load(Ordering::SeqCst), 0);
        assert_eq!(at(&p, "pdns").switches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_zone_no_account_has_is_not_found_and_one_that_cannot_be_told_is_not_sent() {
        let p = two(&["a.test."], &["b.test."]);
        let err = p.zone("c.test.").await.unwrap_err();
        assert!(matches!(err, ProviderError::NotFound(_)), "{err}");
        assert!(err.to_string().contains("gcore, pdns"), "{err}");
        // An account that cannot be asked: which one holds the zone is not known, and
        // "not found" would be a lie.
        at(&p, "pdns").unreachable.store(true, Ordering::SeqCst);
        let err = p.set_dnssec("b.test.", true, &yes).await.unwrap_err();
        assert!(matches!(err, ProviderError::Owner(_)), "{err}");
        assert!(err.to_string().contains("pdns: cannot connect"), "{err}");
    }

    #[tokio::test]
    async fn a_failing_listing_names_its_account_and_the_zones_are_still_found() {
        let p = two(&["a.test."], &["b.test."]);
        at(&p, "pdns").listing_fails.store(true, Ordering::SeqCst);
        let err = p.zone_flags().await.unwrap_err();
        assert!(err.to_string().contains("provider pdns"), "{err}");
        // The other account's listing counts; the unlisted account is asked.
        assert_eq!(p.largest_ttl("b.test.").await.unwrap(), Some(300));
        assert_eq!(p.account("b.test."), Some("pdns".into()));
    }

    #[tokio::test]
    async fn a_zone_gone_from_its_listed_account_is_looked_for_again() {
        let p = two(&["a.test."], &[]);
        p.zone_flags().await.unwrap();
        // Moved by hand from one account to the other since the listing.
        at(&p, "gcore").zones.lock().unwrap().clear();
        at(&p, "pdns").zones.lock().unwrap().push("a.test.".into());
        assert_eq!(p.largest_ttl("a.test.").await.unwrap(), Some(300));
        assert_eq!(at(&p, "pdns").zone_calls.load(Ordering::SeqCst), 1);
        // But a switch is never sent on to another account than the one it was meant for.
        at(&p, "pdns").zones.lock().unwrap().clear();
        at(&p, "gcore").zones.lock().unwrap().push("a.test.".into());
        p.zone_flags().await.unwrap();
        p.zone("a.test.").await.unwrap();
        // Looked at at gcore; moved to pdns before the switch.
        at(&p, "gcore").zones.lock().unwrap().clear();
        at(&p, "pdns").zones.lock().unwrap().push("a.test.".into());
        let err = p.set_dnssec("a.test.", false, &yes).await.unwrap_err();
        assert!(matches!(err, ProviderError::Owner(_)), "{err}");
        assert!(
            err.to_string()
                .contains("moved from provider gcore to pdns"),
            "{err}"
        );
        assert_eq!(at(&p, "pdns").switches.load(Ordering::SeqCst), 0);
        // Looked at again there (the read follows the zone), the switch goes to it.
        p.zone("a.test.").await.unwrap();
        p.set_dnssec("a.test.", false, &yes).await.unwrap();
        assert_eq!(at(&p, "pdns").switches.load(Ordering::SeqCst), 1);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(usize, usize),
        Remove(usize, usize),
        Listing,
        Reachable(usize, bool),
        Read(usize),
        Switch(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0..3usize, 0..3usize).prop_map(|(a, z)| Op::Add(a, z)),
            (0..3usize, 0..3usize).prop_map(|(a, z)| Op::Remove(a, z)),
            Just(Op::Listing),
            (0..3usize, proptest::bool::weighted(0.7)).prop_map(|(a, r)| Op::Reachable(a, r)),
            (0..3usize).prop_map(Op::Read),
            (0..3usize).prop_map(Op::Switch),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// Rule 13 against the accounts' ground truth: a switch reaches an account only
        /// when it is, at that moment, the one account holding the zone, every account
        /// could say so, and it is the account the zone was last read at; and such a
        /// switch is never withheld.
        #[test]
        fn a_switch_reaches_only_the_one_holder_the_zone_was_read_at(
            ops in proptest::collection::vec(op(), 1..60)
        ) {
            let zones = ["a.test.", "b.test.", "c.test."];
            let names = ["one", "two", "three"];
            let p = Providers::new(names.iter().map(|n| (n.to_string(), Fake::default())).collect());
            let fake = |i: usize| &p.accounts[i].1;
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let mut read_at: [Option<usize>; 3] = [None; 3];
            for op in ops {
                match op {
                    Op::Add(a, z) => {
                        let mut held = fake(a).zones.lock().unwrap();
                        if !held.contains(&zones[z].to_string()) {
                            held.push(zones[z].to_string());
                        }
                    }
                    Op::Remove(a, z) => fake(a).zones.lock().unwrap().retain(|n| n != zones[z]),
                    Op::Listing => {
                        let _ = runtime.block_on(p.zone_flags());
                    }
                    Op::Reachable(a, up) => fake(a).unreachable.store(!up, Ordering::SeqCst),
                    Op::Read(z) => {
                        let before: Vec<usize> = (0..3).map(|i| fake(i).served.load(Ordering::SeqCst)).collect();
                        if runtime.block_on(p.zone(zones[z])).is_ok() {
                            let by = (0..3).find(|&i| fake(i).served.load(Ordering::SeqCst) > before[i]);
                            read_at[z] = by;
                        }
                    }
                    Op::Switch(z) => {
                        let holders: Vec<usize> = (0..3)
                            .filter(|&i| fake(i).zones.lock().unwrap().contains(&zones[z].to_string()))
                            .collect();
                        let all_up = (0..3).all(|i| !fake(i).unreachable.load(Ordering::SeqCst));
                        let before: Vec<usize> = (0..3).map(|i| fake(i).switches.load(Ordering::SeqCst)).collect();
                        let result = runtime.block_on(p.set_dnssec(zones[z], true, &yes));
                        let got: Vec<usize> = (0..3)
                            .filter(|&i| fake(i).switches.load(Ordering::SeqCst) > before[i])
                            .collect();
                        if let [to] = got.as_slice() {
                            proptest::prop_assert_eq!(&holders, &vec![*to], "sent to {} while {:?} hold it", to, holders);
                            proptest::prop_assert!(all_up, "sent while an account could not be asked");
                            if let Some(read) = read_at[z] {
                                proptest::prop_assert_eq!(read, *to, "sent to {} after a read at {}", to, read);
                            }
                        } else {
                            proptest::prop_assert!(got.is_empty(), "sent to several: {:?}", got);
                            let due = holders.len() == 1 && all_up && read_at[z] == Some(holders[0]);
                            proptest::prop_assert!(!due, "withheld from {:?}: {:?}", holders, result);
                        }
                    }
                }
            }
        }
    }
}
