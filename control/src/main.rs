//! `rocefab`: bring AI-fabric emulations up and down, inspect them, build frames, decode pcaps.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "rocefab", version, about = "Switch data-plane emulator for AI training fabrics")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Fabric lifecycle and inspection (up, down, status, exec, ...).
    #[command(flatten)]
    Fabric(control::cmd::fabric::FabricCmd),
    /// Build a frame from options and write it to a pcap file.
    Frame(control::cmd::frame::FrameArgs),
    /// pcap / pcapng tools.
    #[command(subcommand)]
    Pcap(PcapCmd),
    /// Run a collective (incast, alltoall, allreduce, broadcast) on a running fabric.
    Run(control::cmd::run::RunArgs),
    /// A data-parallel training job: torchrun-style processes rendezvous over TCP on a frontend
    /// network, broadcast the parameters, then compute and AllReduce gradient buckets.
    Train(control::cmd::train::TrainArgs),
    /// Make something fail on a running fabric (a link: both ends down at once).
    #[command(subcommand)]
    Fail(control::cmd::fail::FailCmd),
    /// Undo a failure (a link back up).
    #[command(subcommand)]
    Restore(control::cmd::fail::RestoreCmd),
    /// The fabric's event log: failures and restores, in emulated and wall-clock time.
    Events(control::cmd::fail::EventsArgs),
    /// Every switch's routes in its data path beside static routing's computation, differences
    /// marked.
    #[command(override_usage = "rocefab routes [FABRIC] [SWITCH] [--json]")]
    Routes(control::cmd::routes::RoutesArgs),
    /// LLDP neighbours and DCBX of every switch port and GPU NIC; `--check` compares them with
    /// the topology's cabling.
    Lldp(control::cmd::lldp::LldpArgs),
    /// Capture switch ports and GPU NICs (what they receive and send) into pcapng.
    Capture(control::cmd::capture::CaptureArgs),
    /// Inject a capture's RoCEv2 frames from a GPU NIC into a running fabric, with the
    /// capture's timing (addresses mapped onto the fabric's GPUs, checksums and ICRC redone).
    #[command(override_usage = "rocefab replay [FABRIC] --from <HOST:GPU> <CAPTURE> [OPTIONS]")]
    Replay(control::replay::ReplayArgs),
    /// Ping one GPU NIC from another and compare the round trip, in emulated time, with the
    /// cable and pipeline latencies the topology configures along the path.
    Ping(control::cmd::ping::PingArgs),
    /// QoS configuration tools.
    #[command(subcommand)]
    Qos(QosCmd),
    /// Print a Prometheus configuration (prometheus.yml) scraping every switch daemon, NIC agent
    /// and (while jobs run) host daemon of a running fabric, labelled fabric, node, role and tier.
    #[command(override_usage = "rocefab prometheus-config [FABRIC] [--scrape-interval 5s] [--hostd-port-base 9700]")]
    PrometheusConfig(control::cmd::prometheus_config::PrometheusConfigArgs),
    /// Serve a live view of a running fabric in the browser: the topology with every link
    /// coloured by its utilisation, PFC pauses and ECN marks, queue depths, DCQCN rates and the
    /// event log, in emulated time.
    #[command(override_usage = "rocefab web [FABRIC] [--listen 127.0.0.1:8080]")]
    Web(control::cmd::web::WebArgs),
}

#[derive(Subcommand)]
enum QosCmd {
    /// Read an NX-OS QoS configuration (class-maps, policy-maps, network-qos, PFC, PFC watchdog)
    /// and print the equivalent `qos:` section, or write it into a topology file; every line that
    /// does not map is listed on stderr with its line number.
    #[command(override_usage = "rocefab qos import <FILE> [--apply TOPOLOGY.yaml]")]
    Import(control::cmd::qos_import::ImportArgs),
}

#[derive(Subcommand)]
enum PcapCmd {
    /// Decode every frame rocefab knows (PFC, PAUSE, LLDP/DCBX, RoCEv2, UET) and list the rest.
    Show(control::cmd::pcap_show::PcapShowArgs),
}

fn main() {
    let cli = Cli::parse();
    control::init_logging();
    // A reader that goes away (`| head`, tshark that has its frames) ends the command quietly
    // with exit 0, wherever the write failed: as an error that reaches here, or as the panic of a
    // `println!` (caught after unwinding, so guards such as a running job's hostd still stop).
    control::pipe::quiet_print_panics();
    let res = std::panic::catch_unwind(|| match &cli.cmd {
        Cmd::Fabric(c) => control::cmd::fabric::run(c),
        Cmd::Frame(a) => control::cmd::frame::run(a),
        Cmd::Pcap(PcapCmd::Show(a)) => control::cmd::pcap_show::run(a),
        Cmd::Run(a) => control::cmd::run::run(a),
        Cmd::Train(a) => control::cmd::train::run(a),
        Cmd::Fail(c) => control::cmd::fail::fail(c),
        Cmd::Restore(c) => control::cmd::fail::restore(c),
        Cmd::Events(a) => control::cmd::fail::events(a),
        Cmd::Routes(a) => control::cmd::routes::run(a),
        Cmd::Lldp(a) => control::cmd::lldp::run(a),
        Cmd::Replay(a) => control::replay::run(a),
        Cmd::Ping(a) => control::cmd::ping::run(a),
        Cmd::Capture(a) => control::cmd::capture::run(a),
        Cmd::Qos(QosCmd::Import(a)) => control::cmd::qos_import::run(a),
        Cmd::PrometheusConfig(a) => control::cmd::prometheus_config::run(a),
        Cmd::Web(a) => control::cmd::web::run(a),
    });
    match res {
        Ok(Ok(())) => {}
        Ok(Err(e)) if control::pipe::is_broken_pipe(&e) => {}
        Ok(Err(e)) => {
            eprintln!("rocefab: {e:#}");
            std::process::exit(1);
        }
        Err(panic) if control::pipe::is_broken_pipe_panic(panic.as_ref()) => {}
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
