//! Server-side partition assignors of the consumer group protocol (KIP-848): `uniform` and
//! `range`, as Kafka's `group.consumer.assignors` names them. Pure functions from the members'
//! subscriptions and current target assignments, and the subscribed topics' partition counts,
//! to the next target assignment.
//!
//! What each guarantees (Kafka's):
//! - **uniform**: every partition of a subscribed topic goes to exactly one of its subscribers;
//!   balanced, so that no partition could move to another of its topic's subscribers holding
//!   two or more fewer partitions (with identical subscriptions: every member holds ⌊P/n⌋ or
//!   ⌈P/n⌉); sticky, so that a member keeps what it held unless balance needs it moved (a
//!   member joining takes only its share from the others).
//! - **range**: for each topic, its subscribers (static members first by instance id, then
//!   the others by member id) take contiguous ranges of its partitions, the first `P mod n`
//!   one more; members subscribed to the same topics get the same partition numbers of each
//!   (co-partitioning, for joins). Not sticky: the current assignment plays no part.
//!
//! Topics are any ordered key (topic ids on the wire).

use std::collections::{BTreeMap, BTreeSet};

/// Which assignor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerAssignor {
    Uniform,
    Range,
}

impl ServerAssignor {
    /// By the name clients send (`group.remote.assignor`) and `group.consumer.assignors` lists.
    pub fn from_name(name: &str) -> Option<ServerAssignor> {
        match name {
            "uniform" => Some(ServerAssignor::Uniform),
            "range" => Some(ServerAssignor::Range),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ServerAssignor::Uniform => "uniform",
            ServerAssignor::Range => "range",
        }
    }
}

/// A member's partitions: topic -> partition numbers.
pub type Partitions<T> = BTreeMap<T, BTreeSet<i32>>;

/// What the assignor knows of a member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSpec<T: Ord> {
    /// The topics it subscribes to (those that exist).
    pub subscribed: BTreeSet<T>,
    /// Its current target assignment (what stickiness keeps).
    pub current: Partitions<T>,
    /// Its `group.instance.id`: range orders static members first, by instance id.
    pub instance_id: Option<String>,
}

/// The next target assignment of every member (members with nothing get an empty map).
pub fn assign<T: Ord + Clone>(
    assignor: ServerAssignor,
    members: &BTreeMap<String, MemberSpec<T>>,
    partition_counts: &BTreeMap<T, i32>,
) -> BTreeMap<String, Partitions<T>> {
    match assignor {
        ServerAssignor::Uniform => uniform(members, partition_counts),
        ServerAssignor::Range => range(members, partition_counts),
    }
}

/// Subscribers of each existing topic, in member id order.
fn subscribers<'a, T: Ord + Clone>(
    members: &'a BTreeMap<String, MemberSpec<T>>,
    partition_counts: &BTreeMap<T, i32>,
) -> BTreeMap<T, Vec<&'a str>> {
    let mut out: BTreeMap<T, Vec<&str>> = BTreeMap::new();
    for (id, m) in members {
        for t in &m.subscribed {
            if partition_counts.get(t).is_some_and(|n| *n > 0) {
                out.entry(t.clone()).or_default().push(id.as_str());
            }
        }
    }
    out
}

fn range<T: Ord + Clone>(
    members: &BTreeMap<String, MemberSpec<T>>,
    partition_counts: &BTreeMap<T, i32>,
) -> BTreeMap<String, Partitions<T>> {
    let mut out: BTreeMap<String, Partitions<T>> = members
        .keys()
        .map(|id| (id.clone(), Partitions::new()))
        .collect();
    // Static members first, by instance id, then the others by member id (Kafka's order).
    let rank = |id: &str| {
        (
            members[id].instance_id.is_none(),
            members[id].instance_id.clone(),
            id.to_string(),
        )
    };
    for (topic, mut subs) in subscribers(members, partition_counts) {
        subs.sort_by_key(|id| rank(id));
        let n = partition_counts[&topic];
        let k = subs.len() as i32;
        let (each, extra) = (n / k, n % k);
        let mut next = 0;
        for (i, id) in subs.iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0 {
                let parts = out.entry(id.to_string()).or_default().entry(topic.clone());
                parts.or_default().extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

fn uniform<T: Ord + Clone>(
    members: &BTreeMap<String, MemberSpec<T>>,
    partition_counts: &BTreeMap<T, i32>,
) -> BTreeMap<String, Partitions<T>> {
    let subs = subscribers(members, partition_counts);
    let total: usize = subs.keys().map(|t| partition_counts[t] as usize).sum();
    let homogeneous = {
        let mut sets = members.values().map(|m| {
            m.subscribed
                .iter()
                .filter(|t| subs.contains_key(*t))
                .collect::<Vec<_>>()
        });
        let first = sets.next();
        sets.all(|s| Some(&s) == first.as_ref())
    };
    // Quotas with identical subscriptions: ⌈P/n⌉ for as many members as the remainder
    // (those holding the most keep the extra one), ⌊P/n⌋ for the others. With different
    // subscriptions every member may hold what it holds; the moves below balance them.
    let quotas: BTreeMap<&str, usize> = if homogeneous && !members.is_empty() {
        let n = members.len();
        let (floor, mut extra) = (total / n, total % n);
        let mut by_held: Vec<(&str, usize)> = members
            .iter()
            .map(|(id, m)| (id.as_str(), held(m, partition_counts)))
            .collect();
        by_held.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        by_held
            .into_iter()
            .map(|(id, _)| {
                let q = floor + usize::from(extra > 0);
                extra = extra.saturating_sub(1);
                (id, q)
            })
            .collect()
    } else {
        members.keys().map(|id| (id.as_str(), usize::MAX)).collect()
    };
    // 1. Stickiness: each member keeps what it held that still exists and that it still
    // subscribes to, up to its quota, never a partition another member kept first.
    let mut owner: BTreeMap<(T, i32), &str> = BTreeMap::new();
    let quota = |id: &str| quotas.get(id).copied().unwrap_or(usize::MAX);
    let mut holdings = Holdings {
        out: BTreeMap::new(),
        count: BTreeMap::new(),
    };
    for (id, m) in members {
        let id = id.as_str();
        for (t, parts) in &m.current {
            let Some(n) = partition_counts.get(t) else {
                continue;
            };
            if !m.subscribed.contains(t) {
                continue;
            }
            for p in parts.iter().filter(|p| (0..*n).contains(*p)) {
                if holdings.count(id) >= quota(id) || owner.contains_key(&(t.clone(), *p)) {
                    continue;
                }
                owner.insert((t.clone(), *p), id);
                holdings.give(id, t, *p);
            }
        }
    }
    // 2. Every partition left goes to the subscriber of its topic holding the fewest (below
    // its quota), topics with the fewest subscribers first.
    let mut topics: Vec<(&T, &Vec<&str>)> = subs.iter().collect();
    topics.sort_by_key(|(_, s)| s.len());
    for (t, candidates) in &topics {
        for p in 0..partition_counts[*t] {
            if owner.contains_key(&((*t).clone(), p)) {
                continue;
            }
            let Some(id) = candidates
                .iter()
                .filter(|id| holdings.count(id) < quota(id))
                .min_by_key(|id| (holdings.count(id), **id))
                .copied()
            else {
                continue;
            };
            owner.insert(((*t).clone(), p), id);
            holdings.give(id, t, p);
        }
    }
    // 3. Balance: while a partition could move to another subscriber of its topic holding
    // two or more fewer, move it (from the member holding the most).
    loop {
        let mut moved = false;
        let mut givers: Vec<&str> = members.keys().map(String::as_str).collect();
        givers.sort_by(|a, b| holdings.count(b).cmp(&holdings.count(a)).then(a.cmp(b)));
        let fewest = givers.last().map_or(0, |id| holdings.count(id));
        'givers: for giver in givers {
            if holdings.count(giver) < fewest + 2 {
                break; // sorted: nobody after holds more
            }
            let mine: Vec<(T, i32)> = holdings
                .out
                .get(giver)
                .into_iter()
                .flatten()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
                .collect();
            for (t, p) in mine.into_iter().rev() {
                let Some(taker) = subs
                    .get(&t)
                    .into_iter()
                    .flatten()
                    .filter(|id| holdings.count(id) + 2 <= holdings.count(giver))
                    .min_by_key(|id| (holdings.count(id), **id))
                    .copied()
                else {
                    continue;
                };
                holdings.take(giver, &t, p);
                holdings.give(taker, &t, p);
                moved = true;
                break 'givers;
            }
        }
        if !moved {
            break;
        }
    }
    members
        .keys()
        .map(|id| {
            (
                id.clone(),
                holdings.out.remove(id.as_str()).unwrap_or_default(),
            )
        })
        .collect()
}

/// What each member holds while the uniform assignor works, and how many.
struct Holdings<'a, T: Ord> {
    out: BTreeMap<&'a str, Partitions<T>>,
    count: BTreeMap<&'a str, usize>,
}

impl<'a, T: Ord + Clone> Holdings<'a, T> {
    fn count(&self, id: &str) -> usize {
        self.count.get(id).copied().unwrap_or(0)
    }

    fn give(&mut self, id: &'a str, t: &T, p: i32) {
        if self
            .out
            .entry(id)
            .or_default()
            .entry(t.clone())
            .or_default()
            .insert(p)
        {
            *self.count.entry(id).or_default() += 1;
        }
    }

    fn take(&mut self, id: &str, t: &T, p: i32) {
        let Some(held) = self.out.get_mut(id) else {
            return;
        };
        if held.get_mut(t).is_some_and(|ps| ps.remove(&p)) {
            if held.get(t).is_some_and(BTreeSet::is_empty) {
                held.remove(t);
            }
            if let Some(c) = self.count.get_mut(id) {
                *c -= 1;
            }
        }
    }
}

/// How many of a member's current partitions still exist in a topic it subscribes to.
fn held<T: Ord>(m: &MemberSpec<T>, partition_counts: &BTreeMap<T, i32>) -> usize {
    m.current
        .iter()
        .filter(|(t, _)| m.subscribed.contains(*t))
        .map(|(t, ps)| {
            let n = partition_counts.get(t).copied().unwrap_or(0);
            ps.iter().filter(|p| (0..n).contains(*p)).count()
        })
        .sum()
}

#[cfg(test)]
mod tests;
