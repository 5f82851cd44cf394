//! The `sticky` task assignor of streams groups, after Kafka's StickyTaskAssignor: active
//! tasks stay with their previous owner while it is under its share, then go to the least
//! loaded process (load = tasks per member of the process) and its least loaded member;
//! standby replicas of stateful tasks go to processes that do not hold the task yet,
//! previous owners first. Deterministic: ties break by process and member id.

use std::collections::{BTreeMap, BTreeSet};

use super::TaskSet;

/// What the assignor knows of a member.
#[derive(Clone, Debug)]
pub struct AssignMember {
    pub process_id: String,
    /// Its previous target assignment.
    pub previous: TaskSet,
}

type Task = (String, i32);

/// Members' task counts and their shares: the share is recomputed as members fill up, so
/// 10 tasks over 4 members end 3, 3, 2, 2 (Kafka's `maybeUpdateActiveTasksPerMember`).
struct Quota {
    remaining_tasks: usize,
    remaining_members: usize,
    per_member: usize,
}

impl Quota {
    fn new(tasks: usize, members: usize) -> Self {
        let mut q = Quota {
            remaining_tasks: tasks,
            remaining_members: members,
            per_member: 0,
        };
        q.recompute();
        q
    }

    fn recompute(&mut self) {
        self.per_member = if self.remaining_members == 0 {
            0
        } else {
            self.remaining_tasks.div_ceil(self.remaining_members)
        };
    }

    /// After a member's count went to `count`.
    fn added(&mut self, count: usize) {
        if count == self.per_member && self.remaining_members > 0 {
            self.remaining_members -= 1;
            self.remaining_tasks = self.remaining_tasks.saturating_sub(count);
            self.recompute();
        }
    }
}

/// The target assignment of every member. `tasks`: subtopology -> number of tasks;
/// `stateful`: subtopologies with a changelog (only those get standbys).
pub fn assign(
    members: &BTreeMap<String, AssignMember>,
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    num_standby: usize,
) -> BTreeMap<String, TaskSet> {
    let ids: Vec<&String> = members.keys().collect();
    if ids.is_empty() {
        return BTreeMap::new();
    }
    let mut sets: Vec<TaskSet> = vec![TaskSet::default(); ids.len()];
    // Processes (by id, in order) and their members; each member's process.
    let mut by_process: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        by_process
            .entry(members[*id].process_id.as_str())
            .or_default()
            .push(i);
    }
    let processes: Vec<Vec<usize>> = by_process.into_values().collect();
    let mut process_of = vec![0usize; ids.len()];
    for (p, ms) in processes.iter().enumerate() {
        for m in ms {
            process_of[*m] = p;
        }
    }
    let mut count = vec![0usize; ids.len()];
    let mut all: Vec<Task> = tasks
        .iter()
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    all.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    let mut previous_active: BTreeMap<Task, usize> = BTreeMap::new();
    let mut previous_standby: BTreeMap<Task, Vec<usize>> = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        let previous = &members[*id].previous;
        for (s, ps) in &previous.active {
            for p in ps {
                previous_active.insert((s.clone(), *p), i);
            }
        }
        for (s, ps) in &previous.standby {
            for p in ps {
                previous_standby.entry((s.clone(), *p)).or_default().push(i);
            }
        }
    }
    // Which processes hold a task (active or standby), so no process gets it twice.
    let mut holders: BTreeMap<Task, BTreeSet<usize>> = BTreeMap::new();
    let mut give = |m: usize,
                    task: &Task,
                    active: bool,
                    count: &mut Vec<usize>,
                    holders: &mut BTreeMap<Task, BTreeSet<usize>>| {
        let set = &mut sets[m];
        let tasks = if active {
            &mut set.active
        } else {
            &mut set.standby
        };
        tasks.entry(task.0.clone()).or_default().insert(task.1);
        count[m] += 1;
        holders
            .entry(task.clone())
            .or_default()
            .insert(process_of[m]);
    };
    let least_loaded_process = |count: &[usize], skip: &dyn Fn(usize) -> bool| -> Option<usize> {
        // Load = tasks per member; compared as fractions (a/b < c/d  <=>  a*d < c*b).
        let (_, members) = processes
            .iter()
            .enumerate()
            .filter(|(p, _)| !skip(*p))
            .min_by(|(pa, a), (pb, b)| {
                let ta: usize = a.iter().map(|m| count[*m]).sum();
                let tb: usize = b.iter().map(|m| count[*m]).sum();
                (ta * b.len()).cmp(&(tb * a.len())).then(pa.cmp(pb))
            })?;
        members.iter().copied().min_by_key(|m| (count[*m], *m))
    };
    let mut quota = Quota::new(all.len(), ids.len());
    // 1. Active tasks stay with their previous owner while it is under its share.
    let mut left = Vec::new();
    for task in &all {
        match previous_active.get(task) {
            Some(&m) if count[m] < quota.per_member => {
                give(m, task, true, &mut count, &mut holders);
                quota.added(count[m]);
            }
            _ => left.push(task.clone()),
        }
    }
    // 2. Then with a previous standby owner under its share (the least loaded one).
    let mut rest = Vec::new();
    for task in left {
        let candidate = previous_standby.get(&task).and_then(|owners| {
            owners
                .iter()
                .copied()
                .filter(|m| count[*m] < quota.per_member)
                .min_by_key(|m| (count[*m], *m))
        });
        match candidate {
            Some(m) => {
                give(m, &task, true, &mut count, &mut holders);
                quota.added(count[m]);
            }
            None => rest.push(task),
        }
    }
    // 3. The rest to the least loaded process, its least loaded member.
    rest.sort();
    for task in rest {
        let Some(m) = least_loaded_process(&count, &|_| false) else {
            break;
        };
        give(m, &task, true, &mut count, &mut holders);
        quota.added(count[m]);
    }
    if num_standby > 0 {
        // Standbys of stateful tasks: never on a process that holds the task.
        let standby_tasks: Vec<Task> = all
            .iter()
            .filter(|(s, _)| stateful.contains(s))
            .cloned()
            .collect();
        let per_member = (all.len() + standby_tasks.len() * num_standby).div_ceil(ids.len());
        for task in standby_tasks.iter().rev() {
            for _ in 0..num_standby {
                let held = holders.get(task).cloned().unwrap_or_default();
                let free = |m: usize| !held.contains(&process_of[m]) && count[m] < per_member;
                let chosen = previous_active
                    .get(task)
                    .copied()
                    .filter(|m| free(*m))
                    .or_else(|| {
                        previous_standby.get(task).and_then(|owners| {
                            owners
                                .iter()
                                .copied()
                                .filter(|m| free(*m))
                                .min_by_key(|m| (count[*m], *m))
                        })
                    })
                    .or_else(|| least_loaded_process(&count, &|p| held.contains(&p)));
                match chosen {
                    Some(m) => give(m, task, false, &mut count, &mut holders),
                    None => break,
                }
            }
        }
    }
    ids.into_iter().cloned().zip(sets).collect()
}
