//! The coverage table at the end of `docs/api.md` (*Test coverage*) names, for every
//! operation and MCP admin tool, the end-to-end test that exercises it. These tests hold it
//! to the code: an operation or tool without a row, a row for one that does not exist, or a
//! row whose test is not a test of its file, or sits in a file that never names the
//! operation, fails CI.

use std::collections::{BTreeSet, HashMap};

/// One row: an operation or tool, and its test as `file::test`.
#[derive(Debug, PartialEq, Eq)]
struct Row<'a> {
    name: &'a str,
    file: &'a str,
    test: &'a str,
}

/// The rows of the table under `## Test coverage` (cells in backticks).
fn rows(doc: &str) -> Vec<Row<'_>> {
    let Some((_, section)) = doc.split_once("\n## Test coverage\n") else {
        return Vec::new();
    };
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [_, name, test, _] = cells.as_slice() else {
                return None;
            };
            let name = name.strip_prefix('`')?.strip_suffix('`')?;
            let test = test.strip_prefix('`')?.strip_suffix('`')?;
            let (file, test) = test.split_once("::")?;
            Some(Row { name, file, test })
        })
        .collect()
}

/// Whether `source` defines `test` as a test: a function under a `#[test]` or
/// `#[tokio::test…]` attribute, one named in an `on_both_backends!(…)` list, or a function
/// run by a `mod <test> { … }` of tests (one per backend).
fn defines_test(source: &str, test: &str) -> bool {
    let is_test_attribute = |l: &str| l.starts_with("#[test]") || l.starts_with("#[tokio::test");
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let signatures = [format!("async fn {test}("), format!("fn {test}(")];
    let attributed = lines.iter().enumerate().any(|(i, line)| {
        signatures.iter().any(|s| line.starts_with(s.as_str()))
            && lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .any(|l| is_test_attribute(l))
    });
    let listed = source.split("on_both_backends!(").skip(1).any(|list| {
        let list = list.split(')').next().unwrap_or_default();
        list.split(',').any(|name| name.trim() == test)
    });
    let module = source
        .split_once(&format!("\nmod {test} {{\n"))
        .and_then(|(_, rest)| rest.split("\n}\n").next())
        .is_some_and(|body| body.lines().map(str::trim).any(is_test_attribute));
    attributed || listed || module
}

/// The functions of a source file by name, each with its text (up to the next function).
fn functions(source: &str) -> HashMap<&str, &str> {
    let mut starts = Vec::new();
    let mut at = 0;
    for line in source.split_inclusive('\n') {
        let name = line
            .trim_start()
            .split_once("fn ")
            .filter(|(before, _)| {
                before
                    .split_whitespace()
                    .all(|w| w.starts_with("pub") || w == "async")
            })
            .and_then(|(_, after)| after.split_once('('))
            .map(|(name, _)| name)
            .filter(|name| name.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            starts.push((name, at));
        }
        at += line.len();
    }
    let ends = starts
        .iter()
        .skip(1)
        .map(|(_, at)| *at)
        .chain([source.len()]);
    starts
        .iter()
        .zip(ends)
        .map(|((name, from), to)| (*name, &source[*from..to]))
        .collect()
}

/// Whether `test`, or a function of the same file it calls (however deep), names `name`.
fn names_it(source: &str, test: &str, name: &str) -> bool {
    let functions = functions(source);
    let quoted = format!("\"{name}\"");
    let mut todo = vec![test];
    let mut seen = BTreeSet::new();
    while let Some(f) = todo.pop() {
        if !seen.insert(f) {
            continue;
        }
        let Some(text) = functions.get(f) else {
            continue;
        };
        if text.contains(&quoted) {
            return true;
        }
        todo.extend(
            functions
                .keys()
                .filter(|callee| text.contains(&format!("{callee}("))),
        );
    }
    false
}

/// What is wrong with the table, given every operation and tool name and the end-to-end
/// test files by stem.
fn problems(names: &BTreeSet<String>, doc: &str, sources: &HashMap<String, String>) -> Vec<String> {
    let rows = rows(doc);
    let mut out = Vec::new();
    for name in names {
        if !rows.iter().any(|r| r.name == name) {
            out.push(format!(
                "{name} has no row in docs/api.md's test coverage table"
            ));
        }
    }
    for row in &rows {
        if !names.contains(row.name) {
            out.push(format!(
                "{} has a row but is not an operation or tool",
                row.name
            ));
            continue;
        }
        let Some(source) = sources.get(row.file) else {
            out.push(format!(
                "{}: no file tests/tests/e2e/{}.rs",
                row.name, row.file
            ));
            continue;
        };
        if !defines_test(source, row.test) {
            out.push(format!(
                "{}: {}::{} is not a test",
                row.name, row.file, row.test
            ));
        } else if !names_it(source, row.test, row.name) {
            out.push(format!(
                "{}: {}::{} never names it (nor does any function of its file it calls)",
                row.name, row.file, row.test
            ));
        }
    }
    out
}

/// Every operation (by method name) and MCP admin tool.
fn names() -> BTreeSet<String> {
    let registry = crate::api::Registry::new();
    let operations = registry
        .paths()
        .into_iter()
        .filter_map(|p| p.rsplit('/').next().map(str::to_string));
    let tools = super::TOOLS.iter().map(|t| t.name.to_string());
    operations.chain(tools).collect()
}

fn e2e_sources() -> HashMap<String, String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/tests/e2e");
    std::fs::read_dir(dir)
        .expect("the end-to-end tests are beside the control plane")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.extension()? != "rs" {
                return None;
            }
            let stem = path.file_stem()?.to_str()?.to_string();
            Some((stem, std::fs::read_to_string(&path).ok()?))
        })
        .collect()
}

#[test]
fn every_operation_and_tool_has_an_end_to_end_test() {
    let doc = include_str!("../../../docs/api.md");
    let found = problems(&names(), doc, &e2e_sources());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A test file for the self-test: a test naming its operation through a helper, a helper
/// that is not a test, an `on_both_backends!` test that does not name its operation (its
/// sibling does), and a per-backend `mod` of tests.
const THINGS: &str = r#"
#[tokio::test(flavor = "multi_thread")]
async fn gets() {
    fetch().await;
}

async fn fetch() {
    call("GetThing");
}

#[cfg(test)]
async fn helper() {
    call("PutThing");
}

on_both_backends!(both, other);

async fn both(cp: &Cp) {}

async fn other(cp: &Cp) {
    call("svc_thing_get");
}

mod per_backend {
    #[tokio::test]
    async fn sqlite() {
        super::per_backend(&cp).await;
    }
}

async fn per_backend(cp: &Cp) {
    call("ListThings");
}
"#;

#[test]
fn the_check_fails_for_a_missing_row_a_wrong_test_or_an_unnamed_operation() {
    let names: BTreeSet<String> = [
        "GetThing",
        "PutThing",
        "svc_thing_get",
        "ListThings",
        "DropThing",
    ]
    .map(str::to_string)
    .into();
    let doc = "# API\n\n## Test coverage\n\n| Operation or tool | End-to-end test |\n|---|---|\n\
               | `GetThing` | `things::gets` |\n| `PutThing` | `things::helper` |\n\
               | `svc_thing_get` | `things::both` |\n| `ListThings` | `things::per_backend` |\n\
               | `DropThing` | `stuff::gets` |\n| `Gone` | `things::gets` |\n\n## Health\n";
    let sources = HashMap::from([("things".to_string(), THINGS.to_string())]);
    let found: BTreeSet<String> = problems(&names, doc, &sources).into_iter().collect();
    let expected: BTreeSet<String> = [
        "PutThing: things::helper is not a test",
        "svc_thing_get: things::both never names it (nor does any function of its file it calls)",
        "DropThing: no file tests/tests/e2e/stuff.rs",
        "Gone has a row but is not an operation or tool",
    ]
    .map(str::to_string)
    .into();
    assert_eq!(found, expected);
    let without_row = doc.replace("| `GetThing` | `things::gets` |\n", "");
    let found = problems(&names, &without_row, &sources);
    assert!(
        found.contains(&"GetThing has no row in docs/api.md's test coverage table".to_string()),
        "{found:?}"
    );
}
