//! [`TaskShared`]: values the functions of one task share — a source and the operators and
//! sink chained into it run in one task, one subtask at a time, and may hand each other what
//! no record carries (the Kafka source's consumer, whose group metadata the Kafka sink's
//! transaction needs to commit the source's offsets).
//!
//! The same map, one per operator, is what that operator's parallel subtasks share
//! ([`RuntimeContext::subtasks_shared`](crate::context::RuntimeContext::subtasks_shared)).
//!
//! One value per type; connectors define a private type for what they share, so values of
//! different connectors never meet.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

type Values = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

/// Values shared by the functions of one task (see the [module docs](self)). Cloning gives
/// another handle on the same values.
#[derive(Clone, Default)]
pub struct TaskShared(Arc<Mutex<Values>>);

impl std::fmt::Debug for TaskShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskShared")
            .field("values", &self.0.lock().len())
            .finish()
    }
}

impl TaskShared {
    /// The value of type `V`, if a function of this task put one.
    pub fn get<V: Any + Send + Sync>(&self) -> Option<Arc<V>> {
        let v = self.0.lock().get(&TypeId::of::<V>())?.clone();
        v.downcast().ok()
    }

    /// The value of type `V`, put by `make` if there is none yet: whichever function opens
    /// first creates it, the other finds it.
    pub fn get_or_insert_with<V: Any + Send + Sync>(&self, make: impl FnOnce() -> V) -> Arc<V> {
        let mut values = self.0.lock();
        let v = values
            .entry(TypeId::of::<V>())
            .or_insert_with(|| Arc::new(make()))
            .clone();
        drop(values);
        v.downcast().expect("keyed by its own type")
    }

    /// Same values: two handles of one task.
    pub fn same(&self, other: &TaskShared) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Link(std::sync::atomic::AtomicU32);

    #[test]
    fn one_value_per_type_seen_by_every_handle() {
        let a = TaskShared::default();
        let b = a.clone();
        assert!(a.get::<Link>().is_none());
        let first = b.get_or_insert_with(Link::default);
        first.0.store(7, std::sync::atomic::Ordering::Relaxed);
        let again = a.get_or_insert_with(|| Link(std::sync::atomic::AtomicU32::new(1)));
        assert_eq!(again.0.load(std::sync::atomic::Ordering::Relaxed), 7);
        assert!(a.get::<Link>().is_some());
        assert!(a.get::<String>().is_none());
        assert!(a.same(&b));
        assert!(!a.same(&TaskShared::default()));
    }
}
