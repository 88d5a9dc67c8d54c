//! What a handler's panic says, and where it happened. A caught panic's payload has its
//! message but not its location; the panic hook is the only place that sees both. Workers install, once per
//! process, a hook that notes the location on the panicking thread and then calls the
//! hook that was there before (the default one prints the panic as usual; an app's own
//! hook keeps working). The attempt that catches the panic reads the note on the same
//! thread, in the same poll, right after `catch_unwind` returns.
//!
//! An app that sets its own hook after the workers start replaces this one: panics are
//! then recorded with their message only.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    /// The location of the latest panic on this thread, until an attempt takes it.
    static LAST_PANIC_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the noting hook, chained before the current one; later calls do nothing.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(ToString::to_string);
            // `try_with`: a panic while the thread's locals are torn down notes nothing.
            let _ = LAST_PANIC_AT.try_with(|last| last.replace(at));
            previous(info);
        }));
    });
}

/// The location of the panic just caught on this thread (`file:line:column`), if the
/// hook saw it.
pub(crate) fn take() -> Option<String> {
    LAST_PANIC_AT.try_with(|last| last.take()).ok().flatten()
}

/// A caught panic's message, from either kind of payload `panic!` makes.
pub(crate) fn message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_s_location_is_read_once_on_its_thread() {
        install();
        install(); // a second call keeps one hook
        let line = line!() + 1;
        let caught = std::panic::catch_unwind(|| panic!("noted"));
        assert!(caught.is_err());
        let at = take().expect("the hook noted the location");
        assert!(at.starts_with(&format!("{}:{line}:", file!())), "{at}");
        assert_eq!(take(), None, "a location is taken once");
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        let s: Box<dyn Any + Send> = Box::new("boom");
        let owned: Box<dyn Any + Send> = Box::new(String::from("bang"));
        let other: Box<dyn Any + Send> = Box::new(42);
        assert_eq!(message(s.as_ref()), "boom");
        assert_eq!(message(owned.as_ref()), "bang");
        assert_eq!(message(other.as_ref()), "a non-string panic payload");
    }
}
