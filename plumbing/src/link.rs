//! Link queries on the calling thread's network namespace (ioctls, not sysfs: /sys shows the
//! namespace it was mounted in, not the one the process entered).

/// An `ifreq` ioctl (`SIOCGIF*`) on interface `name` of the calling thread's network namespace
/// (sysfs would show the namespace /sys was mounted in, not the one the process entered).
fn ifreq_get(name: &str, request: libc::c_ulong) -> std::io::Result<libc::ifreq> {
    ifreq_ioctl(name, request, |_| {})
}

/// An `ifreq` ioctl `request` on interface `name`, after `fill` has set the request's member.
fn ifreq_ioctl(
    name: &str,
    request: libc::c_ulong,
    fill: impl FnOnce(&mut libc::ifreq),
) -> std::io::Result<libc::ifreq> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    if name.len() >= libc::IFNAMSIZ {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is too long"),
        ));
    }
    // SAFETY: plain socket(2) call; the descriptor is checked and then owned.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    fill(&mut ifr);
    // SAFETY: the SIOCGIF* requests read ifr_name and write one member of the ifreq we pass;
    // SIOCSIFFLAGS reads ifr_name and the flags `fill` set;
    // SIOCETHTOOL reads the command `ifru_data` points to (set by `fill`, alive for this call).
    if unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut ifr) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The MTU of interface `name` (`SIOCGIFMTU`).
pub fn link_mtu(name: &str) -> std::io::Result<u32> {
    let ifr = ifreq_get(name, libc::SIOCGIFMTU)?;
    // SAFETY: the kernel filled the mtu member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}

/// Whether interface `name` is up with carrier (`IFF_UP` and `IFF_RUNNING`, `SIOCGIFFLAGS`);
/// `None` if it does not exist.
pub fn link_running(name: &str) -> Option<bool> {
    let ifr = ifreq_get(name, libc::SIOCGIFFLAGS).ok()?;
    // SAFETY: the kernel filled the flags member of the union.
    let flags = i32::from(unsafe { ifr.ifr_ifru.ifru_flags });
    Some(flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0)
}

/// Sets interface `name` administratively up or down (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with
/// `IFF_UP` changed): what `ip link set dev <name> up|down` does, without a process.
pub fn set_admin_up(name: &str, up: bool) -> std::io::Result<()> {
    let named = |e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{name}: setting it {}: {e}", if up { "up" } else { "down" }))
    };
    let ifr = ifreq_get(name, libc::SIOCGIFFLAGS).map_err(named)?;
    // SAFETY: the kernel filled the flags member of the union.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    let up_flag = libc::IFF_UP as libc::c_short;
    let flags = if up { flags | up_flag } else { flags & !up_flag };
    ifreq_ioctl(name, libc::SIOCSIFFLAGS, |r| r.ifr_ifru.ifru_flags = flags).map(|_| ()).map_err(named)
}

/// ethtool's ioctl commands and string set (linux/ethtool.h).
mod ethtool {
    pub const GSTRINGS: u32 = 0x1b;
    pub const GSSET_INFO: u32 = 0x37;
    pub const SFEATURES: u32 = 0x3b;
    /// `ETH_SS_FEATURES`: the netdev feature names, one per feature bit.
    pub const SS_FEATURES: u32 = 4;
    /// `ETH_GSTRING_LEN`.
    pub const GSTRING_LEN: usize = 32;
}

/// SIOCETHTOOL with the command in `buf` (a `struct ethtool_*` the kernel reads and fills).
fn ethtool_ioctl(name: &str, buf: &mut [u32]) -> std::io::Result<()> {
    ifreq_ioctl(name, libc::SIOCETHTOOL, |ifr| ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast()).map(|_| ())
}

/// The netdev feature names of interface `name`, in bit order (`ethtool -k`'s names).
pub fn feature_names(name: &str) -> std::io::Result<Vec<String>> {
    // struct ethtool_sset_info { cmd, reserved, sset_mask: u64, data[1] }
    let mut info = [ethtool::GSSET_INFO, 0, 1 << ethtool::SS_FEATURES, 0, 0];
    ethtool_ioctl(name, &mut info)?;
    let count = info[4] as usize;
    // struct ethtool_gstrings { cmd, string_set, len, data[len * ETH_GSTRING_LEN] }
    let mut buf = vec![0u32; 3 + count * ethtool::GSTRING_LEN / 4];
    buf[..3].copy_from_slice(&[ethtool::GSTRINGS, ethtool::SS_FEATURES, count as u32]);
    ethtool_ioctl(name, &mut buf)?;
    let bytes: Vec<u8> = buf[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes
        .chunks(ethtool::GSTRING_LEN)
        .map(|c| String::from_utf8_lossy(&c[..c.iter().position(|&b| b == 0).unwrap_or(c.len())]).into_owned())
        .collect())
}

/// The features `ethtool -K <if> tx off tso off gso off gro off` turns off, by name: every TX
/// checksum, every TCP segmentation offload, GSO and GRO.
fn offload_feature(f: &str) -> bool {
    f.starts_with("tx-checksum-")
        || (f.starts_with("tx-tcp") && f.ends_with("segmentation"))
        || f == "tx-generic-segmentation"
        || f == "rx-gro"
}

/// Turns TX checksumming, TSO, GSO and GRO off on interface `name` of the calling thread's
/// namespace, as `ethtool -K <name> tx off tso off gso off gro off` does, without a process per
/// interface: SIOCETHTOOL `ETHTOOL_SFEATURES` with the feature bits found by name. (The legacy
/// per-offload commands miss features newer than them, e.g. TCP AccECN segmentation in 6.18;
/// rust-netlink's `ethtool` crate speaks the netlink interface but needs tokio, which the CLI
/// does not link.)
pub fn offloads_off(name: &str) -> std::io::Result<()> {
    let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{name}: ethtool (offloads off): {e}"));
    let names = feature_names(name).map_err(named)?;
    let words = names.len().div_ceil(32);
    // struct ethtool_sfeatures { cmd, size, features[size] { valid, requested } }
    let mut buf = vec![0u32; 2 + 2 * words];
    buf[..2].copy_from_slice(&[ethtool::SFEATURES, words as u32]);
    for (bit, _) in names.iter().enumerate().filter(|(_, f)| offload_feature(f)) {
        buf[2 + 2 * (bit / 32)] |= 1 << (bit % 32); // valid; requested stays 0: off
    }
    ethtool_ioctl(name, &mut buf).map_err(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ethtool -k <name>`'s verdict on one feature line (`tx-checksumming: off`).
    fn ethtool_says(name: &str, feature: &str) -> bool {
        let out = std::process::Command::new("ethtool").args(["-k", name]).output().expect("ethtool -k");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{feature}:")))
            .unwrap_or_else(|| panic!("{text}"));
        line.split(':').nth(1).is_some_and(|v| v.trim().starts_with("on"))
    }

    const OFFLOADS: [&str; 4] =
        ["tx-checksumming", "tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"];

    #[test]
    fn offloads_off_turns_off_what_ethtool_k_tx_tso_gso_gro_off_does() {
        assert!(
            nix::unistd::Uid::effective().is_root(),
            "needs root (unshare(CLONE_NEWNET), SIOCETHTOOL set): run as root"
        );
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
            let run =
                |p: &str, args: &[&str]| assert!(std::process::Command::new(p).args(args).status().unwrap().success());
            run("ip", &["link", "add", "rfo0", "type", "veth", "peer", "name", "rfo1"]);
            run("ethtool", &["-K", "rfo0", "gro", "on"]);
            // A veth starts with all four on (GRO as just set), by ethtool's own reading.
            assert!(OFFLOADS.iter().all(|f| ethtool_says("rfo0", f)));
            let names = feature_names("rfo0").unwrap();
            assert!(
                names.iter().any(|n| n == "tx-generic-segmentation") && names.iter().any(|n| n == "rx-gro"),
                "{names:?}"
            );
            offloads_off("rfo0").unwrap();
            for f in OFFLOADS {
                assert!(!ethtool_says("rfo0", f), "{f} still on");
            }
            // Only those: RX checksumming stays on; the peer is untouched.
            assert!(ethtool_says("rfo0", "rx-checksumming"));
            assert!(ethtool_says("rfo1", "tx-checksumming"));
            let e = offloads_off("no-such-if0").unwrap_err().to_string();
            assert!(e.starts_with("no-such-if0: ethtool (offloads off): "), "{e}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn set_admin_up_does_what_ip_link_set_up_and_down_do() {
        assert!(
            nix::unistd::Uid::effective().is_root(),
            "needs root (unshare(CLONE_NEWNET), SIOCSIFFLAGS): run as root"
        );
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
            let ip = |args: &[&str]| {
                let o = std::process::Command::new("ip").args(args).output().unwrap();
                assert!(o.status.success(), "ip {args:?}");
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            // `ip -o link show`'s flags: <BROADCAST,MULTICAST,UP,LOWER_UP>.
            let flags = |n: &str| {
                let l = ip(&["-o", "link", "show", n]);
                l.split('<')
                    .nth(1)
                    .and_then(|r| r.split('>').next())
                    .unwrap()
                    .split(',')
                    .map(String::from)
                    .collect::<Vec<_>>()
            };
            ip(&["link", "add", "rfs0", "type", "veth", "peer", "name", "rfs1"]);
            assert!(!flags("rfs0").contains(&"UP".to_string()));
            set_admin_up("rfs0", true).unwrap();
            set_admin_up("rfs1", true).unwrap();
            assert!(flags("rfs0").contains(&"UP".to_string()) && flags("rfs0").contains(&"LOWER_UP".to_string()));
            assert_eq!(link_running("rfs1"), Some(true));
            set_admin_up("rfs0", false).unwrap();
            assert!(!flags("rfs0").contains(&"UP".to_string()), "{:?}", flags("rfs0"));
            // The peer keeps its own flag and loses the carrier, as with `ip link set rfs0 down`.
            assert!(flags("rfs1").contains(&"UP".to_string()) && flags("rfs1").contains(&"NO-CARRIER".to_string()));
            assert_eq!(link_running("rfs1"), Some(false));
            let e = set_admin_up("no-such-if0", false).unwrap_err().to_string();
            assert!(e.starts_with("no-such-if0: "), "{e}");
        })
        .join()
        .unwrap();
    }
}
