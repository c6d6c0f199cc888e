//! placeholder (ebpf helper)
