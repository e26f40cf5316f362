//! The console's users, sessions, CSRF tokens and login limiter.
