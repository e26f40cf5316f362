//! Support for the end-to-end suite on real DNS software (`tests/e2e_knot.rs`) and the
//! scripted authoritative world (`scripted_dns`, for the observer and `check` suites).
#![allow(dead_code)]

pub mod daemon;
pub mod fault_proxy;
pub mod knot;
pub mod scripted_dns;
pub mod world;
