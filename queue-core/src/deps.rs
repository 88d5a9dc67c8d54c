//! Dependencies handed to handlers: `Dep<T>` and the map `QueueApp::provide` fills.

use std::any::{type_name, Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A shared dependency of a handler, provided once on the app with
/// [`QueueAppBuilder::provide`](crate::QueueAppBuilder::provide).
///
/// ```
/// use queue_core::{Dep, Job, JobError};
///
/// struct Mailer;
/// impl Mailer { async fn send(&self, _to: &str) -> Result<(), std::io::Error> { Ok(()) } }
///
/// async fn send_welcome(job: Job<String>, mailer: Dep<Mailer>) -> Result<(), JobError> {
///     mailer.send(&job.data).await?;
///     Ok(())
/// }
/// ```
pub struct Dep<T: ?Sized>(Arc<T>);

impl<T: ?Sized> Dep<T> {
    /// Wraps a shared value (useful when calling a handler directly in a test).
    pub fn new(value: Arc<T>) -> Self {
        Dep(value)
    }

    /// The shared value.
    pub fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T> From<T> for Dep<T> {
    fn from(value: T) -> Self {
        Dep(Arc::new(value))
    }
}

impl<T: ?Sized> Clone for Dep<T> {
    fn clone(&self) -> Self {
        Dep(self.0.clone())
    }
}

impl<T: ?Sized> Deref for Dep<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> fmt::Debug for Dep<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dep<{}>", type_name::<T>())
    }
}

/// The type of one dependency a handler asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub struct DepInfo {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
}

impl DepInfo {
    /// The dependency type `T`.
    pub fn of<T: 'static>() -> Self {
        DepInfo {
            type_id: TypeId::of::<T>(),
            type_name: type_name::<T>(),
        }
    }
}

/// Provided values by type.
#[derive(Default, Clone)]
#[doc(hidden)]
pub struct Deps {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Deps {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn insert_any(&mut self, type_id: TypeId, value: Arc<dyn Any + Send + Sync>) {
        self.values.entry(type_id).or_insert(value);
    }

    pub(crate) fn contains_id(&self, type_id: TypeId) -> bool {
        self.values.contains_key(&type_id)
    }

    /// The provided `T`, if any.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Dep<T>> {
        let value = self.values.get(&TypeId::of::<T>())?.clone();
        value.downcast::<T>().ok().map(Dep)
    }

    pub(crate) fn contains(&self, info: &DepInfo) -> bool {
        self.values.contains_key(&info.type_id)
    }
}

impl fmt::Debug for Deps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deps")
            .field("count", &self.values.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provided_values_resolve_by_type() {
        let mut deps = Deps::default();
        deps.insert(Arc::new(7_u32));
        assert_eq!(*deps.get::<u32>().unwrap(), 7);
        assert!(deps.get::<u64>().is_none());
        assert!(deps.contains(&DepInfo::of::<u32>()));
        assert!(!deps.contains(&DepInfo::of::<String>()));
    }
}
