//! `portcullis`: every management operation as a subcommand, and `portcullis up`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod commands;
mod ctx;
mod output;
mod parse;
mod up;

use clap::Parser;

use args::{Cli, Command};

#[tokio::main]
async fn main() {
    portcullis_gateway::install_crypto_provider();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Up(args) => up::run(args).await,
        command => match ctx::Ctx::connect(&cli.global).await {
            Ok(ctx) => commands::run(&ctx, command).await,
            Err(e) => Err(e),
        },
    };
    if let Err(e) = result {
        eprintln!("error: {}", output::describe(&e));
        std::process::exit(1);
    }
}
