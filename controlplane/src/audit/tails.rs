//! Live tails (`StreamEvents`) held open per platform key: at most [`MAX_PER_KEY`] at once, so
//! one key cannot pin an unbounded number of streams and tasks (DESIGN §24). A [`Tail`] holds
//! its place until it is dropped, when its stream ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Live tails one platform key may hold open at once.
pub const MAX_PER_KEY: usize = 8;

/// How many tails each key holds open.
#[derive(Default)]
pub struct Tails {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open tail's place, given back when dropped.
pub struct Tail {
    open: Arc<Mutex<HashMap<String, usize>>>,
    key: String,
}

impl Tails {
    /// A place for one more tail of `key`, or `None` when it holds [`MAX_PER_KEY`] already.
    pub fn open(&self, key: &str) -> Option<Tail> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let held = open.entry(key.to_string()).or_default();
        if *held >= MAX_PER_KEY {
            return None;
        }
        *held += 1;
        Some(Tail {
            open: self.open.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = open.get_mut(&self.key) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_share_of_tails_until_one_ends() {
        let tails = Tails::default();
        let mut held: Vec<Tail> = (0..MAX_PER_KEY)
            .map(|_| tails.open("k1").unwrap())
            .collect();
        assert!(tails.open("k1").is_none());
        assert!(tails.open("k2").is_some(), "another key");
        held.pop();
        assert!(tails.open("k1").is_some(), "a place came back");
        drop(held);
        assert!(tails.open.lock().unwrap().get("k1").is_none());
    }
}
