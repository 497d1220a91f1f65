//! What guards look for, compiled once per scope into a few multi-pattern automata
//! (`regex-automata`'s meta engine: linear time, no backtracking): one for the `block` guards'
//! patterns and one for the `redact` guards', each with the entropy candidate apart. Every
//! guard in scope adds its patterns — a `regex` guard its own, `keywords` escaped literals,
//! `pii` and `secrets` the shipped detectors below — each tagged with its guard, label and an
//! optional check the candidate must also pass (Luhn for card numbers, the IBAN checksum, SSN
//! ranges, entropy). A block match anywhere wins over any redaction.

mod checks;
pub mod config;
pub mod schema;
#[cfg(test)]
mod tests;

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

use checks::{passes, Check};

/// What a guard does with a match.
pub use crate::api::guards::GuardAction as Action;

/// The personal data a `pii` guard finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pii {
    Email,
    Phone,
    CardNumber,
    Iban,
    UsSsn,
}

impl Pii {
    pub const ALL: [Pii; 5] = [
        Pii::Email,
        Pii::Phone,
        Pii::CardNumber,
        Pii::Iban,
        Pii::UsSsn,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Pii::Email => "email",
            Pii::Phone => "phone",
            Pii::CardNumber => "card_number",
            Pii::Iban => "iban",
            Pii::UsSsn => "us_ssn",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// What one guard looks for.
#[derive(Debug, Clone)]
pub enum Finds {
    /// Regular expressions, each of bounded length.
    Patterns(Vec<String>),
    Keywords {
        words: Vec<String>,
        case_sensitive: bool,
    },
    /// The listed kinds of personal data (all when empty).
    Pii(Vec<Pii>),
    /// Well-known credential formats and high-entropy tokens.
    Secrets,
}

impl Finds {
    /// The guard kind that finds this.
    pub fn kind(&self) -> crate::api::guards::GuardKind {
        use crate::api::guards::GuardKind;
        match self {
            Finds::Patterns(_) => GuardKind::Regex,
            Finds::Keywords { .. } => GuardKind::Keywords,
            Finds::Pii(_) => GuardKind::Pii,
            Finds::Secrets => GuardKind::Secrets,
        }
    }
}

impl GuardSpec {
    /// Whether the guard acts on a field of this class whole (a tool's
    /// `field_classifications`): a guard covers its own name; a `pii` guard `pii` and the
    /// types it finds; a `secrets` guard `secret`.
    pub fn covers(&self, class: &str) -> bool {
        if self.name == class {
            return true;
        }
        match &self.finds {
            Finds::Pii(types) => {
                class == "pii"
                    || Pii::parse(class).is_some_and(|t| types.is_empty() || types.contains(&t))
            }
            Finds::Secrets => class == "secret",
            Finds::Patterns(_) | Finds::Keywords { .. } => false,
        }
    }
}

/// A guard as the detector needs it.
#[derive(Debug, Clone)]
pub struct GuardSpec {
    pub id: String,
    pub name: String,
    pub action: Action,
    pub finds: Finds,
}

struct Tag {
    guard: usize,
    label: &'static str,
    check: Check,
}

/// One match: which guard, what it found (`email`, `secret`, `keyword`, …) and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub guard: usize,
    pub label: &'static str,
    pub start: usize,
    pub end: usize,
}

/// One automaton over some of a scope's patterns.
struct Pass {
    engine: Engine,
    tags: Vec<Tag>,
    /// A candidate that fails its check is skipped whole (the entropy pass: no part of a run
    /// that is not random is a secret), not retried a character on.
    skip_failed: bool,
    /// The block guards' patterns of this pass, to look inside a redacting match for a block
    /// match it would hide (only when the pass mixes both actions).
    blocks: Option<Box<Pass>>,
}

/// The patterns of the guards (of one action, or all with block guards' first), with or
/// without the entropy candidate.
fn tagged(
    guards: &[GuardSpec],
    entropy: bool,
    only: Option<Action>,
) -> Result<Tagged, CompileError> {
    let mut order: Vec<usize> = (0..guards.len())
        .filter(|&i| only.is_none_or(|a| guards[i].action == a))
        .collect();
    order.sort_by_key(|&i| guards[i].action != Action::Block);
    let mut patterns = Vec::new();
    let mut tags = Vec::new();
    for i in order {
        for (pattern, label, check) in patterns_of(&guards[i].finds)? {
            // A pattern already listed (by a block guard, or an earlier guard of the same
            // action) always matches first: a second copy could never win.
            if (check == Check::Entropy) == entropy && !patterns.contains(&pattern) {
                patterns.push(pattern);
                tags.push(Tag {
                    guard: i,
                    label,
                    check,
                });
            }
        }
    }
    Ok((patterns, tags))
}

/// What finds a pass's candidates.
enum Engine {
    /// A multi-pattern automaton.
    Regex(Regex),
    /// The entropy candidate alone ([`HIGH_ENTROPY`]), found by a byte scan: a table lookup
    /// per byte instead of an automaton's transitions.
    Runs,
}

impl Engine {
    fn build(patterns: &[String]) -> Result<Self, CompileError> {
        if patterns.len() == 1 && patterns[0] == HIGH_ENTROPY {
            return Ok(Engine::Runs);
        }
        Regex::builder()
            .configure(Regex::config().utf8_empty(true))
            .build_many(patterns)
            .map(Engine::Regex)
            .map_err(|e| CompileError(format!("the guards' patterns do not compile: {e}")))
    }

    /// The leftmost-first match starting at or after `at` and ending by `end`: which pattern
    /// and where. Look-around sees the whole text.
    fn search(&self, text: &str, at: usize, end: usize) -> Option<(usize, usize, usize)> {
        match self {
            Engine::Regex(regex) => {
                let input = Input::new(text).range(at..end).anchored(Anchored::No);
                let m = regex.search(&input)?;
                Some((m.pattern().as_usize(), m.start(), m.end()))
            }
            Engine::Runs => entropy_candidate(text.as_bytes(), at, end).map(|(s, e)| (0, s, e)),
        }
    }
}

/// The bytes [`HIGH_ENTROPY`] runs over (base64, base64url and hex).
const RUN_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'_' | b'=' | b'-');
        b += 1;
    }
    table
};
const RUN_MIN: usize = 24;
const RUN_MAX: usize = 256;

/// What `(?-u:\b)[A-Za-z0-9+/_=-]{24,256}` matches first in `bytes[at..end]`: the leftmost
/// start on an ASCII word boundary with at least 24 run bytes before `end`, taking up to 256.
fn entropy_candidate(bytes: &[u8], at: usize, end: usize) -> Option<(usize, usize)> {
    let word = |i: usize| i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_');
    let boundary = |i: usize| (i > 0 && word(i - 1)) != word(i);
    let mut p = at;
    while p + RUN_MIN <= end {
        if !RUN_BYTES[usize::from(bytes[p])] {
            p += 1;
            continue;
        }
        let run_end = p + bytes[p..end]
            .iter()
            .take_while(|&&b| RUN_BYTES[usize::from(b)])
            .count();
        let mut q = p;
        while q + RUN_MIN <= run_end {
            if boundary(q) {
                return Some((q, run_end.min(q + RUN_MAX)));
            }
            q += 1;
        }
        p = run_end;
    }
    None
}

/// Every guard of a scope, compiled: one pass over every pattern, block guards' first (so on
/// the same text a block wins, and a block match inside a redacting one is looked for), and
/// the entropy candidate in a pass of its own (so skipping a run that is not random never
/// hides another pattern's match).
pub struct Detector {
    passes: Vec<Pass>,
    pub guards: Vec<GuardSpec>,
    /// The longest text any pattern can match, in bytes: a stream keeps this much back so a
    /// match across chunks is still seen whole.
    pub longest: usize,
}

/// What scanning a stretch of text found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// A `block` guard matched (the first such match).
    Blocked(Found),
    /// The redacting matches, left to right and not overlapping, and how far the text is
    /// settled: every match that starts before it is known.
    Clean { found: Vec<Found>, settled: usize },
}

/// Why guards could not be compiled (refused when the guard is created).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);

/// The longest match a guard pattern may have: what a stream holds back beyond its window.
pub const MAX_PATTERN_BYTES: usize = 8192;
/// One UTF-8 character after a match, so `\b` at its end sees what follows.
const LOOKAHEAD: usize = 4;

const EMAIL: &str = r"(?-u:(?-u:\b))[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}(?-u:(?-u:\b))";
const PHONE: &str = r"(?:\+[0-9]{1,3}[ .-]?)?(?:\([0-9]{3}\)|(?-u:(?-u:\b))[0-9]{3})[ .-]?[0-9]{3}[ .-]?[0-9]{4}(?-u:(?-u:\b))";
const CARD: &str = r"(?-u:(?-u:\b))[0-9](?:[ -]?[0-9]){12,18}(?-u:(?-u:\b))";
const IBAN: &str = r"(?-u:(?-u:\b))[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}(?-u:(?-u:\b))";
const SSN: &str = r"(?-u:(?-u:\b))[0-9]{3}-[0-9]{2}-[0-9]{4}(?-u:(?-u:\b))";

/// Credential formats published by their issuers, then anything that looks random enough.
/// Each is at most a few hundred bytes long, so a stream holds back little: the body of a
/// private key block and the parts of a JWT are caught line by line as high-entropy text.
const SECRETS: &[&str] = &[
    r"(?-u:(?-u:\b))(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:(?-u:\b))",
    r"(?-u:(?-u:\b))gh[pousr]_[A-Za-z0-9]{36,255}(?-u:(?-u:\b))",
    r"(?-u:(?-u:\b))github_pat_[A-Za-z0-9_]{22,255}(?-u:(?-u:\b))",
    r"(?-u:(?-u:\b))xox[abpors]-[A-Za-z0-9-]{10,250}",
    r"(?-u:(?-u:\b))sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,200}",
    r"(?-u:(?-u:\b))(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,128}(?-u:(?-u:\b))",
    r"(?-u:(?-u:\b))AIza[0-9A-Za-z_-]{35}",
    r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,2}PRIVATE KEY-----",
];
/// A candidate for the entropy check: a long run of base64 or hex characters.
const HIGH_ENTROPY: &str = r"(?-u:(?-u:\b))[A-Za-z0-9+/_=-]{24,256}";

/// Patterns with their tags, block guards' first.
type Tagged = (Vec<String>, Vec<Tag>);

impl Detector {
    /// Compiles the guards of one scope; `None` when there are none.
    pub fn compile(guards: Vec<GuardSpec>) -> Result<Option<Self>, CompileError> {
        if guards.is_empty() {
            return Ok(None);
        }
        let mut longest = 0;
        let mut passes = Vec::new();
        for entropy in [false, true] {
            let (patterns, tags) = tagged(&guards, entropy, None)?;
            if patterns.is_empty() {
                continue;
            }
            for p in &patterns {
                longest = longest.max(max_len(p)?);
            }
            let mixed = tags
                .iter()
                .any(|t| guards[t.guard].action == Action::Redact)
                && tags.iter().any(|t| guards[t.guard].action == Action::Block);
            // Where a redacting match could start before a block match and hide it, the block
            // patterns alone look inside each redacting match.
            let blocks = if mixed && !entropy {
                let (patterns, tags) = tagged(&guards, entropy, Some(Action::Block))?;
                Some(Box::new(Pass {
                    engine: Engine::build(&patterns)?,
                    tags,
                    skip_failed: false,
                    blocks: None,
                }))
            } else {
                None
            };
            passes.push(Pass {
                engine: Engine::build(&patterns)?,
                tags,
                skip_failed: entropy,
                blocks,
            });
        }
        Ok(Some(Self {
            passes,
            guards,
            longest,
        }))
    }

    /// Every match in `text`: the first `block` match alone, or every redacting match, left
    /// to right and not overlapping. A candidate that fails its check (a 16-digit number that
    /// is not a card number) does not hide a later one that starts inside it.
    pub fn find(&self, text: &str) -> Vec<Found> {
        match self.scan(text, 0, text.len()) {
            Scan::Blocked(found) => vec![found],
            Scan::Clean { found, .. } => found,
        }
    }

    /// The matches that start at or after `from` and before `limit` (the text before `from`
    /// is context only). `settled` may lie past `limit`: a match or a skipped run that starts
    /// before it can reach beyond, and every pass has then looked at all that starts before
    /// `settled`. Scanning on from `settled` finds exactly what scanning the whole text would.
    pub fn scan(&self, text: &str, from: usize, limit: usize) -> Scan {
        let mut before = limit.min(text.len());
        let mut at = vec![from; self.passes.len()];
        let mut found = Vec::new();
        loop {
            let end = (before + self.longest + LOOKAHEAD).min(text.len());
            let mut reach = before;
            for (i, pass) in self.passes.iter().enumerate() {
                let (next, r) = pass.scan(text, at[i], before, end, &mut found);
                at[i] = next;
                reach = reach.max(r);
            }
            if reach <= before {
                break;
            }
            before = reach;
        }
        if let Some(first) = found
            .iter()
            .filter(|f| self.action(f) == Action::Block)
            .min_by_key(|f| f.start)
        {
            return Scan::Blocked(first.clone());
        }
        found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
        let mut kept: Vec<Found> = Vec::with_capacity(found.len());
        for f in found {
            if kept.last().is_none_or(|k| f.start >= k.end) {
                kept.push(f);
            }
        }
        Scan::Clean {
            found: kept,
            settled: before,
        }
    }

    pub fn action(&self, f: &Found) -> Action {
        self.guards[f.guard].action
    }
}

impl Pass {
    /// A match of these (block) patterns that starts inside `[start, end)`, if any.
    fn inside(&self, text: &str, start: usize, end: usize, limit: usize, found: &mut Vec<Found>) {
        let mut inner = Vec::new();
        self.scan(
            text,
            next_char(text, start),
            end,
            limit.max(end),
            &mut inner,
        );
        found.extend(inner.into_iter().take(1));
    }

    /// Looks at the candidates that start in `[at, before)`, searching no further than `end`
    /// (room for the longest match from before `before`); those that pass their check go to
    /// `found`. Returns where to go on from and how far what it consumed reaches.
    fn scan(
        &self,
        text: &str,
        mut at: usize,
        before: usize,
        end: usize,
        found: &mut Vec<Found>,
    ) -> (usize, usize) {
        let mut reach = before;
        while at < before {
            let Some((pattern, start, stop)) = self.engine.search(text, at, end) else {
                return (before, reach);
            };
            if start >= before {
                return (before, reach);
            }
            if start == stop {
                at = next_char(text, stop);
                continue;
            }
            let tag = &self.tags[pattern];
            if passes(tag.check, &text[start..stop]) {
                if let Some(blocks) = &self.blocks {
                    blocks.inside(text, start, stop, end, found);
                }
                found.push(Found {
                    guard: tag.guard,
                    label: tag.label,
                    start,
                    end: stop,
                });
                at = stop;
                reach = reach.max(at);
            } else if self.skip_failed {
                at = stop;
                reach = reach.max(at);
            } else {
                at = next_char(text, start);
            }
        }
        (at, reach)
    }
}

fn next_char(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len(), |c| at + c.len_utf8())
}

/// `text` with each redacting match replaced by `[REDACTED:<label>]`.
pub fn redact(text: &str, found: &[Found]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in found {
        out.push_str(&text[at..f.start]);
        out.push_str("[REDACTED:");
        out.push_str(f.label);
        out.push(']');
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

fn patterns_of(finds: &Finds) -> Result<Vec<(String, &'static str, Check)>, CompileError> {
    Ok(match finds {
        Finds::Patterns(list) => list
            .iter()
            .map(|p| (p.clone(), "regex", Check::None))
            .collect(),
        Finds::Keywords {
            words,
            case_sensitive,
        } => words
            .iter()
            .map(|w| (keyword(w, *case_sensitive), "keyword", Check::None))
            .collect(),
        Finds::Pii(kinds) => {
            let kinds = if kinds.is_empty() {
                Pii::ALL.to_vec()
            } else {
                kinds.clone()
            };
            kinds
                .into_iter()
                .map(|k| {
                    let (pattern, check) = match k {
                        Pii::Email => (EMAIL, Check::None),
                        Pii::Phone => (PHONE, Check::None),
                        Pii::CardNumber => (CARD, Check::Luhn),
                        Pii::Iban => (IBAN, Check::Iban),
                        Pii::UsSsn => (SSN, Check::Ssn),
                    };
                    (pattern.to_string(), k.as_str(), check)
                })
                .collect()
        }
        Finds::Secrets => SECRETS
            .iter()
            .map(|p| (p.to_string(), "secret", Check::None))
            .chain(std::iter::once((
                HIGH_ENTROPY.to_string(),
                "secret",
                Check::Entropy,
            )))
            .collect(),
    })
}

/// A keyword as a pattern: the literal, on word boundaries where it starts or ends with a
/// word character.
/// An ASCII keyword folds case and finds word boundaries the ASCII way, which keeps the
/// automaton small (homoglyphs defeat keyword lists either way).
fn keyword(word: &str, case_sensitive: bool) -> String {
    let word_char = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let ascii = word.is_ascii();
    let boundary = if ascii { r"(?-u:\b)" } else { r"\b" };
    let mut p = String::new();
    match (case_sensitive, ascii) {
        (true, _) => {}
        (false, true) => p.push_str("(?i-u)"),
        (false, false) => p.push_str("(?i)"),
    }
    if word_char(word.chars().next()) {
        p.push_str(boundary);
    }
    p.push_str(&regex_syntax::escape(word));
    if word_char(word.chars().last()) {
        p.push_str(boundary);
    }
    p
}

/// The longest text `pattern` can match; refused when unbounded or too long, since a stream
/// could not hold back enough to see it whole.
pub fn max_len(pattern: &str) -> Result<usize, CompileError> {
    let hir = regex_syntax::parse(pattern)
        .map_err(|e| CompileError(format!("pattern {pattern:?} does not compile: {e}")))?;
    match hir.properties().maximum_len() {
        Some(n) if n <= MAX_PATTERN_BYTES => Ok(n),
        Some(n) => Err(CompileError(format!(
            "pattern {pattern:?} can match {n} bytes; the most is {MAX_PATTERN_BYTES}"
        ))),
        None => Err(CompileError(format!(
            "pattern {pattern:?} can match text of any length; bound it (e.g. {{1,64}} instead \
             of + or *) so a stream can hold back enough to see a whole match"
        ))),
    }
}
