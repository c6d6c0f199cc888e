//! RoCEv2 wire format speed: BTH parse / emit, and a whole RoCEv2 frame parse including the
//! ICRC verification (Ethernet/IPv4/UDP via etherparse, BTH+RETH, 1024-byte payload).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rocefab_wire::roce::{self, bth, reth, Opcode, ParsedFrame, Repr, RoceFrame};

fn benches(c: &mut Criterion) {
    let bth_bytes = [0x0a, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x64];
    c.bench_function("bth_parse", |b| {
        b.iter(|| {
            let p = bth::Packet::new_checked(black_box(&bth_bytes[..])).unwrap();
            black_box(bth::Repr::parse(&p).unwrap())
        })
    });
    let repr = bth::Repr::new(Opcode::WriteOnly, 0x12, 100);
    let mut out = [0u8; 12];
    c.bench_function("bth_emit", |b| {
        b.iter(|| {
            black_box(&repr).emit(&mut bth::Packet::new_unchecked(&mut out[..]));
            black_box(&out);
        })
    });

    for len in [64usize, 1024, 4096] {
        let mut h = Repr::new(bth::Repr::new(Opcode::WriteOnly, 0x12, 100));
        h.reth = Some(reth::Repr { va: 0x1000, r_key: 7, dma_len: len as u32 });
        let payload = vec![0x5au8; len];
        let f = RoceFrame::new(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            h,
            &payload,
        );
        let frame = f.to_vec().unwrap();
        let mut g = c.benchmark_group(format!("frame_{len}"));
        g.throughput(Throughput::Bytes(frame.len() as u64));
        g.bench_function("parse_and_verify_icrc", |b| {
            b.iter(|| {
                let p = ParsedFrame::parse(black_box(&frame)).unwrap();
                assert!(p.icrc.is_good());
                black_box(p.headers)
            })
        });
        g.bench_function("icrc_only", |b| b.iter(|| black_box(roce::icrc_ipv4(black_box(&frame[14..])).unwrap())));
        let mut buf = vec![0u8; frame.len()];
        g.bench_function("emit_with_icrc", |b| b.iter(|| black_box(f.emit(black_box(&mut buf)).unwrap())));
        g.finish();
    }
}

criterion_group!(roce_benches, benches);
criterion_main!(roce_benches);
