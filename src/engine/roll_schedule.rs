//! `[rollover]`'s look at a settled zone (`lifecycle::roll_policy`, DESIGN.md section 2
//! "Key rollovers", "Policy"): the provider's key listing, and where a roll is due the
//! rolls in progress at the zone's account, asked only where the policy wants them;
//! asking, never deciding. A roll the policy starts is committed by the zone's one step
//! and taken by the next, as one `dnssec-warden roll` declared.

use crate::dns::Observer;
use crate::lifecycle::roll_policy::{self, AccountRolls, KeyListing};
use crate::lifecycle::rollover::ListedKey;
use crate::lifecycle::{Decision, Timestamp, Zone};
use crate::provider::Provider;

use super::{Engine, EngineError};

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// `step`'s decision for `zone` at `at`, with the policy's key ages and the roll it
    /// starts where one is due (unchanged where the policy has no lifetime or the zone is
    /// not settled `active`). The cap is read before the commit: zones falling due in
    /// the same instant may pass it together, by at most the steps in flight.
    pub(super) async fn roll_policy(
        &self,
        zone: &Zone,
        decision: Decision,
        at: Timestamp,
    ) -> Result<Decision, EngineError> {
        if !roll_policy::wants_keys(zone, &decision, &self.policy) {
            return Ok(decision);
        }
        let name = zone.name.as_str();
        let keys = match self.provider.keys(name).await {
            Ok(Some(keys)) => KeyListing::Listed(
                keys.into_iter()
                    .map(|k| ListedKey {
                        id: k.id,
                        dnskey: k.dnskey,
                        active: k.state.active,
                        published: k.state.published,
                    })
                    .collect(),
            ),
            Ok(None) => KeyListing::NoKeyApi,
            Err(e) => KeyListing::Unknown(e.to_string()),
        };
        let mut rolls = AccountRolls {
            account: self.provider.account(name),
            in_progress: 0,
        };
        if roll_policy::due_with(zone, &keys, at, &self.policy) {
            let rolling = self.store.rolling_zones().await?;
            let n = rolling
                .iter()
                .filter(|(z, account)| z != name && *account == rolls.account)
                .count();
            rolls.in_progress = u32::try_from(n).unwrap_or(u32::MAX);
        }
        Ok(roll_policy::schedule(
            zone,
            decision,
            &keys,
            &rolls,
            at,
            &self.policy,
        ))
    }
}
