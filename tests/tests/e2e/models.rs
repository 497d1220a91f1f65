//! Model connections: every rule of the spec's model operations and model resource.

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::{on_both_backends, ControlPlane, Reply};
use serde_json::{json, Value};

pub async fn create_model(cp: &ControlPlane, fields: Value) -> Value {
    let reply = cp
        .ok(MGMT, "CreateLLMModelConnection", cp.body(fields))
        .await;
    reply["model"].clone()
}

async fn get_model(cp: &ControlPlane, id: &str) -> Value {
    cp.ok(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await["model"]
        .clone()
}

fn id(model: &Value) -> String {
    model["connection_id"].as_str().unwrap().to_string()
}

on_both_backends!(
    create_get_list_and_names_unique,
    provider_is_known_and_fixed,
    provider_groups_need_their_locators,
    cloud_credentials_are_checked,
    provider_config_needs_model_and_known_keys,
    auth_pairs_and_defaults,
    update_keeps_omitted_and_replaces_provider_config,
    unflagged_values_are_ignored_and_flags_replace,
    filter_window_limits,
    switching_auth_method_deletes_the_credential,
    delete_detaches_and_deletes_credentials,
    oauth_connect_and_disconnect_validate_auth_method,
    a_key_never_follows_the_model_to_another_origin,
);

/// Issue 38, L4: a model's stored key was given for its endpoint; pointing the model at
/// another origin needs the key again, and a refused move changes nothing.
async fn a_key_never_follows_the_model_to_another_origin(cp: &ControlPlane) {
    let model = create_model(
        cp,
        json!({"name": "moving", "provider": "openai", "provider_config": {"model": "gpt-4o", "base_url": "https://proxy.example.com/v1"},
               "secret_values": {"Authorization": "Bearer sk-origin-1"}}),
    )
    .await;
    let update = |config: Value, secrets: Option<Value>| {
        let mut body = json!({"connection_id": id(&model), "provider_config": config});
        if let Some(s) = secrets {
            body["secret_values"] = s;
            body["secret_values_provided"] = json!(true);
        }
        cp.body(body)
    };
    let same_origin = json!({"model": "gpt-4o", "base_url": "https://proxy.example.com/v2"});
    cp.ok(MGMT, "UpdateLLMModelConnection", update(same_origin, None))
        .await;
    assert_eq!(get_model(cp, &id(&model)).await["has_credential"], true);

    let elsewhere = json!({"model": "gpt-4o", "base_url": "https://collector.example/v1"});
    cp.call(
        MGMT,
        "UpdateLLMModelConnection",
        update(elsewhere.clone(), None),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("secret_values again");
    let kept = get_model(cp, &id(&model)).await;
    assert_eq!(
        kept["provider_config"]["base_url"],
        "https://proxy.example.com/v2"
    );
    assert_eq!(
        kept["has_credential"], true,
        "a refused move changes nothing"
    );
    let moved = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            update(
                elsewhere,
                Some(json!({"Authorization": "Bearer sk-origin-2"})),
            ),
        )
        .await;
    assert_eq!(moved["model"]["has_credential"], true);
    assert!(
        cp.db_strings(
            "SELECT owner_id FROM credentials WHERE owner_id = $1",
            &id(&model)
        )
        .await
        .len()
            <= 1
    );
}

async fn create_get_list_and_names_unique(cp: &ControlPlane) {
    let model = create_model(
        cp,
        json!({"name": "gpt", "provider": "openai", "provider_config": {"model": "gpt-4o"},
               "secret_values": {"Authorization": "Bearer sk-create-1"}, "attributes": {"tier": "gold"}}),
    )
    .await;
    assert_eq!(model["auth_method"], "api-key");
    assert_eq!(model["credential_type"], "shared");
    assert_eq!(model["secret_keys"], json!(["Authorization"]));
    assert_eq!(model["has_credential"], true);
    let got = get_model(cp, &id(&model)).await;
    assert_eq!(got["provider_config"], json!({"model": "gpt-4o"}));
    assert_eq!(got["attributes"], json!({"tier": "gold"}));
    let list = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    assert_eq!(list["models"].as_array().unwrap().len(), 1);

    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        cp.body(json!({"name": "gpt", "provider": "groq", "provider_config": {"model": "x"}})),
    )
    .await
    .expect_error("already_exists", 409)
    .mentions("gpt");
    let list = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    assert_eq!(
        list["models"].as_array().unwrap().len(),
        1,
        "a refused create stores nothing"
    );

    cp.call(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": uuid::Uuid::new_v4().to_string()})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn provider_is_known_and_fixed(cp: &ControlPlane) {
    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        cp.body(json!({"name": "m", "provider": "acme", "provider_config": {"model": "x"}})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("provider 'acme' is unknown");
    let model = create_model(
        cp,
        json!({"name": "m", "provider": "openai", "provider_config": {"model": "gpt-4o"}}),
    )
    .await;
    cp.call(
        MGMT,
        "UpdateLLMModelConnection",
        cp.body(json!({"connection_id": id(&model), "provider": "anthropic"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("provider cannot change");
    assert_eq!(get_model(cp, &id(&model)).await["provider"], "openai");
    // Sending the same provider is not a change.
    cp.ok(
        MGMT,
        "UpdateLLMModelConnection",
        cp.body(json!({"connection_id": id(&model), "provider": "openai"})),
    )
    .await;
}

async fn provider_groups_need_their_locators(cp: &ControlPlane) {
    let cases = [
        ("openai_compatible", json!({"model": "m"}), Some("base_url")),
        (
            "openai_compatible",
            json!({"model": "m", "base_url": "http://127.0.0.1:9/v1"}),
            None,
        ),
        ("custom", json!({"model": "m"}), Some("base_url")),
        ("databricks", json!({"model": "m"}), Some("base_url")),
        ("azure_openai", json!({"model": "m"}), Some("base_url")),
        (
            "vertex",
            json!({"model": "gemini", "project": "p"}),
            Some("location"),
        ),
        (
            "vertex",
            json!({"model": "gemini", "project": "p", "location": "us-central1"}),
            None,
        ),
        ("bedrock", json!({"model": "claude"}), Some("region")),
        (
            "bedrock",
            json!({"model": "claude", "base_url": "http://127.0.0.1:9"}),
            Some("region"),
        ),
        (
            "vertex",
            json!({"model": "gemini", "base_url": "http://127.0.0.1:9"}),
            Some("project"),
        ),
        (
            "bedrock",
            json!({"model": "claude", "region": "us-east-1", "role_arn": "arn:aws:s3:::bucket"}),
            Some("role_arn"),
        ),
        (
            "bedrock",
            json!({"model": "claude", "region": "us-east-1", "external_id": "x"}),
            Some("role_arn"),
        ),
        (
            "openai",
            json!({"model": "gpt", "role_arn": "arn:aws:iam::123456789012:role/r"}),
            Some("bedrock"),
        ),
        (
            "bedrock",
            json!({"model": "claude", "region": "us-east-1",
                "role_arn": "arn:aws:iam::123456789012:role/bedrock-caller", "external_id": "e-1"}),
            None,
        ),
        (
            "bedrock",
            json!({"model": "claude", "region": "us-east-1"}),
            None,
        ),
        ("groq", json!({"model": "llama"}), None),
        ("anthropic", json!({"model": "claude"}), None),
        (
            "openai",
            json!({"model": "gpt", "base_url": "not a url"}),
            Some("base_url"),
        ),
    ];
    for (i, (provider, config, missing)) in cases.into_iter().enumerate() {
        let reply = cp
            .call(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": format!("m{i}"), "provider": provider, "provider_config": config, "auth_method": "none"})))
            .await;
        match missing {
            Some(field) => {
                reply.expect_error("invalid_argument", 400).mentions(field);
            }
            None => assert_eq!(reply.status, 200, "{provider}: {}", reply.text),
        }
    }
}

/// Cloud providers take their own credential shapes, checked whole; none is echoed back.
async fn cloud_credentials_are_checked(cp: &ControlPlane) {
    let bedrock = json!({"model": "anthropic.claude-3-haiku-20240307-v1:0", "region": "us-east-1"});
    let vertex = json!({"model": "gemini-2.5-flash", "project": "p", "location": "us-central1"});
    malformed_cloud_credentials_are_refused_unechoed(cp, &bedrock, &vertex).await;
    bedrock_takes_keys_or_an_api_key(cp, &bedrock).await;
    no_credential_means_the_gateways_own_identity(cp, &bedrock, &vertex).await;
}

/// `CreateLLMModelConnection` of `name` on `provider`, with `auth`'s fields added.
async fn create_cloud_model(
    cp: &ControlPlane,
    name: &str,
    provider: &str,
    config: Value,
    auth: Value,
) -> Reply {
    let mut body = json!({"name": name, "provider": provider, "provider_config": config});
    body.as_object_mut()
        .unwrap()
        .extend(auth.as_object().unwrap().clone());
    cp.call(MGMT, "CreateLLMModelConnection", cp.body(body))
        .await
}

async fn malformed_cloud_credentials_are_refused_unechoed(
    cp: &ControlPlane,
    bedrock: &Value,
    vertex: &Value,
) {
    let secret = "AKIAIOSFODNN7EXAMPLE-secret-never-echoed";
    for (provider, config, secrets, says) in [
        (
            "bedrock",
            bedrock,
            json!({"aws_access_key_id": "AKIA"}),
            "aws_secret_access_key",
        ),
        (
            "bedrock",
            bedrock,
            json!({"Authorization": "Bearer k", "aws_access_key_id": "AKIA"}),
            "not both",
        ),
        (
            "vertex",
            vertex,
            json!({"service_account_json": secret}),
            "not JSON",
        ),
        (
            "vertex",
            vertex,
            json!({"service_account_json": format!("{{\"client_email\": \"a@b\", \"private_key\": \"{secret}\"}}")}),
            "PEM",
        ),
    ] {
        let r = create_cloud_model(
            cp,
            "m",
            provider,
            config.clone(),
            json!({"secret_values": secrets}),
        )
        .await;
        r.expect_error("invalid_argument", 400).mentions(says);
        assert!(
            !r.text.contains(secret),
            "the secret is not echoed: {}",
            r.text
        );
    }
}

async fn bedrock_takes_keys_or_an_api_key(cp: &ControlPlane, bedrock: &Value) {
    let keys = create_cloud_model(
        cp,
        "keys",
        "bedrock",
        bedrock.clone(),
        json!({"secret_values": {"aws_access_key_id": "AKIA", "aws_secret_access_key": "s"}}),
    )
    .await;
    assert_eq!(keys.status, 200, "{}", keys.text);
    assert_eq!(keys.body["model"]["uses_gateway_identity"], false);
    let api_key = create_cloud_model(
        cp,
        "api-key",
        "bedrock",
        bedrock.clone(),
        json!({"secret_values": {"Authorization": "Bearer bedrock-api-key"}}),
    )
    .await;
    assert_eq!(api_key.status, 200, "{}", api_key.text);
}

async fn no_credential_means_the_gateways_own_identity(
    cp: &ControlPlane,
    bedrock: &Value,
    vertex: &Value,
) {
    for (name, provider, config) in [
        ("own-aws", "bedrock", bedrock),
        ("own-google", "vertex", vertex),
    ] {
        let own = create_cloud_model(
            cp,
            name,
            provider,
            config.clone(),
            json!({"auth_method": "none"}),
        )
        .await;
        assert_eq!(own.status, 200, "{}", own.text);
        assert_eq!(
            own.body["model"]["uses_gateway_identity"], true,
            "{}",
            own.text
        );
    }
}

async fn provider_config_needs_model_and_known_keys(cp: &ControlPlane) {
    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        cp.body(json!({"name": "m", "provider": "openai"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("provider_config");
    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        cp.body(json!({"name": "m", "provider": "openai", "provider_config": {}})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("provider_config.model");
    cp.call(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": "m", "provider": "openai", "provider_config": {"model": "x", "base_uri": "typo"}})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("provider_config.base_uri");
    cp.call(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": "m", "provider": "openai", "provider_config": {"model": "x", "pricing": {"input_usd_per_mtok": -1}}})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("pricing");
}

async fn auth_pairs_and_defaults(cp: &ControlPlane) {
    let base = |name: &str| json!({"name": name, "provider": "openai", "provider_config": {"model": "gpt-4o"}});
    let with = |name: &str, extra: Value| {
        let mut v = base(name);
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        cp.body(v)
    };
    for (extra, reason) in [
        (
            json!({"auth_method": "none", "credential_type": "shared"}),
            "none accepts only credential_type none",
        ),
        (
            json!({"auth_method": "api-key", "credential_type": "none"}),
            "needs credential_type shared or per-user",
        ),
        (
            json!({"auth_method": "oauth", "credential_type": "none"}),
            "needs credential_type shared or per-user",
        ),
        (
            json!({"auth_method": "none", "secret_values": {"Authorization": "Bearer x"}}),
            "secret_values can be stored only",
        ),
        (
            json!({"secret_values": {"bad header": "x"}}),
            "not a valid HTTP header name",
        ),
        (json!({"auth_method": "basic"}), "unknown variant"),
    ] {
        cp.call(MGMT, "CreateLLMModelConnection", with("bad", extra))
            .await
            .expect_error("invalid_argument", 400)
            .mentions(reason);
    }
    let expectations = [
        (json!({}), ("api-key", "shared")),
        (json!({"auth_method": "none"}), ("none", "none")),
        (json!({"auth_method": "api-key"}), ("api-key", "shared")),
        (json!({"auth_method": "oauth"}), ("oauth", "per-user")),
        (
            json!({"credential_type": "per-user"}),
            ("api-key", "per-user"),
        ),
        (json!({"credential_type": "none"}), ("none", "none")),
        (
            json!({"auth_method": "oauth", "credential_type": "shared"}),
            ("oauth", "shared"),
        ),
    ];
    for (i, (extra, (method, ctype))) in expectations.into_iter().enumerate() {
        let model = cp
            .ok(
                MGMT,
                "CreateLLMModelConnection",
                with(&format!("ok{i}"), extra),
            )
            .await;
        assert_eq!(model["model"]["auth_method"], method);
        assert_eq!(model["model"]["credential_type"], ctype);
    }
}

async fn update_keeps_omitted_and_replaces_provider_config(cp: &ControlPlane) {
    let model = create_model(
        cp,
        json!({"name": "m", "provider": "openai", "provider_config": {"model": "gpt-4o", "base_url": "https://proxy.example.com/v1"},
               "secret_values": {"Authorization": "Bearer sk-keep"}, "attributes": {"tier": "gold"},
               "filter_window_bytes": 1000, "filter_window_tokens": 100}),
    )
    .await;
    let updated = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(json!({"connection_id": id(&model), "name": "renamed"})),
        )
        .await;
    let m = &updated["model"];
    assert_eq!(m["name"], "renamed");
    assert_eq!(m["provider_config"], model["provider_config"]);
    assert_eq!(m["attributes"], json!({"tier": "gold"}));
    assert_eq!(m["has_credential"], true);
    assert_eq!(
        (
            m["filter_window_bytes"].as_u64(),
            m["filter_window_tokens"].as_u64()
        ),
        (Some(1000), Some(100))
    );

    let updated = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(
                json!({"connection_id": id(&model), "provider_config": {"model": "gpt-4o-mini"}}),
            ),
        )
        .await;
    assert_eq!(
        updated["model"]["provider_config"],
        json!({"model": "gpt-4o-mini"}),
        "provider_config is replaced whole, not merged"
    );

    create_model(
        cp,
        json!({"name": "other", "provider": "openai", "provider_config": {"model": "x"}}),
    )
    .await;
    cp.call(
        MGMT,
        "UpdateLLMModelConnection",
        cp.body(json!({"connection_id": id(&model), "name": "other"})),
    )
    .await
    .expect_error("already_exists", 409);
}

async fn unflagged_values_are_ignored_and_flags_replace(cp: &ControlPlane) {
    let model = create_model(
        cp,
        json!({"name": "m", "provider": "openai", "provider_config": {"model": "gpt-4o"},
               "secret_values": {"Authorization": "Bearer sk-one"}, "attributes": {"tier": "gold"}, "filter_window_bytes": 10}),
    )
    .await;
    let mid = id(&model);
    // A client that sends the whole record back without the flags changes nothing it did not
    // flag: the spec's "omitted or unflagged values keep the stored ones".
    let echoed = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(json!({"connection_id": mid, "name": "m2",
             "secret_values": {"x-api-key": "sk-two"}, "attributes": {"tier": "silver"},
             "filter_window_bytes": 20, "filter_window_tokens": 5})),
        )
        .await["model"]
        .clone();
    assert_eq!(
        echoed["name"], "m2",
        "the unflagged update still applies the rest"
    );
    let m = get_model(cp, &mid).await;
    assert_eq!(
        (
            m["attributes"].clone(),
            m["filter_window_bytes"].as_u64(),
            m["filter_window_tokens"].as_u64()
        ),
        (json!({"tier": "gold"}), Some(10), Some(0)),
        "unflagged attributes and window are kept"
    );
    assert_eq!(
        (m["secret_keys"].clone(), m["has_credential"].clone()),
        (json!(["Authorization"]), json!(true)),
        "unflagged secrets are kept"
    );
    let m = cp
        .ok(MGMT, "UpdateLLMModelConnection", cp.body(json!({"connection_id": mid, "secret_values": {"x-api-key": "k2"}, "secret_values_provided": true,
             "attributes": {"tier": "silver"}, "attributes_provided": true, "filter_window_bytes": 20, "filter_window_provided": true})))
        .await["model"]
        .clone();
    assert_eq!(
        m["secret_keys"],
        json!(["x-api-key"]),
        "secret values are replaced, not merged"
    );
    assert_eq!(m["attributes"], json!({"tier": "silver"}));
    assert_eq!(
        (
            m["filter_window_bytes"].as_u64(),
            m["filter_window_tokens"].as_u64()
        ),
        (Some(20), Some(0))
    );

    let m = cp
        .ok(MGMT, "UpdateLLMModelConnection", cp.body(json!({"connection_id": mid, "secret_values_provided": true, "attributes": {}, "attributes_provided": true, "filter_window_provided": true})))
        .await["model"]
        .clone();
    assert_eq!(
        m["has_credential"], false,
        "an empty provided value clears the secrets"
    );
    assert_eq!(m["attributes"], json!({}));
    assert_eq!(m["filter_window_bytes"], 0);
}

async fn filter_window_limits(cp: &ControlPlane) {
    let body = |name: &str, bytes: u64, tokens: u64| {
        cp.body(json!({"name": name, "provider": "openai", "provider_config": {"model": "x"}, "filter_window_bytes": bytes, "filter_window_tokens": tokens}))
    };
    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        body("a", 1024 * 1024 + 1, 0),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("filter_window_bytes");
    cp.call(MGMT, "CreateLLMModelConnection", body("b", 0, 4097))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("filter_window_tokens");
    cp.ok(
        MGMT,
        "CreateLLMModelConnection",
        body("c", 1024 * 1024, 4096),
    )
    .await;
}

async fn switching_auth_method_deletes_the_credential(cp: &ControlPlane) {
    let model = create_model(cp, json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}, "secret_values": {"Authorization": "Bearer sk-switch"}})).await;
    let mid = id(&model);
    let m = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(json!({"connection_id": mid, "auth_method": "none"})),
        )
        .await["model"]
        .clone();
    assert_eq!(
        (
            m["auth_method"].as_str(),
            m["credential_type"].as_str(),
            m["has_credential"].as_bool()
        ),
        (Some("none"), Some("none"), Some(false))
    );
    let m = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(json!({"connection_id": mid, "auth_method": "api-key"})),
        )
        .await["model"]
        .clone();
    assert_eq!(
        m["has_credential"], false,
        "switching back does not bring the old key back"
    );
    let stored = cp
        .db_strings("SELECT owner_id FROM credentials WHERE owner_id = $1", &mid)
        .await;
    assert!(stored.is_empty(), "credential rows remain: {stored:?}");
    // An empty auth_method keeps the stored one.
    let m = cp
        .ok(
            MGMT,
            "UpdateLLMModelConnection",
            cp.body(json!({"connection_id": mid, "auth_method": ""})),
        )
        .await["model"]
        .clone();
    assert_eq!(m["auth_method"], "api-key");
}

async fn delete_detaches_and_deletes_credentials(cp: &ControlPlane) {
    let model = create_model(cp, json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}, "secret_values": {"Authorization": "Bearer sk-del"}})).await;
    let other = create_model(
        cp,
        json!({"name": "n", "provider": "openai", "provider_config": {"model": "y"}}),
    )
    .await;
    let (mid, oid) = (id(&model), id(&other));
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(
                json!({"name": "p", "members": [{"connection_id": mid}, {"connection_id": oid}]}),
            ),
        )
        .await;
    let pool_id = pool["pool"]["pool_id"].as_str().unwrap().to_string();
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": mid})),
    )
    .await;
    assert_eq!(
        get_model(cp, &mid).await["gateways"][0]["id"],
        cp.default_gateway_id.as_str()
    );
    assert_eq!(get_model(cp, &mid).await["pools"][0]["name"], "p");

    cp.ok(
        MGMT,
        "DeleteLLMModelConnection",
        cp.body(json!({"connection_id": mid})),
    )
    .await;
    cp.call(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": mid})),
    )
    .await
    .expect_error("not_found", 404);
    let pool = cp
        .ok(MGMT, "GetLLMPool", cp.body(json!({"pool_id": pool_id})))
        .await;
    let members: Vec<&str> = pool["pool"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["connection_id"].as_str().unwrap())
        .collect();
    assert_eq!(members, [oid.as_str()]);
    let gw = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert_eq!(gw["gateway"]["members"], json!([]));
    assert!(cp
        .db_strings("SELECT owner_id FROM credentials WHERE owner_id = $1", &mid)
        .await
        .is_empty());
    cp.call(
        MGMT,
        "DeleteLLMModelConnection",
        cp.body(json!({"connection_id": mid})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn oauth_connect_and_disconnect_validate_auth_method(cp: &ControlPlane) {
    let key = create_model(
        cp,
        json!({"name": "k", "provider": "openai", "provider_config": {"model": "x"}}),
    )
    .await;
    for op in ["BeginLLMOAuthConnect", "DisconnectLLMOAuth"] {
        cp.call(MGMT, op, cp.body(json!({"connection_id": id(&key)})))
            .await
            .expect_error("failed_precondition", 400)
            .mentions("auth_method=oauth");
    }
    let oauth = create_model(cp, json!({"name": "o", "provider": "openai", "provider_config": {"model": "x"}, "auth_method": "oauth", "credential_type": "shared"})).await;
    assert_eq!(oauth["oauth_state"], "disconnected");
    let reply = cp
        .call(
            MGMT,
            "BeginLLMOAuthConnect",
            cp.body(json!({"connection_id": id(&oauth)})),
        )
        .await;
    reply
        .expect_error("failed_precondition", 400)
        .mentions("auth_config.issuer");
    // Disconnecting a disconnected model has no effect.
    cp.ok(
        MGMT,
        "DisconnectLLMOAuth",
        cp.body(json!({"connection_id": id(&oauth)})),
    )
    .await;
    assert_eq!(
        get_model(cp, &id(&oauth)).await["oauth_state"],
        "disconnected"
    );
}
