use proptest::prelude::*;

use super::oracle::{self, valid_in_cedar};
use super::*;
use crate::policy::{parse_bundle, PolicyError};

/// The bundle as Cedar reads it: `None` when a policy is not an unconditional permit of the
/// subset.
fn cedar_view(prefix: &str, text: &str) -> Result<Option<Vec<Permit>>, PolicyError> {
    Ok(oracle::cedar_view(prefix, text)?.into_iter().collect())
}

#[test]
fn managed_agent_permits_are_read_as_cedar_reads_them() {
    let text = "@id(\"gateway/g1\")\npermit (principal == Svc::Agent::\"a 1\", action == \
                Svc::Action::\"gateway:access\", resource == Svc::Gateway::\"g1\");\n\n\
                @id(\"tool/t/echo\")\npermit (principal == Svc::Agent::\"a 1\", action in \
                [Svc::Action::\"mcp:call\", Svc::Action::\"mcp:discover\"], resource == \
                Svc::Tool::\"t/echo\");\n\npermit(principal is Svc::Agent,action==Svc::Action::\"llm:invoke\",resource==Svc::Pool::\"\");";
    let read = read_valid("agent/a 1", text).unwrap();
    assert_eq!(Some(read.clone()), cedar_view("agent/a 1", text).unwrap());
    assert_eq!(
        read.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        [
            "agent/a 1/gateway/g1",
            "agent/a 1/tool/t/echo",
            "agent/a 1/2"
        ]
    );
}

#[test]
fn anything_else_is_left_to_cedar() {
    for text in [
        "",
        "// a comment\npermit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");",
        "permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\") when { true };",
        "forbid (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");",
        "permit (principal in Svc::Agent::\"a\", action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");",
        "permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\\\"q\");",
        "permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\")",
        "permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");x",
        "permit (principalis Svc::Agent, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");",
        "permit (principal, action == Svc::Action::\"nope\", resource == Svc::Pool::\"p\");",
        "permit (principal, action, resource == Svc::Pool::\"p\");",
        "@id(\"x\")\n@id(\"y\")\npermit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");",
        "@id(\"x\")permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"p\");\
         @id(\"x\")permit (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Pool::\"q\");",
    ] {
        assert_eq!(read("b", text), None, "{text}");
    }
}

#[test]
fn a_shape_validates_exactly_when_cedar_validates_the_permit() {
    // gateway:access applies to gateways only: an impossible policy, which Cedar warns of
    // but lets pass.
    let text =
        "permit (principal == Svc::Agent::\"a\", action == Svc::Action::\"gateway:access\", \
                resource == Svc::Pool::\"p\");";
    assert!(read("b", text).is_some());
    assert_eq!(read_valid("b", text).is_some(), valid_in_cedar("b", text));
}

/// Shapes are validated with placeholder ids, which holds only while ids do not matter to
/// validation.
#[test]
fn the_schema_declares_no_enumerated_entity_types() {
    assert!(!crate::policy::SCHEMA_TEXT.contains("enum"));
}

fn kind() -> impl Strategy<Value = Kind> {
    proptest::sample::select(Kind::ALL.to_vec())
}

fn id() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9/ .:-]{0,12}", any::<String>(), ".{0,6}"]
        .prop_map(|s| s.replace(|c: char| c == '"' || c == '\\' || c.is_control(), ""))
}

fn space() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ \t\r\n]{1,3}",
        "[ \t\r\n\u{a0}]{1,2}"
    ]
}

/// Bundle text in the subset's grammar with random ids, spacing and shapes, and the
/// positions where a random insertion may land.
fn bundle() -> impl Strategy<Value = String> {
    let principal = prop_oneof![
        Just("principal".to_string()),
        kind().prop_map(|k| format!("principal is {}", k.type_name())),
        (kind(), id()).prop_map(|(k, id)| format!("principal == {}::\"{id}\"", k.type_name())),
    ];
    let action = prop_oneof![
        proptest::sample::select(Action::ALL.to_vec())
            .prop_map(|a| format!("action == {}", a.cedar())),
        proptest::collection::vec(proptest::sample::select(Action::ALL.to_vec()), 1..3).prop_map(
            |list| {
                let list: Vec<String> = list.iter().map(|a| a.cedar()).collect();
                format!("action in [{}]", list.join(", "))
            }
        ),
    ];
    let policy = (
        proptest::option::of(id()),
        principal,
        action,
        kind(),
        id(),
        space(),
        space(),
    )
        .prop_map(|(annotation, principal, action, kind, rid, s1, s2)| {
            let annotation = annotation.map_or(String::new(), |a| format!("@id(\"{a}\"){s1}"));
            format!(
                "{annotation}permit{s2}({principal},{s1}{action},resource{s2}=={s1}{}::\"{rid}\"){s2};{s1}",
                kind.type_name()
            )
        });
    proptest::collection::vec(policy, 1..4).prop_map(|p| p.concat())
}

fn mutated() -> impl Strategy<Value = String> {
    (bundle(), any::<prop::sample::Index>(), ".{0,3}").prop_map(|(text, at, insert)| {
        let cut = text
            .char_indices()
            .map(|(i, _)| i)
            .nth(at.index(text.chars().count().max(1)))
            .unwrap_or(text.len());
        format!("{}{insert}{}", &text[..cut], &text[cut..])
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_subset_is_read_as_cedar_reads_it(text in bundle()) {
        let ours = read("p", &text);
        // Without non-ASCII space, all that Cedar parses here is in the subset.
        if !text.contains('\u{a0}') && parse_bundle("p", &text).is_ok() {
            prop_assert!(ours.is_some(), "{text:?}");
        }
        if let Some(ours) = ours {
            prop_assert_eq!(Ok(Some(ours.clone())), cedar_view("p", &text), "{:?}", text);
            prop_assert_eq!(read_valid("p", &text).is_some(), valid_in_cedar("p", &text), "{:?}", text);
        }
    }

    #[test]
    fn what_is_read_after_any_insertion_is_what_cedar_reads(text in mutated()) {
        if let Some(ours) = read("p", &text) {
            prop_assert_eq!(Ok(Some(ours)), cedar_view("p", &text), "{:?}", text);
            prop_assert_eq!(read_valid("p", &text).is_some(), valid_in_cedar("p", &text), "{:?}", text);
        }
    }
}
