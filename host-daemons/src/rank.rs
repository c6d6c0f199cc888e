//! `rocefab-rank`: one training process per GPU, as torchrun starts them (book ch. 14,
//! Fig. 14-2/14-3), doing what a PyTorch worker and NCCL do before the first collective: the
//! rendezvous over TCP on the frontend (management) network.
//!
//! torchrun's environment names the process: `RANK` (global rank = node rank × processes per
//! node + local rank), `LOCAL_RANK`, `GROUP_RANK` (the node rank), `WORLD_SIZE`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`. Rank 0 listens on `MASTER_ADDR:MASTER_PORT`;
//! every other rank connects (retrying until the master listens, as torchrun's store clients
//! do) and sends a hello line naming itself and its GPU's backend addresses. Once all
//! `WORLD_SIZE − 1` hellos are in, the master draws the communicator's unique ID (128 random
//! bytes, the size of an `ncclUniqueId`) and sends every rank the ID and the world table
//! (NCCL's bootstrap allgather). Each rank prints one JSON line ([`Joined`]) and keeps its
//! socket until its standard input closes (the job's end), then exits.
//!
//! The protocol is one JSON object per line ([`Hello`], [`Welcome`], in `rocefab_contracts::rendezvous`); a malformed or duplicate
//! hello, a rank outside the world or a missing peer by the deadline ends the master with an
//! error naming it.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rocefab_contracts::rendezvous::{Hello, Joined, Welcome};

pub use rocefab_contracts::rendezvous::UNIQUE_ID_BYTES;

/// `rocefab-rank` arguments (torchrun's environment, or flags).
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "rocefab-rank", about = "one torchrun-style training process: TCP rendezvous on the frontend")]
pub struct Args {
    #[arg(long, env = "RANK")]
    pub rank: u32,
    #[arg(long, env = "LOCAL_RANK")]
    pub local_rank: u32,
    #[arg(long, env = "GROUP_RANK")]
    pub node_rank: u32,
    #[arg(long, env = "WORLD_SIZE")]
    pub world_size: u32,
    #[arg(long, env = "MASTER_ADDR")]
    pub master_addr: std::net::IpAddr,
    #[arg(long, env = "MASTER_PORT", default_value_t = 29500)]
    pub master_port: u16,
    /// This GPU's backend (RoCE) addresses, comma separated.
    #[arg(long, value_delimiter = ',')]
    pub backend: Vec<std::net::IpAddr>,
    /// Network namespace to enter first (the GPU's host).
    #[arg(long)]
    pub netns: Option<String>,
    /// Give up on the rendezvous after this many ms (wall clock).
    #[arg(long, default_value_t = 60_000)]
    pub timeout_ms: u64,
}

/// Runs the rank: rendezvous, print [`Joined`], wait for standard input to close.
pub fn main(a: Args) -> anyhow::Result<()> {
    let t0 = Instant::now();
    if let Some(ns) = &a.netns {
        rocefab_plumbing::netns::enter(ns).with_context(|| format!("entering namespace {ns}"))?;
    }
    let deadline = t0 + Duration::from_millis(a.timeout_ms);
    let me = Hello { rank: a.rank, local_rank: a.local_rank, node_rank: a.node_rank, backend: a.backend.clone() };
    let addr = SocketAddr::new(a.master_addr, a.master_port);
    let (welcome, _sockets) = if a.rank == 0 {
        let l = TcpListener::bind(addr).with_context(|| format!("rank 0: listening on {addr}"))?;
        master(&l, me, a.world_size, deadline, &random_id()?)?
    } else {
        let s = worker(addr, &me, deadline)?;
        let mut line = String::new();
        BufReader::new(s.try_clone()?).read_line(&mut line).with_context(|| format!("rank {}: reading", a.rank))?;
        let w: Welcome = serde_json::from_str(line.trim())
            .with_context(|| format!("rank {}: the master's answer {:?}", a.rank, line.trim()))?;
        (w, vec![s])
    };
    let joined = Joined {
        rank: a.rank,
        unique_id: welcome.unique_id,
        world: welcome.world,
        rendezvous_ns: t0.elapsed().as_nanos() as u64,
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (the controller went away) ends the rank quietly.
    if writeln!(out, "{}", serde_json::to_string(&joined)?).and_then(|_| out.flush()).is_err() {
        return Ok(());
    }
    drop(out);
    // Keep the sockets (NCCL keeps its bootstrap connections) until the job is over.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    Ok(())
}

/// The master's side on `l`: every other rank's hello by `deadline`, then the ID `id` and the
/// world table to each. Returns the answer and the open connections.
pub fn master(
    l: &TcpListener,
    me: Hello,
    world_size: u32,
    deadline: Instant,
    id: &[u8],
) -> anyhow::Result<(Welcome, Vec<TcpStream>)> {
    if me.rank != 0 || world_size == 0 {
        bail!("the master is rank 0 of a world of at least one rank");
    }
    l.set_nonblocking(true)?;
    let mut world: Vec<Option<Hello>> = vec![None; world_size as usize];
    world[0] = Some(me);
    let mut socks = Vec::new();
    while socks.len() + 1 < world_size as usize {
        let (s, peer) = match l.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> =
                        world.iter().enumerate().filter(|(_, h)| h.is_none()).map(|(r, _)| r.to_string()).collect();
                    bail!("rendezvous: ranks {} did not join by the deadline", missing.join(", "));
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => return Err(e).context("rendezvous: accepting"),
        };
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
        let mut line = String::new();
        BufReader::new(s.try_clone()?).read_line(&mut line).with_context(|| format!("rendezvous: reading {peer}"))?;
        let h: Hello = serde_json::from_str(line.trim())
            .with_context(|| format!("rendezvous: hello from {peer} is not a hello: {:?}", line.trim()))?;
        let slot = world
            .get_mut(h.rank as usize)
            .ok_or_else(|| anyhow!("rendezvous: {peer} says rank {}, world {world_size}", h.rank))?;
        if slot.is_some() {
            bail!("rendezvous: rank {} joined twice (again from {peer})", h.rank);
        }
        *slot = Some(h);
        socks.push(s);
    }
    let w = Welcome { unique_id: hex(id), world: world.into_iter().map(|h| h.expect("all joined")).collect() };
    let line = serde_json::to_string(&w)? + "\n";
    for s in &mut socks {
        s.write_all(line.as_bytes()).context("rendezvous: sending the unique ID")?;
    }
    Ok((w, socks))
}

/// A worker's side: connect to the master (retrying until `deadline`) and say hello.
pub fn worker(addr: SocketAddr, me: &Hello, deadline: Instant) -> anyhow::Result<TcpStream> {
    let mut s = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!("rank {}: {addr}: {e}; retrying", me.rank);
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e).with_context(|| format!("rank {}: connecting to the master {addr}", me.rank)),
        }
    };
    s.set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))?;
    s.write_all((serde_json::to_string(me)? + "\n").as_bytes())?;
    Ok(s)
}

/// 128 random bytes from the kernel.
fn random_id() -> anyhow::Result<Vec<u8>> {
    let mut id = vec![0u8; UNIQUE_ID_BYTES];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut id)).context("reading /dev/urandom")?;
    Ok(id)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(rank: u32) -> Hello {
        Hello {
            rank,
            local_rank: rank % 2,
            node_rank: rank / 2,
            backend: vec![format!("10.0.{}.1", rank).parse().unwrap()],
        }
    }

    #[test]
    fn every_rank_gets_the_masters_id_and_the_whole_world() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let workers: Vec<_> = (1..4u32)
            .rev()
            .map(|r| {
                std::thread::spawn(move || {
                    let s = worker(addr, &hello(r), deadline).unwrap();
                    let mut line = String::new();
                    BufReader::new(s).read_line(&mut line).unwrap();
                    serde_json::from_str::<Welcome>(line.trim()).unwrap()
                })
            })
            .collect();
        let id = [7u8; UNIQUE_ID_BYTES];
        let (w, socks) = master(&l, hello(0), 4, deadline, &id).unwrap();
        assert_eq!(socks.len(), 3);
        assert_eq!(w.unique_id.len(), 2 * UNIQUE_ID_BYTES);
        assert_eq!(w.world, (0..4).map(hello).collect::<Vec<_>>(), "the table is by rank");
        for t in workers {
            assert_eq!(t.join().unwrap(), w);
        }
    }

    #[test]
    fn a_duplicate_or_foreign_rank_and_a_missing_one_are_named() {
        let deadline = || Instant::now() + Duration::from_millis(600);
        for (bad, want) in [(2u32, "rank 2 joined twice"), (9, "says rank 9, world 3")] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let d = deadline();
            let t = std::thread::spawn(move || {
                let a = worker(addr, &hello(2), d).unwrap();
                let b = worker(addr, &hello(bad), d).unwrap();
                (a, b)
            });
            let e = master(&l, hello(0), 3, deadline(), &[1; 4]).unwrap_err();
            assert!(format!("{e:#}").contains(want), "{e:#}");
            drop(t.join());
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let d = deadline();
        let t = std::thread::spawn(move || worker(addr, &hello(1), d).unwrap());
        let e = master(&l, hello(0), 3, deadline(), &[1; 4]).unwrap_err();
        assert!(format!("{e:#}").contains("ranks 2 did not join"), "{e:#}");
        drop(t.join());
        // Not a hello.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET / HTTP/1.0\n").unwrap();
            s
        });
        let e = master(&l, hello(0), 2, deadline(), &[1; 4]).unwrap_err();
        assert!(format!("{e:#}").contains("is not a hello"), "{e:#}");
        drop(t.join());
    }
}
