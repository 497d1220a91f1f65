//! `portcullis`: every management operation of the control-plane API as a subcommand, and
//! `portcullis up`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod commands;
mod ctx;
mod output;
#[cfg(test)]
mod parity;
mod parse;
mod up;

use std::process::ExitCode;

use clap::Parser;
use mimalloc::MiMalloc;

use args::{Cli, Command};

// The gateway's allocator, for `portcullis up` too: it serves requests on every core.
#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    portcullis_gateway::install_crypto_provider();
    let cli = Cli::parse();
    let result = match cli.command {
        // Commands that need no control-plane connection.
        Command::Up(args) => up::run(args).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "portcullis",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        // An agent's own call: its key, not a platform key.
        Command::Key(args::KeyCmd::Exchange { agent_key, gateway }) => {
            commands::keys::exchange(&cli.global, &agent_key, gateway.as_deref()).await
        }
        // Everything else talks to the control plane with a platform key.
        command => match ctx::Ctx::connect(&cli.global) {
            Ok(ctx) => commands::run(&ctx, command).await,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => output::fail(&e),
    }
}
