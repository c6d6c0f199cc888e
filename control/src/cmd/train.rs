//! `rocefab train [fabric] --model-params 16M --iterations 3 --compute 10ms [--bucket 25MiB]
//! [--broadcast tree|chain] [--ring ranks|rail-aligned] [--json]`: a data-parallel training job
//! as the book's chapter 14 walks through it.
//!
//! 1. **Processes:** one `rocefab-rank` per GPU in its host's namespace, numbered and given the
//!    environment torchrun gives (`RANK` = node rank × GPUs per host + local rank, `LOCAL_RANK`,
//!    `GROUP_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`).
//! 2. **Rendezvous** over TCP on the frontend network ([`crate::fabric::frontend`], made on first use):
//!    every rank connects to rank 0 on `MASTER_ADDR:MASTER_PORT`, rank 0 sends each the
//!    communicator's 128-byte unique ID and the world table. Real kernel TCP, so its time is wall
//!    clock.
//! 3. **The job**, one `rocefab-hostd` per host running one schedule
//!    ([`gpu_host::training`]): the parameters broadcast from rank 0 over the backend (a tree by
//!    default, as NCCL's Tree), then per iteration the compute gap (emulated) during which the
//!    gradient buckets become ready, each ring-AllReduced at once (DDP's overlap).
//! 4. **The log**: per iteration its step time, compute, communication window and exposed
//!    communication (emulated), and what the hosts' NICs sent, resent, and received as CNPs and
//!    PFC frames in it; then the collective report of the whole job (per-QP goodput,
//!    retransmissions, CNPs, PFC pause). `--json` prints the same as one object.
//!
//! Every rank's data are checked at the end: the parameters equal rank 0's on every rank, and
//! each iteration's gradients (a region per iteration) are the sum over all ranks.
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use gpu_host::nic::collective_job::{self, ELEM};
use gpu_host::training::{BroadcastAlgo, IterationTimes, Mark, RingOrder, Training, TrainingSpec};
use rocefab_contracts::job::{MilestoneReport, Report};
use rocefab_contracts::rendezvous::{Hello, Joined};
use serde::Serialize;

use crate::fabric::rundir;
use crate::job::hosts::{build_options, check_memory, hosts_of};
use crate::job::launch::{ends_with_parent, execute, locate_hostd, Executed, Hostds, Launch};
use crate::job::report::{human, render_table, summarize, RunReport};
use crate::job::{parse_size, JobArgs};

/// How the parameters are broadcast (`--broadcast`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Broadcast {
    /// Binary tree over hosts (local rank 0 to local rank 0), a chain inside each host.
    #[default]
    Tree,
    /// A pipelined chain in rank order.
    Chain,
}

/// How the AllReduce rings are built (`--ring`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Ring {
    /// One ring in rank order.
    #[default]
    Ranks,
    /// A ring per local rank whose hops between hosts stay on one rail (as NCCL builds them).
    RailAligned,
}

/// Arguments of `rocefab train`.
#[derive(clap::Args, Debug, Clone)]
pub struct TrainArgs {
    /// The fabric (default: the only running one).
    pub fabric: Option<String>,
    /// Parameters of the model (each a 4-byte gradient): a count with an optional K, M, G
    /// (thousand, million, billion) suffix.
    #[arg(long, default_value = "4M", value_parser = parse_count)]
    pub model_params: u64,
    /// Training iterations after the broadcast.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub iterations: u32,
    /// Compute time per iteration (forward and backward pass), emulated: 50ms, 500us.
    #[arg(long, default_value = "10ms", value_parser = parse_compute)]
    pub compute: u64,
    /// Gradient bucket size (PyTorch DDP's bucket_cap_mb; 25 MiB there too).
    #[arg(long, default_value = "25MiB", value_parser = parse_size)]
    pub bucket: u64,
    #[arg(long, value_enum, default_value_t = Broadcast::Tree)]
    pub broadcast: Broadcast,
    #[arg(long, value_enum, default_value_t = Ring::Ranks)]
    pub ring: Ring,
    /// Print the log as JSON.
    #[arg(long)]
    pub json: bool,
    /// Rank 0's rendezvous port on the frontend (torchrun's MASTER_PORT).
    #[arg(long, default_value_t = 29500)]
    pub master_port: u16,
    /// Give up after this many seconds of wall clock from the start of the command.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// How the job's QPs are set up (as `rocefab run`).
    #[command(flatten)]
    pub job: JobArgs,
    /// The NICs send at line rate whatever CNPs they receive (no DCQCN reaction point).
    #[arg(long)]
    pub no_dcqcn: bool,
}

/// `16M` → 16,000,000; `1G` → 1,000,000,000; `1.5K` → 1,500.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'B') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("{s:?}: expected a count such as 4M, 1.5G or 350000"))?;
    let n = (v * mult).round();
    if !(1.0..=1e15).contains(&n) {
        return Err(format!("{s:?}: a parameter count from 1 to 10^15"));
    }
    Ok(n as u64)
}

fn parse_compute(s: &str) -> Result<u64, String> {
    rocefab_units::parse_duration(s, rocefab_units::Bare::Refuse).map(|d| d.as_nanos() as u64)
}

/// Network counters of one part of the job, summed over the hosts' NICs and QPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub tx_bytes: u64,
    pub retransmitted_packets: u64,
    pub cnps_received: u64,
    pub pfc_frames_received: u64,
}

impl Counters {
    fn of(m: &MilestoneReport) -> Counters {
        Counters {
            tx_bytes: m.tx_bytes,
            retransmitted_packets: m.retransmitted_packets,
            cnps_received: m.cnps_received,
            pfc_frames_received: m.pfc_frames_received,
        }
    }

    fn minus(self, o: Counters) -> Counters {
        Counters {
            tx_bytes: self.tx_bytes.saturating_sub(o.tx_bytes),
            retransmitted_packets: self.retransmitted_packets.saturating_sub(o.retransmitted_packets),
            cnps_received: self.cnps_received.saturating_sub(o.cnps_received),
            pfc_frames_received: self.pfc_frames_received.saturating_sub(o.pfc_frames_received),
        }
    }

    fn plus(self, o: Counters) -> Counters {
        Counters {
            tx_bytes: self.tx_bytes + o.tx_bytes,
            retransmitted_packets: self.retransmitted_packets + o.retransmitted_packets,
            cnps_received: self.cnps_received + o.cnps_received,
            pfc_frames_received: self.pfc_frames_received + o.pfc_frames_received,
        }
    }
}

/// The rendezvous.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Rendezvous {
    /// `MASTER_ADDR:MASTER_PORT` on the frontend.
    pub master: String,
    /// The communicator's unique ID, hex (the same on every rank).
    pub unique_id: String,
    /// Wall-clock ms from starting the rank processes until every rank had the ID.
    pub wall_ms: f64,
}

/// One iteration of the log.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct IterationLine {
    pub iteration: u32,
    /// From the previous iteration's (or the broadcast's) end to this one's, on the slowest rank.
    pub step_ns: u64,
    pub compute_ns: u64,
    pub comm_ns: u64,
    pub exposed_comm_ns: u64,
    #[serde(flatten)]
    pub counters: Counters,
}

/// What `rocefab train` reports.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TrainReport {
    pub fabric: String,
    pub ranks: u32,
    pub hosts: usize,
    pub gpus_per_host: u32,
    pub model_params: u64,
    pub bucket_bytes: u64,
    pub buckets: u32,
    pub compute_ns: u64,
    pub broadcast_algo: String,
    pub rings: String,
    /// The NICs ran DCQCN (never over UET, whose window reacts to ECN itself).
    pub dcqcn: bool,
    pub time_dilation: f64,
    pub rendezvous: Rendezvous,
    /// When every rank held the parameters, emulated ns from the start.
    pub broadcast_ns: u64,
    pub broadcast_counters: Counters,
    pub iterations: Vec<IterationLine>,
    /// Every rank's parameters and gradients verified.
    pub ok: bool,
    /// The collective report of the whole job.
    pub network: RunReport,
}

/// Milestone id → (rank, mark).
fn marks(tr: &Training) -> std::collections::HashMap<usize, (u32, Mark)> {
    tr.milestones.iter().map(|m| (m.id, (m.rank, m.mark))).collect()
}

/// Per iteration (0: the broadcast) the counters summed over hosts: each host's counters at the
/// last of its ranks to reach the iteration's end, minus at the previous one's.
pub fn counters_by_iteration(tr: &Training, reports: &[(String, Report)], iterations: u32) -> Vec<Counters> {
    let marks = marks(tr);
    let mut out = vec![Counters::default(); iterations as usize + 1];
    for (_, r) in reports {
        // The host's counters at its latest end of each iteration.
        let mut at: Vec<Option<(u64, Counters)>> = vec![None; iterations as usize + 1];
        for m in &r.milestones {
            let k = match marks.get(&m.id) {
                Some((_, Mark::BroadcastDone)) => 0,
                Some((_, Mark::IterationDone { iteration })) => *iteration as usize,
                _ => continue,
            };
            if at[k].is_none_or(|(t, _)| m.at_ns >= t) {
                at[k] = Some((m.at_ns, Counters::of(m)));
            }
        }
        let mut prev = Counters::default();
        for (k, x) in at.iter().enumerate() {
            if let Some((_, c)) = x {
                out[k] = out[k].plus(c.minus(prev));
                prev = *c;
            }
        }
    }
    out
}

/// The log's iteration lines from the iterations' times and counters.
pub fn iteration_lines(broadcast_end: u64, times: &[IterationTimes], counters: &[Counters]) -> Vec<IterationLine> {
    let mut prev = broadcast_end;
    times
        .iter()
        .map(|t| {
            let line = IterationLine {
                iteration: t.iteration,
                step_ns: t.end_ns.saturating_sub(prev),
                compute_ns: t.compute_ns,
                comm_ns: t.comm_ns,
                exposed_comm_ns: t.exposed_ns,
                counters: counters.get(t.iteration as usize).copied().unwrap_or_default(),
            };
            prev = t.end_ns;
            line
        })
        .collect()
}

/// The text log.
pub fn render_log(r: &TrainReport) -> String {
    let d = crate::text::duration;
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let mut s = format!(
        "rocefab train {}: {} ranks on {} hosts (torchrun: {} nodes x {} procs), {} params ({} of fp32 gradients), \
         {} buckets of {}, compute {} per iteration, {} broadcast, rings {}, {}; times emulated (time dilation {})\n",
        r.fabric,
        r.ranks,
        r.hosts,
        r.hosts,
        r.gpus_per_host,
        count(r.model_params),
        mb(r.model_params * ELEM),
        r.buckets,
        human(r.bucket_bytes),
        d(r.compute_ns),
        r.broadcast_algo,
        r.rings,
        match (r.network.transport == "uet", r.dcqcn) {
            (true, _) => "UET (RUD PDCs, window congestion control)",
            (false, true) => "RoCEv2, DCQCN on",
            (false, false) => "RoCEv2, DCQCN off",
        },
        r.time_dilation
    );
    s += &format!(
        "rendezvous: {} ranks joined rank 0 at {} over TCP on the frontend in {:.1} ms (wall clock); unique id {}..{} ({} bytes)\n",
        r.ranks,
        r.rendezvous.master,
        r.rendezvous.wall_ms,
        &r.rendezvous.unique_id[..8.min(r.rendezvous.unique_id.len())],
        &r.rendezvous.unique_id[r.rendezvous.unique_id.len().saturating_sub(4)..],
        r.rendezvous.unique_id.len() / 2
    );
    s += &format!(
        "broadcast: {} of parameters from rank 0 over the backend ({}) in {} | tx {} | retrans {} | CNPs {} | PFC rx {}\n",
        mb(r.model_params * ELEM),
        r.broadcast_algo,
        d(r.broadcast_ns),
        mb(r.broadcast_counters.tx_bytes),
        r.broadcast_counters.retransmitted_packets,
        r.broadcast_counters.cnps_received,
        r.broadcast_counters.pfc_frames_received
    );
    let n = r.iterations.len();
    for it in &r.iterations {
        let exposed_pct = if it.step_ns > 0 { 100.0 * it.exposed_comm_ns as f64 / it.step_ns as f64 } else { 0.0 };
        s += &format!(
            "iter {}/{n}: step {} | compute {} | comm {} | exposed comm {} ({exposed_pct:.0}% of the step) | tx {} | retrans {} | CNPs {} | PFC rx {}\n",
            it.iteration,
            d(it.step_ns),
            d(it.compute_ns),
            d(it.comm_ns),
            d(it.exposed_comm_ns),
            mb(it.counters.tx_bytes),
            it.counters.retransmitted_packets,
            it.counters.cnps_received,
            it.counters.pfc_frames_received
        );
    }
    s += &format!(
        "train: {} ({} of {} ranks verified: parameters equal rank 0's, every iteration's gradients the sum over ranks)\n\n",
        if r.ok { "ok" } else { "FAILED" },
        r.network.verified_ranks,
        r.ranks
    );
    s += "network, whole job:\n";
    s += &render_table(&r.network);
    s
}

/// `4.0M`, `350.0K`, `1.2G`.
fn count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.1}G", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1}K", n as f64 / 1e3),
        n => n.to_string(),
    }
}

/// Locates `rocefab-rank` beside this binary (or `ROCEFAB_RANK`).
fn locate_rank() -> anyhow::Result<std::path::PathBuf> {
    crate::fabric::process::sibling(
        "rocefab-rank",
        Some("ROCEFAB_RANK"),
        "rank process",
        "build it with `cargo build -p host-daemons`, or set ROCEFAB_RANK",
    )
}

/// Runs `rocefab train`.
pub fn run(a: &TrainArgs) -> anyhow::Result<()> {
    let fabric = crate::fabric::pick_fabric(a.fabric.as_deref())?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(a.timeout);
    let fh = hosts_of(&fabric)?;
    let hostd = locate_hostd()?;
    let rank_bin = locate_rank()?;
    let g = fh.hosts[0].gpus;
    let layout = gpu_host::collective::RankLayout::new(fh.hosts.len() as u32, g)?;
    let params = usize::try_from(a.model_params).map_err(|_| anyhow!("--model-params too large"))?;
    let spec = TrainingSpec {
        layout,
        params,
        iterations: a.iterations,
        bucket: ((a.bucket / ELEM) as usize).max(1),
        compute_ns: a.compute,
        broadcast: match a.broadcast {
            Broadcast::Tree => BroadcastAlgo::Tree,
            Broadcast::Chain => BroadcastAlgo::Chain,
        },
        rings: match a.ring {
            Ring::Ranks => RingOrder::Ranks,
            Ring::RailAligned => RingOrder::RailAligned,
        },
    };
    let opts = build_options(&format!("{}-train", fabric), &fh, &a.job, a.timeout, !a.no_dcqcn);
    let (built, training) =
        collective_job::build_training(&spec, &fh.hosts, &opts).context("building the training job")?;
    check_memory(&format!("train on {}", fabric), &fh, &built.jobs)?;

    // The frontend and one process per GPU, which rendezvous while the hosts' NICs come up.
    let fe = crate::fabric::frontend::addresses(&fabric, fh.hosts.len())?;
    let dir = rundir::dir(&fabric).join("jobs").join("train");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let master = std::net::SocketAddr::new(fe[0].into(), a.master_port);
    let world = layout.world_size();
    let mut ranks = Hostds::named("rocefab-rank");
    let mut expected = Vec::new();
    let rdv_start = Instant::now();
    for (node, (h, ns)) in fh.hosts.iter().zip(&fh.netns).enumerate() {
        for local in 0..g {
            let rank = layout.global_rank(node as u32, local)?;
            let nics = h.nics.len() / h.ports as usize;
            let first = (local as usize % nics) * h.ports as usize;
            let ips: Vec<std::net::IpAddr> = h.nics[first..first + h.ports as usize].iter().map(|n| n.ip).collect();
            expected.push(Hello { rank, local_rank: local, node_rank: node as u32, backend: ips.clone() });
            let log = dir.join(format!("rank{rank}.log"));
            let logf = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
            let ips: Vec<String> = ips.iter().map(|i| i.to_string()).collect();
            let child = ends_with_parent(&mut Command::new(&rank_bin))
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", local.to_string())
                .env("GROUP_RANK", node.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("LOCAL_WORLD_SIZE", g.to_string())
                .env("MASTER_ADDR", fe[0].to_string())
                .env("MASTER_PORT", a.master_port.to_string())
                .args(["--netns", ns, "--backend", &ips.join(",")])
                .arg("--timeout-ms")
                .arg(deadline.saturating_duration_since(Instant::now()).as_millis().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(logf)
                .spawn()
                .with_context(|| format!("starting {} for rank {rank}", rank_bin.display()))?;
            ranks.push(format!("rank {rank} ({}:gpu{local})", h.name), child, log);
        }
    }
    let mut rendezvous = None;
    let launch = Launch {
        what: "train",
        fabric: &fabric,
        dir: &dir,
        hosts: &fh.hosts,
        netns: &fh.netns,
        jobs: &built.jobs,
        started,
        deadline,
        timeout_s: a.timeout,
        quiet: a.json,
        host_workers: a.job.host_workers.resolve_hosts(
            crate::workers::available_cores(),
            fh.hosts.len(),
            built.jobs.iter().map(|j| j.qps.len()).max().unwrap_or(0),
        ),
    };
    let executed = execute(
        &launch,
        &hostd,
        None,
        || {
            let r = wait_rendezvous(&mut ranks, &expected, master, rdv_start, deadline)?;
            if !a.json {
                eprintln!(
                    "rendezvous: {} ranks joined {master} over TCP on the frontend in {:.1} ms (wall clock)",
                    world, r.wall_ms
                );
            }
            rendezvous = Some(r);
            Ok(())
        },
        || Ok(()),
    )?;
    // The job is over: the ranks close their sockets and exit.
    for l in ranks.stop() {
        eprintln!("warning: {l}");
    }
    let Executed { reports, timed_out, errors, .. } = executed;
    let rendezvous = rendezvous.expect("execute ran before_go");
    let metrics = built.jobs.iter().filter_map(|j| j.metrics_listen).map(|l| format!("http://{l}/metrics")).collect();
    let mut net = summarize(&fabric, "train", a.job.segment, a.model_params * ELEM, world, &reports, metrics);
    net.hosts = fh.hosts.len();
    net.timed_out = timed_out;
    let now = rundir::unix_now_ns();
    net.events =
        crate::fabric::events::events_between(&fabric, now.saturating_sub(started.elapsed().as_nanos() as u64), now);
    net.errors.extend(errors);
    net.ok &= net.errors.is_empty() && reports.len() == fh.hosts.len();
    let at: std::collections::HashMap<usize, u64> =
        reports.iter().flat_map(|(_, r)| r.milestones.iter().map(|m| (m.id, m.at_ns))).collect();
    let (broadcast_ns, times) = match training.times(|id| at.get(&id).copied()) {
        Ok(x) => x,
        Err(m) => {
            net.errors.push(format!("rank {} never reached {:?}", m.rank, m.mark));
            net.ok = false;
            (0, Vec::new())
        }
    };
    let counters = counters_by_iteration(&training, &reports, a.iterations);
    let rep = TrainReport {
        fabric: fabric.clone(),
        ranks: world,
        hosts: fh.hosts.len(),
        gpus_per_host: g,
        model_params: a.model_params,
        bucket_bytes: spec.bucket as u64 * ELEM,
        buckets: training.buckets,
        compute_ns: a.compute,
        broadcast_algo: format!("{:?}", a.broadcast).to_lowercase(),
        rings: match a.ring {
            Ring::Ranks => "in rank order".into(),
            Ring::RailAligned => "rail-aligned".into(),
        },
        time_dilation: fh.dilation.factor(),
        dcqcn: !a.no_dcqcn && a.job.transport == crate::job::Transport::Rocev2,
        rendezvous,
        broadcast_ns,
        broadcast_counters: counters[0],
        iterations: iteration_lines(broadcast_ns, &times, &counters),
        ok: net.ok,
        network: net,
    };
    std::fs::write(dir.join("train.json"), serde_json::to_vec_pretty(&rep)?)?;
    let out = if a.json { serde_json::to_string_pretty(&rep)? + "\n" } else { render_log(&rep) };
    std::io::stdout().lock().write_all(out.as_bytes())?;
    if !rep.ok {
        let errs = &rep.network.errors;
        bail!(
            "train did not complete with verified data{}: {}",
            if timed_out { " (timed out: --timeout)" } else { "" },
            errs.iter().take(8).cloned().collect::<Vec<_>>().join("; ")
        );
    }
    Ok(())
}

/// Every rank's [`Joined`] line by `deadline`: all with one unique ID and the world table the
/// plan expects (`expected`, by rank).
fn wait_rendezvous(
    ranks: &mut Hostds,
    expected: &[Hello],
    master: std::net::SocketAddr,
    t0: Instant,
    deadline: Instant,
) -> anyhow::Result<Rendezvous> {
    if let Some(i) = ranks.wait_lines_or_failure(1, deadline, |_| false) {
        bail!("rendezvous: {}", ranks.silence(i, "before it had the unique ID"));
    }
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
    let mut id: Option<String> = None;
    for i in 0..ranks.procs.len() {
        let p = &ranks.procs[i];
        let Some(l) = p.lines.first() else {
            let w = format!("before it had the unique ID (waited {:.1} s)", t0.elapsed().as_secs_f64());
            bail!("rendezvous timed out (--timeout): {}", ranks.silence(i, &w));
        };
        let j: Joined = serde_json::from_str(l).with_context(|| format!("{}: {l:?}", p.host))?;
        if j.world != expected {
            bail!("rendezvous: {} got a world table that is not the fabric's: {:?}", p.host, j.world);
        }
        match &id {
            None => id = Some(j.unique_id),
            Some(x) if *x != j.unique_id => {
                bail!("rendezvous: {} got another unique ID ({} vs {x})", p.host, j.unique_id)
            }
            Some(_) => {}
        }
    }
    Ok(Rendezvous { master: master.to_string(), unique_id: id.unwrap_or_default(), wall_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_read_like_model_sizes() {
        assert_eq!(parse_count("4M").unwrap(), 4_000_000);
        assert_eq!(parse_count("1.5G").unwrap(), 1_500_000_000);
        assert_eq!(parse_count("7B").unwrap(), 7_000_000_000);
        assert_eq!(parse_count("350k").unwrap(), 350_000);
        assert_eq!(parse_count("1024").unwrap(), 1024);
        assert!(parse_count("0").is_err() && parse_count("lots").is_err() && parse_count("-3M").is_err());
    }
}
