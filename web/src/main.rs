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
    control::init_logging();
    if let Err(e) = rocefab_web::run(&cli.args) {
        eprintln!("rocefab: {e:#}");
        std::process::exit(1);
    }
}
