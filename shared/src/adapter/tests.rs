//! The shipped adapters against their recorded fixtures: every definition loads and checks,
//! every operation of the newest version has a fixture, its arguments build the recorded
//! request, and the recorded answer projects to the recorded result.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;

fn catalog() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../catalog")
}

fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every shipped definition, newest version of each slug last.
fn definitions() -> Vec<Definition> {
    let mut out = Vec::new();
    let dirs = std::fs::read_dir(catalog().join("adapters")).unwrap_or_else(|e| panic!("{e}"));
    for dir in dirs.flatten() {
        for file in std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
        {
            let d: Definition = serde_json::from_value(read(&file.path()))
                .unwrap_or_else(|e| panic!("{}: {e}", file.path().display()));
            out.push(d);
        }
    }
    out.sort_by(|a, b| (&a.slug, a.version).cmp(&(&b.slug, b.version)));
    out
}

#[test]
fn shipped_adapters_check_and_replay_their_fixtures() {
    let all = definitions();
    assert!(all.len() >= 4, "three adapters, one with two versions");
    let mut replayed = 0;
    for (i, d) in all.iter().enumerate() {
        check(d).unwrap_or_else(|e| panic!("{} v{}: {e}", d.slug, d.version));
        let newest = all.get(i + 1).is_none_or(|next| next.slug != d.slug);
        if !newest {
            continue;
        }
        for op in &d.operations {
            let path = catalog().join(format!("fixtures/{}/{}.json", d.slug, op.name));
            let fx = read(&path);
            let args = fx["arguments"].as_object().cloned().unwrap_or_default();
            let checker = validator(&op.input_schema).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                violations(&checker, &fx["arguments"]),
                "",
                "{}",
                path.display()
            );
            let req = op
                .request(&d.base_url, &args)
                .unwrap_or_else(|e| panic!("{e}"));
            let recorded = &fx["request"];
            assert_eq!(req.method, recorded["method"], "{}", path.display());
            assert_eq!(req.url.path(), recorded["path"], "{}", path.display());
            assert_eq!(
                req.url.query(),
                recorded["query"].as_str(),
                "{}",
                path.display()
            );
            assert_eq!(
                req.body.unwrap_or(Value::Null),
                recorded["body"],
                "{}",
                path.display()
            );
            let status = fx["status"].as_u64().unwrap_or_default() as u16;
            let got = op.outcome(status, &fx["response"]);
            assert_eq!(got, Ok(fx["structured"].clone()), "{}", path.display());
            replayed += 1;
        }
    }
    assert!(replayed >= 10, "{replayed}");
}

fn github() -> Definition {
    definitions()
        .into_iter()
        .rfind(|d| d.slug == "github-issues")
        .unwrap_or_else(|| panic!("github-issues is shipped"))
}

#[test]
fn path_values_are_encoded_and_absent_query_arguments_left_out() {
    let d = github();
    let op = d.operations.iter().find(|o| o.name == "get_issue").unwrap();
    let args = json!({"owner": "a/b c", "repo": "r?x", "issue_number": 7});
    let req = op
        .request("https://ghe.example/api/v3/", args.as_object().unwrap())
        .unwrap();
    assert_eq!(
        req.url.as_str(),
        "https://ghe.example/api/v3/repos/a%2Fb%20c/r%3Fx/issues/7"
    );
    for bad in ["", ".", ".."] {
        let args = json!({"owner": bad, "repo": "r", "issue_number": 7});
        assert!(
            op.request(&d.base_url, args.as_object().unwrap()).is_err(),
            "{bad:?}"
        );
    }
    let list = d
        .operations
        .iter()
        .find(|o| o.name == "list_issues")
        .unwrap();
    let args = json!({"owner": "o", "repo": "r"});
    let req = list
        .request(&d.base_url, args.as_object().unwrap())
        .unwrap();
    assert_eq!(req.url.query(), None);
}

#[test]
fn arguments_outside_the_schema_are_named() {
    let d = github();
    let op = d
        .operations
        .iter()
        .find(|o| o.name == "create_issue")
        .unwrap();
    let checker = validator(&op.input_schema).unwrap();
    let v = violations(
        &checker,
        &json!({"owner": "o", "repo": "r", "title": "", "x": 1}),
    );
    assert!(v.contains("/title") && v.contains("x"), "{v}");
    let v = violations(&checker, &json!({"owner": "o", "repo": "r"}));
    assert!(v.contains("title"), "{v}");
}

#[test]
fn failures_are_messages() {
    let d = github();
    let op = &d.operations[0];
    let err = op
        .outcome(
            404,
            &json!({"message": "Not Found", "documentation_url": "x"}),
        )
        .unwrap_err();
    assert_eq!(err, "the service answered HTTP 404: Not Found");
    let slack: Definition =
        serde_json::from_value(read(&catalog().join("adapters/slack/v1.json"))).unwrap();
    let post = &slack.operations[0];
    let err = post
        .outcome(200, &json!({"ok": false, "error": "channel_not_found"}))
        .unwrap_err();
    assert_eq!(err, "the service refused the call: channel_not_found");
}

#[test]
fn bad_definitions_are_refused() {
    let mut d = github();
    d.operations[0].path = "/repos/{owner}/{nope}/issues".into();
    assert!(check(&d).unwrap_err().contains("nope"));
    let mut d = github();
    d.operations[1] = d.operations[0].clone();
    assert!(check(&d).unwrap_err().contains("twice"));
    let mut d = github();
    d.base_url = "ftp://x".into();
    assert!(check(&d).is_err());
    let mut d = github();
    d.auth.method = "oauth".into();
    assert!(check(&d).is_err());
}

/// Whatever a service answers, and whatever arguments an agent sends, projecting and
/// building never panic.
mod fuzz {
    use proptest::prelude::*;

    use super::definitions;
    use crate::fuzz::json_value;

    proptest! {
        #[test]
        fn any_answer_and_any_arguments_are_handled(answer in json_value(), args in json_value(), status in 100u16..600) {
            for d in definitions() {
                for op in &d.operations {
                    let _ = op.outcome(status, &answer);
                    if let Some(map) = args.as_object() {
                        let _ = op.request(&d.base_url, map);
                    }
                }
            }
        }
    }
}
