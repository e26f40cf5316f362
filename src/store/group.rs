//! SQLite's group commit of routine decisions: a settled zone's look that changes nothing
//! but its own row (a routine step, or a sampled look that agreed). Every write holds the store's one write turn, and a commit's visit to
//! SQLite's thread, there and back, costs more than its SQL: one at a time they were
//! what capped the engine's settled zones a second. So a routine decision is
//! queued, and whoever holds the write turn next writes every decision queued by then in
//! one statement: each zone's row is still written whole or not at all, with its own
//! version check, and the statement is its own transaction.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::StoreError;

/// One routine decision: the zone's row as the decision leaves it, and the version it
/// was read at.
#[derive(Debug)]
pub(super) struct RoutineUpdate {
    pub name: String,
    pub version: i64,
    pub wake_at: i64,
    pub write: Routine,
}

/// What a routine decision writes beside the next look's time.
#[derive(Debug)]
pub(super) enum Routine {
    /// A routine step: the row as it leaves it (the version moves on).
    Step {
        state: Option<&'static str>,
        since: i64,
        facts: String,
        observed_at: i64,
        observation: super::ObservationText,
    },
    /// A sampled look that agreed: when it was, and nothing of the zone's word (the
    /// version stays).
    Sample { at: i64 },
}

impl Routine {
    fn is_sample(&self) -> bool {
        matches!(self, Self::Sample { .. })
    }
}

/// Whether the row was written (false: its version changed since the read), or why the
/// statement that carried it failed (shared by every decision in it).
pub(super) type Written = Result<bool, Arc<StoreError>>;

struct Queued {
    id: u64,
    update: RoutineUpdate,
    reply: oneshot::Sender<Written>,
}

/// The most decisions one statement carries (nine values each at most).
pub(super) const BATCH_MAX: usize = 16;

/// Decisions waiting for the write turn.
#[derive(Default)]
pub(super) struct Queue {
    waiting: Mutex<Vec<Queued>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `update`; its outcome arrives on the receiver once some turn holder wrote it.
    pub(super) fn push(&self, update: RoutineUpdate) -> (u64, oneshot::Receiver<Written>) {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (reply, written) = oneshot::channel();
        self.lock().push(Queued { id, update, reply });
        (id, written)
    }

    /// Takes back a decision nobody has written yet (its writer gave up waiting for the
    /// turn); false if it was already taken.
    pub(super) fn withdraw(&self, id: u64) -> bool {
        let mut waiting = self.lock();
        let before = waiting.len();
        waiting.retain(|q| q.id != id);
        waiting.len() != before
    }

    /// Every decision queued now, in statements of at most [`BATCH_MAX`] of one kind with
    /// no zone twice in one (a zone's abandoned step may still be queued beside its next
    /// one).
    pub(super) fn take(&self) -> Vec<Batch> {
        let waiting = std::mem::take(&mut *self.lock());
        let mut batches: Vec<Batch> = Vec::new();
        for queued in waiting {
            let sample = queued.update.write.is_sample();
            let fits = batches.iter_mut().find(|b| {
                b.items.len() < BATCH_MAX
                    && b.sample == sample
                    && !b.names.contains(&queued.update.name)
            });
            match fits {
                Some(batch) => batch.add(queued),
                None => {
                    let mut batch = Batch {
                        sample,
                        ..Batch::default()
                    };
                    batch.add(queued);
                    batches.push(batch);
                }
            }
        }
        batches
    }
}

/// Decisions written by one statement.
#[derive(Default)]
pub(super) struct Batch {
    items: Vec<Queued>,
    names: HashSet<String>,
    /// Sampled looks (else routine steps): one statement writes one kind.
    sample: bool,
}

impl Batch {
    fn add(&mut self, queued: Queued) {
        self.names.insert(queued.update.name.clone());
        self.items.push(queued);
    }

    pub(super) fn updates(&self) -> impl Iterator<Item = &RoutineUpdate> {
        self.items.iter().map(|q| &q.update)
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The statement that writes this batch ([`statement`] or [`sample_statement`]).
    pub(super) fn statement(&self) -> String {
        if self.sample {
            sample_statement(self.len())
        } else {
            statement(self.len())
        }
    }

    /// Tells each decision its outcome: written if the statement returned its zone.
    pub(super) fn answer(self, outcome: Result<HashSet<String>, StoreError>) {
        let outcome = outcome.map_err(Arc::new);
        for queued in self.items {
            let written = match &outcome {
                Ok(names) => Ok(names.contains(&queued.update.name)),
                Err(e) => Err(e.clone()),
            };
            // A writer that stopped waiting (its step abandoned) is told nothing.
            let _ = queued.reply.send(written);
        }
    }
}

/// The statement for `n` decisions: each zone's row set from its values where its name
/// and version match, the names written returned.
fn statement(n: usize) -> String {
    let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; n.max(1)].join(", ");
    format!(
        "WITH v (name, version, state, since, facts, wake_at, observed_at, observation, brief) \
         AS (VALUES {values}) \
         UPDATE zones SET state = v.state, state_since = v.since, facts = v.facts, \
         next_check_at = v.wake_at, last_observed_at = v.observed_at, \
         last_observation = v.observation, last_brief = v.brief, version = zones.version + 1 \
         FROM v WHERE zones.name = v.name AND zones.version = v.version \
         RETURNING zones.name"
    )
}

/// The statement for `n` sampled looks: each zone's next look and sampled time, where its
/// name and version match (the version stays), the names written returned.
fn sample_statement(n: usize) -> String {
    let values = vec!["(?, ?, ?, ?)"; n.max(1)].join(", ");
    format!(
        "WITH v (name, version, wake_at, sampled_at) AS (VALUES {values}) \
         UPDATE zones SET next_check_at = v.wake_at, sampled_at = v.sampled_at \
         FROM v WHERE zones.name = v.name AND zones.version = v.version \
         RETURNING zones.name"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(name: &str) -> RoutineUpdate {
        RoutineUpdate {
            name: name.into(),
            version: 1,
            wake_at: 0,
            write: Routine::Step {
                state: Some("active"),
                since: 0,
                facts: "{}".into(),
                observed_at: 0,
                observation: super::super::ObservationText::from_whole("{}"),
            },
        }
    }

    #[test]
    fn steps_and_samples_go_in_statements_of_their_own() {
        let queue = Queue::default();
        let _a = queue.push(update("a."));
        let _b = queue.push(RoutineUpdate {
            write: Routine::Sample { at: 0 },
            ..update("b.")
        });
        let _c = queue.push(update("c."));
        let kinds: Vec<(bool, usize)> = queue.take().iter().map(|b| (b.sample, b.len())).collect();
        assert_eq!(kinds, vec![(false, 2), (true, 1)]);
    }

    #[test]
    fn a_zone_is_never_twice_in_one_statement_and_statements_are_bounded() {
        let queue = Queue::default();
        let _a = queue.push(update("a."));
        let _b = queue.push(update("b."));
        let _a_again = queue.push(update("a."));
        let batches = queue.take();
        let names: Vec<Vec<&str>> = batches
            .iter()
            .map(|b| b.updates().map(|u| u.name.as_str()).collect())
            .collect();
        assert_eq!(names, vec![vec!["a.", "b."], vec!["a."]]);
        assert!(queue.take().is_empty());

        let _many: Vec<_> = (0..BATCH_MAX + 3)
            .map(|i| queue.push(update(&format!("z{i}."))))
            .collect();
        let sizes: Vec<usize> = queue.take().iter().map(Batch::len).collect();
        assert_eq!(sizes, vec![BATCH_MAX, 3]);
    }

    #[test]
    fn a_withdrawn_decision_is_not_written() {
        let queue = Queue::default();
        let (id, _) = queue.push(update("a."));
        let _b = queue.push(update("b."));
        assert!(queue.withdraw(id));
        assert!(!queue.withdraw(id));
        let batches = queue.take();
        assert_eq!(batches.len(), 1);
        assert_eq!(
            batches[0]
                .updates()
                .map(|u| u.name.as_str())
                .collect::<Vec<_>>(),
            vec!["b."]
        );
    }

    #[tokio::test]
    async fn each_decision_hears_its_own_outcome() {
        let queue = Queue::default();
        let (_, a) = queue.push(update("a."));
        let (_, b) = queue.push(update("b."));
        for batch in queue.take() {
            batch.answer(Ok(HashSet::from(["a.".to_string()])));
        }
        assert!(matches!(a.await, Ok(Ok(true))));
        assert!(matches!(b.await, Ok(Ok(false))));
    }
}
