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

/// Whether `source` defines `test` as a test: a function under a `#[…test…]` attribute, or
/// one named in an `on_both_backends!(…)` list (which makes a test per backend).
fn defines_test(source: &str, test: &str) -> bool {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let signatures = [format!("async fn {test}("), format!("fn {test}(")];
    let attributed = lines.iter().enumerate().any(|(i, line)| {
        signatures.iter().any(|s| line.starts_with(s.as_str()))
            && lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .any(|l| l.starts_with("#[") && l.contains("test"))
    });
    attributed
        || source.split("on_both_backends!(").skip(1).any(|listed| {
            let listed = listed.split(')').next().unwrap_or_default();
            listed.split(',').any(|name| name.trim() == test)
        })
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
        } else if !source.contains(&format!("\"{}\"", row.name)) {
            out.push(format!("{}: {}.rs never names it", row.name, row.file));
        }
    }
    out
}

/// Every operation (by method name) and MCP admin tool.
fn names() -> BTreeSet<String> {
    let registry = super::Registry::new();
    let operations = registry
        .paths()
        .into_iter()
        .filter_map(|p| p.rsplit('/').next().map(str::to_string));
    let tools = crate::mcp_admin::TOOLS.iter().map(|t| t.name.to_string());
    operations.chain(tools).collect()
}

fn e2e_sources() -> HashMap<String, String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/tests/e2e");
    std::fs::read_dir(dir)
        .expect("the end-to-end tests are beside the control plane")
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            (path.extension()? == "rs").then(|| (stem, std::fs::read_to_string(&path).ok()))
        })
        .filter_map(|(stem, text)| Some((stem, text?)))
        .collect()
}

#[test]
fn every_operation_and_tool_has_an_end_to_end_test() {
    let doc = include_str!("../../../docs/api.md");
    let found = problems(&names(), doc, &e2e_sources());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_fails_for_a_missing_row_a_wrong_test_or_an_unnamed_operation() {
    let names: BTreeSet<String> = ["GetThing", "PutThing", "svc_thing_get"]
        .map(str::to_string)
        .into();
    let doc = "# API\n\n## Test coverage\n\n| Operation or tool | End-to-end test |\n|---|---|\n\
               | `GetThing` | `things::gets` |\n| `PutThing` | `things::helper` |\n\
               | `svc_thing_get` | `things::both` |\n| `Gone` | `things::gets` |\n\n## Health\n";
    let source =
        "#[tokio::test(flavor = \"multi_thread\")]\nasync fn gets() { call(\"GetThing\") }\n\
                  async fn helper() { call(\"PutThing\") }\n\
                  on_both_backends!(both, other);\nasync fn both(cp: &Cp) {}\n";
    let sources = HashMap::from([("things".to_string(), source.to_string())]);
    let found: BTreeSet<String> = problems(&names, doc, &sources).into_iter().collect();
    let expected: BTreeSet<String> = [
        "PutThing: things::helper is not a test",
        "svc_thing_get: things.rs never names it",
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
