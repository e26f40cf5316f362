//! The engine over the fake world (`test_support::fake`, `move_world`, `rig`), in process:
//! whole lifecycles and moves on a manual clock, crashes, the property tests, two engines
//! on one PostgreSQL database, alerts and their sinks, the metrics endpoint, what an exec
//! hook prints, and every decision of fixed-seed worlds compared with a golden record
//! (`decisions`: a decision that moves fails it). CPU rather than waits: the property tests' sequences are most of it.
//!
//! One binary of a handful (tests/run.sh): the files below were test binaries of their
//! own, and run here together, on threads, beside each other. Nothing of theirs is
//! process-wide: log lines are captured per thread (`test_support::logs`), databases are
//! in memory or a PostgreSQL database each on the shared cluster.

mod alerts;
mod decisions;
mod engine;
mod engine_ha;
mod engine_ha_props;
mod engine_move;
mod engine_props;
mod engine_rollover;
mod engine_signed_move;
mod exec_output;
mod metrics;
