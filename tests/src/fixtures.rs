//! Payloads several test files share.

use serde::{Deserialize, Serialize};

/// A welcome email, as the example service sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WelcomeEmail {
    /// The new user.
    pub user_id: u64,
    /// Where it goes.
    pub to: String,
}

/// The welcome email of user `user_id`.
pub fn welcome(user_id: u64) -> WelcomeEmail {
    WelcomeEmail {
        user_id,
        to: format!("user{user_id}@example.com"),
    }
}
