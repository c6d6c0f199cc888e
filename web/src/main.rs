//! `rocefab-web`: the server of `rocefab web` (which hands over to it); see the library.
use clap::Parser;

#[derive(Parser)]
#[command(name = "rocefab web", version, about = "A live view of a running rocefab fabric in the browser")]
struct Cli {
    #[command(flatten)]
    args: rocefab_web::WebArgs,
}

fn main() {
    let cli = Cli::parse();
    // Warnings of the CLI's library go to stderr, as `rocefab` shows them.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .without_time()
        .init();
    if let Err(e) = rocefab_web::run(&cli.args) {
        eprintln!("rocefab: {e:#}");
        std::process::exit(1);
    }
}
