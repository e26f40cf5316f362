//! The database: SQLite under faults and an adversarial operator (files removed, replaced,
//! restored, damaged, a full disk), newer and read-only openers, many openers at once, the
//! commands on PostgreSQL through the real binary.
//!
//! One binary of a handful (tests/run.sh); each test has its own temporary directory or
//! PostgreSQL database, and its log lines are captured per thread (`test_support::logs`).

mod postgres_cli;
mod store_faults;
mod store_identity;
mod store_integrity;
mod store_newer;
mod store_open;
mod store_read_only;
