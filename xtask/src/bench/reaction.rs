//! `cargo xtask bench --pfc-reaction N`: the switch's PFC reaction time, from an ingress
//! priority group crossing xOFF to its PFC frame handed to the wire (produced on the AF_XDP TX
//! ring and kicked), as the data path records it in `rocefab_pfc_reaction_seconds`.
//!
//! Scenario: the benchmark switch with its sink-facing port shaped to 10 Mbit/s, xOFF 16 KiB,
//! xON 4 KiB. Each burst is 300 lossless (DSCP 24) 64-byte frames from the AF_XDP generator:
//! the shaper's burst lets ~55 through at once, 64 more (256-byte cells) reach xOFF, the rest go
//! to headroom; the port drains them in ~20 ms, the group falls below xON and the next burst crosses xOFF again. The crossing time is
//! the data-plane pass's clock reading, taken before the frame that crosses is processed, so the
//! reported time is an upper bound.
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::proc::{check_interrupt, Child};
use super::topo::*;
use super::{bench_cmd, free_port, scrape_text, start_switchd, switch_config, Ctx, Running};

const BURST: u64 = 300;

pub fn run(ctx: &Ctx<'_>, bursts: usize) -> anyhow::Result<()> {
    if bursts == 0 {
        bail!("--pfc-reaction 0: nothing to measure");
    }
    let mut cfg = switch_config(free_port()?);
    cfg.ports[1].line_rate_bps = 10_000_000;
    cfg.qos.xoff_bytes = 16 << 10;
    cfg.qos.xon_bytes = 4 << 10;
    cfg.qos.watchdog.enabled = false;
    let running = start_switchd(ctx, cfg)?;
    let Running::Process(_child, Some(metrics)) = &running else { bail!("the switch has no metrics endpoint") };
    let pg = format!("rocefab_ingress_pg_bytes{{port=\"{DUT_IN}\",priority=\"3\",switch=\"rfb-dut\"}}");
    let started = Instant::now();
    for i in 0..bursts {
        check_interrupt()?;
        let mut c = bench_cmd(ctx, "gen");
        c.args([
            "--netns",
            NS_GEN,
            "--iface",
            GEN_IF,
            "--src-mac",
            &mac_str(GEN_MAC),
            "--dst-mac",
            &mac_str(DUT_IN_MAC),
        ])
        .args(["--src-ip", GEN_IP, "--dst-ip", SINK_IP, "--size", "64", "--flows", "1", "--dscp", "24"])
        .args(["--max-packets", &BURST.to_string(), "--duration", "1s"]);
        let mut g =
            Child::spawn("generator", c, Some(ctx.args.gen_cpu), ctx.args.nice, ctx.run_dir.join("gen.stderr"))?;
        let v = g.next_json(Duration::from_secs(15))?;
        g.wait(Duration::from_secs(5))?;
        if v["sent"].as_u64() != Some(BURST) {
            bail!("burst {i}: the generator sent {} frames, not {BURST}", v["sent"]);
        }
        // Wait for the group to drain (below xON, the XON sent) before the next burst.
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            let t = scrape_text(*metrics)?;
            let held = t.lines().find_map(|l| l.strip_prefix(pg.as_str())).and_then(|v| v.trim().parse::<f64>().ok());
            if held == Some(0.0) {
                break;
            }
            if Instant::now() > end {
                bail!("burst {i}: the ingress group did not drain within 2 s ({held:?} bytes)");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let text = scrape_text(*metrics)?;
    let buckets = reaction_buckets(&text).context("no rocefab_pfc_reaction_seconds histogram in the scrape")?;
    let count = buckets.last().map(|b| b.1).unwrap_or(0);
    let pfc_tx =
        rocefab_contracts::promtext::sum(&text, "rocefab_pfc_tx_frames_total", &[("port", DUT_IN), ("priority", "3")]);
    if count < bursts as u64 {
        bail!("{bursts} bursts crossed xOFF only {count} times (PFC frames sent: {pfc_tx})");
    }
    let p50 = quantile(&buckets, 0.5);
    let p99 = quantile(&buckets, 0.99);
    println!(
        "PFC reaction time (xOFF crossing → PFC frame handed to the wire), {count} xOFF crossings in {bursts} bursts, {:.1} s:",
        started.elapsed().as_secs_f64()
    );
    println!("  p50 ≤ {}   p99 ≤ {}   (bucket upper bounds)", fmt_le(p50), fmt_le(p99));
    let met = p99.is_finite() && p99 < 50e-6;
    println!("  target p99 < 50 µs: {}", if met { "met" } else { "not met" });
    Ok(())
}

/// (upper bound in seconds, cumulative count) of every bucket, in order; +Inf is `f64::INFINITY`.
fn reaction_buckets(text: &str) -> Option<Vec<(f64, u64)>> {
    let v: Vec<(f64, u64)> = rocefab_contracts::promtext::samples(text)
        .filter(|s| s.name == "rocefab_pfc_reaction_seconds_bucket")
        .filter_map(|s| {
            let le = s.label("le")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, s.value as u64))
        })
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Upper bound of the bucket holding the `q`-quantile.
fn quantile(buckets: &[(f64, u64)], q: f64) -> f64 {
    let total = buckets.last().map(|b| b.1).unwrap_or(0);
    let rank = ((q * total as f64).ceil() as u64).max(1);
    buckets.iter().find(|b| b.1 >= rank).map(|b| b.0).unwrap_or(f64::INFINITY)
}

fn fmt_le(s: f64) -> String {
    if s.is_finite() {
        format!("{:.1} µs", s * 1e6)
    } else {
        "> 10 ms".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_from_cumulative_buckets() {
        let text = "rocefab_pfc_reaction_seconds_bucket{switch=\"s\",le=\"0.00001\"} 50\n\
                    rocefab_pfc_reaction_seconds_bucket{switch=\"s\",le=\"0.00002\"} 99\n\
                    rocefab_pfc_reaction_seconds_bucket{switch=\"s\",le=\"+Inf\"} 100\n";
        let b = reaction_buckets(text).unwrap();
        assert_eq!(quantile(&b, 0.5), 0.00001);
        assert_eq!(quantile(&b, 0.99), 0.00002);
        assert_eq!(quantile(&b, 1.0), f64::INFINITY);
        assert!(reaction_buckets("nothing\n").is_none());
    }
}
