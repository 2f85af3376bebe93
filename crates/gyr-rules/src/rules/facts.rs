//! Working memory: the facts rules assert and retract (CLIPS's working memory), one per
//! program, and refraction, which keeps a fact rule from firing twice on the same facts.
//!
//! A fact is a name and a map of values. Memories are per program: a rule firing for program
//! P asserts into P's memory and its conditions read P's; there is no global memory, so that a
//! program that ends takes its facts with it and programs never see each other's conclusions
//! by accident (a hub-wide view can be added later as a separate memory).
//!
//! Every fact gets an id when asserted, never reused: retracting a fact and asserting it again
//! makes a new fact, on which rules may fire again. An activation is a fact rule together with
//! the ids of the facts its condition read; each fires at most once ([`Refraction`]).

use gyr_core::Value;
use std::collections::HashSet;

/// Most facts one program's memory holds; asserting past it is the rule's error.
pub const MAX_FACTS: usize = 10_000;
/// Most activations remembered per program: past it the oldest are forgotten (activations on
/// retracted facts go first, as they can never come back).
pub const MAX_ACTIVATIONS: usize = 100_000;

/// One fact of a program's working memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Its id, unique within the engine and never reused.
    pub id: u64,
    /// The program whose memory holds it.
    pub pid: u32,
    /// Its name, e.g. `diverged`.
    pub name: String,
    /// Its values, sorted by key.
    pub fields: Vec<(String, Value)>,
}

impl Fact {
    /// Whether the fact holds every `(key, value)` of `want`.
    pub(crate) fn matches(&self, want: &[(String, Value)]) -> bool {
        want.iter()
            .all(|(k, v)| self.fields.iter().any(|(fk, fv)| fk == k && fv == v))
    }
}

impl std::fmt::Display for Fact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{} {}", self.id, self.name)?;
        if !self.fields.is_empty() {
            f.write_str(" {")?;
            for (i, (k, v)) in self.fields.iter().enumerate() {
                write!(f, "{}{k}: {v}", if i == 0 { " " } else { ", " })?;
            }
            f.write_str(" }")?;
        }
        Ok(())
    }
}

/// The facts of one program, in the order they were asserted.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pub(crate) facts: Vec<Fact>,
    /// Changed since the fact rules last looked.
    pub(crate) changed: bool,
    pub(crate) refraction: Refraction,
}

/// What asserting did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asserted {
    New(u64),
    /// An identical fact was there already.
    Exists(u64),
}

impl Memory {
    /// Adds a fact unless an identical one exists; `next_id` is the engine's counter.
    pub(crate) fn assert(
        &mut self,
        pid: u32,
        name: &str,
        mut fields: Vec<(String, Value)>,
        next_id: &mut u64,
    ) -> Result<Asserted, String> {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(f) = self
            .facts
            .iter()
            .find(|f| f.name == name && f.fields == fields)
        {
            return Ok(Asserted::Exists(f.id));
        }
        if self.facts.len() >= MAX_FACTS {
            return Err(format!(
                "this program's working memory holds {MAX_FACTS} facts, the most it may: retract facts that are no longer true"
            ));
        }
        *next_id += 1;
        self.facts.push(Fact {
            id: *next_id,
            pid,
            name: name.to_owned(),
            fields,
        });
        self.changed = true;
        Ok(Asserted::New(*next_id))
    }

    /// Removes the facts named `name` (holding every value of `want`, if given); returns how
    /// many went.
    pub(crate) fn retract(&mut self, name: &str, want: Option<&[(String, Value)]>) -> usize {
        let before = self.facts.len();
        self.facts
            .retain(|f| !(f.name == name && want.is_none_or(|w| f.matches(w))));
        let gone = before - self.facts.len();
        if gone > 0 {
            self.changed = true;
            let live: HashSet<u64> = self.facts.iter().map(|f| f.id).collect();
            self.refraction.forget_dead(&live);
        }
        gone
    }

    /// The facts named `name` (holding every value of `want`), oldest first.
    pub(crate) fn named<'a>(
        &'a self,
        name: &'a str,
        want: Option<&'a [(String, Value)]>,
    ) -> impl Iterator<Item = &'a Fact> + 'a {
        self.facts
            .iter()
            .filter(move |f| f.name == name && want.is_none_or(|w| f.matches(w)))
    }
}

/// The activations that fired: (rule index, sorted ids of the facts its condition read).
#[derive(Debug, Default)]
pub(crate) struct Refraction {
    fired: HashSet<(usize, Vec<u64>)>,
    /// In firing order, for forgetting the oldest.
    order: std::collections::VecDeque<(usize, Vec<u64>)>,
}

impl Refraction {
    /// Whether the activation fired already.
    pub(crate) fn has(&self, rule: usize, ids: &[u64]) -> bool {
        // A HashSet of owned keys: look up without allocating through a borrowed tuple is not
        // possible, and activations are checked only when memory changed.
        self.fired.contains(&(rule, ids.to_vec()))
    }

    pub(crate) fn insert(&mut self, rule: usize, ids: Vec<u64>) {
        if self.fired.len() >= MAX_ACTIVATIONS
            && let Some(old) = self.order.pop_front()
        {
            self.fired.remove(&old);
        }
        if self.fired.insert((rule, ids.clone())) {
            self.order.push_back((rule, ids));
        }
    }

    /// Forgets activations that read a fact no longer in memory: they can never recur.
    fn forget_dead(&mut self, live: &HashSet<u64>) {
        self.fired
            .retain(|(_, ids)| ids.iter().all(|id| live.contains(id)));
        self.order
            .retain(|(_, ids)| ids.iter().all(|id| live.contains(id)));
    }

    /// Keeps the activations of rules still loaded, renumbered (`map[old] = Some(new)`).
    pub(crate) fn renumber(&mut self, map: &[Option<usize>]) {
        let keep = |a: &(usize, Vec<u64>)| {
            map.get(a.0)
                .copied()
                .flatten()
                .map(|new| (new, a.1.clone()))
        };
        self.fired = self.fired.iter().filter_map(keep).collect();
        self.order = self.order.iter().filter_map(keep).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: i64) -> Vec<(String, Value)> {
        vec![(k.to_owned(), Value::Int(v))]
    }

    #[test]
    fn an_identical_fact_is_not_asserted_twice() {
        let mut m = Memory::default();
        let mut id = 0;
        let a = m.assert(1, "diverged", kv("instance", 1), &mut id).unwrap();
        assert_eq!(a, Asserted::New(1));
        m.changed = false;
        assert_eq!(
            m.assert(1, "diverged", kv("instance", 1), &mut id).unwrap(),
            Asserted::Exists(1)
        );
        assert!(!m.changed);
        assert_eq!(
            m.assert(1, "diverged", kv("instance", 2), &mut id).unwrap(),
            Asserted::New(2)
        );
        assert_eq!(m.named("diverged", None).count(), 2);
        assert_eq!(m.named("diverged", Some(&kv("instance", 2))).count(), 1);
    }

    #[test]
    fn retracting_removes_matching_facts_and_a_new_assert_gets_a_new_id() {
        let mut m = Memory::default();
        let mut id = 0;
        m.assert(1, "d", kv("i", 1), &mut id).unwrap();
        m.assert(1, "d", kv("i", 2), &mut id).unwrap();
        m.refraction.insert(0, vec![1]);
        m.refraction.insert(0, vec![2]);
        assert_eq!(m.retract("d", Some(&kv("i", 1))), 1);
        assert!(!m.refraction.has(0, &[1]), "activations on a gone fact go");
        assert!(m.refraction.has(0, &[2]));
        assert_eq!(
            m.assert(1, "d", kv("i", 1), &mut id).unwrap(),
            Asserted::New(3)
        );
        assert_eq!(m.retract("d", None), 2);
        assert!(m.facts.is_empty());
    }

    #[test]
    fn memory_is_bounded() {
        let mut m = Memory::default();
        let mut id = 0;
        for i in 0..MAX_FACTS as i64 {
            m.assert(1, "f", kv("i", i), &mut id).unwrap();
        }
        let e = m.assert(1, "f", kv("i", -1), &mut id).unwrap_err();
        assert!(e.contains("retract"), "{e}");
    }
}
