//! Support for the end-to-end suite on real DNS software (`tests/e2e_knot.rs`).
#![allow(dead_code)]

pub mod daemon;
pub mod fault_proxy;
pub mod knot;
pub mod world;
