//! Parse / emit cost per frame of the L2 formats: PFC (the per-packet path of the PFC engine)
//! and an LLDPDU carrying every DCBX TLV (the LLDP agent's path).
//! `cargo bench -p rocefab-wire --bench l2 -- --quick`

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rocefab_wire::dcbx::*;
use rocefab_wire::ethernet::{MacAddr, Priority, PrioritySet};
use rocefab_wire::lldp::*;
use rocefab_wire::mac_control::{MacControlRepr, Packet, PfcRepr};

const SRC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);

fn p(v: u8) -> Priority {
    Priority::try_new(v).unwrap()
}

fn lldp_dcbx() -> LldpduRepr {
    let tables = EtsTables {
        prio_tc: [0, 0, 0, 3, 0, 0, 0, 7],
        tc_bandwidth: [50, 0, 0, 50, 0, 0, 0, 0],
        tsa: [Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Ets, Tsa::Strict, Tsa::Strict, Tsa::Strict, Tsa::Strict],
    };
    LldpduRepr {
        chassis_id: ChassisId::MacAddress(SRC),
        port_id: PortId::InterfaceName("swp1".into()),
        ttl: 120,
        tlvs: vec![
            Tlv::SystemName { text: "rail-1".into() },
            Tlv::ManagementAddress(ManagementAddress {
                address: NetworkAddress::Ipv4(Ipv4Addr::new(10, 0, 0, 1)),
                interface_subtype: 2,
                interface_number: 1,
                oid: vec![],
            }),
            DcbxTlv::EtsConfiguration(EtsConfig { willing: false, cbs: false, max_tcs: 8, tables }).into(),
            DcbxTlv::EtsRecommendation(EtsRecommendation { tables }).into(),
            DcbxTlv::PfcConfiguration(PfcConfig { willing: false, mbc: false, pfc_cap: 8, enabled: PrioritySet(0x08) })
                .into(),
            DcbxTlv::ApplicationPriority(AppPriority {
                entries: vec![AppEntry::rocev2(p(3)), AppEntry::dscp(24, p(3)), AppEntry::dscp(48, p(7))],
            })
            .into(),
        ],
    }
}

fn bench(c: &mut Criterion) {
    let pfc = MacControlRepr::Pfc(PfcRepr::pause(PrioritySet(0x08), 0xffff));
    let pfc_frame = pfc.to_frame(SRC);
    let mut g = c.benchmark_group("pfc");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_frame", |b| b.iter(|| MacControlRepr::parse_frame(black_box(&pfc_frame)).unwrap()));
    g.bench_function("packet_view_quanta", |b| {
        b.iter(|| {
            let pk = Packet::new_checked(black_box(&pfc_frame[14..])).unwrap();
            pk.pfc_quanta(p(3))
        })
    });
    let mut buf = [0u8; 60];
    g.bench_function("emit_frame", |b| b.iter(|| black_box(&pfc).emit_frame(SRC, &mut buf).unwrap()));
    g.finish();

    let lldp = lldp_dcbx();
    let lldp_frame = lldp.to_frame(SRC).unwrap();
    let mut g = c.benchmark_group("lldp_dcbx");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_frame", |b| b.iter(|| LldpduRepr::parse_frame(black_box(&lldp_frame)).unwrap()));
    g.bench_function("raw_tlv_walk", |b| {
        b.iter(|| {
            RawTlvs::new(black_box(&lldp_frame[14..])).filter_map(Result::ok).map(|t| t.value_len()).sum::<usize>()
        })
    });
    let mut buf = vec![0u8; lldp.frame_len()];
    g.bench_function("emit_frame", |b| b.iter(|| black_box(&lldp).emit_frame(SRC, &mut buf).unwrap()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
