//! Provider calls of unknown outcome, settled by what a later look says (safety rule 11):
//! the audit trail then says what actually happened, the account the call went to asked
//! by name when the zone has moved since.

use super::{Engine, EngineError};
use crate::dns::Observer;
use crate::dnssec::CdsHalves;
use crate::lifecycle::{CdsSetting, Effect, ProviderView};
use crate::provider::{Provider, ProviderError};
use crate::store::EventKind;

/// What became of a provider call of unknown outcome, as a later look tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Took,
    DidNot,
    /// A call of two writes (the CDS setting's halves) whose first took effect alone.
    HalfApplied,
}

impl Outcome {
    fn took(took: bool) -> Self {
        if took { Self::Took } else { Self::DidNot }
    }
}

/// What became of a call of unknown outcome, by what its account says now (DNSSEC on or
/// off, the CDS publication half by half), and those words; `None` when that does not
/// tell.
fn judged(effect: &Effect, on: Option<bool>, cds: Option<CdsHalves>) -> Option<(Outcome, String)> {
    let dnssec = |on: bool| format!("DNSSEC is {}", if on { "on" } else { "off" });
    match (effect, on, cds) {
        (Effect::EnableDnssec, Some(on), _) => Some((Outcome::took(on), dnssec(on))),
        (Effect::DisableDnssec, Some(on), _) => Some((Outcome::took(!on), dnssec(on))),
        (Effect::SetCds { to }, _, Some(now)) => {
            let outcome = match now.as_whole() {
                Some(whole) => Outcome::took(whole == *to),
                // One half as asked, the other not: its answer was lost between the two
                // writes.
                None if now.cds == *to || now.cdnskey == *to => Outcome::HalfApplied,
                None => Outcome::took(false),
            };
            let said = match now.as_whole() {
                Some(whole) => whole.describe().to_string(),
                None => format!("half set ({now})"),
            };
            Some((outcome, format!("its CDS publication is {said}")))
        }
        _ => None,
    }
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// Provider calls whose outcome was unknown are settled by what the provider says now
    /// (safety rule 11): the audit trail then says what actually happened.
    pub(super) async fn settle_unknown_calls(
        &self,
        zone: &str,
        provider: &ProviderView,
        cds: &CdsSetting,
    ) -> Result<(), EngineError> {
        let on = match provider {
            ProviderView::On(_) => Some(true),
            ProviderView::Off => Some(false),
            ProviderView::Missing | ProviderView::Unknown(_) => None,
        };
        let cds = match cds {
            CdsSetting::Set(now) => Some(CdsHalves::whole(*now)),
            CdsSetting::HalfApplied(halves) => Some(*halves),
            _ => None,
        };
        let here = self.provider.account(zone);
        for item in self.store.unknown_calls(zone).await? {
            // A call sent to another account than this look's (the zone moved since) is
            // settled by what that account says, asked by name (rule 13).
            if let Some(account) = item.account.as_deref()
                && here.as_deref() != Some(account)
            {
                self.settle_at_account(zone, &item, account).await?;
                continue;
            }
            let Some((outcome, said)) = judged(&item.effect, on, cds) else {
                continue;
            };
            let who = self.provider_named(zone);
            // A row from before rows named their account: judged here, as then.
            let old = if item.account.is_none() && self.provider.accounts() > 1 {
                " (the call's row names no account: judged at the one holding the zone now)"
            } else {
                ""
            };
            self.settle_outcome(zone, &item, outcome, format!("{who}: {said}{old}"))
                .await?;
        }
        Ok(())
    }

    /// A call of unknown outcome settled by the account it was sent to, asked by name:
    /// the zone may be at another account now, or at two during a signed move. An account
    /// no longer configured, or without the zone, cannot tell: said, and the call stays of
    /// unknown outcome (never judged by another account's word).
    pub(super) async fn settle_at_account(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        account: &str,
    ) -> Result<(), EngineError> {
        let cannot_tell = |why: String| {
            format!(
                "{why}: whether the call to {} took effect there cannot be told; it stays of unknown outcome",
                item.effect.describe()
            )
        };
        let Some(client) = self.provider.account_named(account) else {
            let why = cannot_tell(format!(
                "provider {account} is not configured any more (put its [providers.{account}] back to settle it)"
            ));
            return self.unsettled(zone, &why).await;
        };
        let on = match client.dnssec_key(zone).await {
            Ok(_) => Some(true),
            Err(ProviderError::DnssecDisabled) => Some(false),
            Err(ProviderError::NotFound(e)) => {
                let why = cannot_tell(format!("provider {account} no longer has the zone ({e})"));
                return self.unsettled(zone, &why).await;
            }
            // Not known now: the next step asks again.
            Err(_) => None,
        };
        let cds = match item.effect {
            Effect::SetCds { .. } => client.cds_publication(zone).await.ok().flatten(),
            _ => None,
        };
        if let Some((outcome, said)) = judged(&item.effect, on, cds) {
            self.settle_outcome(zone, item, outcome, format!("provider {account}: {said}"))
                .await?;
        }
        Ok(())
    }

    /// A call whose outcome stays unknown, said in the history (counted when said again).
    async fn unsettled(&self, zone: &str, why: &str) -> Result<(), EngineError> {
        tracing::info!(zone, "{why}");
        self.store
            .record(zone, EventKind::Effect, why, self.clock.now())
            .await?;
        Ok(())
    }

    /// A call of unknown outcome, settled by what the provider says now (`said`, rule 11):
    /// the audit trail then says what actually happened.
    pub(super) async fn settle_call(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        took: bool,
        said: String,
    ) -> Result<(), EngineError> {
        self.settle_outcome(zone, item, Outcome::took(took), said)
            .await
    }

    /// [`Self::settle_call`] with every outcome a look can tell.
    async fn settle_outcome(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        outcome: Outcome,
        said: String,
    ) -> Result<(), EngineError> {
        let took = outcome == Outcome::Took;
        let reason = format!(
            "{said}: the call to {} {}",
            item.effect.describe(),
            match outcome {
                Outcome::Took => "took effect",
                Outcome::DidNot => "did not take effect",
                Outcome::HalfApplied =>
                    "was half applied (its first write took effect, its second did not)",
            }
        );
        tracing::info!(zone, "{reason}");
        self.store
            .settle_unknown_call(item.id, zone, took, &reason, self.clock.now())
            .await?;
        Ok(())
    }
}
