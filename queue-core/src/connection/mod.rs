//! How an app reaches Redis: a Sentinel deployment ([`Sentinel`]), TLS certificates
//! ([`Tls`]), and Redis Cluster's rules for key names ([`queue_slot`]). Plain settings
//! and rules; the connection itself is the engine's.

mod cluster;
mod sentinel;
mod tls;

pub use cluster::queue_slot;
pub(crate) use cluster::{check_same_slot, check_tags, key_slot};
pub use sentinel::Sentinel;
pub use tls::Tls;
