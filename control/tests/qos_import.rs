//! `rocefab qos import`: the book's NX-OS examples (ch. 11, Examples 11-1 to 11-7, clean copies in
//! `tests/fixtures/nxos/`) import into a `qos:` section that the topology loader accepts and
//! whose effective settings are the book's; malformed configurations are errors naming the file,
//! the line and the field; lines that do not map are listed with their line numbers.
//!
//! The tests sit in `mod qos_import` so that `cargo test -p control qos_import` selects them.

mod qos_import {
    use std::io::Read;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    use control::qos::SwitchQos;
    use control::qos_import::{entries, import, merge_into_topology, overridden, render, Import, NoteKind, QosImport};
    use control::topology::Topology;

    const BIN: &str = env!("CARGO_BIN_EXE_rocefab");

    fn manifest() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    fn fixture_path(name: &str) -> PathBuf {
        manifest().join("tests/fixtures/nxos").join(name)
    }

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(fixture_path(name)).unwrap()
    }

    fn shipped(name: &str) -> (PathBuf, String) {
        let p = manifest().join("../topologies").join(name);
        let s = std::fs::read_to_string(&p).unwrap();
        (p, s)
    }

    fn ok(src: &str, file: &str) -> Import {
        import(src, file).unwrap_or_else(|e| panic!("{file} must import: {e}"))
    }

    /// The error of `src` (as `bad.cfg`), one line.
    fn err(src: &str) -> String {
        let e = import(src, "bad.cfg").expect_err("must be rejected").to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        e
    }

    /// The book's full configuration with line `n` (1-based) replaced by `text` (several lines
    /// allowed).
    fn book_with(edits: &[(usize, &str)]) -> String {
        let src = fixture("book-ch11.cfg");
        let mut lines: Vec<String> = src.lines().map(str::to_string).collect();
        for &(n, text) in edits {
            lines[n - 1] = text.to_string();
        }
        lines.join("\n") + "\n"
    }

    /// `(line, kind)` of every note.
    fn noted(i: &Import) -> Vec<(usize, NoteKind)> {
        i.notes.iter().map(|n| (n.line, n.kind)).collect()
    }

    fn dscp_table(pairs: &[(usize, u8)]) -> Vec<u8> {
        let mut t = vec![0u8; 64];
        for &(d, g) in pairs {
            t[d] = g;
        }
        t
    }

    /// What the book configures (ch. 11): DSCP 24 → 3 and 48 → 7, PFC on 3, queue 7 strict,
    /// queues 0 and 3 at 50 % of the rest, WRED with ECN on queue 3 from 150 KB to 3000 KB
    /// with 7 % marked at the maximum, and the PFC watchdog on.
    fn assert_book_effective(name: &str, q: &SwitchQos) {
        assert_eq!(q.dscp_to_tc, dscp_table(&[(24, 3), (48, 7)]), "{name}: classes");
        let c = &q.qos;
        assert_eq!(c.lossless_priorities, 1 << 3, "{name}: pfc");
        assert_eq!(c.strict_priorities, 1 << 7, "{name}: strict");
        assert_eq!(c.ets_percent, [50, 0, 0, 50, 0, 0, 0, 0], "{name}: ets");
        let w = &c.wred;
        assert_eq!(
            (w.queues, w.min_bytes, w.max_bytes, w.probability_percent),
            (1 << 3, 150_000, 3_000_000, 7),
            "{name}"
        );
        assert!(c.watchdog.enabled, "{name}: watchdog");
    }

    /// A topology whose qos: sets every key the import writes to something that is not the
    /// book's, beside keys the import leaves alone.
    const NOT_THE_BOOK: &str = "\
# A fabric whose QoS is not the book's.
fabric: nb
hosts: { count: 2, gpus_per_host: 2, nic: per-gpu }
switches:
  rail:
    - { name: rail1, rails: [1] }
    - { name: rail2, rails: [2] }
  spine:
    - { name: spine1 }
qos:                        # not the book's
  classes: { 26: 4, 46: 6 } # AF31 -> 4, EF -> 6
  pfc: [4]
  strict: [6]
  ets: { 0: 30, 4: 70 }
  xoff: 4MB                 # not imported: kept
  wred: { queues: [4], min: 100KB, max: 900KB, probability: 20 }
  # the watchdog alerts only
  watchdog:
    action: alert
    detect: 100ms
  headroom: auto

lldp: { tx_interval: 10s }
";

    #[test]
    fn the_book_configuration_round_trips_through_the_topology_loader() {
        let file = "book-ch11.cfg";
        let imp = ok(&fixture(file), file);
        // Every key is written: the result does not lean on rocefab's defaults (which are the
        // book's too).
        let keys: Vec<&str> = entries(&imp.qos).iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["classes", "pfc", "strict", "ets", "wred", "watchdog"]);
        // The one line with no equivalent: the network-qos MTU.
        assert_eq!(noted(&imp), [(41, NoteKind::NotSupported)]);
        assert_eq!(imp.notes[0].text, "mtu 9216");

        // Into a topology whose qos: is not the book's: the loader's effective settings of every
        // switch are the book's, and the keys the import does not speak to are kept.
        let path = Path::new("not-the-book.yaml");
        let merged = merge_into_topology(NOT_THE_BOOK, &imp.qos, file).unwrap();
        let t = Topology::parse(&merged, path).unwrap_or_else(|e| panic!("{e}\n{merged}"));
        assert_eq!(t.qos.len(), 3);
        for (s, q) in t.switches.iter().zip(&t.qos) {
            assert_book_effective(&s.name, q);
            assert_eq!(q.qos.xoff_bytes, 4_000_000, "{}: xoff kept", s.name);
            assert!(q.headroom_auto, "{}: headroom kept", s.name);
            assert_eq!(overridden(&imp.qos, q), Vec::<&str>::new());
        }
        assert_eq!(t.lldp, Topology::parse(NOT_THE_BOOK, path).unwrap().lldp, "lldp kept");
        let expected = "\
# A fabric whose QoS is not the book's.
fabric: nb
hosts: { count: 2, gpus_per_host: 2, nic: per-gpu }
switches:
  rail:
    - { name: rail1, rails: [1] }
    - { name: rail2, rails: [2] }
  spine:
    - { name: spine1 }
qos:                        # not the book's
  classes: { 24: 3, 48: 7 }   # book-ch11.cfg:7-10,12-18,50,53
  pfc: [3]                    # book-ch11.cfg:39-40,42,46-47,50-51
  strict: [7]                 # book-ch11.cfg:20,36-37,46,48
  ets: { 0: 50, 3: 50 }       # book-ch11.cfg:20-28,30-36,46,48
  xoff: 4MB                 # not imported: kept
  wred: { queues: [3], min: 150KB, max: 3000KB, probability: 7 } # book-ch11.cfg:20,27,29,46,48
  # the watchdog alerts only
  watchdog: on                # book-ch11.cfg:44,50,52
  headroom: auto

lldp: { tx_interval: 10s }
";
        assert_eq!(merged, expected);

        // The section `rocefab qos import` prints, pasted into a shipped topology without one,
        // parses through the same loader to the same settings.
        let printed = render(&imp.qos, file);
        assert!(
            printed.starts_with("# rocefab qos import book-ch11.cfg\nqos:\n  classes: { 24: 3, 48: 7 }"),
            "{printed}"
        );
        let (rs, text) = shipped("rail-spine.yaml");
        assert!(!text.contains("\nqos:"), "rail-spine.yaml has no qos: section");
        let t = Topology::parse(&format!("{text}{printed}"), &rs).unwrap();
        for (s, q) in t.switches.iter().zip(&t.qos) {
            assert_book_effective(&s.name, q);
        }
        // --apply on a file without qos: adds the same section.
        let added = merge_into_topology(&text, &imp.qos, file).unwrap();
        assert_eq!(added, format!("{text}{}", printed.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n"));
    }

    #[test]
    fn apply_into_a_shipped_topology_keeps_every_other_line() {
        // rail-spine-incast.yaml runs PFC alone: wred and watchdog off, its own thresholds.
        let (path, text) = shipped("rail-spine-incast.yaml");
        let imp = ok(&fixture("book-ch11.cfg"), "book-ch11.cfg");
        let merged = merge_into_topology(&text, &imp.qos, "book-ch11.cfg").unwrap();
        let t = Topology::parse(&merged, &path).unwrap();
        let before = Topology::parse(&text, &path).unwrap();
        for ((s, q), b) in t.switches.iter().zip(&t.qos).zip(&before.qos) {
            assert_book_effective(&s.name, q);
            assert_eq!(
                (q.qos.xoff_bytes, q.qos.xon_bytes, q.qos.headroom_bytes),
                (b.qos.xoff_bytes, b.qos.xon_bytes, b.qos.headroom_bytes)
            );
        }
        // Lines that are not the imported keys are all still there, in order.
        let kept: Vec<&str> = text
            .lines()
            .filter(|l| !["pfc:", "watchdog:", "wred:"].iter().any(|k| l.trim_start().starts_with(k)))
            .collect();
        let now: Vec<&str> = merged.lines().filter(|l| kept.contains(l)).collect();
        assert_eq!(now, kept);
        assert_eq!(merged.lines().count(), text.lines().count() + 3, "classes, strict and ets added");
    }

    #[test]
    fn each_book_example_alone() {
        // 11-1: class-maps no policy uses: nothing set, every line listed as not used.
        let i = ok(&fixture("example-11-1.cfg"), "example-11-1.cfg");
        assert_eq!(i.qos, QosImport::default());
        assert_eq!(noted(&i), [2, 3, 4, 5].map(|l| (l, NoteKind::NotUsed)));
        assert_eq!(
            i.notes[1].show("example-11-1.cfg"),
            "example-11-1.cfg:3: match dscp 24: not used (no policy-map type qos sets a qos-group for class-map ROCEv2)"
        );
        assert!(render(&i.qos, "example-11-1.cfg").ends_with("qos: {}\n"));
        // 11-2 refers to 11-1's class-maps.
        assert_eq!(
            err(&fixture("example-11-2.cfg")),
            "bad.cfg:3: class: class-map type qos ROCEv2 is not defined in the file"
        );
        // 11-3 as printed leaves queues out ("..."): its shares add up to 50 %.
        assert_eq!(
            err(&fixture("example-11-3.cfg")),
            "bad.cfg:3: bandwidth remaining percent: the shares of policy-map QOS_EGRESS_PORT add up to 50 %, not \
             100 (queue 3 50 % at line 8)"
        );
        // With the default queue's share it is the book's scheduling and WRED.
        let filled = fixture("example-11-3.cfg")
            + "  class type queuing c-out-8q-q-default\n    bandwidth remaining percent 50\n";
        let i = ok(&filled, "11-3.cfg");
        assert_eq!((i.qos.strict, i.qos.ets), (Some(1 << 7), Some([50, 0, 0, 50, 0, 0, 0, 0])));
        let w = i.qos.wred.unwrap().unwrap();
        assert_eq!((w.queues, w.min.bytes(), w.max.bytes(), w.probability), (1 << 3, 150_000, 3_000_000, 7));
        assert_eq!((i.qos.classes.is_some(), i.qos.pfc, i.qos.watchdog), (false, None, None));
        assert_eq!(noted(&i), []);
        // 11-4: PFC on priority 3; the MTU has no qos: key.
        let i = ok(&fixture("example-11-4.cfg"), "example-11-4.cfg");
        assert_eq!(entries(&i.qos), [("pfc", "[3]".to_string())]);
        assert_eq!(
            i.notes.iter().map(|n| n.show("example-11-4.cfg")).collect::<Vec<_>>(),
            ["example-11-4.cfg:5: mtu 9216: not supported (an MTU per class: qos: has no MTU key; the topology's \
              top-level mtu: sets every link's, and --apply leaves it)"]
        );
        // 11-5: the watchdog.
        let i = ok(&fixture("example-11-5.cfg"), "example-11-5.cfg");
        assert_eq!((entries(&i.qos), noted(&i)), (vec![("watchdog", "on".to_string())], vec![]));
        // 11-6 and 11-7 attach policies the other examples define.
        assert_eq!(
            err(&fixture("example-11-6.cfg")),
            "bad.cfg:5: service-policy: policy-map type queuing QOS_EGRESS_PORT is not defined in the file"
        );
        assert_eq!(
            err(&fixture("example-11-7.cfg")),
            "bad.cfg:5: service-policy: policy-map type qos QOS_CLASSIFICATION is not defined in the file"
        );
    }

    #[test]
    fn the_book_examples_one_after_another() {
        let full = ok(&fixture("book-ch11.cfg"), "book-ch11.cfg").qos;
        let filled = fixture("example-11-3.cfg")
            + "  class type queuing c-out-8q-q-default\n    bandwidth remaining percent 50\n";
        let parts: Vec<String> =
            (1..=7).map(|n| if n == 3 { filled.clone() } else { fixture(&format!("example-11-{n}.cfg")) }).collect();
        let expect_keys: [&[&str]; 7] = [
            &[],
            &["classes"],
            &["classes", "strict", "ets", "wred"],
            &["classes", "pfc", "strict", "ets", "wred"],
            &["classes", "pfc", "strict", "ets", "wred", "watchdog"],
            &["classes", "pfc", "strict", "ets", "wred", "watchdog"],
            &["classes", "pfc", "strict", "ets", "wred", "watchdog"],
        ];
        for k in 1..=7 {
            let src = parts[..k].concat();
            let i = ok(&src, "steps.cfg");
            let keys: Vec<&str> = entries(&i.qos).iter().map(|(k, _)| *k).collect();
            assert_eq!(keys, expect_keys[k - 1], "examples 11-1 to 11-{k}");
            // Each key, once set, is already what the whole configuration gives.
            for (key, value) in entries(&i.qos) {
                assert!(entries(&full).contains(&(key, value.clone())), "11-1..11-{k}: {key}: {value}");
            }
        }
        let all = ok(&parts.concat(), "steps.cfg").qos;
        assert_eq!(entries(&all), entries(&full));
    }

    #[test]
    fn the_book_unindented_reads_the_same() {
        // The book prints its listings without indentation; NX-OS's modes place every line.
        let src = fixture("book-ch11.cfg");
        let flat: String = src.lines().map(|l| format!("{}\n", l.trim_start())).collect();
        assert_ne!(flat, src);
        assert_eq!(ok(&flat, "book-ch11.cfg"), ok(&src, "book-ch11.cfg"));
    }

    #[test]
    fn malformed_configurations_name_the_file_line_and_field() {
        let check = |edits: &[(usize, &str)], want: &str| assert_eq!(err(&book_with(edits)), want, "{edits:?}");
        // Line 29 of the book's configuration with other `random-detect` arguments.
        let rd = |args: &str| format!("    random-detect {args}");
        let not_dscp = "is not a DSCP (0..=63 or a name such as af31, cs6, ef)";
        check(&[(8, "  match dscp 64")], &format!("bad.cfg:8: match dscp: `64` {not_dscp}"));
        check(&[(8, "  match dscp af51")], &format!("bad.cfg:8: match dscp: `af51` {not_dscp}"));
        check(&[(8, "  match dscp")], "bad.cfg:8: match dscp: missing value (a DSCP 0..=63, a list or a range)");
        check(&[(14, "    set qos-group 9")], "bad.cfg:14: set qos-group: `9` is not a qos-group (0..=7)");
        check(&[(14, "    set qos-group")], "bad.cfg:14: set qos-group: missing value (a qos-group 0..=7)");
        check(
            &[(28, "    bandwidth remaining percent fifty")],
            "bad.cfg:28: bandwidth remaining percent: `fifty` is not a percent (0..=100)",
        );
        let missing_value = "missing value (a number and bytes, kbytes or mbytes)";
        check(
            &[(29, &rd("minimum-threshold kbytes maximum-threshold 3000 kbytes drop-probability 7 weight 0 ecn"))],
            &format!("bad.cfg:29: minimum-threshold: {missing_value}"),
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes maximum-threshold"))],
            &format!("bad.cfg:29: maximum-threshold: {missing_value}"),
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes maximum-threshold 3k kbytes drop-probability 7 ecn"))],
            "bad.cfg:29: maximum-threshold: `3k` is not a whole number",
        );
        check(
            &[(29, &rd("minimum-threshold 150 maximum-threshold 3000 kbytes drop-probability 7 ecn"))],
            "bad.cfg:29: minimum-threshold: 150 needs a unit: bytes, kbytes or mbytes",
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes drop-probability 7 weight 0 ecn"))],
            "bad.cfg:29: maximum-threshold: missing (random-detect needs a minimum and a maximum threshold)",
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes maximum-threshold 3000 kbytes weight 0 ecn"))],
            "bad.cfg:29: drop-probability: missing (the percent marked at the maximum threshold)",
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability weight 0 ecn"))],
            "bad.cfg:29: drop-probability: missing value (a percent 0..=100)",
        );
        check(
            &[(29, &rd("minimum-threshold 3 mbytes maximum-threshold 150 kbytes drop-probability 7 ecn"))],
            "bad.cfg:29: minimum-threshold: 3000000 bytes is above maximum-threshold (150000 bytes)",
        );
        check(
            &[(29, &rd("minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 fast ecn"))],
            "bad.cfg:29: random-detect: unexpected `fast`",
        );
        check(&[(37, "    priority level 3")], "bad.cfg:37: priority level: `3` is not a level (1..=2)");
        check(&[(42, "    pause pfc-cos x")], "bad.cfg:42: pause pfc-cos: `x` is not a CoS (0..=7)");
        check(&[(41, "    mtu jumbo")], "bad.cfg:41: mtu: `jumbo` is not an MTU in bytes (0..=65535)");
        // References and contradictions.
        check(&[(13, "  class RoCEv2")], "bad.cfg:13: class: class-map type qos RoCEv2 is not defined in the file");
        check(
            &[(15, "  class ROCEv2")],
            "bad.cfg:15: class: class ROCEv2 is listed twice in policy-map QOS_CLASSIFICATION (line 13)",
        );
        check(
            &[(53, "  service-policy type qos input QOS_CLASS")],
            "bad.cfg:53: service-policy: policy-map type qos QOS_CLASS is not defined in the file",
        );
        check(
            &[(35, "    bandwidth remaining percent 40")],
            "bad.cfg:20: bandwidth remaining percent: the shares of policy-map QOS_EGRESS_PORT add up to 90 %, not 100 \
             (queue 0 40 % at line 35, queue 3 50 % at line 28)",
        );
        check(
            &[(37, "    priority level 1\n    bandwidth remaining percent 10")],
            "bad.cfg:38: bandwidth remaining percent: queue 7 is strict (priority at line 37) and cannot have a share \
             too",
        );
        // qos-group 3's queue configured twice (the 4-queue name is the same queue).
        check(
            &[(30, "  class type queuing c-out-q3")],
            "bad.cfg:30: class type queuing: queue 3 (qos-group 3) is already configured by c-out-8q-q3 at line 27",
        );
        check(
            &[(31, &rd("minimum-threshold 100 kbytes maximum-threshold 3000 kbytes drop-probability 7 ecn"))],
            "bad.cfg:31: random-detect: queue 2's thresholds differ from those at line 29: rocefab runs one WRED \
             profile on its WRED queues",
        );
        check(
            &[(42, "    pause pfc-cos 4")],
            "bad.cfg:42: pause pfc-cos: pfc-cos 4 in class c-8q-nq3: rocefab pauses a class on its own priority \
             (3)",
        );
        check(
            &[(21, "  class type queuing c-in-8q-q6")],
            "bad.cfg:21: class type queuing: c-in-8q-q6 is not an egress queue class (c-out-8q-q1 .. c-out-8q-q7, \
             c-out-8q-q-default)",
        );
        check(
            &[(21, "  class type qos c-out-8q-q6")],
            "bad.cfg:21: class: class type qos in policy-map type queuing: expected class type queuing",
        );
        check(
            &[(53, "  service-policy type queuing output OTHER")],
            "bad.cfg:53: service-policy: policy-map type queuing OTHER is attached here and QOS_EGRESS_PORT at line \
             48: a topology's qos: holds one",
        );
        check(
            &[(22, "    priority level 1"), (37, "    priority level 2")],
            "bad.cfg:37: priority level: queue 7 at level 2 would go before queue 6 at level 1 (line 22): rocefab \
             serves strict queues highest first",
        );
        // Two policies of a type and no service-policy to choose.
        let two =
            fixture("example-11-4.cfg") + "policy-map type network-qos other\n  class type network-qos c-8q-nq4\n";
        assert_eq!(
            err(&two),
            "bad.cfg:7: policy-map: several policy-map type network-qos and no service-policy says which one applies"
        );
    }

    #[test]
    fn lines_that_do_not_map_are_listed_with_their_line_numbers() {
        let src = std::fs::read_to_string(fixture_path("running-config.cfg")).unwrap();
        let i = ok(&src, "leaf1.cfg");
        let shown: Vec<String> = i.notes.iter().map(|n| n.show("leaf1.cfg")).collect();
        let want = [
            "leaf1.cfg:2: version 10.3(2) Bios:version 05.47: not supported (not a QoS command rocefab imports)",
            "leaf1.cfg:3: hostname leaf1: not supported (not a QoS command rocefab imports)",
            "leaf1.cfg:4: feature lldp: not supported (not a QoS command rocefab imports)",
            "leaf1.cfg:7: match cos 3: not supported (rocefab classifies by DSCP only: match dscp)",
            "leaf1.cfg:8: class-map type qos match-all UNUSED: not used (policy-map type qos QOS_CLASSIFICATION does \
             not use class-map UNUSED)",
            "leaf1.cfg:9: match dscp 10: not used (policy-map type qos QOS_CLASSIFICATION does not use class-map \
             UNUSED)",
            "leaf1.cfg:13: set dscp 24: not supported (rocefab does not rewrite packets; its classes only choose the \
             queue: set qos-group)",
            "leaf1.cfg:15: police cir 10 gbps: not supported (rocefab does not police)",
            "leaf1.cfg:19: random-detect minimum-threshold 150 kbytes maximum-threshold 3000 kbytes drop-probability 7 \
             weight 5 ecn: not supported (weight other than 0: rocefab's WRED reads the instantaneous queue depth; \
             imported as weight 0)",
            "leaf1.cfg:20: shape min 0 gbps max 100 gbps: not supported (rocefab shapes every port at its line rate, \
             not per queue)",
            "leaf1.cfg:23: random-detect minimum-threshold 1 mbytes maximum-threshold 2 mbytes drop-probability 10 \
             weight 0: not supported (WRED without ecn drops packets; rocefab's WRED marks the ECN-capable ones, with \
             ecn)",
            "leaf1.cfg:28: pause buffer-size 100 pause-threshold 50 resume-threshold 45: not supported (PFC \
             thresholds in the platform's units: set qos.xoff, qos.xon and qos.headroom in bytes)",
            "leaf1.cfg:30: mtu 9216: not supported (an MTU per class: qos: has no MTU key; the topology's top-level \
             mtu: sets every link's, and --apply leaves it)",
            "leaf1.cfg:31: policy-map type control-plane copp: not supported (policy-map type control-plane: rocefab \
             imports types qos, queuing and network-qos)",
            "leaf1.cfg:32: class copp-class-critical: not supported (inside `policy-map type control-plane copp` at \
             line 31, which is not imported)",
            "leaf1.cfg:33: police cir 100 kbps: not supported (inside `policy-map type control-plane copp` at line \
             31, which is not imported)",
            "leaf1.cfg:37: service-policy type queuing input IN_POLICY: not supported (rocefab imports type qos \
             input, type queuing output and, under system qos, type network-qos)",
            "leaf1.cfg:38: priority-flow-control auto-restore multiplier 10: not supported (a PFC watchdog setting \
             rocefab does not have; qos.watchdog takes detect, restore and poll times)",
            "leaf1.cfg:41: mtu 9216: not supported (an interface setting that is not QoS: the topology describes the \
             ports)",
            "leaf1.cfg:45: ip address 10.0.0.1/31: not supported (an interface setting that is not QoS: the topology \
             describes the ports)",
            "leaf1.cfg:46: no shutdown: not supported (an interface setting that is not QoS: the topology describes \
             the ports)",
            "leaf1.cfg:47: interface Ethernet1/2: not used (none of its QoS commands is used)",
            "leaf1.cfg:48: priority-flow-control mode off: not supported (PFC off on one port: rocefab runs PFC on \
             every port for the lossless priorities, qos.pfc)",
            "leaf1.cfg:49: interface mgmt0: not supported (no QoS commands: the topology describes the ports)",
            "leaf1.cfg:50: vrf member management: not supported (an interface setting that is not QoS: the topology \
             describes the ports)",
            "leaf1.cfg:51: router bgp 65001: not supported (not a QoS command rocefab imports)",
            "leaf1.cfg:52: router-id 10.0.0.1: not supported (inside `router bgp 65001` at line 51, which is not \
             imported)",
            "leaf1.cfg:53: neighbor 10.0.0.2: not supported (inside `router bgp 65001` at line 51, which is not \
             imported)",
            "leaf1.cfg:54: remote-as 65002: not supported (inside `router bgp 65001` at line 51, which is not \
             imported)",
            "leaf1.cfg:55: line console: not supported (not a QoS command rocefab imports)",
        ];
        assert_eq!(shown, want);
        // What does map: DSCP 24 and 26 → 3, queue 3 at 60 % with WRED, the default queue at 40 %
        // (its WRED has no ecn), CNPs strict, PFC on 3, the watchdog on from the port.
        let e = entries(&i.qos);
        let want = [
            ("classes", "{ 24: 3, 26: 3 }"),
            ("pfc", "[3]"),
            ("strict", "[7]"),
            ("ets", "{ 0: 40, 3: 60 }"),
            ("wred", "{ queues: [3], min: 150KB, max: 3000KB, probability: 7 }"),
            ("watchdog", "on"),
        ];
        assert_eq!(e, want.map(|(k, v)| (k, v.to_string())));
        assert_every_line_is_mapped_or_listed(&src, &i);
    }

    /// Each line that is not a comment or a remark feeds a key or is listed.
    fn assert_every_line_is_mapped_or_listed(src: &str, i: &Import) {
        for (n, l) in src.lines().enumerate().map(|(n, l)| (n + 1, l.trim())) {
            if l.is_empty() || l.starts_with('!') || l.starts_with("description ") {
                continue;
            }
            let mapped = i.qos.sources.values().any(|v| v.contains(&n));
            let listed = i.notes.iter().any(|x| x.line == n);
            assert!(mapped || listed, "line {n} `{l}` is neither mapped nor listed");
        }
    }

    #[test]
    fn every_line_of_the_book_is_mapped_or_listed() {
        for name in ["book-ch11.cfg", "example-11-1.cfg", "example-11-4.cfg", "example-11-5.cfg"] {
            let src = fixture(name);
            assert_every_line_is_mapped_or_listed(&src, &ok(&src, name));
        }
    }

    #[test]
    fn dscp_names_lists_ranges_first_match_and_class_default() {
        let src = "\
class-map type qos match-any A
  match dscp af31,cs6,ef,10-12
class-map type qos match-any B
  match dscp 26,30
class-map type qos match-all C
  match dscp 40-42
  match dscp 41,42,43
policy-map type qos P
  class A
    set qos-group 3
  class B
    set qos-group 4
  class C
    set qos-group 5
  class class-default
    set qos-group 1
";
        let i = ok(src, "n.cfg");
        let t = i.qos.classes.clone().unwrap();
        // af31 = 26, cs6 = 48, ef = 46; 26 stays with A (the first class); match-all takes
        // the DSCPs both lines list; every other DSCP goes to class-default's group 1.
        for (d, g) in [(26, 3), (48, 3), (46, 3), (10, 3), (11, 3), (12, 3), (30, 4), (41, 5), (42, 5)] {
            assert_eq!(t[d], g, "DSCP {d}");
        }
        assert_eq!((t[0], t[40], t[43], t[63]), (1, 1, 1, 1));
        assert_eq!(
            i.notes.iter().map(|n| n.show("n.cfg")).collect::<Vec<_>>(),
            ["n.cfg:4: match dscp 26,30: not used (already classified, and the first class wins: DSCP 26 by class A \
              at line 9)"]
        );
        // A class-default group other than 0 is written out DSCP by DSCP, and loads.
        let merged = merge_into_topology(NOT_THE_BOOK, &i.qos, "n.cfg").unwrap();
        let topo = Topology::parse(&merged, Path::new("n.yaml")).unwrap();
        assert_eq!(topo.qos[0].dscp_to_tc, t);
    }

    #[test]
    fn the_attached_policy_is_imported_and_the_others_are_listed() {
        let src = fixture("book-ch11.cfg")
            + "policy-map type queuing ALL_TO_DEFAULT\n  class type queuing c-out-8q-q-default\n    bandwidth \
               remaining percent 100\n";
        let i = ok(&src, "b.cfg");
        assert_eq!(i.qos.ets, Some([50, 0, 0, 50, 0, 0, 0, 0]));
        let why = "not used (policy-map type queuing ALL_TO_DEFAULT is not attached: line 48 attaches QOS_EGRESS_PORT)";
        let shown: Vec<String> = i.notes.iter().skip(1).map(|n| n.show("b.cfg")).collect();
        assert_eq!(
            shown,
            [
                format!("b.cfg:54: policy-map type queuing ALL_TO_DEFAULT: {why}"),
                format!("b.cfg:55: class type queuing c-out-8q-q-default: {why}"),
                format!("b.cfg:56: bandwidth remaining percent 100: {why}"),
            ]
        );
    }

    #[test]
    fn watchdog_priority_levels_and_replaced_commands() {
        // A global off wins over a port's on (rocefab's watchdog is per switch).
        let src =
            "priority-flow-control watch-dog-interval off\ninterface Ethernet1/1\n  priority-flow-control watch-dog\n";
        let i = ok(src, "w.cfg");
        assert_eq!(i.qos.watchdog, Some(false));
        assert_eq!(noted(&i), [(2, NoteKind::NotUsed), (3, NoteKind::NotSupported)]);
        // Two strict levels, level 1 on the higher queue: both strict.
        let src = "policy-map type queuing Q\n  class type queuing c-out-8q-q7\n    priority level 1\n  class type \
                   queuing c-out-8q-q6\n    priority level 2\n  class type queuing c-out-8q-q-default\n    bandwidth \
                   remaining percent 30\n    bandwidth remaining percent 100\n";
        let i = ok(src, "p.cfg");
        assert_eq!((i.qos.strict, i.qos.ets), (Some(0b1100_0000), Some([100, 0, 0, 0, 0, 0, 0, 0])));
        assert_eq!(i.qos.wred, Some(None), "a queuing policy without random-detect ecn: wred off");
        assert_eq!(
            i.notes.iter().map(|n| n.show("p.cfg")).collect::<Vec<_>>(),
            ["p.cfg:7: bandwidth remaining percent 30: not used (replaced by line 8)"]
        );
        assert!(render(&i.qos, "p.cfg").contains("  wred: off "), "{}", render(&i.qos, "p.cfg"));
        // PFC mode without a network-qos policy: which priorities are lossless is not in the file.
        let i = ok("interface Ethernet1/1\n  priority-flow-control mode on\n", "m.cfg");
        assert_eq!(i.qos, QosImport::default());
        assert_eq!(noted(&i), [(1, NoteKind::NotUsed), (2, NoteKind::NotUsed)]);
    }

    #[test]
    fn apply_edits_only_a_block_qos_section_and_reports_overrides() {
        let imp = ok(&fixture("book-ch11.cfg"), "book-ch11.cfg").qos;
        let base = NOT_THE_BOOK.split("qos:").next().unwrap().to_string();
        // `qos: {}` becomes a block.
        let merged = merge_into_topology(&format!("{base}qos: {{}}\n"), &imp, "b.cfg").unwrap();
        let section = "\
qos:
  classes: { 24: 3, 48: 7 }   # b.cfg:7-10,12-18,50,53
  pfc: [3]                    # b.cfg:39-40,42,46-47,50-51
  strict: [7]                 # b.cfg:20,36-37,46,48
  ets: { 0: 50, 3: 50 }       # b.cfg:20-28,30-36,46,48
  wred: { queues: [3], min: 150KB, max: 3000KB, probability: 7 } # b.cfg:20,27,29,46,48
  watchdog: on                # b.cfg:44,50,52
";
        assert_eq!(merged, format!("{base}{section}"));
        Topology::parse(&merged, Path::new("t.yaml")).unwrap();
        // A one-line section with settings is not rewritten.
        let e = merge_into_topology(&format!("{base}qos: {{ xoff: 1MB }}\n"), &imp, "b.cfg").unwrap_err();
        assert_eq!(
            e,
            "line 10: `qos: { xoff: 1MB }` is written on one line; --apply edits a block `qos:` section (one key a \
             line)"
        );
        // A per-switch override keeps its keys; the import reports them.
        let src = format!("{base}qos:\n  switches:\n    spine1: {{ strict: [3, 7], ets: {{ 0: 100 }} }}\n");
        let merged = merge_into_topology(&src, &imp, "b.cfg").unwrap();
        let t = Topology::parse(&merged, Path::new("t.yaml")).unwrap();
        let over: Vec<Vec<&str>> = t.qos.iter().map(|q| overridden(&imp, q)).collect();
        assert_eq!(over, [vec![], vec![], vec!["strict", "ets"]]);
        // Part of a configuration replaces only its keys.
        let pfc_only = ok(&fixture("example-11-4.cfg"), "example-11-4.cfg").qos;
        let merged = merge_into_topology(NOT_THE_BOOK, &pfc_only, "example-11-4.cfg").unwrap();
        assert_eq!(
            merged,
            NOT_THE_BOOK.replace("  pfc: [4]\n", "  pfc: [3]                    # example-11-4.cfg:3-4,6\n")
        );
    }

    // -----------------------------------------------------------------------------------------
    // The command line

    fn rocefab(args: &[&str]) -> (Option<i32>, String, String) {
        let o = Command::new(BIN).args(args).output().expect("run rocefab");
        (o.status.code(), String::from_utf8(o.stdout).unwrap(), String::from_utf8(o.stderr).unwrap())
    }

    #[test]
    fn cli_prints_the_section_and_lists_what_does_not_map_on_stderr() {
        let cfg = fixture_path("book-ch11.cfg");
        let cfg = cfg.to_str().unwrap();
        let (code, out, errs) = rocefab(&["qos", "import", cfg]);
        assert_eq!(code, Some(0), "{errs}");
        let imp = ok(&fixture("book-ch11.cfg"), cfg);
        assert_eq!(out, render(&imp.qos, cfg));
        assert_eq!(errs, format!("{}\n", imp.notes[0].show(cfg)));
        assert!(errs.starts_with(&format!("{cfg}:41: mtu 9216: not supported (")), "{errs}");
        // A malformed configuration: exit 1, one line naming the file, the line and the field.
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("nexus.cfg");
        std::fs::write(&bad, book_with(&[(29, "    random-detect minimum-threshold 150 kbytes")])).unwrap();
        let (code, out, errs) = rocefab(&["qos", "import", bad.to_str().unwrap()]);
        assert_eq!((code, out.as_str()), (Some(1), ""));
        assert_eq!(
            errs,
            format!(
                "rocefab: {}:29: maximum-threshold: missing (random-detect needs a minimum and a maximum threshold)\n",
                bad.display()
            )
        );
    }

    #[test]
    fn cli_apply_writes_a_topology_the_loader_reads() {
        let dir = tempfile::tempdir().unwrap();
        let (_, text) = shipped("rail-spine-incast.yaml");
        let topo = dir.path().join("rsi.yaml");
        std::fs::write(&topo, &text).unwrap();
        let cfg = fixture_path("book-ch11.cfg");
        let (code, out, errs) = rocefab(&["qos", "import", cfg.to_str().unwrap(), "--apply", topo.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{errs}");
        assert_eq!(
            out,
            format!(
                "{}: qos classes, pfc, strict, ets, wred, watchdog imported from {}\n",
                topo.display(),
                cfg.display()
            )
        );
        // The mtu line, and the loader's warnings: this file's 64 KB xOFF is below WRED's band.
        let first = errs.lines().next().unwrap();
        assert!(first.starts_with(&format!("{}:41: mtu 9216: not supported (", cfg.display())), "{errs}");
        assert!(
            errs.contains(&format!(
                "warning: {}: qos.wred.max: rail1: 3000000 bytes is not below xoff",
                topo.display()
            )),
            "{errs}"
        );
        let t = Topology::load(&topo).unwrap();
        for (s, q) in t.switches.iter().zip(&t.qos) {
            assert_book_effective(&s.name, q);
        }
        let written = std::fs::read_to_string(&topo).unwrap();
        let imp = ok(&fixture("book-ch11.cfg"), cfg.to_str().unwrap()).qos;
        assert_eq!(written, merge_into_topology(&text, &imp, cfg.to_str().unwrap()).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        // `strict: [3]` with the default ETS shares does not load; the book's import replaces
        // it, an import of the PFC part alone does not, and the file is left as it was.
        let broken = text.replace("xon: 16KB", "xon: 16KB\n  strict: [3]");
        std::fs::write(&topo, &broken).unwrap();
        let only_pfc = fixture_path("example-11-4.cfg");
        let (code, _, errs) =
            rocefab(&["qos", "import", only_pfc.to_str().unwrap(), "--apply", topo.to_str().unwrap()]);
        assert_eq!(code, Some(1));
        assert!(errs.contains("does not load, not written") && errs.contains("qos.ets"), "{errs}");
        assert_eq!(std::fs::read_to_string(&topo).unwrap(), broken, "unchanged");
        let (code, _, errs) = rocefab(&["qos", "import", cfg.to_str().unwrap(), "--apply", topo.to_str().unwrap()]);
        assert_eq!(code, Some(0), "strict is replaced by the import: {errs}");
        assert_book_effective("rail1", &Topology::load(&topo).unwrap().qos[0]);
    }

    #[test]
    fn cli_into_a_closed_pipe_ends_quietly() {
        let cfg = fixture_path("example-11-5.cfg");
        let mut child = Command::new(BIN)
            .args(["qos", "import", cfg.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut errs = String::new();
        child.stderr.take().unwrap().read_to_string(&mut errs).unwrap();
        assert_eq!((child.wait().unwrap().code(), errs.as_str()), (Some(0), ""));
    }
}
