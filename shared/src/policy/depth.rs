//! How deeply a Cedar text can nest, bounded before Cedar's parser sees it. Cedar's parser and
//! the code that turns its tree into policies recurse once per level of nesting, and a text of
//! a few hundred bytes can nest deeply enough to overflow a thread's stack, which aborts the
//! process (both binaries check bundles). The bound is an estimate from the text alone, never
//! below the real depth: brackets open a level, and every operator seen at a level deepens the
//! expression at that level (a chain `a && b && c` is a tree as deep as it is long).

/// Brackets (`(`, `[`, `{`) open inside one another.
pub const MAX_BRACKETS: usize = 32;
/// The estimated depth of one policy's expression tree.
pub const MAX_DEPTH: usize = 400;

/// Fails, saying why, when `text` nests past the bounds.
pub fn check(text: &str) -> Result<(), String> {
    let mut scan = Scan::default();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        i = scan.step(bytes, i)?;
    }
    Ok(())
}

/// Operators at each open level (the first entry is the policy's top level).
struct Scan {
    levels: Vec<usize>,
    /// The sum of `levels`.
    operators: usize,
}

impl Default for Scan {
    fn default() -> Self {
        Self {
            levels: vec![0],
            operators: 0,
        }
    }
}

/// Words that combine or wrap expressions.
const WORD_OPERATORS: [&[u8]; 7] = [b"in", b"has", b"like", b"is", b"if", b"then", b"else"];

impl Scan {
    /// Reads what starts at `i`; returns where the next thing starts.
    fn step(&mut self, b: &[u8], i: usize) -> Result<usize, String> {
        let next = b.get(i + 1).copied();
        match b[i] {
            b'"' => Ok(skip_string(b, i + 1)),
            b'/' if next == Some(b'/') => Ok(b[i..]
                .iter()
                .position(|c| *c == b'\n')
                .map_or(b.len(), |n| i + n + 1)),
            b'(' | b'[' | b'{' => {
                self.levels.push(0);
                if self.levels.len() > MAX_BRACKETS + 1 {
                    return Err(format!(
                        "the policies nest brackets more than {MAX_BRACKETS} deep"
                    ));
                }
                self.deepen(0)?;
                Ok(i + 1)
            }
            b')' | b']' | b'}' => {
                if self.levels.len() > 1 {
                    self.operators -= self.levels.pop().unwrap_or(0);
                }
                Ok(i + 1)
            }
            // A policy ends: the next one starts from the top.
            b';' if self.levels.len() == 1 => {
                *self = Self::default();
                Ok(i + 1)
            }
            b':' if next == Some(b':') => Ok(i + 2),
            b'&' | b'|' | b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'.' => {
                self.deepen(1)?;
                Ok(i + 1 + usize::from(matches!(next, Some(b'&' | b'|' | b'='))))
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = b[i..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                    .map_or(b.len(), |n| i + n);
                if WORD_OPERATORS.contains(&&b[i..end]) {
                    self.deepen(1)?;
                }
                Ok(end)
            }
            _ => Ok(i + 1),
        }
    }

    fn deepen(&mut self, operators: usize) -> Result<(), String> {
        if let Some(top) = self.levels.last_mut() {
            *top += operators;
        }
        self.operators += operators;
        if self.levels.len() + self.operators > MAX_DEPTH {
            return Err(format!(
                "a policy's expression nests more than {MAX_DEPTH} levels deep; split it into \
                 several policies"
            ));
        }
        Ok(())
    }
}

/// Where a string literal that starts at `i` (after its quote) ends.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_policies_pass() {
        let text = r#"
            @id("support")
            permit(principal == Agent::"a", action in [Action::"llm:invoke"], resource)
            when { context.act_as.present && (context.act_as.email like "*@example.com" || resource has name) }
            unless { principal.name == "x" };
            forbid(principal, action, resource) when { if 1 < 2 then true else false };
        "#;
        assert_eq!(check(text), Ok(()));
        let many: String = (0..300)
            .map(|i| format!("permit(principal == Agent::\"a{i}\", action, resource) when {{ 1 + 2 == 3 }};\n"))
            .collect();
        assert_eq!(check(&many), Ok(()), "the bound is per policy");
    }

    #[test]
    fn deep_brackets_and_long_chains_are_refused() {
        let parens = format!(
            "permit(principal, action, resource) when {{ {}true{} }};",
            "(".repeat(200),
            ")".repeat(200)
        );
        assert!(parens.len() < 500);
        assert!(check(&parens).unwrap_err().contains("brackets"));
        let chain = format!(
            "permit(principal, action, resource) when {{ true{} }};",
            " && true".repeat(MAX_DEPTH)
        );
        assert!(check(&chain).unwrap_err().contains("levels"));
        let nots = format!(
            "permit(principal, action, resource) when {{ {}true }};",
            "!".repeat(1000)
        );
        assert!(check(&nots).is_err());
    }

    #[test]
    fn strings_and_comments_do_not_count() {
        let text = format!(
            "// {}\npermit(principal, action, resource) when {{ context.x == \"{}\\\"\" }};",
            "((((".repeat(100),
            "((((&&".repeat(100)
        );
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn bundles_are_checked_without_overflowing_a_small_stack() {
        let nested = format!(
            "permit(principal, action, resource) when {{ {}true{} }};",
            "(".repeat(200),
            ")".repeat(200)
        );
        let within = format!(
            "permit(principal, action, resource) when {{ true{} }};",
            " && true".repeat(MAX_DEPTH / 2 - 10)
        );
        // A tokio worker's stack is 2 MiB; check on a quarter of that.
        let (refused, accepted) = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || {
                (
                    crate::policy::check_bundle("b", &nested).err(),
                    crate::policy::check_bundle("b", &within).map(|c| c.ids()),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(
            matches!(&refused, Some(crate::policy::PolicyError::Parse(m)) if m.contains("brackets")),
            "{refused:?}"
        );
        assert_eq!(accepted.unwrap(), ["b/0"]);
    }
}
