//! A run's logs read back: each acquisition as a [`Hold`], each worker's settings and life, each
//! fault the test injected, together in one [`History`].

use std::collections::HashMap;

use super::log::decode_key;
use super::resource::ResourceRecords;

/// One update of the resource (read, compute, write back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// When it was invoked.
    pub inv: u64,
    /// Made after `is_held()` said true (a careful holder), not blindly after a loss.
    pub careful: bool,
    /// When its read returned, and the counters it read (one per key written).
    pub read: Option<(u64, Vec<i64>)>,
    /// When it returned, and whether the resource accepted it; `None` if it never returned.
    pub outcome: Option<(u64, Option<bool>)>,
}

/// One acquisition and what became of it.
#[derive(Clone, Debug, Default)]
pub struct Hold {
    /// `worker.task.n`.
    pub id: String,
    /// The worker's index.
    pub worker: usize,
    /// The lock key (the first one named, for a multi-key hold).
    pub key: String,
    /// Every key of the hold, as named: one, or the keys of a `lock_all`.
    pub keys: Vec<String>,
    /// The read side of a read-write lock (`read_lock`); otherwise the hold excludes
    /// everyone on each of its keys (`lock`, `write_lock`, `lock_all`).
    pub shared: bool,
    /// An unfenced lock (`ok` with fence `-`): it excludes like any lock, but has no fence
    /// for the fence rules to judge (its `ok` and `key_fences` carry 0).
    pub unfenced: bool,
    /// The permits a semaphore hold asked for (`inv` mode `pN`); 1 when not said.
    pub permits: u32,
    /// When acquire was invoked.
    pub inv: u64,
    /// When acquire returned a guard, and its fence (of the first key, for a multi-key hold).
    pub ok: Option<(u64, u64)>,
    /// The fence of each of `keys`, in their order, once acquired.
    pub key_fences: Vec<u64>,
    /// When acquire failed, and the error's code.
    pub err: Option<(u64, String)>,
    /// Times at which the holder provably believed it held the lock (`is_held()` true).
    pub first_true: Option<u64>,
    /// The last such time.
    pub last_true: Option<u64>,
    /// The first time `is_held()` was seen false.
    pub first_false: Option<u64>,
    /// `is_held()` was seen true again after false.
    pub resurrected: bool,
    /// When the holder noticed the loss.
    pub lost: Option<u64>,
    /// When release was invoked, and whether `is_held()` was true just before.
    pub rel: Option<(u64, bool)>,
    /// When release returned, and how (`rok`, `rlost`, `runav`, `rerr`).
    pub rel_done: Option<(u64, String)>,
    /// Writes to the fenced resource.
    pub writes: Vec<Write>,
    /// Runtime blocks inside this hold: (start, end).
    pub blocks: Vec<(u64, Option<u64>)>,
}

impl Hold {
    fn saw_true(&mut self, t: u64) {
        if self.first_false.is_some() && self.first_false < Some(t) {
            self.resurrected = true;
        }
        self.first_true = Some(self.first_true.map_or(t, |f| f.min(t)));
        self.last_true = Some(self.last_true.map_or(t, |l| l.max(t)));
    }

    /// The fence, if acquired.
    pub fn fence(&self) -> Option<u64> {
        self.ok.map(|(_, f)| f)
    }

    /// The fence of `key`, if acquired and one of the hold's keys.
    pub fn fence_of(&self, key: &str) -> Option<u64> {
        self.ok?;
        let i = self.keys.iter().position(|k| k == key)?;
        self.key_fences.get(i).copied()
    }

    /// When the acquire ended: granted, failed, or never (`None`).
    pub fn answered(&self) -> Option<u64> {
        self.ok
            .map(|(t, _)| t)
            .or(self.err.as_ref().map(|(t, _)| *t))
    }
}

/// A worker's settings and life, from its log.
#[derive(Clone, Debug, Default)]
pub struct WorkerLife {
    /// The worker's index.
    pub id: usize,
    /// When it started, and its lease, wait and op timeout in ms.
    pub start: Option<(u64, u64, u64, u64)>,
    /// Its tasks, when its log says (logs from before they did: `None`).
    pub tasks: Option<usize>,
    /// Whether it took its single-key locks with `fair(true)`.
    pub fair: bool,
    /// When it finished by itself.
    pub end: Option<u64>,
    /// The permits of the semaphores it took (`sem`); 0 when it took locks.
    pub permits: u32,
    /// It campaigned for leader elections (`ldr`), not locks.
    pub leader: bool,
    /// Its resource (`res`): the store (`redis`, `postgres`), the fencing (`claim`,
    /// `write-only`) and the compute time of each update in ms; `None` in logs from before.
    pub resource: Option<(String, String, u64)>,
    /// How long one update may take besides its compute time, in ms (`res`); `None` in logs
    /// from before it was logged (the bound was [`DEFAULT_UPDATE_LIMIT`](super::DEFAULT_UPDATE_LIMIT) then).
    pub update_limit: Option<u64>,
}

/// A fault the test injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What (`pause`, `kill`, `restart`, `stall`, ...).
    pub kind: String,
    /// On what (`w3`, `redis`, ...).
    pub target: String,
    /// When it started.
    pub start: u64,
    /// When it ended, if it did.
    pub end: Option<u64>,
}

/// How long before B an acquire A must have been invoked for the FIFO check of fair locks to
/// expect A granted first: 10 ms, for A's first attempt to reach the store and queue it (a
/// round trip on loopback, and a process that was not scheduled at once: with several
/// multi-process tests on two cores, 5 ms was exceeded now and then).
pub const FIFO_SLACK_NS: u64 = 10_000_000;

/// Everything the workers and the test logged in one run.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Every acquisition, in log order per worker.
    pub holds: Vec<Hold>,
    /// Every worker.
    pub workers: Vec<WorkerLife>,
    /// Every fault.
    pub faults: Vec<Fault>,
    /// Lines that did not parse (a worker killed mid-write leaves none, but who knows).
    pub garbage: usize,
    /// Whether fair locks must grant in strict arrival order across the tasks of all
    /// processes (the FIFO rule, [`Rule::Fifo`](super::Rule::Fifo)); set by
    /// [`Run::expect_fifo`](super::Run::expect_fifo). Without it the order is measured (the
    /// report's `fifo_*` figures) but not judged: `fair(true)` has promised turns by process,
    /// not by task.
    pub expect_fifo: bool,
    /// How long before B an acquire A must have been invoked for the FIFO rule to expect A
    /// first; [`FIFO_SLACK_NS`] unless the run says otherwise.
    pub fifo_slack_ns: u64,
    /// Whether a reader's fence must *equal* the newest writer's before it where nothing else
    /// can have drawn a fence in between (see
    /// `check_reader_fences`): engines whose readers read the
    /// last writer's record (ZooKeeper, etcd). Off for Redis, whose readers get the fence
    /// counter lifted to the server clock (µs): only the bounds hold there.
    pub exact_reader_fences: bool,
    /// What the resource's store holds after the run
    /// ([`Run::full_history`](super::Run::full_history) reads it), or why it could not be read; `None` when nobody read it (a history parsed
    /// from logs alone): the lost-update rule is then not judged.
    pub resource: Option<Result<ResourceRecords, String>>,
}

impl History {
    /// Parses worker logs (`(worker index, text)`) and the fault log.
    pub fn parse(logs: &[(usize, String)], faults: &str) -> History {
        let mut history = History {
            fifo_slack_ns: FIFO_SLACK_NS,
            ..History::default()
        };
        for (worker, text) in logs {
            let mut life = WorkerLife {
                id: *worker,
                ..WorkerLife::default()
            };
            let mut index: HashMap<String, usize> = HashMap::new();
            for line in text.lines() {
                let fields: Vec<&str> = line.split(' ').collect();
                let (Some(t), Some(&event)) = (
                    fields.first().and_then(|t| t.parse::<u64>().ok()),
                    fields.get(1),
                ) else {
                    history.garbage += 1;
                    continue;
                };
                let num = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
                match event {
                    "start" => {
                        life.start = Some((
                            t,
                            num(4).unwrap_or(0),
                            num(5).unwrap_or(0),
                            num(6).unwrap_or(0),
                        ));
                        life.tasks = num(7).map(|n| n as usize);
                        life.fair = fields.get(8) == Some(&"1");
                    }
                    "end" => life.end = Some(t),
                    "sem" => life.permits = num(2).unwrap_or(0) as u32,
                    "ldr" => life.leader = true,
                    "res" => match (fields.get(2), fields.get(3), num(4)) {
                        (Some(store), Some(fencing), Some(compute)) => {
                            life.resource =
                                Some(((*store).to_owned(), (*fencing).to_owned(), compute));
                            life.update_limit = num(5);
                        }
                        _ => history.garbage += 1,
                    },
                    _ => {
                        let Some(&id) = fields.get(2) else {
                            history.garbage += 1;
                            continue;
                        };
                        if event == "inv" {
                            let keys: Vec<String> = fields
                                .get(3)
                                .unwrap_or(&"")
                                .split(',')
                                .map(decode_key)
                                .collect();
                            let mut permits = 1;
                            let shared = match fields.get(4) {
                                None | Some(&"x") | Some(&"w") => false,
                                Some(&"r") => true,
                                Some(mode) if mode.starts_with('p') => {
                                    match mode[1..].parse::<u32>() {
                                        Ok(n) if n > 0 => permits = n,
                                        _ => history.garbage += 1,
                                    }
                                    false
                                }
                                Some(_) => {
                                    history.garbage += 1;
                                    false
                                }
                            };
                            index.insert(id.to_owned(), history.holds.len());
                            history.holds.push(Hold {
                                id: id.to_owned(),
                                worker: *worker,
                                key: keys[0].clone(),
                                keys,
                                shared,
                                permits,
                                inv: t,
                                ..Hold::default()
                            });
                            continue;
                        }
                        let Some(&i) = index.get(id) else {
                            history.garbage += 1;
                            continue;
                        };
                        let hold = &mut history.holds[i];
                        let flag = fields.get(3) == Some(&"1");
                        match event {
                            "ok" if fields.get(3) == Some(&"-") => {
                                hold.ok = Some((t, 0));
                                hold.unfenced = true;
                                hold.key_fences = vec![0; hold.keys.len()];
                            }
                            "ok" => {
                                hold.ok = num(3).map(|f| (t, f));
                                hold.key_fences = match fields.get(5) {
                                    Some(list) => {
                                        list.split(',').filter_map(|f| f.parse().ok()).collect()
                                    }
                                    None => hold.ok.map(|(_, f)| f).into_iter().collect(),
                                };
                                if hold.ok.is_some() && hold.key_fences.len() != hold.keys.len() {
                                    history.garbage += 1;
                                }
                            }
                            "aerr" => {
                                hold.err = Some((t, fields.get(3).unwrap_or(&"").to_string()))
                            }
                            "chk" if flag => hold.saw_true(t),
                            "chk" | "nh" => {
                                hold.first_false = Some(hold.first_false.map_or(t, |f| f.min(t)))
                            }
                            "h" => hold.saw_true(t),
                            "rz" => hold.resurrected = true,
                            "win" => hold.writes.push(Write {
                                inv: t,
                                careful: fields.get(4) == Some(&"1"),
                                read: None,
                                outcome: None,
                            }),
                            "rd" => {
                                let values: Option<Vec<i64>> = fields
                                    .get(3)
                                    .unwrap_or(&"")
                                    .split(',')
                                    .map(|v| v.parse().ok())
                                    .collect();
                                match (hold.writes.last_mut(), values) {
                                    (Some(w), Some(values)) => w.read = Some((t, values)),
                                    _ => history.garbage += 1,
                                }
                            }
                            "wok" | "werr" => {
                                if let Some(w) = hold.writes.last_mut() {
                                    let accepted = (event == "wok").then_some(flag);
                                    w.outcome = Some((t, accepted));
                                }
                            }
                            "lost" => hold.lost = Some(t),
                            "blk" => hold.blocks.push((t, None)),
                            "blkend" => {
                                if let Some(b) = hold.blocks.last_mut() {
                                    b.1 = Some(t);
                                }
                            }
                            "rel" => {
                                hold.rel = Some((t, flag));
                                if flag {
                                    hold.saw_true(t);
                                }
                            }
                            "rok" | "rlost" | "runav" | "rerr" => {
                                hold.rel_done = Some((t, event.to_owned()))
                            }
                            _ => history.garbage += 1,
                        }
                    }
                }
            }
            history.workers.push(life);
        }
        let mut open: Vec<Fault> = Vec::new();
        for line in faults.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(t), Some(&event), Some(&kind), Some(&target)) = (
                fields.first().and_then(|t| t.parse::<u64>().ok()),
                fields.get(1),
                fields.get(2),
                fields.get(3),
            ) else {
                history.garbage += 1;
                continue;
            };
            match event {
                "fault" => open.push(Fault {
                    kind: kind.to_owned(),
                    target: target.to_owned(),
                    start: t,
                    end: None,
                }),
                "heal" => {
                    if let Some(i) = open
                        .iter()
                        .position(|f| f.kind == kind && f.target == target && f.end.is_none())
                    {
                        open[i].end = Some(t);
                    }
                }
                _ => history.garbage += 1,
            }
        }
        history.faults = open;
        history
    }

    /// The holds of worker `w`.
    pub fn holds_of(&self, w: usize) -> impl Iterator<Item = &Hold> {
        self.holds.iter().filter(move |h| h.worker == w)
    }

    /// How many holds were granted (their acquire returned a guard).
    pub fn granted(&self) -> usize {
        self.holds.iter().filter(|h| h.ok.is_some()).count()
    }

    /// How many holds of worker `w` were granted.
    pub fn granted_to(&self, w: usize) -> usize {
        self.holds_of(w).filter(|h| h.ok.is_some()).count()
    }

    /// The hold of the given id.
    pub fn hold(&self, id: &str) -> Option<&Hold> {
        self.holds.iter().find(|h| h.id == id)
    }

    /// The first hold (of any worker) that acquired `key` (as one of its keys) at or after
    /// `t`.
    pub fn first_acquired_after(&self, key: &str, t: u64) -> Option<&Hold> {
        self.holds
            .iter()
            .filter(|h| h.keys.iter().any(|k| k == key) && h.ok.is_some_and(|(ok, _)| ok >= t))
            .min_by_key(|h| h.ok.map(|(ok, _)| ok))
    }
}
