//! `portcullis webhook …` flags: subscriptions (which events go where), destinations (where
//! they go; subscriptions may share one), deliveries (each event sent, with its attempts) and
//! the destination providers.

use clap::{Args, Subcommand};
use portcullis_shared::api::eventing::DeliveryStatus;

use crate::parse;

const SUBSCRIPTION_EXAMPLES: &str = "\
Examples:
  portcullis webhook subscription create denials --event-type access.denied \\
    --endpoint https://hooks.example.com/portcullis
  portcullis webhook subscription create billing-denials --event-type access.denied \\
    --filter agent_name=billing --filter 'tool_name~=github/*' --destination denials
  portcullis webhook subscription create spend --event-type quota.threshold \\
    --event-type quota.exceeded --provider slack \\
    --setting webhook_url=https://hooks.slack.com/services/T0/B0/x
  portcullis webhook subscription update denials --disable
  portcullis webhook subscription test denials";

const DESTINATION_EXAMPLES: &str = "\
Examples:
  portcullis webhook destination create ops --endpoint https://hooks.example.com/portcullis
  portcullis webhook destination create ops-slack --provider slack \\
    --setting webhook_url=https://hooks.slack.com/services/T0/B0/x
  portcullis webhook destination update ops --enable
  portcullis webhook providers    # the providers and the settings each takes";

const DELIVERY_EXAMPLES: &str = "\
Examples:
  portcullis webhook delivery list --status failed --status dlq --since 24h
  portcullis webhook delivery get 1f0c… --include-body
  portcullis webhook delivery replay 1f0c…
  portcullis webhook delivery replay-failed --since 24h --subscription denials
  portcullis webhook delivery cancel 1f0c…";

#[derive(Debug, Subcommand)]
pub enum WebhookCmd {
    /// Subscriptions: the event types (and filters) a destination receives.
    #[command(subcommand)]
    Subscription(SubscriptionCmd),
    /// Destinations: HTTPS endpoints or providers, each with its signing secret.
    #[command(subcommand)]
    Destination(DestinationCmd),
    /// Deliveries: each event sent to a destination, with its attempts.
    #[command(subcommand)]
    Delivery(DeliveryCmd),
    /// The destination providers (https, slack, …) and the settings each takes.
    Providers,
}

/// Where a new subscription's events go: a new destination (an endpoint, or a provider and
/// its settings) or an existing one.
#[derive(Debug, Clone, Default, Args)]
pub struct Target {
    /// A new https destination posting to this URL.
    #[arg(
        long,
        value_name = "URL",
        required_unless_present_any = ["destination", "provider"],
        conflicts_with_all = ["destination", "provider", "settings"]
    )]
    pub endpoint: Option<String>,
    /// An existing destination (id or name).
    #[arg(long, conflicts_with_all = ["provider", "settings"])]
    pub destination: Option<String>,
    /// A new destination of this provider (see `webhook providers`), with --setting.
    #[arg(long)]
    pub provider: Option<String>,
    /// A provider setting, KEY=VALUE (repeatable).
    #[arg(long = "setting", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
}

#[derive(Debug, Subcommand)]
#[command(after_help = SUBSCRIPTION_EXAMPLES)]
pub enum SubscriptionCmd {
    /// Subscribe a destination to event types; a new destination's signing secret is printed
    /// once.
    #[command(after_help = SUBSCRIPTION_EXAMPLES)]
    Create {
        /// The subscription's name (or --name).
        #[arg(required_unless_present = "name_flag")]
        name: Option<String>,
        /// The name, as a flag.
        #[arg(long = "name", value_name = "NAME", conflicts_with = "name")]
        name_flag: Option<String>,
        /// An event type it receives (repeatable): access.denied, quota.exceeded, …
        #[arg(long = "event-type", value_name = "TYPE", required = true)]
        event_types: Vec<String>,
        /// Only events whose data matches: `key=value` or `key~=glob` on a top-level field such
        /// as agent_name or tool_name (repeatable; a key given twice matches either value,
        /// distinct keys must all match).
        #[arg(long = "filter", value_name = "FILTER", value_parser = parse::webhook_filter)]
        filters: Vec<String>,
        #[command(flatten)]
        target: Target,
        /// Store without delivering.
        #[arg(long)]
        disabled: bool,
    },
    /// Show one subscription.
    Get {
        /// Subscription id or name.
        subscription: String,
    },
    /// List the workspace's subscriptions, disabled ones included.
    List,
    /// Change a subscription; flags left out keep their value.
    Update {
        /// Subscription id or name.
        subscription: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// Replaces the event types (repeatable).
        #[arg(long = "event-type", value_name = "TYPE")]
        event_types: Vec<String>,
        /// Replaces the filters (repeatable): `key=value` or `key~=glob`.
        #[arg(long = "filter", value_name = "FILTER", value_parser = parse::webhook_filter)]
        filters: Vec<String>,
        /// Remove every filter.
        #[arg(long, conflicts_with = "filters")]
        clear_filters: bool,
        #[arg(long, alias = "enabled", conflicts_with = "disable")]
        enable: bool,
        #[arg(long, alias = "disabled")]
        disable: bool,
    },
    /// Delete a subscription and cancel its pending deliveries (its destination stays).
    Delete {
        /// Subscription id or name.
        subscription: String,
    },
    /// Send an `eventing.test` event; `webhook delivery get` shows how it went.
    Test {
        /// Subscription id or name.
        subscription: String,
    },
    /// A new signing secret for the subscription's destination, printed once; the old one
    /// still signs for 24 hours.
    RotateSecret {
        /// Subscription id or name.
        subscription: String,
    },
}

#[derive(Debug, Subcommand)]
#[command(after_help = DESTINATION_EXAMPLES)]
pub enum DestinationCmd {
    /// Add a destination subscriptions can share; its signing secret is printed once.
    #[command(after_help = DESTINATION_EXAMPLES)]
    Create {
        /// The destination's name (or --name).
        #[arg(required_unless_present = "name_flag")]
        name: Option<String>,
        /// The name, as a flag.
        #[arg(long = "name", value_name = "NAME", conflicts_with = "name")]
        name_flag: Option<String>,
        /// An https destination posting to this URL.
        #[arg(
            long,
            value_name = "URL",
            required_unless_present = "provider",
            conflicts_with = "provider"
        )]
        endpoint: Option<String>,
        /// A provider (see `webhook providers`), with --setting.
        #[arg(long)]
        provider: Option<String>,
        /// A provider setting, KEY=VALUE (repeatable).
        #[arg(
            long = "setting",
            value_name = "KEY=VALUE",
            conflicts_with = "endpoint"
        )]
        settings: Vec<String>,
    },
    /// List the workspace's destinations (secrets are never shown).
    List,
    /// Change a destination; flags left out keep their value. Enabling one that `410 Gone`
    /// disabled clears the reason.
    Update {
        /// Destination id or name.
        destination: String,
        /// A new name.
        #[arg(long)]
        name: Option<String>,
        /// A new URL (https destinations).
        #[arg(long, value_name = "URL", conflicts_with = "settings")]
        endpoint: Option<String>,
        /// Replaces the provider settings, KEY=VALUE (repeatable; give every required one).
        #[arg(long = "setting", value_name = "KEY=VALUE")]
        settings: Vec<String>,
        #[arg(long, alias = "enabled", conflicts_with = "disable")]
        enable: bool,
        #[arg(long, alias = "disabled")]
        disable: bool,
    },
    /// Delete a destination no subscription uses.
    Delete {
        /// Destination id or name.
        destination: String,
    },
    /// A new signing secret, printed once; the old one still signs for 24 hours.
    RotateSecret {
        /// Destination id or name.
        destination: String,
    },
}

#[derive(Debug, Subcommand)]
#[command(after_help = DELIVERY_EXAMPLES)]
pub enum DeliveryCmd {
    /// Deliveries, newest first, a page at a time.
    #[command(after_help = DELIVERY_EXAMPLES)]
    List {
        /// pending | failed | succeeded | dlq | canceled (repeatable; none given = all).
        #[arg(long = "status", value_name = "STATUS", value_parser = parse::delivery_status)]
        statuses: Vec<DeliveryStatus>,
        /// RFC 3339 time, or a duration back from now such as 30m, 24h, 7d.
        #[arg(long)]
        since: Option<String>,
        /// Only this subscription's (id or name).
        #[arg(long)]
        subscription: Option<String>,
        /// Only this destination's (id or name).
        #[arg(long)]
        destination: Option<String>,
        /// Only events of this type.
        #[arg(long, value_name = "TYPE")]
        event_type: Option<String>,
        /// Deliveries per page.
        #[arg(long, visible_alias = "limit", value_name = "N")]
        max: Option<u32>,
        /// The next-page token a previous list printed.
        #[arg(long)]
        page_token: Option<String>,
    },
    /// One delivery and its attempts.
    Get {
        delivery_id: String,
        /// Also print the body as sent, while it is retained.
        #[arg(long)]
        include_body: bool,
    },
    /// Send a delivery's retained body again, as a new delivery of the same event.
    Replay { delivery_id: String },
    /// Replay what failed since a time; safe to run again.
    ///
    /// Replays the failed and dlq deliveries (or only those of --status) that have no live or
    /// succeeded replay yet, at most --max (500 unless lower) per run. Canceled deliveries are
    /// never replayed in bulk.
    #[command(after_help = DELIVERY_EXAMPLES)]
    ReplayFailed {
        /// RFC 3339 time, or a duration back from now such as 30m, 24h, 7d.
        #[arg(long)]
        since: String,
        /// Only this subscription's (id or name).
        #[arg(long)]
        subscription: Option<String>,
        /// Only this destination's (id or name).
        #[arg(long)]
        destination: Option<String>,
        /// failed | dlq (repeatable; both when not given).
        #[arg(long = "status", value_name = "STATUS", value_parser = parse::delivery_status)]
        statuses: Vec<DeliveryStatus>,
        /// At most this many replays (at most 500).
        #[arg(long, value_name = "N")]
        max: Option<u32>,
    },
    /// Stop retrying a delivery; it ends `canceled`.
    Cancel { delivery_id: String },
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use portcullis_shared::api::eventing::DeliveryStatus::{Dlq, Failed};

    use super::*;
    use crate::args::{Cli, Command};

    fn parse(line: &str) -> Result<Command, clap::Error> {
        Cli::try_parse_from(line.split_whitespace()).map(|cli| cli.command)
    }

    #[test]
    fn a_subscription_needs_a_name_event_types_and_one_target() {
        let create = "portcullis webhook subscription create";
        assert!(parse(&format!(
            "{create} s --event-type access.denied --endpoint https://h"
        ))
        .is_ok());
        assert!(parse(&format!(
            "{create} s --event-type a --provider slack --setting k=v"
        ))
        .is_ok());
        let Ok(Command::Webhook(WebhookCmd::Subscription(SubscriptionCmd::Create {
            name,
            name_flag,
            target,
            ..
        }))) = parse(&format!("{create} --name s --event-type a --destination d"))
        else {
            panic!("parsed as the wrong command")
        };
        assert_eq!((name, name_flag), (None, Some("s".into())));
        assert_eq!(target.destination.as_deref(), Some("d"));
        for bad in [
            "--event-type a --endpoint https://h",
            "s --endpoint https://h",
            "s --event-type a",
            "s --event-type a --endpoint https://h --destination d",
            "s --event-type a --destination d --setting k=v",
            "s --event-type a --endpoint https://h --filter nokey",
            "s --name t --event-type a --endpoint https://h",
        ] {
            assert!(parse(&format!("{create} {bad}")).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn statuses_limits_and_enabled_flags_parse() {
        let Ok(Command::Webhook(WebhookCmd::Delivery(DeliveryCmd::List { statuses, max, .. }))) =
            parse("portcullis webhook delivery list --status failed --status dlq --limit 10")
        else {
            panic!("parsed as the wrong command")
        };
        assert_eq!((statuses, max), (vec![Failed, Dlq], Some(10)));
        let err = parse("portcullis webhook delivery list --status done").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(parse("portcullis webhook delivery replay-failed").is_err());
        for flag in ["--disable", "--disabled"] {
            let Ok(Command::Webhook(WebhookCmd::Destination(DestinationCmd::Update {
                enable,
                disable,
                ..
            }))) = parse(&format!("portcullis webhook destination update d {flag}"))
            else {
                panic!("parsed as the wrong command")
            };
            assert!(disable && !enable, "{flag}");
        }
        let update = "portcullis webhook subscription update s";
        assert!(parse(&format!("{update} --enable --disable")).is_err());
        assert!(parse(&format!("{update} --clear-filters --filter a=b")).is_err());
    }
}
