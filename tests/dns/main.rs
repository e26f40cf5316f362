//! What the world says over DNS: the observer against scripted fakes, the lab hierarchy
//! and scripted servers on loopback, the transport, the validator's work bounds, our DS
//! against ldns, `check` against real Knot and the scripted world, the lab registry
//! against real PowerDNS and Knot.
//!
//! One binary of a handful (tests/run.sh). The loopback blocks are each file's own:
//! 127.0.53.x the lab (a port of its own per world), 127.0.54.x knot, 127.0.61.x
//! transport, 127.0.72.x the scripted world (a port of its own per world), 127.0.73-76.x
//! registry_lab (test-support/src/world.rs); observer_fakes opens no socket.

mod check_cli;
mod knot;
mod ldns_crosscheck;
mod observer_fakes;
mod observer_lab;
mod observer_scripted;
mod registry_lab;
mod silent_servers;
mod transport;
mod validator_work;
