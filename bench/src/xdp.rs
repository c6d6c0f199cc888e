//! The two XDP programs the benchmark tools need, assembled here from raw eBPF instructions
//! (Linux `Documentation/bpf/standardization/instruction-set.rst`) and loaded with libbpf:
//!
//! - [`Program::Drop`]: `return XDP_DROP`. Attached to the sink's veth, it discards every frame
//!   before an skb is built; the veth driver still counts the frame in `rx_packets`.
//! - [`Program::RedirectXsk`]: `return bpf_redirect_map(&xsks, 0, XDP_PASS)` into a one-slot
//!   XSKMAP holding the forwarder's AF_XDP socket (veth has a single queue, 0).
//!
//! They are attached through BPF links (`BPF_LINK_CREATE`, attach type `BPF_XDP`), so the kernel
//! detaches them when the process exits for any reason, `kill -9` included: nothing to clean up.
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use anyhow::{bail, Context};

/// XDP return codes (include/uapi/linux/bpf.h, `enum xdp_action`).
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;
/// `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE` (include/uapi/linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `BPF_PSEUDO_MAP_FD`: the imm of an `ld_imm64` is a map fd the loader resolves.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// Helper id of `bpf_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// One eBPF instruction, laid out as `struct bpf_insn` (8 bytes; dst_reg in the low nibble).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}
const _: () = assert!(std::mem::size_of::<Insn>() == 8);

const fn insn(code: u8, dst: u8, src: u8, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | (dst & 0x0f), off: 0, imm }
}
/// `BPF_ALU64 | BPF_MOV | BPF_K`: dst = imm.
const fn mov64_imm(dst: u8, imm: i32) -> Insn {
    insn(0xb7, dst, 0, imm)
}
/// `BPF_JMP | BPF_CALL`.
const fn call(helper: i32) -> Insn {
    insn(0x85, 0, 0, helper)
}
/// `BPF_JMP | BPF_EXIT`.
const fn exit() -> Insn {
    insn(0x95, 0, 0, 0)
}
/// `BPF_LD | BPF_IMM | BPF_DW` with `src = BPF_PSEUDO_MAP_FD`: dst = &map (two instructions).
const fn ld_map_fd(dst: u8, fd: i32) -> [Insn; 2] {
    [insn(0x18, dst, BPF_PSEUDO_MAP_FD, fd), insn(0, 0, 0, 0)]
}

/// Instructions of `return XDP_DROP`.
fn drop_insns() -> Vec<Insn> {
    vec![mov64_imm(0, XDP_DROP), exit()]
}

/// Instructions of `return bpf_redirect_map(map, 0, XDP_PASS)`.
fn redirect_insns(map_fd: RawFd) -> Vec<Insn> {
    let mut v = ld_map_fd(1, map_fd).to_vec();
    v.extend([mov64_imm(2, 0), mov64_imm(3, XDP_PASS), call(BPF_FUNC_REDIRECT_MAP), exit()]);
    v
}

/// XDP attach mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Native (driver) XDP; veth supports it.
    Driver,
    /// Generic (skb) XDP.
    Skb,
}

impl Mode {
    fn flags(self) -> u32 {
        match self {
            Mode::Driver => XDP_FLAGS_DRV_MODE,
            Mode::Skb => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// Which program to attach.
pub enum Program<'a> {
    Drop,
    /// Redirect to this AF_XDP socket (queue 0).
    RedirectXsk(&'a dyn AsRawFd),
}

/// An attached program; dropping it closes the link, which detaches the program.
pub struct Attached {
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: Option<OwnedFd>,
}

fn owned(ret: i32, what: &str) -> anyhow::Result<OwnedFd> {
    if ret < 0 {
        return Err(io::Error::from_raw_os_error(-ret)).with_context(|| what.to_string());
    }
    // SAFETY: libbpf returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

/// Looks up an interface index in the current network namespace.
pub fn ifindex(iface: &str) -> anyhow::Result<u32> {
    let c = CString::new(iface).context("interface name contains NUL")?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("interface {iface:?} not found"));
    }
    Ok(idx)
}

/// Loads `prog` and attaches it to `iface` (current namespace) in `mode` through a BPF link.
pub fn attach(iface: &str, prog: Program<'_>, mode: Mode) -> anyhow::Result<Attached> {
    let idx = ifindex(iface)?;
    let (insns, map) = match prog {
        Program::Drop => (drop_insns(), None),
        Program::RedirectXsk(sock) => {
            let name = CString::new("rfb_xsks").expect("no NUL");
            // SAFETY: valid name pointer; NULL opts is allowed by libbpf.
            let ret = unsafe {
                libxdp_sys::bpf_map_create(
                    libxdp_sys::bpf_map_type_BPF_MAP_TYPE_XSKMAP,
                    name.as_ptr(),
                    4,
                    4,
                    1,
                    std::ptr::null(),
                )
            };
            let map = owned(ret, "creating the XSKMAP")?;
            let key = 0u32;
            let val = sock.as_raw_fd() as u32;
            // SAFETY: key and value point to 4-byte values as the map was created with.
            let ret = unsafe {
                libxdp_sys::bpf_map_update_elem(
                    map.as_raw_fd(),
                    (&key as *const u32).cast(),
                    (&val as *const u32).cast(),
                    0,
                )
            };
            if ret < 0 {
                return Err(io::Error::from_raw_os_error(-ret)).context("inserting the AF_XDP socket into the XSKMAP");
            }
            (redirect_insns(map.as_raw_fd()), Some(map))
        }
    };
    let name = CString::new("rfb_bench").expect("no NUL");
    let license = CString::new("GPL").expect("no NUL");
    let mut log = vec![0u8; 64 * 1024];
    // SAFETY: all-zero is a valid bpf_prog_load_opts (plain integers and null pointers).
    let mut opts: libxdp_sys::bpf_prog_load_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of::<libxdp_sys::bpf_prog_load_opts>();
    opts.log_buf = log.as_mut_ptr().cast();
    opts.log_size = log.len() as u32;
    opts.log_level = 0;
    // SAFETY: `Insn` has the layout of `struct bpf_insn`; the pointers outlive the call.
    let ret = unsafe {
        libxdp_sys::bpf_prog_load(
            libxdp_sys::bpf_prog_type_BPF_PROG_TYPE_XDP,
            name.as_ptr(),
            license.as_ptr(),
            insns.as_ptr().cast(),
            insns.len(),
            &mut opts,
        )
    };
    if ret < 0 {
        let msg = String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
        bail!("loading the XDP program: {} {msg}", io::Error::from_raw_os_error(-ret));
    }
    let prog_fd = owned(ret, "loading the XDP program")?;
    // SAFETY: all-zero is a valid bpf_link_create_opts.
    let mut lopts: libxdp_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
    lopts.sz = std::mem::size_of::<libxdp_sys::bpf_link_create_opts>();
    lopts.flags = mode.flags();
    // SAFETY: valid program fd and ifindex; `lopts` outlives the call.
    let ret = unsafe {
        libxdp_sys::bpf_link_create(prog_fd.as_raw_fd(), idx as i32, libxdp_sys::bpf_attach_type_BPF_XDP, &lopts)
    };
    let link = owned(ret, &format!("attaching XDP ({mode:?} mode) to {iface}"))?;
    Ok(Attached { _link: link, _prog: prog_fd, _map: map })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_program_encoding() {
        // r0 = 1; exit — the encoding bpftool prints for `return XDP_DROP`.
        let p = drop_insns();
        // SAFETY: Insn is 8 plain bytes.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(p.as_ptr().cast(), p.len() * 8) };
        assert_eq!(bytes, &[0xb7, 0, 0, 0, 1, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn redirect_program_encoding() {
        let p = redirect_insns(7);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], Insn { code: 0x18, regs: 0x11, off: 0, imm: 7 }, "ld_imm64 r1 = map fd 7 (pseudo)");
        assert_eq!(p[1], Insn { code: 0, regs: 0, off: 0, imm: 0 });
        assert_eq!(p[2], Insn { code: 0xb7, regs: 0x02, off: 0, imm: 0 }, "r2 = key 0");
        assert_eq!(p[3], Insn { code: 0xb7, regs: 0x03, off: 0, imm: 2 }, "r3 = XDP_PASS");
        assert_eq!(p[4], Insn { code: 0x85, regs: 0, off: 0, imm: 51 }, "call bpf_redirect_map");
        assert_eq!(p[5].code, 0x95);
    }
}
