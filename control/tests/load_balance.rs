//! The `load_balance:` section through the whole topology loader: errors are one line naming
//! file, line and field; the effective mode reaches every switch's config and `rocefab plan`.
use std::path::Path;

use control::cmd::plan::render_plan;
use control::plan::compile;
use control::topology::Topology;
use rocefab_contracts::config::LbMode;

const BASE: &str = "\
fabric: t
time_dilation: 4
hosts:
  count: 2
  gpus_per_host: 2
switches:
  rail:
    - name: rail1
      rails: [1]
    - name: rail2
      rails: [2]
  spine:
    - name: spine1
    - name: spine2
";

fn err(extra: &str) -> String {
    let e = Topology::parse(&format!("{BASE}{extra}"), Path::new("topologies/bad.yaml"))
        .expect_err("must be rejected")
        .to_string();
    assert!(!e.contains('\n'), "error is one line: {e}");
    e
}

#[test]
fn modes_reach_the_switch_configs_and_the_plan() {
    let src = format!(
        "{BASE}load_balance:\n  mode: flowlet\n  flowlet_gap: 100us\n  classes:\n    3: {{ mode: spray, spray: round-robin }}\n  switches:\n    spine1: {{ mode: adaptive }}\n"
    );
    let t = Topology::parse(&src, Path::new("lb.yaml")).unwrap();
    let plan = compile(&t, 9400);
    let cfg = |name: &str| &plan.switch(name).unwrap().config.load_balance;
    assert_eq!(cfg("rail1").modes[3], LbMode::SprayRoundRobin);
    assert_eq!(cfg("rail1").modes[0], LbMode::Flowlet);
    assert_eq!(cfg("spine1").modes, [LbMode::Adaptive; 8]);
    assert_eq!(cfg("spine2").flowlet_gap_us, 100);
    for s in &plan.switches {
        s.config.validate().unwrap();
    }
    let text = render_plan(&t, &plan);
    assert!(
        text.contains("  load balance flowlet (classes 0,1,2,4,5,6,7), spray round-robin (class 3); flowlet gap 100 µs (0.4 ms on the wall clock at D=4)"),
        "{text}"
    );
    assert!(text.contains("  load balance adaptive (every class); flowlet gap 100 µs"), "{text}");
}

#[test]
fn errors_name_file_line_and_field() {
    assert_eq!(
        err("load_balance:\n  mode: ecmp\n  classes:\n    3: { mode: flowlet, spray: random }\n"),
        "topologies/bad.yaml:18: load_balance.classes.3.spray: only with mode: spray"
    );
    assert_eq!(
        err("load_balance:\n  switches:\n    spine7: { mode: spray }\n"),
        "topologies/bad.yaml:17: load_balance.switches.spine7: no switch named \"spine7\""
    );
    let e = err("load_balance:\n  flowlet_gap: 0us\n");
    assert!(
        e.starts_with("topologies/bad.yaml:16: ") && e.contains("flowlet_gap") && e.contains("longer than 0"),
        "{e}"
    );
    let e = err("load_balance: { mode: hash }\n");
    assert!(e.starts_with("topologies/bad.yaml:15: ") && e.contains("unknown variant `hash`"), "{e}");
}
