use clap::Parser;

fn main() {
    let cli = rebench::cli::Cli::parse();
    std::process::exit(rebench::cli::run(cli));
}
