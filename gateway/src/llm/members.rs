//! The order a request tries a target's members in: the pool's strategy first, then members
//! that are cooling down after repeated failures move to the back (still tried last).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use portcullis_shared::api::pools::PoolStrategy;
use rand::Rng;

use crate::llm::table::{ModelEntry, PoolEntry, Target};

pub fn order(target: &Target) -> Vec<Arc<ModelEntry>> {
    let mut list = match target {
        Target::Model(m) => return vec![m.clone()],
        Target::Pool(p) => by_strategy(p),
    };
    // Stable: healthy members keep their order ahead of cooling ones.
    list.sort_by_key(|m| m.health.is_cooling());
    list
}

fn by_strategy(pool: &PoolEntry) -> Vec<Arc<ModelEntry>> {
    let n = pool.members.len();
    if n == 0 {
        return Vec::new();
    }
    match pool.strategy {
        PoolStrategy::RoundRobin => {
            let start = pool.cursor.fetch_add(1, Ordering::Relaxed) % n;
            (0..n)
                .map(|i| pool.members[(start + i) % n].model.clone())
                .collect()
        }
        PoolStrategy::Priority => {
            let mut indexed: Vec<(usize, u32)> = pool
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (i, m.priority))
                .collect();
            indexed.sort_by_key(|(i, p)| (*p, *i));
            indexed
                .into_iter()
                .map(|(i, _)| pool.members[i].model.clone())
                .collect()
        }
        PoolStrategy::Weighted => {
            // Weighted sampling without replacement: each draw picks by remaining weight.
            let mut rng = rand::thread_rng();
            let mut left: Vec<(usize, u64)> = pool
                .members
                .iter()
                .enumerate()
                .map(|(i, m)| (i, u64::from(m.weight.max(1))))
                .collect();
            let mut out = Vec::with_capacity(n);
            while !left.is_empty() {
                let total: u64 = left.iter().map(|(_, w)| w).sum();
                let mut pick = rng.gen_range(0..total);
                let mut chosen = 0;
                for (j, (_, w)) in left.iter().enumerate() {
                    if pick < *w {
                        chosen = j;
                        break;
                    }
                    pick -= w;
                }
                let (i, _) = left.remove(chosen);
                out.push(pool.members[i].model.clone());
            }
            out
        }
    }
}
