//! How a sealed value or text reads on a page: as sealed, with its key's id (never the
//! envelope: its base64 is nobody's payload, and its JSON nobody's failure); opened, with
//! a word that the reading is audited; or why it did not open.

use maud::{html, Markup};

use super::format::Clip;
use crate::load::payload::Shown;

/// The characters of a sealed value's key id shown (ids are at most 64; this one is
/// read from Redis, where anyone may have written a longer one).
const KEY_SHOWN: usize = 64;

/// The characters of why a sealed value did not open shown.
const ERROR_SHOWN: usize = 2_000;

/// `(key <id>)`.
pub(crate) fn key(id: &str) -> Markup {
    html! { "(key " code.key { (Clip(id, KEY_SHOWN)) } ")" }
}

/// The `sealed` chip.
fn chip() -> Markup {
    html! { span.chip { "sealed" } }
}

/// The line said above a value or text that was sealed: nothing for a plain one.
pub(crate) fn notice<T>(shown: &Shown<T>) -> Markup {
    html! {
        @match shown {
            Shown::Plain(_) => {},
            Shown::Sealed { key: id } => p.sealed {
                (chip()) " " (key(id))
                span.muted {
                    " Stored encrypted; the access policy does not reveal sealed values to you."
                }
            },
            Shown::Opened { key: id, .. } => p.sealed.muted {
                (chip()) " " (key(id)) " opened for you; this reading is audited."
            },
            Shown::Unopened { key: id, error } => p.sealed {
                (chip()) " " (key(id)) " "
                span.bad { "Does not open: " (Clip(error, ERROR_SHOWN)) }
            },
        }
    }
}

/// What may be read of a value or text: as stored, or opened; `None` for one left
/// sealed.
pub(crate) fn readable<T>(shown: &Shown<T>) -> Option<&T> {
    match shown {
        Shown::Plain(value) | Shown::Opened { value, .. } => Some(value),
        Shown::Sealed { .. } | Shown::Unopened { .. } => None,
    }
}

/// A text in a line of others (a flow's node, a log line), cut at `chars`: as stored or
/// opened (marked so); a sealed one as the chip and its key, and why it did not open.
pub(crate) fn inline(shown: &Shown<String>, chars: usize) -> Markup {
    html! {
        @match shown {
            Shown::Plain(text) => (Clip(text, chars)),
            Shown::Opened { key: id, value } => {
                (Clip(value, chars)) " "
                span.sealed.muted { "· sealed " (key(id)) ", opened for you; this reading is audited" }
            },
            Shown::Sealed { key: id } => span.sealed { (chip()) " " (key(id)) },
            Shown::Unopened { key: id, error } => span.sealed {
                (chip()) " " (key(id)) " "
                span.bad { "does not open: " (Clip(error, ERROR_SHOWN)) }
            },
        }
    }
}

/// A listing's text that is sealed, or was cut from a sealed one: the chip, and its
/// key's id when the text still held it. Listings never open one (a page of them would
/// be fifty openings at a glance): the job's page does, for a reader who may.
pub(crate) fn listed(key_id: Option<&str>) -> Markup {
    html! {
        span.sealed title="opened on the job's page, for a reader the policy lets reveal it" {
            (chip())
            @if let Some(id) = key_id { " " (key(id)) }
        }
    }
}
