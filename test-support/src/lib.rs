//! The harness dnssec-warden's integration tests and benchmarks share (as hickory-dns has
//! its `test-support` crate): one home for it, compiled once, instead of files included
//! into every test binary by `#[path]`.
//!
//! | module | what |
//! |---|---|
//! | [`postgres`] | a throwaway PostgreSQL cluster, stopped by PID; the only module the library's own unit tests use, so it names no `dnssec-warden` type |

pub mod postgres;
