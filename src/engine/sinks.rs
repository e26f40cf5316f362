//! Each alert sink's worker: a sink's notifications are delivered from its own
//! queue in the database (`deliveries`), by a task of its own, never inside a zone's
//! step, so that a slow or failing sink holds up neither a zone, nor the registrar hook,
//! nor another sink.
//!
//! A worker sends its sink's owed notifications oldest first, each with the sink's own
//! timeout and retries. When a send fails, the worker waits before its next try, from
//! [`FIRST_WAIT`] doubling to `alerts.sink_retry_max`; it says so once when the sink
//! starts failing (ERROR) and once when it delivers again (INFO), and a sink failing for
//! `alerts.sink_failing_after` is the daemon-wide `alert_sink_failing` (its own
//! [`Condition`], one per sink).
//!
//! Several daemons: a zone's notification is sent only by the zone's holder, asked of
//! the database right before (rule 12), and every row is claimed before it is sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::alert::{AlertEvent, Sink};
use crate::condition::Condition;
use crate::lifecycle::{AlertKind, Clock, Timestamp};
use crate::store::{DeliveryRow, Fenced, Store};

/// The first wait after a failed try; doubled for each further one.
pub const FIRST_WAIT: Duration = Duration::from_secs(5);
/// Rows read per round.
const BATCH: i64 = 256;
/// A worker with nothing to send looks again this often (rows another daemon left, a
/// claim that ran out).
const POLL: Duration = Duration::from_secs(5);
/// Delivered rows are kept this long (what a sink took, and when), then forgotten.
const KEEP: Duration = Duration::from_secs(7 * 86_400);

/// One sink and what its worker shares with the producers.
#[derive(Debug)]
pub struct SinkQueue {
    pub sink: Sink,
    /// `alert_sink_failing` for this sink.
    pub condition: Arc<Condition>,
    wake: Notify,
    /// Rounds asked for by producers, and (the worker's) rounds done and whether the
    /// sink is waiting after a failure: together, whether the worker is settled.
    requested: AtomicU64,
    done: watch::Sender<(u64, bool)>,
}

impl SinkQueue {
    pub fn new(sink: Sink) -> Self {
        Self {
            sink,
            condition: Arc::new(Condition::new(AlertKind::AlertSinkFailing)),
            wake: Notify::new(),
            // Unsettled until the worker's first round: it may find rows owed from before.
            requested: AtomicU64::new(1),
            done: watch::channel((0, false)).0,
        }
    }

    pub fn name(&self) -> &str {
        self.sink.name()
    }

    /// A notification was queued: the worker looks now.
    pub fn wake(&self) {
        self.requested.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Nothing the worker may send now is left (or it waits after a failure).
    pub fn settled(&self) -> bool {
        let (done, waiting) = *self.done.borrow();
        waiting || done >= self.requested.load(Ordering::SeqCst)
    }
}

/// How a worker waits between tries of a failing sink, and when that is an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
    pub failing_after: Duration,
}

impl Backoff {
    /// The wait after the `tries`-th failed try in a row.
    pub fn wait(&self, tries: u32) -> Duration {
        let doubled = self
            .first
            .saturating_mul(1u32 << tries.saturating_sub(1).min(20));
        doubled.min(self.max)
    }
}

/// The workers of one configuration; dropped (a stop, a reload), they end where they
/// stand: what they were sending stays owed, and a command they ran is killed.
#[derive(Debug, Default)]
pub struct SinkWorkers(Vec<tokio::task::JoinHandle<()>>);

impl Drop for SinkWorkers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

impl SinkWorkers {
    pub(super) fn start(
        queues: &[Arc<SinkQueue>],
        store: &Store,
        clock: Arc<dyn Clock>,
        backoff: Backoff,
    ) -> Self {
        Self(
            queues
                .iter()
                .map(|q| tokio::spawn(work(q.clone(), store.clone(), clock.clone(), backoff)))
                .collect(),
        )
    }
}

/// A failing episode of one sink.
struct Failing {
    since: Timestamp,
    tries: u32,
}

/// One sink's worker, for the daemon's life (or the configuration's).
async fn work(queue: Arc<SinkQueue>, store: Store, clock: Arc<dyn Clock>, backoff: Backoff) {
    let name = queue.name().to_string();
    // Longer than one send can take: a daemon that dies mid-send leaves the row to
    // another (or to itself restarted) after this.
    let hold = queue.sink.longest() + Duration::from_secs(5);
    if store.holder().is_none()
        && let Err(e) = store.release_delivery_claims(&name).await
    {
        tracing::debug!(sink = name.as_str(), error = %e, "cannot release old claims");
    }
    let mut failing: Option<Failing> = None;
    let mut pruned: Option<Timestamp> = None;
    loop {
        let round = queue.requested.load(Ordering::SeqCst);
        let now = clock.now();
        let rows = match store.owed_deliveries(&name, now, BATCH).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::debug!(sink = name.as_str(), error = %e, "cannot read the sink's queue yet");
                idle(&queue, round).await;
                continue;
            }
        };
        let full = rows.len() as i64 == BATCH;
        let mut failed = None;
        for row in rows {
            match deliver(&queue, &store, clock.as_ref(), &row, hold).await {
                Sent::Yes => {
                    if let Some(episode) = failing.take() {
                        tracing::info!(
                            sink = name.as_str(),
                            since = %episode.since,
                            tries = episode.tries,
                            "the alert sink delivers again; what it owed follows"
                        );
                    }
                    // Also ends an episode a restart left open.
                    queue.condition.clear();
                }
                Sent::Skipped => {}
                Sent::Failed(error) => {
                    failed = Some(error);
                    // The rest would meet the same fault: the next try is after the wait.
                    break;
                }
            }
        }
        if let Some(error) = failed {
            let episode = failing.get_or_insert_with(|| {
                tracing::error!(
                    sink = name.as_str(),
                    "the alert sink fails; its notifications stay owed in its queue and are tried again after a wait of {}s doubling up to {}s (said again when it delivers): {error}",
                    backoff.first.as_secs(),
                    backoff.max.as_secs()
                );
                Failing {
                    since: clock.now(),
                    tries: 0,
                }
            });
            episode.tries = episode.tries.saturating_add(1);
            if clock.now().since(episode.since) >= backoff.failing_after {
                queue.condition.holds(format!(
                    "the alert sink {name} has failed every delivery since {} ({} tries; the other sinks and the log still get every notification): {error}",
                    episode.since, episode.tries
                ));
            } else {
                tracing::debug!(
                    sink = name.as_str(),
                    tries = episode.tries,
                    "the alert sink failed again: {error}"
                );
            }
            queue.done.send_replace((round, true));
            tokio::time::sleep(backoff.wait(episode.tries)).await;
            continue;
        }
        if full {
            continue;
        }
        let now = clock.now();
        if pruned.is_none_or(|at| now.since(at) >= Duration::from_secs(3600)) {
            pruned = Some(now);
            if let Err(e) = store
                .prune_deliveries(
                    &name,
                    Timestamp(now.0.saturating_sub(KEEP.as_millis() as i64)),
                )
                .await
            {
                tracing::debug!(sink = name.as_str(), error = %e, "cannot forget old deliveries yet");
            }
        }
        idle(&queue, round).await;
    }
}

/// Says the round is done, then waits for a producer or the poll.
async fn idle(queue: &SinkQueue, round: u64) {
    queue.done.send_replace((round, false));
    let _ = tokio::time::timeout(POLL, queue.wake.notified()).await;
}

enum Sent {
    Yes,
    /// Not this daemon's to send (another zone holder's, or claimed by another daemon).
    Skipped,
    Failed(String),
}

async fn deliver(
    queue: &SinkQueue,
    store: &Store,
    clock: &dyn Clock,
    row: &DeliveryRow,
    hold: Duration,
) -> Sent {
    // A zone's notifications are its holder's (rule 12), asked right before.
    if !row.zone.is_empty()
        && (!store.holds(&row.zone)
            || !store
                .lease_current(&row.zone, Fenced::Notification)
                .await
                .unwrap_or(false))
    {
        return Sent::Skipped;
    }
    if !store
        .claim_delivery(row.id, clock.now(), hold)
        .await
        .unwrap_or(false)
    {
        return Sent::Skipped;
    }
    let event: AlertEvent = match serde_json::from_str(&row.event) {
        Ok(event) => event,
        Err(e) => {
            // Never sendable: dropped, said, not retried for good.
            tracing::warn!(sink = queue.name(), id = row.event_id.as_str(), error = %e, "an unreadable notification in the sink's queue was dropped");
            let _ = store.delivered(row.id, clock.now()).await;
            return Sent::Skipped;
        }
    };
    match queue.sink.send(&event).await {
        Ok(()) => {
            if let Err(e) = store.delivered(row.id, clock.now()).await {
                // Sent but not recorded: sent again later, with the same id.
                tracing::warn!(sink = queue.name(), id = row.event_id.as_str(), error = %e, "a notification was delivered but cannot be recorded as such; it may be sent again (same id)");
            }
            Sent::Yes
        }
        Err(e) => {
            let error = e.to_string();
            if let Err(e) = store.delivery_failed(row.id, &error).await {
                tracing::debug!(sink = queue.name(), error = %e, "cannot record a failed delivery");
            }
            Sent::Failed(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_to_its_ceiling() {
        let b = Backoff {
            first: Duration::from_secs(5),
            max: Duration::from_secs(600),
            failing_after: Duration::from_secs(900),
        };
        let waits: Vec<u64> = (1..=10).map(|n| b.wait(n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 600, 600, 600]);
        assert_eq!(b.wait(u32::MAX), Duration::from_secs(600));
    }
}
