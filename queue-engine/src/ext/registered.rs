//! One of our scripts, as the connection's registry holds it (`scripts.rs` lists them):
//! the one lookup the extensions share.

use crate::error::Error;
use crate::redis_connection::RedisConnection;
use crate::scripts::LuaScript;

/// Our script `name`; a missing one is a configuration error naming it.
pub(crate) fn script(conn: &RedisConnection, name: &str) -> Result<LuaScript, Error> {
    conn.scripts()
        .get(name)
        .cloned()
        .ok_or_else(|| Error::InvalidConfig(format!("{name} script not found")))
}
