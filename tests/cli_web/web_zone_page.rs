//! The console's zone page over real HTTP, for what a zone is in the middle of: a key
//! rollover shown with the words `status` prints (the harness is `web_security`'s).

use dnssec_warden::dnssec::Dnskey;
use dnssec_warden::lifecycle::hold::{Hold, Party};
use dnssec_warden::lifecycle::rollover::{KeyKind, ListedKey, Roll};
use dnssec_warden::lifecycle::{Decision, Facts, Intent, State, Timestamp};
use dnssec_warden::store::ObservationText;

use crate::web_security::{ALICE, T0, ZONE, console};

/// The CSK the zone signs with (a real ECDSA P-256 public key).
const CSK: &str = "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==";

/// A zone in a CSK roll: the page says the roll's method, the kind of key, its phase by
/// name and in words, what it waits for, on whom and until when, as `status` says them;
/// a zone without a roll says none of it.
#[tokio::test]
async fn a_key_roll_in_progress_is_shown_with_its_phase_and_its_wait() {
    let c = console().await;
    let (cookie, _) = c.session("alice", ALICE).await;
    let page = || async {
        c.get(&format!("/zones/{ZONE}"), Some(&cookie))
            .await
            .text()
            .await
            .unwrap()
    };
    let step = |facts: Facts, at: Timestamp| {
        let store = c.store.clone();
        async move {
            let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
            let decision = Decision {
                state: Some(State::Active),
                facts,
                effects: Vec::new(),
                alerts: Vec::new(),
                notes: Vec::new(),
                wake_at: Timestamp(i64::MAX / 2),
            };
            let text = ObservationText::from_whole("{}");
            assert!(
                store
                    .commit_step(&read, &decision, &text, at)
                    .await
                    .unwrap()
            );
        }
    };
    c.store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    step(Facts::default(), T0.plus_secs(1)).await;
    let settled = page().await;
    assert!(!settled.contains("key-roll"), "{settled}");
    assert!(!settled.contains("KEY ROLL") && !settled.contains("roll of the"));

    let listed = [ListedKey {
        id: "1".into(),
        dnskey: Dnskey::parse_text(CSK).unwrap(),
        active: true,
        published: true,
    }];
    let roll = Roll::plan(&listed, KeyKind::Csk, None, T0.plus_secs(2)).unwrap();
    c.store
        .declare_roll(ZONE, Some(&roll), "operator alice", T0.plus_secs(2))
        .await
        .unwrap();
    // What a step of the roll leaves: the DNSKEY TTL's hold, until when.
    let until = T0.plus_secs(3_600);
    let mut facts = c.store.zone(ZONE).await.unwrap().unwrap().zone.facts;
    facts.wait.held_by = Some(
        Hold::new(
            "resolvers to forget DNSKEY sets without the new key",
            Party::Ttl,
        )
        .until(Some(until)),
    );
    step(facts, T0.plus_secs(3)).await;

    let rolling = page().await;
    assert!(rolling.contains("id=\"key-roll\""), "{rolling}");
    assert!(
        rolling.contains(
            "double_ds roll of the csk (algorithm 13), phase publishing: \
             the new CSK published beside the old CSK, not signing yet"
        ),
        "{rolling}"
    );
    let wait = rolling
        .split("id=\"key-roll-wait\"")
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_else(|| panic!("no wait in the roll's section: {rolling}"));
    assert!(
        wait.contains("Waiting for resolvers to forget DNSKEY sets without the new key, on ttl"),
        "{wait}"
    );
    assert!(
        wait.contains(&format!("datetime=\"{until}\"")),
        "until when: {wait}"
    );
}
