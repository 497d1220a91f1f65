//! Which subcommand runs each operation of the control-plane API. A test walks the
//! control plane's registry: an operation without a subcommand here, or a subcommand that does
//! not parse, fails it.

/// Operation (method name) → the words of the subcommand that runs it.
pub const COMMANDS: &[(&str, &str)] = &[
    ("CreateLLMModelConnection", "model add"),
    ("UpdateLLMModelConnection", "model update"),
    ("GetLLMModelConnection", "model get"),
    ("ListLLMModelConnections", "model list"),
    ("DeleteLLMModelConnection", "model remove"),
    ("BeginLLMOAuthConnect", "model oauth-connect"),
    ("DisconnectLLMOAuth", "model oauth-disconnect"),
    ("CreateLLMPool", "pool create"),
    ("UpdateLLMPool", "pool update"),
    ("GetLLMPool", "pool get"),
    ("ListLLMPools", "pool list"),
    ("DeleteLLMPool", "pool remove"),
    ("AddLLMPoolMember", "pool member-add"),
    ("RemoveLLMPoolMember", "pool member-remove"),
    ("CreateMCPServerConnection", "tool add"),
    ("UpdateMCPServerConnection", "tool update"),
    ("GetMCPServerConnection", "tool get"),
    ("ListMCPServerConnections", "tool list"),
    ("DeleteMCPServerConnection", "tool remove"),
    ("SyncMCPServerConnectionTools", "tool sync"),
    ("BeginMCPServerOAuthConnect", "tool oauth-connect"),
    ("DisconnectMCPServerOAuth", "tool oauth-disconnect"),
    ("ListConnectionTools", "tool tools"),
    ("ListCatalogServices", "tool catalog"),
    ("InstallCatalogConnection", "tool install"),
    ("UpgradeCatalogConnection", "tool upgrade"),
    ("UninstallCatalogConnection", "tool uninstall"),
    ("BlockTool", "tool block"),
    ("DeprecateTool", "tool deprecate"),
    ("RestoreTool", "tool restore"),
    ("CreateGateway", "gateway create"),
    ("UpdateGateway", "gateway update"),
    ("GetGateway", "gateway get"),
    ("ListGateways", "gateway list"),
    ("DeleteGateway", "gateway remove"),
    ("SetGatewayState", "gateway state"),
    ("SetDefaultGateway", "gateway default"),
    ("AddGatewayModel", "gateway model-add"),
    ("AddGatewayTool", "gateway tool-add"),
    ("AddGatewayToolSource", "gateway tool-source-add"),
    ("AddGatewayPool", "gateway pool-add"),
    ("RemoveGatewayMember", "gateway member-remove"),
    ("SetGatewayAgentAccess", "gateway access"),
    ("SetGatewayAllAgentsAccess", "gateway all-agents"),
    ("SetGatewayQuota", "gateway quota set"),
    ("UpdateGatewayQuota", "gateway quota update"),
    ("ListGatewayQuotas", "gateway quota list"),
    ("RemoveGatewayQuota", "gateway quota remove"),
    ("CreateLLMQuota", "quota create"),
    ("UpdateLLMQuota", "quota update"),
    ("ListLLMQuotas", "quota list"),
    ("DeleteLLMQuota", "quota delete"),
    ("RegisterAgent", "agent register"),
    ("UpdateAgent", "agent update"),
    ("GetAgent", "agent get"),
    ("ListAgents", "agent list"),
    ("ListToolReach", "agent reach"),
    ("ListInteractiveGrants", "agent grants list"),
    ("RevokeInteractiveGrant", "agent grants revoke"),
    ("SuspendAgent", "agent suspend"),
    ("ReactivateAgent", "agent reactivate"),
    ("RevokeAgent", "agent revoke"),
    ("DeleteAgent", "agent delete"),
    ("CreateAgentKey", "key create"),
    ("EnsureAgentKey", "key ensure"),
    ("RotateAgentKey", "key rotate"),
    ("RevokeAgentKey", "key revoke"),
    ("ListAgentKeys", "key list"),
    ("ExchangeAgentKey", "key exchange"),
    ("CreateActAsProvider", "actas-provider create"),
    ("UpdateActAsProvider", "actas-provider update"),
    ("GetActAsProvider", "actas-provider get"),
    ("ListActAsProviders", "actas-provider list"),
    ("DeleteActAsProvider", "actas-provider delete"),
    ("DeployRuleBundle", "rules deploy"),
    ("ListRuleBundles", "rules list"),
    ("DeleteRuleBundle", "rules delete"),
    ("CreateGuard", "guard create"),
    ("UpdateGuard", "guard update"),
    ("GetGuard", "guard get"),
    ("ListGuards", "guard list"),
    ("DeleteGuard", "guard delete"),
    ("TestGuard", "guard test"),
    ("CreateDeployment", "deployment create"),
    ("ListDeployments", "deployment list"),
    ("RevokeDeployment", "deployment revoke"),
    ("CreatePlatformKey", "platform-key create"),
    ("ListPlatformKeys", "platform-key list"),
    ("RevokePlatformKey", "platform-key revoke"),
    ("ListUserCredentials", "credential list"),
    ("DeleteUserCredential", "credential delete"),
    ("GetIdentity", "identity"),
    ("ListWorkspaces", "workspaces"),
    ("UpdateWorkspace", "workspace update"),
    ("QueryEvents", "audit query"),
    ("GetEvent", "audit get"),
    ("CreateSubscription", "webhook subscription create"),
    ("GetSubscription", "webhook subscription get"),
    ("ListSubscriptions", "webhook subscription list"),
    ("UpdateSubscription", "webhook subscription update"),
    ("DeleteSubscription", "webhook subscription delete"),
    ("TestSubscription", "webhook subscription test"),
    (
        "RotateSubscriptionSecret",
        "webhook subscription rotate-secret",
    ),
    ("CreateDestination", "webhook destination create"),
    ("ListDestinations", "webhook destination list"),
    ("UpdateDestination", "webhook destination update"),
    ("DeleteDestination", "webhook destination delete"),
    (
        "RotateDestinationSecret",
        "webhook destination rotate-secret",
    ),
    ("ListProviders", "webhook providers"),
    ("ListDeliveries", "webhook delivery list"),
    ("GetDelivery", "webhook delivery get"),
    ("ReplayDelivery", "webhook delivery replay"),
    ("ReplayFailedDeliveries", "webhook delivery replay-failed"),
    ("CancelDeliveryRetry", "webhook delivery cancel"),
];

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::COMMANDS;
    use crate::args::Cli;

    /// Gateways' own traffic: no person runs it.
    const GATEWAY_ONLY: &str = "svc.sync.v1.SyncService/";

    #[test]
    fn every_operation_has_a_subcommand() {
        let registry = portcullis_controlplane::api::Registry::new();
        for path in registry.paths() {
            if path.starts_with(GATEWAY_ONLY) {
                continue;
            }
            let method = path.rsplit('/').next().unwrap_or_default();
            assert!(
                COMMANDS.iter().any(|(op, _)| *op == method),
                "{path} has no subcommand in cli/src/parity.rs"
            );
        }
        for (op, _) in COMMANDS {
            assert!(registry.path_of(op).is_some(), "{op} is not an operation");
        }
    }

    /// Every command group shows examples in its `--help`, and every example parses.
    #[test]
    fn every_command_group_has_examples_that_parse() {
        use clap::CommandFactory;
        let cli = Cli::command();
        for group in cli.get_subcommands() {
            let name = group.get_name();
            if matches!(name, "help" | "identity" | "workspaces") {
                continue;
            }
            let text = group
                .get_after_help()
                .or_else(|| group.get_long_about())
                .map(ToString::to_string)
                .unwrap_or_default();
            let examples: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    l.trim()
                        .strip_prefix("Example: ")
                        .or_else(|| l.strip_prefix("  "))
                })
                .filter(|l| l.starts_with("portcullis "))
                .collect();
            assert!(
                !examples.is_empty(),
                "`portcullis {name} --help` shows no example"
            );
            for example in examples {
                let argv: Vec<&str> = example.split(' ').take_while(|w| *w != ">").collect();
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("the example `{example}` does not parse: {e}");
                }
            }
        }
    }

    #[test]
    fn every_listed_subcommand_exists() {
        for (op, words) in COMMANDS {
            let mut argv = vec!["portcullis"];
            argv.extend(words.split(' '));
            argv.push("--help");
            let err = Cli::try_parse_from(&argv).expect_err("--help stops parsing");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::DisplayHelp,
                "{op}: `{words}` is not a subcommand: {err}"
            );
        }
    }
}
