//! Slots reused from value to value, each value named by its slot and a stamp: what the
//! worker keeps per running attempt (the lock keeper's holds, the tracker's facts), at
//! no allocation and no hashing per attempt once the slots exist. A stamp is never
//! given twice, so a key kept past its value's removal names nothing, not the value
//! put in the same slot later; stamps also tell the order values came in.

/// One value's place in a [`Slab`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SlabKey {
    /// The slot.
    pub(crate) index: usize,
    /// When the value came in, among all the slab's values.
    pub(crate) stamp: u64,
}

/// The values, in reusable slots.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<(u64, Option<T>)>,
    free: Vec<usize>,
    next_stamp: u64,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            next_stamp: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Puts `value` in a free slot (a new one if none is free).
    pub(crate) fn insert(&mut self, value: T) -> SlabKey {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index] = (stamp, Some(value));
                index
            }
            None => {
                self.slots.push((stamp, Some(value)));
                self.slots.len() - 1
            }
        };
        SlabKey { index, stamp }
    }

    /// The value `key` names, if it is still there.
    pub(crate) fn get_mut(&mut self, key: SlabKey) -> Option<&mut T> {
        match self.slots.get_mut(key.index)? {
            (stamp, Some(value)) if *stamp == key.stamp => Some(value),
            _ => None,
        }
    }

    /// Whether the value `key` names is still there.
    pub(crate) fn contains(&self, key: SlabKey) -> bool {
        matches!(self.slots.get(key.index), Some((stamp, Some(_))) if *stamp == key.stamp)
    }

    /// Takes out the value `key` names, if it is still there; its slot is free again.
    pub(crate) fn remove(&mut self, key: SlabKey) -> Option<T> {
        let (stamp, value) = self.slots.get_mut(key.index)?;
        if *stamp != key.stamp || value.is_none() {
            return None;
        }
        self.free.push(key.index);
        value.take()
    }

    /// The values there now, with their keys.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (SlabKey, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(index, (stamp, value))| {
                let key = SlabKey {
                    index,
                    stamp: *stamp,
                };
                value.as_ref().map(|value| (key, value))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;

    #[test]
    fn a_key_names_its_value_only_until_it_is_removed() {
        let mut slab = Slab::default();
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_eq!(slab.remove(a), Some("a"));
        assert!(!slab.contains(a) && slab.contains(b));
        // The slot is reused under a new stamp: the old key names nothing.
        let c = slab.insert("c");
        assert_eq!(c.index, a.index);
        assert!(c.stamp > b.stamp);
        assert_eq!(slab.get_mut(a), None);
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get_mut(c), Some(&mut "c"));
        let left: Vec<_> = slab.iter().map(|(_, v)| *v).collect();
        assert_eq!(left, ["c", "b"]);
    }
}
