//! `rocefab qos import`: reads the QoS part of a Cisco NX-OS configuration (Nexus 9000 syntax,
//! as book ch. 11 shows it in Examples 11-1 to 11-7) and prints the equivalent `qos:` section of
//! a topology file ([`crate::qos`]), or writes it into one (`--apply`).
//!
//! qos-group N is priority N and egress queue N, as on NX-OS's 8-queue platforms ("the mapping
//! between internal QoS labels and queues is fixed", book ch. 11):
//!
//! - `class-map type qos` … `match dscp D` with `policy-map type qos` … `class` … `set qos-group
//!   G`: `classes: { D: G }`;
//! - `policy-map type network-qos` … `class type network-qos c-8q-nqN` … `pause pfc-cos N`:
//!   `pfc: [N]`;
//! - `policy-map type queuing` … `class type queuing c-out-8q-qN` … `priority level 1`:
//!   `strict: [N]`;
//! - … `bandwidth remaining percent P`: `ets: { N: P }` (0 %: no share, left out);
//! - … `random-detect minimum-threshold A kbytes maximum-threshold B kbytes drop-probability P
//!   weight 0 ecn`: `wred: { queues: [N], min: AKB, max: BKB, probability: P }`;
//! - `priority-flow-control watch-dog-interval on` (global) or `priority-flow-control watch-dog`
//!   (interface): `watchdog: on`, with rocefab's detection and restoration times;
//! - interface `priority-flow-control mode on` or `auto`: PFC on the port, as every rocefab port
//!   runs PFC on the `pfc` priorities.
//!
//! `c-out-8q-q-default` and `c-8q-nq-default` are queue 0; the 4-queue names (`c-out-q3`,
//! `c-nq3`) are read the same way. The first class of a `policy-map type qos` that matches a
//! DSCP classifies it, as on the switch; `class-default`'s qos-group takes every other DSCP.
//! `match dscp` takes numbers, lists and ranges (`10,12-14`) and the names `af11`..`af43`,
//! `cs0`..`cs7`, `ef` and `default`.
//!
//! Threshold units: NX-OS's `bytes`, `kbytes` and `mbytes` are read as powers of 1000: `150
//! kbytes` is 150,000 bytes, `150KB` in the topology, as the book writes it ("from 150 KB to
//! 3000 KB") and as rocefab's own defaults (`min: 150KB`) read it. `packets` has no byte size
//! and is not imported. `drop-probability` is the percent marked at the maximum threshold
//! (`probability`) and must be given (rocefab does not guess a platform default); `weight` is
//! 0 (the instantaneous depth) unless stated, and another weight is listed as not supported.
//!
//! Which policies: the ones `service-policy` attaches, under `system qos` or on an interface; a
//! file that attaches none of a type (one book example alone) imports its only policy-map of
//! that type. A key whose part of the NX-OS configuration is not in the file is not written:
//! rocefab's default (or, with `--apply`, the topology's own setting) stays. Keys are written
//! whole where the file has their part: a queuing policy without `random-detect … ecn` gives
//! `wred: off`, a network-qos policy without `pause pfc-cos` gives `pfc: []`.
//!
//! Nothing is dropped silently: each line that has no effect on the result is listed as
//! `FILE:LINE: <text>: not supported (why)` (rocefab has no equivalent) or `FILE:LINE: <text>:
//! not used (why)` (valid, but nothing the import uses refers to it). Contradictions and
//! malformed commands are errors naming the file, the line and the NX-OS field ([`ImportError`]).
//!
//! `!` comments and `description` remarks are skipped: they configure nothing.
//!
//! Lines are read as NX-OS's CLI reads pasted configuration, by mode rather than indentation: a
//! command the current mode does not take goes to the enclosing mode, so the book's unindented
//! listings read like the switch's indented running configuration. Indentation only decides
//! where a line no mode takes belongs: inside a block that is not imported (`router bgp`), or at
//! the top level.
use std::collections::BTreeMap;

/// A configuration that cannot be imported: the file, the line, the NX-OS field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {field}: {msg}")]
pub struct ImportError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub msg: String,
}

/// What an NX-OS configuration sets, in `qos:` terms; `None`: the file does not configure it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QosImport {
    /// DSCP → priority, 64 entries.
    pub classes: Option<Vec<u8>>,
    /// Lossless priorities, bit p for priority p.
    pub pfc: Option<u8>,
    /// Strict-priority queues, bit q for queue q.
    pub strict: Option<u8>,
    /// Queue → bandwidth remaining percent; 0: no share.
    pub ets: Option<[u8; 8]>,
    /// `Some(None)`: the queuing policy runs no WRED with ECN (`wred: off`).
    pub wred: Option<Option<Wred>>,
    pub watchdog: Option<bool>,
    /// The lines of the file each key comes from (for the comments of the YAML).
    pub sources: BTreeMap<&'static str, Vec<usize>>,
}

/// WRED with ECN marking on `queues` (bit q for queue q).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wred {
    pub queues: u8,
    pub min: Threshold,
    pub max: Threshold,
    /// Percent marked at the maximum threshold.
    pub probability: u8,
}

/// A WRED threshold as the configuration writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub value: u64,
    pub unit: SizeUnit,
}

/// NX-OS's threshold units, read as powers of 1000 (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeUnit {
    Bytes,
    Kbytes,
    Mbytes,
}

impl Threshold {
    pub fn bytes(self) -> u64 {
        self.value * self.unit.bytes()
    }

    /// The size as a topology file writes it: `150KB`.
    fn yaml(self) -> String {
        match self.unit {
            SizeUnit::Bytes => self.value.to_string(),
            SizeUnit::Kbytes => format!("{}KB", self.value),
            SizeUnit::Mbytes => format!("{}MB", self.value),
        }
    }
}

impl SizeUnit {
    fn name(self) -> &'static str {
        match self {
            SizeUnit::Bytes => "bytes",
            SizeUnit::Kbytes => "kbytes",
            SizeUnit::Mbytes => "mbytes",
        }
    }

    fn bytes(self) -> u64 {
        match self {
            SizeUnit::Bytes => 1,
            SizeUnit::Kbytes => 1_000,
            SizeUnit::Mbytes => 1_000_000,
        }
    }
}

/// A line that has no effect on the result, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub line: usize,
    /// The line, trimmed.
    pub text: String,
    pub kind: NoteKind,
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// rocefab has no equivalent.
    NotSupported,
    /// Valid, but nothing the import uses refers to it.
    NotUsed,
}

impl Note {
    /// `nexus.cfg:41: mtu 9216: not supported (why)`.
    pub fn show(&self, file: &str) -> String {
        let kind = match self.kind {
            NoteKind::NotSupported => "not supported",
            NoteKind::NotUsed => "not used",
        };
        format!("{file}:{}: {}: {kind} ({})", self.line, self.text, self.why)
    }
}

/// The result of an import: the settings, and the lines that do not map, in line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub qos: QosImport,
    pub notes: Vec<Note>,
}

/// Imports NX-OS configuration text; `file` names it in errors.
pub fn import(src: &str, file: &str) -> Result<Import, ImportError> {
    let parsed = Parser::new(src, file).run()?;
    resolve(parsed, file)
}

// ---------------------------------------------------------------------------------------------
// Output

/// The keys the import sets, in `qos:` order, with their YAML values.
pub fn entries(q: &QosImport) -> Vec<(&'static str, String)> {
    let list = |m: u8| {
        let v: Vec<String> = (0..8).filter(|b| m & (1 << b) != 0).map(|b| b.to_string()).collect();
        format!("[{}]", v.join(", "))
    };
    let map =
        |pairs: Vec<String>| if pairs.is_empty() { "{}".to_string() } else { format!("{{ {} }}", pairs.join(", ")) };
    let mut out = Vec::new();
    if let Some(t) = &q.classes {
        let pairs = t.iter().enumerate().filter(|(_, &g)| g != 0).map(|(d, g)| format!("{d}: {g}")).collect();
        out.push(("classes", map(pairs)));
    }
    if let Some(m) = q.pfc {
        out.push(("pfc", list(m)));
    }
    if let Some(m) = q.strict {
        out.push(("strict", list(m)));
    }
    if let Some(e) = q.ets {
        let pairs = (0..8).filter(|&i| e[i] != 0).map(|i| format!("{i}: {}", e[i])).collect();
        out.push(("ets", map(pairs)));
    }
    match q.wred {
        None => {}
        Some(None) => out.push(("wred", "off".to_string())),
        Some(Some(w)) => out.push((
            "wred",
            format!(
                "{{ queues: {}, min: {}, max: {}, probability: {} }}",
                list(w.queues),
                w.min.yaml(),
                w.max.yaml(),
                w.probability
            ),
        )),
    }
    if let Some(on) = q.watchdog {
        out.push(("watchdog", if on { "on" } else { "off" }.to_string()));
    }
    out
}

/// Every key [`entries`] can write.
pub const KEYS: [&str; 6] = ["classes", "pfc", "strict", "ets", "wred", "watchdog"];

/// `key: value   # file:lines`, without indentation.
fn entry_line(q: &QosImport, key: &str, value: &str, file: &str) -> String {
    let kv = format!("{key}: {value}");
    let lines = q.sources.get(key).map(Vec::as_slice).unwrap_or_default();
    if lines.is_empty() {
        return kv;
    }
    format!("{kv:<27} # {file}:{}", line_ranges(lines))
}

/// Sorted line numbers as `7-10,12,20-22`.
fn line_ranges(lines: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let mut j = i;
        while j + 1 < lines.len() && lines[j + 1] == lines[j] + 1 {
            j += 1;
        }
        out.push(if j == i { lines[i].to_string() } else { format!("{}-{}", lines[i], lines[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// What `rocefab qos import FILE` prints: the `qos:` section and which keys keep their defaults.
pub fn render(q: &QosImport, file: &str) -> String {
    let e = entries(q);
    let mut s = format!("# rocefab qos import {file}\n");
    let missing: Vec<&str> = KEYS.iter().copied().filter(|k| !e.iter().any(|(key, _)| key == k)).collect();
    if !missing.is_empty() {
        s += &format!("# not configured in {file} (rocefab's defaults apply): {}\n", missing.join(", "));
    }
    if e.is_empty() {
        s += "qos: {}\n";
        return s;
    }
    s += "qos:\n";
    for (k, v) in &e {
        s += &format!("  {}\n", entry_line(q, k, v, file));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// --apply

/// The topology text `topo` with the imported keys in its `qos:` section: a key the import sets
/// replaces the section's own (its line and the lines nested under it) where it stands, or is
/// added at the section's end; every other line of the file is kept. A file without `qos:` gets
/// the section at its end. `file` is the NX-OS file, named in the comments.
pub fn merge_into_topology(topo: &str, q: &QosImport, file: &str) -> Result<String, String> {
    let e = entries(q);
    let mut lines: Vec<String> = topo.lines().map(str::to_string).collect();
    if e.is_empty() {
        return Ok(topo.to_string());
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let blank = |l: &str| l.trim().is_empty();
    let comment = |l: &str| l.trim_start().starts_with('#');
    let at =
        lines.iter().position(|l| l.strip_prefix("qos:").is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t'])));
    let Some(at) = at else {
        while lines.last().is_some_and(|l| blank(l)) {
            lines.pop();
        }
        lines.push("qos:".to_string());
        lines.extend(e.iter().map(|(k, v)| format!("  {}", entry_line(q, k, v, file))));
        return Ok(lines.join("\n") + "\n");
    };
    // `qos:` with a value on its line: only an empty one can become a block.
    let value = lines[at][4..].split(" #").next().unwrap_or("").trim().to_string();
    if !value.is_empty() && !value.starts_with('#') {
        if !matches!(value.as_str(), "{}" | "~" | "null") {
            return Err(format!(
                "line {}: `qos: {value}` is written on one line; --apply edits a block `qos:` section (one key a line)",
                at + 1
            ));
        }
        lines[at] = "qos:".to_string();
    }
    let end = (at + 1..lines.len()).find(|&i| !blank(&lines[i]) && indent(&lines[i]) == 0).unwrap_or(lines.len());
    let child = (at + 1..end).find(|&i| !blank(&lines[i]) && !comment(&lines[i])).map_or(2, |i| indent(&lines[i]));
    // Each key of the section: its first line and one past its last.
    let mut keys: Vec<(String, usize, usize)> = Vec::new();
    for i in at + 1..end {
        let l = &lines[i];
        if blank(l) || comment(l) || indent(l) != child {
            continue;
        }
        let key = l.trim().split(':').next().unwrap_or("").trim().to_string();
        let mut j = i + 1;
        while j < end && (blank(&lines[j]) || indent(&lines[j]) > child) {
            j += 1;
        }
        while j > i + 1 && blank(&lines[j - 1]) {
            j -= 1;
        }
        keys.push((key, i, j));
    }
    let pad = " ".repeat(child);
    let mut replace: BTreeMap<usize, (usize, String)> = BTreeMap::new();
    let mut append = Vec::new();
    for (k, v) in &e {
        let text = format!("{pad}{}", entry_line(q, k, v, file));
        match keys.iter().find(|(key, _, _)| key == k) {
            Some(&(_, from, to)) => {
                replace.insert(from, (to, text));
            }
            None => append.push(text),
        }
    }
    let last = (at..end).rev().find(|&i| !blank(&lines[i])).unwrap_or(at);
    let mut out = Vec::with_capacity(lines.len() + append.len());
    let mut i = 0;
    while i < lines.len() {
        if let Some((to, text)) = replace.get(&i) {
            out.push(text.clone());
            i = *to;
        } else {
            out.push(lines[i].clone());
            i += 1;
        }
        if i == last + 1 {
            out.append(&mut append);
        }
    }
    Ok(out.join("\n") + "\n")
}

/// The imported keys whose effective value on a switch differs from the import (a
/// `qos.switches` override keeps its own).
pub fn overridden(q: &QosImport, eff: &crate::qos::SwitchQos) -> Vec<&'static str> {
    let c = &eff.qos;
    let mut out = Vec::new();
    if q.classes.as_ref().is_some_and(|t| *t != eff.dscp_to_tc) {
        out.push("classes");
    }
    if q.pfc.is_some_and(|m| m != c.lossless_priorities) {
        out.push("pfc");
    }
    if q.strict.is_some_and(|m| m != c.strict_priorities) {
        out.push("strict");
    }
    if q.ets.is_some_and(|t| t != c.ets_percent) {
        out.push("ets");
    }
    let wred_differs = match q.wred {
        None => false,
        Some(None) => c.wred.queues != 0,
        Some(Some(w)) => {
            (w.queues, w.min.bytes(), w.max.bytes(), w.probability)
                != (c.wred.queues, c.wred.min_bytes, c.wred.max_bytes, c.wred.probability_percent)
        }
    };
    if wred_differs {
        out.push("wred");
    }
    if q.watchdog.is_some_and(|on| on != c.watchdog.enabled) {
        out.push("watchdog");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading the configuration

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Qos,
    Queuing,
    NetworkQos,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Qos => "qos",
            Kind::Queuing => "queuing",
            Kind::NetworkQos => "network-qos",
        }
    }
}

#[derive(Debug)]
struct ClassMap<'a> {
    name: &'a str,
    line: usize,
    match_all: bool,
    /// `match dscp` lines and their DSCPs.
    matches: Vec<(usize, Vec<u8>)>,
    /// Lines that import or not with the class-map (its header and `match dscp` lines).
    lines: Vec<usize>,
}

#[derive(Debug)]
struct Policy<'a> {
    kind: Kind,
    name: &'a str,
    line: usize,
    classes: Vec<PolicyClass<'a>>,
    lines: Vec<usize>,
}

#[derive(Debug)]
struct PolicyClass<'a> {
    name: &'a str,
    line: usize,
    /// The queue of a queuing or network-qos class.
    queue: Option<u8>,
    cmds: Vec<(usize, Cmd)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cmd {
    QosGroup(u8),
    Bandwidth(u8),
    Priority(u8),
    Wred(WredLine),
    Pause(Vec<u8>),
    Mtu(u32),
}

impl Cmd {
    /// Commands of one class that replace each other (a later `bandwidth` replaces an earlier).
    fn slot(&self) -> u8 {
        match self {
            Cmd::QosGroup(_) => 0,
            Cmd::Bandwidth(_) => 1,
            Cmd::Priority(_) => 2,
            Cmd::Wred(_) => 3,
            Cmd::Pause(_) => 4,
            Cmd::Mtu(_) => 5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WredLine {
    min: Threshold,
    max: Threshold,
    probability: u8,
}

#[derive(Debug)]
struct Attach<'a> {
    kind: Kind,
    name: &'a str,
    line: usize,
    /// The `system qos` or `interface` line above it.
    head: usize,
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Top,
    ClassMap(usize),
    Policy(usize),
    Class(usize, usize),
    /// `system qos` and `interface` blocks, by index into `Parsed::blocks`.
    SystemQos(usize),
    Interface(usize),
    /// A block that is not imported (`router bgp`, `class-map type queuing`), opened at this line.
    Other(usize),
}

#[derive(Debug, Default)]
struct Parsed<'a> {
    class_maps: Vec<ClassMap<'a>>,
    policies: Vec<Policy<'a>>,
    attach: Vec<Attach<'a>>,
    /// Interface `priority-flow-control mode on|auto` lines, with their interface's line.
    pfc_modes: Vec<(usize, usize)>,
    /// Global `priority-flow-control watch-dog-interval on|off`.
    wd_global: Vec<(usize, bool)>,
    /// Interface `priority-flow-control watch-dog[-interval on]` lines, with their interface's line.
    wd_ports: Vec<(usize, usize)>,
    /// `system qos` and `interface` lines, and whether the block has a QoS command.
    blocks: Vec<(usize, bool)>,
    notes: Vec<Note>,
    /// Line number → trimmed text.
    text: BTreeMap<usize, &'a str>,
}

struct Parser<'a, 'f> {
    src: &'a str,
    file: &'f str,
    p: Parsed<'a>,
}

/// Why an unknown command is listed.
const NOT_QOS: &str = "not a QoS command rocefab imports";

impl<'a, 'f> Parser<'a, 'f> {
    fn new(src: &'a str, file: &'f str) -> Self {
        Parser { src, file, p: Parsed::default() }
    }

    fn err(&self, line: usize, field: &str, msg: impl Into<String>) -> ImportError {
        ImportError { file: self.file.to_string(), line, field: field.to_string(), msg: msg.into() }
    }

    fn note(&mut self, line: usize, kind: NoteKind, why: impl Into<String>) {
        let text = self.p.text.get(&line).copied().unwrap_or("").to_string();
        self.p.notes.push(Note { line, text, kind, why: why.into() });
    }

    fn unsupported(&mut self, line: usize, why: impl Into<String>) {
        self.note(line, NoteKind::NotSupported, why)
    }

    fn run(mut self) -> Result<Parsed<'a>, ImportError> {
        let mut stack = vec![Mode::Top];
        for (i, raw) in self.src.lines().enumerate() {
            let no = i + 1;
            let t = raw.trim();
            if t.is_empty() || t.starts_with('!') {
                continue;
            }
            self.p.text.insert(no, t);
            let indent = raw.len() - raw.trim_start().len();
            let w: Vec<&'a str> = t.split_whitespace().collect();
            let first = w[0].to_ascii_lowercase();
            let deepest = *stack.last().unwrap_or(&Mode::Top);
            match first.as_str() {
                "exit" => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    continue;
                }
                "end" => {
                    stack.truncate(1);
                    continue;
                }
                // A remark: no setting.
                "description" if stack.len() > 1 && !matches!(deepest, Mode::Other(_)) => continue,
                _ => {}
            }
            if let Mode::Other(head) = deepest {
                if indent > 0 || !accepts(Mode::Top, &first, &w) {
                    let why = if indent > 0 {
                        format!("inside `{}` at line {head}, which is not imported", self.p.text[&head])
                    } else {
                        NOT_QOS.to_string()
                    };
                    self.unsupported(no, why);
                    continue;
                }
            }
            match (0..stack.len()).rev().find(|&d| accepts(stack[d], &first, &w)) {
                Some(d) => {
                    stack.truncate(d + 1);
                    if let Some(m) = self.command(stack[d], no, &first, &w)? {
                        stack.push(m);
                    }
                }
                None if indent > 0 && stack.len() > 1 => {
                    let why = match deepest {
                        Mode::Interface(_) => "an interface setting that is not QoS: the topology describes the ports",
                        _ => NOT_QOS,
                    };
                    self.unsupported(no, why);
                }
                None => {
                    self.unsupported(no, NOT_QOS);
                    stack.truncate(1);
                    stack.push(Mode::Other(no));
                }
            }
        }
        Ok(self.p)
    }

    /// Runs a command `mode` takes; returns the mode it enters, if any.
    fn command(&mut self, mode: Mode, no: usize, first: &str, w: &[&'a str]) -> Result<Option<Mode>, ImportError> {
        let kw = |i: usize| w.get(i).map(|s| s.to_ascii_lowercase());
        match mode {
            Mode::Top => match first {
                "class-map" => self.class_map(no, w),
                "policy-map" => self.policy_map(no, w),
                "system" => {
                    self.p.blocks.push((no, false));
                    Ok(Some(Mode::SystemQos(self.p.blocks.len() - 1)))
                }
                "interface" => {
                    self.p.blocks.push((no, false));
                    Ok(Some(Mode::Interface(self.p.blocks.len() - 1)))
                }
                _ => {
                    // priority-flow-control, global.
                    match (kw(1).as_deref(), kw(2).as_deref(), w.len()) {
                        (Some("watch-dog-interval"), Some(v @ ("on" | "off")), 3) => {
                            self.p.wd_global.push((no, v == "on"))
                        }
                        (Some("mode"), _, _) => self.unsupported(no, "an interface command outside an interface"),
                        _ => self.unsupported(
                            no,
                            "a PFC watchdog setting rocefab does not have; qos.watchdog takes detect, restore and \
                             poll times",
                        ),
                    }
                    Ok(None)
                }
            },
            Mode::ClassMap(i) => {
                match kw(1).as_deref() {
                    Some("dscp") => {
                        let list = w[2..].concat();
                        if list.is_empty() {
                            return Err(self.err(no, "match dscp", "missing value (a DSCP 0..=63, a list or a range)"));
                        }
                        let d = parse_dscp_list(&list).map_err(|m| self.err(no, "match dscp", m))?;
                        let cm = &mut self.p.class_maps[i];
                        cm.matches.push((no, d));
                        cm.lines.push(no);
                    }
                    Some("not") => self.unsupported(no, "a negated match: rocefab's classes list the DSCPs they take"),
                    _ => self.unsupported(no, "rocefab classifies by DSCP only: match dscp"),
                }
                Ok(None)
            }
            Mode::Policy(i) => self.class(i, no, w).map(Some),
            Mode::Class(pi, ci) => {
                self.class_command(pi, ci, no, first, w)?;
                Ok(None)
            }
            Mode::SystemQos(k) | Mode::Interface(k) => {
                self.p.blocks[k].1 = true;
                let head = self.p.blocks[k].0;
                if first == "service-policy" {
                    self.service_policy(mode, head, no, w)?;
                    return Ok(None);
                }
                // priority-flow-control on an interface.
                match (kw(1).as_deref(), kw(2).as_deref(), w.len()) {
                    (Some("mode"), Some("on" | "auto"), 3) => self.p.pfc_modes.push((no, head)),
                    (Some("mode"), Some("off"), 3) => self.unsupported(
                        no,
                        "PFC off on one port: rocefab runs PFC on every port for the lossless priorities, qos.pfc",
                    ),
                    (Some("watch-dog"), None, 2) | (Some("watch-dog-interval"), Some("on"), 3) => {
                        self.p.wd_ports.push((no, head))
                    }
                    (Some("watch-dog-interval"), Some("off"), 3) => self.unsupported(
                        no,
                        "the watchdog off on one port: rocefab's watchdog is per switch, qos.watchdog",
                    ),
                    _ => self.unsupported(no, "a PFC setting rocefab does not have"),
                }
                Ok(None)
            }
            Mode::Other(_) => Ok(None),
        }
    }

    /// `class-map [type qos] [match-any|match-all] NAME`.
    fn class_map(&mut self, no: usize, w: &[&'a str]) -> Result<Option<Mode>, ImportError> {
        let mut rest = &w[1..];
        if rest.first().is_some_and(|t| t.eq_ignore_ascii_case("type")) {
            let ty = rest.get(1).copied().unwrap_or("");
            if !ty.eq_ignore_ascii_case("qos") {
                self.unsupported(
                    no,
                    format!(
                        "class-map type {ty}: rocefab imports class-map type qos; queues are NX-OS's fixed \
                         c-out-8q-q* classes"
                    ),
                );
                return Ok(Some(Mode::Other(no)));
            }
            rest = &rest[2..];
        }
        let mut match_all = false;
        if let Some(m) =
            rest.first().filter(|t| t.eq_ignore_ascii_case("match-any") || t.eq_ignore_ascii_case("match-all"))
        {
            match_all = m.eq_ignore_ascii_case("match-all");
            rest = &rest[1..];
        }
        let [name] = rest else {
            return Err(self.err(no, "class-map", "expected one name after `class-map type qos match-any`"));
        };
        let i = match self.p.class_maps.iter().position(|c| c.name == *name) {
            Some(i) => i,
            None => {
                self.p.class_maps.push(ClassMap { name, line: no, match_all, matches: Vec::new(), lines: Vec::new() });
                self.p.class_maps.len() - 1
            }
        };
        self.p.class_maps[i].lines.push(no);
        Ok(Some(Mode::ClassMap(i)))
    }

    /// `policy-map [type qos|queuing|network-qos] NAME`.
    fn policy_map(&mut self, no: usize, w: &[&'a str]) -> Result<Option<Mode>, ImportError> {
        let mut rest = &w[1..];
        let mut kind = Kind::Qos;
        if rest.first().is_some_and(|t| t.eq_ignore_ascii_case("type")) {
            let ty = rest.get(1).copied().unwrap_or("");
            kind = match ty.to_ascii_lowercase().as_str() {
                "qos" => Kind::Qos,
                "queuing" => Kind::Queuing,
                "network-qos" => Kind::NetworkQos,
                _ => {
                    self.unsupported(
                        no,
                        format!("policy-map type {ty}: rocefab imports types qos, queuing and network-qos"),
                    );
                    return Ok(Some(Mode::Other(no)));
                }
            };
            rest = &rest[2..];
        }
        let [name] = rest else {
            return Err(self.err(
                no,
                "policy-map",
                format!("expected one name after `policy-map type {}`", kind.name()),
            ));
        };
        let i = match self.p.policies.iter().position(|p| p.kind == kind && p.name == *name) {
            Some(i) => i,
            None => {
                self.p.policies.push(Policy { kind, name, line: no, classes: Vec::new(), lines: Vec::new() });
                self.p.policies.len() - 1
            }
        };
        self.p.policies[i].lines.push(no);
        Ok(Some(Mode::Policy(i)))
    }

    /// `class [type T] NAME` in policy `pi`.
    fn class(&mut self, pi: usize, no: usize, w: &[&'a str]) -> Result<Mode, ImportError> {
        let kind = self.p.policies[pi].kind;
        let mut rest = &w[1..];
        if rest.first().is_some_and(|t| t.eq_ignore_ascii_case("type")) {
            let ty = rest.get(1).copied().unwrap_or("");
            if !ty.eq_ignore_ascii_case(kind.name()) {
                return Err(self.err(
                    no,
                    "class",
                    format!("class type {ty} in policy-map type {}: expected class type {}", kind.name(), kind.name()),
                ));
            }
            rest = &rest[2..];
        }
        let [name] = rest else {
            return Err(self.err(no, "class", "expected one class name"));
        };
        let queue = match kind {
            Kind::Qos => None,
            Kind::Queuing => Some(queue_of(name, &["c-out-8q-q", "c-out-q"]).ok_or_else(|| {
                self.err(
                    no,
                    "class type queuing",
                    format!("{name} is not an egress queue class (c-out-8q-q1 .. c-out-8q-q7, c-out-8q-q-default)"),
                )
            })?),
            Kind::NetworkQos => Some(queue_of(name, &["c-8q-nq", "c-nq"]).ok_or_else(|| {
                self.err(
                    no,
                    "class type network-qos",
                    format!("{name} is not a network-qos class (c-8q-nq1 .. c-8q-nq7, c-8q-nq-default)"),
                )
            })?),
        };
        let p = &mut self.p.policies[pi];
        p.classes.push(PolicyClass { name, line: no, queue, cmds: Vec::new() });
        p.lines.push(no);
        Ok(Mode::Class(pi, p.classes.len() - 1))
    }

    /// A command inside a policy's class.
    fn class_command(&mut self, pi: usize, ci: usize, no: usize, first: &str, w: &[&str]) -> Result<(), ImportError> {
        let kind = self.p.policies[pi].kind;
        let kw = |i: usize| w.get(i).map(|s| s.to_ascii_lowercase());
        let cmd = match (kind, first) {
            (Kind::Qos, "set") if kw(1).as_deref() == Some("qos-group") => {
                Cmd::QosGroup(self.number(no, "set qos-group", w.get(2), 0..=7, "a qos-group")?)
            }
            (Kind::Qos, "set") => {
                self.unsupported(
                    no,
                    "rocefab does not rewrite packets; its classes only choose the queue: set qos-group",
                );
                return Ok(());
            }
            (Kind::Queuing, "bandwidth")
                if kw(1).as_deref() == Some("remaining") && kw(2).as_deref() == Some("percent") =>
            {
                Cmd::Bandwidth(self.number(no, "bandwidth remaining percent", w.get(3), 0..=100, "a percent")?)
            }
            (Kind::Queuing, "bandwidth") => {
                self.unsupported(no, "rocefab shares what the strict queues leave: bandwidth remaining percent");
                return Ok(());
            }
            (Kind::Queuing, "priority") => match (kw(1).as_deref(), w.len()) {
                (None, 1) => Cmd::Priority(1),
                (Some("level"), 3) => Cmd::Priority(self.number(no, "priority level", w.get(2), 1..=2, "a level")?),
                (Some("level"), 2) => return Err(self.err(no, "priority level", "missing value (1 or 2)")),
                _ => return Err(self.err(no, "priority", "expected `priority` or `priority level 1`")),
            },
            (Kind::Queuing, "random-detect") => match self.random_detect(no, w)? {
                Some(r) => Cmd::Wred(r),
                None => return Ok(()),
            },
            (Kind::NetworkQos, "pause") if kw(1).as_deref() == Some("pfc-cos") => {
                let list = w[2..].concat();
                if list.is_empty() {
                    return Err(self.err(no, "pause pfc-cos", "missing value (a CoS 0..=7 or a list)"));
                }
                let mut cos = Vec::new();
                for v in list.split(',') {
                    cos.push(self.number(no, "pause pfc-cos", Some(&v), 0..=7, "a CoS")?);
                }
                Cmd::Pause(cos)
            }
            (Kind::NetworkQos, "pause") => {
                self.unsupported(
                    no,
                    "PFC thresholds in the platform's units: set qos.xoff, qos.xon and qos.headroom in bytes",
                );
                return Ok(());
            }
            (Kind::NetworkQos, "mtu") => Cmd::Mtu(self.number(no, "mtu", w.get(1), 0..=65535, "an MTU in bytes")?),
            (_, "police") => {
                self.unsupported(no, "rocefab does not police");
                return Ok(());
            }
            (_, "shape") => {
                self.unsupported(no, "rocefab shapes every port at its line rate, not per queue");
                return Ok(());
            }
            _ => {
                self.unsupported(no, format!("not a command rocefab imports in a policy-map type {}", kind.name()));
                return Ok(());
            }
        };
        let p = &mut self.p.policies[pi];
        p.classes[ci].cmds.push((no, cmd));
        p.lines.push(no);
        Ok(())
    }

    /// A whole number within `range` from token `v`; errors name `field` and say what `what` is.
    fn number<T: TryFrom<u64> + Copy + std::fmt::Display + PartialOrd>(
        &self,
        no: usize,
        field: &str,
        v: Option<&&str>,
        range: std::ops::RangeInclusive<T>,
        what: &str,
    ) -> Result<T, ImportError> {
        let Some(v) = v else {
            return Err(self.err(no, field, format!("missing value ({what} {}..={})", range.start(), range.end())));
        };
        let n =
            v.parse::<u64>().ok().and_then(|n| T::try_from(n).ok()).filter(|n| range.contains(n)).ok_or_else(|| {
                self.err(no, field, format!("`{v}` is not {what} ({}..={})", range.start(), range.end()))
            })?;
        Ok(n)
    }

    /// `random-detect minimum-threshold A U maximum-threshold B U drop-probability P [weight W] [ecn]`;
    /// `None` when the line is listed as not supported.
    fn random_detect(&mut self, no: usize, w: &[&str]) -> Result<Option<WredLine>, ImportError> {
        let (mut min, mut max, mut prob, mut weight, mut ecn) = (None, None, None, None, false);
        let mut packets = false;
        let mut i = 1;
        while i < w.len() {
            let k = w[i].to_ascii_lowercase();
            match k.as_str() {
                "minimum-threshold" | "maximum-threshold" => {
                    let (t, is_packets) = self.threshold(no, &k, w.get(i + 1), w.get(i + 2))?;
                    packets |= is_packets;
                    if k == "minimum-threshold" {
                        min = Some(t);
                    } else {
                        max = Some(t);
                    }
                    i += 3;
                }
                "drop-probability" => {
                    let v = w.get(i + 1).filter(|v| !is_wred_word(v));
                    prob = Some(self.number(no, "drop-probability", v, 0..=100u8, "a percent")?);
                    i += 2;
                }
                "weight" => {
                    let v = w.get(i + 1).filter(|v| !is_wred_word(v));
                    weight = Some(self.number(no, "weight", v, 0..=15u8, "a weight")?);
                    i += 2;
                }
                "ecn" => {
                    ecn = true;
                    i += 1;
                }
                "threshold" => {
                    self.unsupported(no, "NX-OS's preset thresholds: rocefab needs minimum and maximum thresholds");
                    return Ok(None);
                }
                _ => return Err(self.err(no, "random-detect", format!("unexpected `{}`", w[i]))),
            }
        }
        let (Some(min), Some(max)) = (min, max) else {
            let field = if min.is_none() { "minimum-threshold" } else { "maximum-threshold" };
            return Err(self.err(no, field, "missing (random-detect needs a minimum and a maximum threshold)"));
        };
        let Some(probability) = prob else {
            return Err(self.err(no, "drop-probability", "missing (the percent marked at the maximum threshold)"));
        };
        if packets {
            self.unsupported(no, "thresholds in packets: rocefab's WRED thresholds are bytes");
            return Ok(None);
        }
        if !ecn {
            self.unsupported(no, "WRED without ecn drops packets; rocefab's WRED marks the ECN-capable ones, with ecn");
            return Ok(None);
        }
        if min.bytes() > max.bytes() {
            return Err(self.err(
                no,
                "minimum-threshold",
                format!("{} bytes is above maximum-threshold ({} bytes)", min.bytes(), max.bytes()),
            ));
        }
        if weight.is_some_and(|w| w != 0) {
            self.unsupported(
                no,
                "weight other than 0: rocefab's WRED reads the instantaneous queue depth; imported as weight 0",
            );
        }
        Ok(Some(WredLine { min, max, probability }))
    }

    /// A threshold's value and unit; also whether it counts packets.
    fn threshold(
        &self,
        no: usize,
        field: &str,
        v: Option<&&str>,
        unit: Option<&&str>,
    ) -> Result<(Threshold, bool), ImportError> {
        let missing = || self.err(no, field, "missing value (a number and bytes, kbytes or mbytes)");
        let v = v.filter(|v| !is_wred_word(v)).ok_or_else(missing)?;
        let value: u64 = v.parse().map_err(|_| self.err(no, field, format!("`{v}` is not a whole number")))?;
        let unit = unit.map(|u| u.to_ascii_lowercase());
        let unit = match unit.as_deref() {
            Some("bytes") => SizeUnit::Bytes,
            Some("kbytes") => SizeUnit::Kbytes,
            Some("mbytes") => SizeUnit::Mbytes,
            Some("packets") => return Ok((Threshold { value, unit: SizeUnit::Bytes }, true)),
            _ => return Err(self.err(no, field, format!("{value} needs a unit: bytes, kbytes or mbytes"))),
        };
        if value.checked_mul(unit.bytes()).is_none_or(|b| b > 1 << 40) {
            return Err(self.err(no, field, format!("{value} {} is too large", unit.name())));
        }
        Ok((Threshold { value, unit }, false))
    }

    /// `service-policy type T [input|output] NAME` under `system qos` or an interface.
    fn service_policy(&mut self, mode: Mode, head: usize, no: usize, w: &[&'a str]) -> Result<(), ImportError> {
        let mut rest = &w[1..];
        let mut kind = Kind::Qos;
        if rest.first().is_some_and(|t| t.eq_ignore_ascii_case("type")) {
            kind = match rest.get(1).map(|t| t.to_ascii_lowercase()).as_deref() {
                Some("qos") => Kind::Qos,
                Some("queuing") => Kind::Queuing,
                Some("network-qos") => Kind::NetworkQos,
                _ => {
                    self.unsupported(no, "rocefab imports service-policy types qos, queuing and network-qos");
                    return Ok(());
                }
            };
            rest = &rest[2..];
        }
        let dir = rest.first().map(|t| t.to_ascii_lowercase()).filter(|t| t == "input" || t == "output");
        if dir.is_some() {
            rest = &rest[1..];
        }
        let [name] = rest else {
            return Err(self.err(no, "service-policy", "expected one policy-map name"));
        };
        let ok = match (kind, dir.as_deref()) {
            (Kind::Qos, Some("input")) | (Kind::Queuing, Some("output")) => true,
            (Kind::NetworkQos, None) => matches!(mode, Mode::SystemQos(_)),
            _ => false,
        };
        if !ok {
            self.unsupported(
                no,
                "rocefab imports type qos input, type queuing output and, under system qos, type network-qos",
            );
            return Ok(());
        }
        self.p.attach.push(Attach { kind, name, line: no, head });
        Ok(())
    }
}

/// The keywords of `random-detect`: a value missing before one of them is missing, not malformed.
fn is_wred_word(t: &str) -> bool {
    matches!(
        t.to_ascii_lowercase().as_str(),
        "bytes"
            | "kbytes"
            | "mbytes"
            | "packets"
            | "minimum-threshold"
            | "maximum-threshold"
            | "drop-probability"
            | "weight"
            | "ecn"
    )
}

/// The commands a mode takes (by their first word); the rest go to an enclosing mode.
fn accepts(mode: Mode, first: &str, w: &[&str]) -> bool {
    match mode {
        Mode::Top => {
            matches!(first, "class-map" | "policy-map" | "interface" | "priority-flow-control")
                || (first == "system" && w.len() == 2 && w[1].eq_ignore_ascii_case("qos"))
        }
        Mode::ClassMap(_) => first == "match",
        Mode::Policy(_) => first == "class",
        Mode::Class(..) => matches!(
            first,
            "set"
                | "police"
                | "bandwidth"
                | "priority"
                | "random-detect"
                | "shape"
                | "queue-limit"
                | "pause"
                | "mtu"
                | "congestion-control"
        ),
        Mode::SystemQos(_) => first == "service-policy",
        Mode::Interface(_) => matches!(first, "service-policy" | "priority-flow-control"),
        Mode::Other(_) => false,
    }
}

/// The queue of a system-defined class: `<prefix>N` (1..=7) or `<prefix>-default` (0).
fn queue_of(name: &str, prefixes: &[&str]) -> Option<u8> {
    let lower = name.to_ascii_lowercase();
    prefixes.iter().find_map(|p| {
        let rest = lower.strip_prefix(p)?;
        if rest == "-default" {
            return Some(0);
        }
        rest.parse::<u8>().ok().filter(|q| (1..=7).contains(q))
    })
}

/// `24`, `24,26`, `10-12`, `af31`, `cs6`, `ef`, `default` → DSCPs.
fn parse_dscp_list(s: &str) -> Result<Vec<u8>, String> {
    let one = |v: &str| -> Result<u8, String> {
        let l = v.to_ascii_lowercase();
        let named = match l.as_str() {
            "default" => Some(0),
            "ef" => Some(46),
            _ => match (l.strip_prefix("af"), l.strip_prefix("cs")) {
                (Some(d), _) if d.len() == 2 => {
                    let (c, p) = (d.as_bytes()[0].wrapping_sub(b'0'), d.as_bytes()[1].wrapping_sub(b'0'));
                    ((1..=4).contains(&c) && (1..=3).contains(&p)).then(|| 8 * c + 2 * p)
                }
                (_, Some(c)) => c.parse::<u8>().ok().filter(|c| *c <= 7).map(|c| 8 * c),
                _ => None,
            },
        };
        match named {
            Some(d) => Ok(d),
            None => v
                .parse::<u8>()
                .ok()
                .filter(|d| *d <= 63)
                .ok_or_else(|| format!("`{v}` is not a DSCP (0..=63 or a name such as af31, cs6, ef)")),
        }
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (one(a)?, one(b)?);
                if a > b {
                    return Err(format!("`{part}`: the range runs backwards"));
                }
                out.extend(a..=b);
            }
            None => out.push(one(part)?),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// From the configuration to the settings

fn resolve(mut p: Parsed, file: &str) -> Result<Import, ImportError> {
    let mut out =
        Out { q: QosImport::default(), notes: std::mem::take(&mut p.notes), text: std::mem::take(&mut p.text), file };
    let Chosen { active, unused_why } = choose_policies(&p, file)?;
    for i in active.iter().flatten() {
        drop_replaced(&mut p.policies[*i], &mut out);
    }
    classify(&p, active[0], &mut out)?;
    schedule(&p, active[1], &mut out)?;
    pause(&p, active[2], &mut out)?;
    watchdog(&p, &mut out);
    for (i, pol) in p.policies.iter().enumerate() {
        if !active.contains(&Some(i)) {
            let why = unused_why.get(&i).cloned().unwrap_or_default();
            for &l in &pol.lines {
                out.note(l, NoteKind::NotUsed, why.clone());
            }
        }
    }
    finish(&p, out)
}

/// The settings and notes being built, with the file's lines for the notes.
struct Out<'a, 'f> {
    q: QosImport,
    notes: Vec<Note>,
    text: BTreeMap<usize, &'a str>,
    file: &'f str,
}

impl Out<'_, '_> {
    fn note(&mut self, line: usize, kind: NoteKind, why: impl Into<String>) {
        let text = self.text.get(&line).copied().unwrap_or("").to_string();
        self.notes.push(Note { line, text, kind, why: why.into() });
    }

    fn err(&self, line: usize, field: &str, msg: String) -> ImportError {
        ImportError { file: self.file.to_string(), line, field: field.to_string(), msg }
    }
}

/// The policy of each type that applies (by index into `Parsed::policies`: qos, queuing,
/// network-qos), and why each other policy does not.
struct Chosen {
    active: [Option<usize>; 3],
    unused_why: BTreeMap<usize, String>,
}

/// Which policy of each type applies: the one `service-policy` attaches, or the only one.
fn choose_policies(p: &Parsed, file: &str) -> Result<Chosen, ImportError> {
    let err = |line: usize, field: &str, msg: String| ImportError {
        file: file.to_string(),
        line,
        field: field.to_string(),
        msg,
    };
    let mut active: [Option<usize>; 3] = [None; 3];
    let mut unused_why: BTreeMap<usize, String> = BTreeMap::new();
    for (slot, kind) in [Kind::Qos, Kind::Queuing, Kind::NetworkQos].into_iter().enumerate() {
        let mut attached: Vec<&Attach> = Vec::new();
        for a in p.attach.iter().filter(|a| a.kind == kind) {
            if !attached.iter().any(|b| b.name == a.name) {
                attached.push(a);
            }
        }
        let defined: Vec<usize> = (0..p.policies.len()).filter(|&i| p.policies[i].kind == kind).collect();
        let ty = kind.name();
        active[slot] = match attached.as_slice() {
            [a, b, ..] => {
                return Err(err(
                    b.line,
                    "service-policy",
                    format!(
                        "policy-map type {ty} {} is attached here and {} at line {}: a topology's qos: holds one",
                        b.name, a.name, a.line
                    ),
                ))
            }
            [a] => {
                let Some(&i) = defined.iter().find(|&&i| p.policies[i].name == a.name) else {
                    return Err(err(
                        a.line,
                        "service-policy",
                        format!("policy-map type {ty} {} is not defined in the file", a.name),
                    ));
                };
                for &j in defined.iter().filter(|&&j| j != i) {
                    let name = p.policies[j].name;
                    let why =
                        format!("policy-map type {ty} {name} is not attached: line {} attaches {}", a.line, a.name);
                    unused_why.insert(j, why);
                }
                Some(i)
            }
            [] => match defined.as_slice() {
                [] => None,
                [i] => Some(*i),
                [_, j, ..] => {
                    return Err(err(
                        p.policies[*j].line,
                        "policy-map",
                        format!("several policy-map type {ty} and no service-policy says which one applies"),
                    ))
                }
            },
        };
    }
    Ok(Chosen { active, unused_why })
}

/// Drops the commands a later one of the same kind in the same class replaces, noting them.
fn drop_replaced(pol: &mut Policy, out: &mut Out) {
    for c in &mut pol.classes {
        let mut keep: Vec<(usize, Cmd)> = Vec::new();
        for (line, cmd) in c.cmds.drain(..) {
            if let Some(k) = keep.iter().position(|(_, old)| old.slot() == cmd.slot()) {
                out.note(keep[k].0, NoteKind::NotUsed, format!("replaced by line {line}"));
                keep.remove(k);
            }
            keep.push((line, cmd));
        }
        c.cmds = keep;
    }
}

/// `classes` from the qos policy `pi` and the class-maps it names; notes the class-maps it does
/// not use and the DSCPs an earlier class already took.
fn classify(p: &Parsed, pi: Option<usize>, out: &mut Out) -> Result<(), ImportError> {
    let mut used_maps = vec![false; p.class_maps.len()];
    if let Some(pi) = pi {
        let pol = &p.policies[pi];
        // DSCP → (qos-group, class, its line), first match first.
        let mut table: [Option<(u8, &str, usize)>; 64] = [None; 64];
        let mut default = 0u8;
        let mut src = vec![pol.line];
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for c in &pol.classes {
            if let Some((_, l)) = seen.iter().find(|(n, _)| *n == c.name) {
                let msg = format!("class {} is listed twice in policy-map {} (line {l})", c.name, pol.name);
                return Err(out.err(c.line, "class", msg));
            }
            seen.push((c.name, c.line));
            src.push(c.line);
            let group = c.cmds.iter().find_map(|(l, cmd)| match cmd {
                Cmd::QosGroup(g) => Some((*g, *l)),
                _ => None,
            });
            src.extend(group.map(|(_, l)| l));
            let group = group.map_or(0, |(g, _)| g);
            if c.name.eq_ignore_ascii_case("class-default") {
                default = group;
                continue;
            }
            let Some(m) = p.class_maps.iter().position(|m| m.name == c.name) else {
                let msg = format!("class-map type qos {} is not defined in the file", c.name);
                return Err(out.err(c.line, "class", msg));
            };
            used_maps[m] = true;
            let cm = &p.class_maps[m];
            src.push(cm.line);
            src.extend(cm.matches.iter().map(|(l, _)| *l));
            for d in class_map_dscps(cm, &table, out) {
                table[d as usize].get_or_insert((group, c.name, c.line));
            }
        }
        out.q.classes = Some(table.iter().map(|t| t.map_or(default, |(g, _, _)| g)).collect());
        out.q.sources.insert("classes", src);
    }
    for (_, cm) in p.class_maps.iter().enumerate().filter(|(m, _)| !used_maps[*m]) {
        let why = match pi {
            Some(pi) => format!("policy-map type qos {} does not use class-map {}", p.policies[pi].name, cm.name),
            None => format!("no policy-map type qos sets a qos-group for class-map {}", cm.name),
        };
        for &l in &cm.lines {
            out.note(l, NoteKind::NotUsed, why.clone());
        }
    }
    Ok(())
}

/// The DSCPs a class-map matches (match-all: a packet has one DSCP, so those every line lists);
/// notes its lines that match nothing, or only DSCPs `table` already gives an earlier class.
fn class_map_dscps(cm: &ClassMap, table: &[Option<(u8, &str, usize)>; 64], out: &mut Out) -> Vec<u8> {
    let all: Vec<u8> = if cm.match_all {
        (0..64u8).filter(|d| cm.matches.iter().all(|(_, l)| l.contains(d))).collect()
    } else {
        cm.matches.iter().flat_map(|(_, l)| l.iter().copied()).collect()
    };
    for (line, list) in &cm.matches {
        if cm.match_all && all.is_empty() {
            out.note(
                *line,
                NoteKind::NotUsed,
                format!("class-map {} is match-all and no DSCP is in every match", cm.name),
            );
            continue;
        }
        let taken: Vec<String> = list
            .iter()
            .filter(|d| all.contains(d))
            .filter_map(|&d| table[d as usize].map(|(_, n, l)| format!("DSCP {d} by class {n} at line {l}")))
            .collect();
        if !taken.is_empty() {
            out.note(
                *line,
                NoteKind::NotUsed,
                format!("already classified, and the first class wins: {}", taken.join(", ")),
            );
        }
    }
    all
}

/// `strict`, `ets` and `wred` from the queuing policy `pi`.
fn schedule(p: &Parsed, pi: Option<usize>, out: &mut Out) -> Result<(), ImportError> {
    let Some(pi) = pi else { return Ok(()) };
    let pol = &p.policies[pi];
    let mut queues: [Option<&PolicyClass>; 8] = [None; 8];
    let (mut strict, mut ets) = (0u8, [0u8; 8]);
    let (mut strict_src, mut ets_src, mut wred_src) = (vec![pol.line], vec![pol.line], vec![pol.line]);
    // (queue, level, line) of every `priority`.
    let mut levels: Vec<(u8, u8, usize)> = Vec::new();
    let mut wred: Option<(Wred, usize)> = None;
    for c in &pol.classes {
        let qn = c.queue.unwrap_or(0);
        if let Some(prev) = queues[qn as usize] {
            let msg =
                format!("queue {qn} (qos-group {qn}) is already configured by {} at line {}", prev.name, prev.line);
            return Err(out.err(c.line, "class type queuing", msg));
        }
        queues[qn as usize] = Some(c);
        ets_src.push(c.line);
        let prio = c.cmds.iter().find_map(|(l, cmd)| if let Cmd::Priority(_) = cmd { Some(*l) } else { None });
        for (line, cmd) in &c.cmds {
            match cmd {
                Cmd::Priority(level) => {
                    strict |= 1 << qn;
                    levels.push((qn, *level, *line));
                    strict_src.extend([c.line, *line]);
                }
                Cmd::Bandwidth(pct) => {
                    if let (Some(pl), true) = (prio, *pct != 0) {
                        let msg = format!("queue {qn} is strict (priority at line {pl}) and cannot have a share too");
                        return Err(out.err(*line, "bandwidth remaining percent", msg));
                    }
                    ets[qn as usize] = *pct;
                    ets_src.push(*line);
                }
                Cmd::Wred(r) => {
                    wred_src.extend([c.line, *line]);
                    add_wred(&mut wred, qn, r, *line, out)?;
                }
                _ => {}
            }
        }
    }
    for &(qa, la, line_a) in &levels {
        if let Some(&(qb, _, line_b)) = levels.iter().find(|&&(qb, lb, _)| lb < la && qb < qa) {
            let msg = format!(
                "queue {qa} at level {la} would go before queue {qb} at level 1 (line {line_b}): rocefab serves \
                 strict queues highest first"
            );
            return Err(out.err(line_a, "priority level", msg));
        }
    }
    let sum: u32 = ets.iter().map(|&v| u32::from(v)).sum();
    if sum != 100 && !(sum == 0 && strict == 0xff) {
        let shares: Vec<String> = (0..8)
            .filter_map(|qn| {
                queues[qn]?.cmds.iter().find_map(|(l, c)| match c {
                    Cmd::Bandwidth(v) if *v != 0 => Some(format!("queue {qn} {v} % at line {l}")),
                    _ => None,
                })
            })
            .collect();
        let listed = if shares.is_empty() { String::new() } else { format!(" ({})", shares.join(", ")) };
        let msg = format!("the shares of policy-map {} add up to {sum} %, not 100{listed}", pol.name);
        return Err(out.err(pol.line, "bandwidth remaining percent", msg));
    }
    out.q.strict = Some(strict);
    out.q.ets = Some(ets);
    out.q.wred = Some(wred.map(|(w, _)| w));
    out.q.sources.insert("strict", strict_src);
    out.q.sources.insert("ets", ets_src);
    out.q.sources.insert("wred", wred_src);
    Ok(())
}

/// Adds queue `qn` to the WRED queues; rocefab has one profile, so its thresholds must be the
/// others'.
fn add_wred(wred: &mut Option<(Wred, usize)>, qn: u8, r: &WredLine, line: usize, out: &Out) -> Result<(), ImportError> {
    let Some((w, first)) = wred else {
        *wred = Some((Wred { queues: 1 << qn, min: r.min, max: r.max, probability: r.probability }, line));
        return Ok(());
    };
    if (w.min.bytes(), w.max.bytes(), w.probability) != (r.min.bytes(), r.max.bytes(), r.probability) {
        let msg = format!(
            "queue {qn}'s thresholds differ from those at line {first}: rocefab runs one WRED profile on its WRED \
             queues"
        );
        return Err(out.err(line, "random-detect", msg));
    }
    w.queues |= 1 << qn;
    Ok(())
}

/// `pfc` from the network-qos policy `pi`, with the ports' `priority-flow-control mode` lines.
fn pause(p: &Parsed, pi: Option<usize>, out: &mut Out) -> Result<(), ImportError> {
    let Some(pi) = pi else {
        for &(l, _) in &p.pfc_modes {
            let why = "no policy-map type network-qos with pause pfc-cos: the file does not say which priorities \
                       are lossless";
            out.note(l, NoteKind::NotUsed, why);
        }
        return Ok(());
    };
    let pol = &p.policies[pi];
    let mut seen: [Option<usize>; 8] = [None; 8];
    let mut pfc = 0u8;
    let mut src = vec![pol.line];
    for c in &pol.classes {
        let qn = c.queue.unwrap_or(0);
        if let Some(l) = seen[qn as usize] {
            let msg = format!("queue {qn} (qos-group {qn}) is already configured at line {l}");
            return Err(out.err(c.line, "class type network-qos", msg));
        }
        seen[qn as usize] = Some(c.line);
        src.push(c.line);
        for (line, cmd) in &c.cmds {
            match cmd {
                Cmd::Pause(cos) => {
                    if let Some(&other) = cos.iter().find(|&&v| v != qn) {
                        let msg = format!(
                            "pfc-cos {other} in class {}: rocefab pauses a class on its own priority ({qn})",
                            c.name
                        );
                        return Err(out.err(*line, "pause pfc-cos", msg));
                    }
                    pfc |= 1 << qn;
                    src.push(*line);
                }
                Cmd::Mtu(_) => {
                    let why = "an MTU per class: qos: has no MTU key; the topology's top-level mtu: sets every \
                               link's, and --apply leaves it";
                    out.note(*line, NoteKind::NotSupported, why);
                }
                _ => {}
            }
        }
    }
    out.q.pfc = Some(pfc);
    src.extend(p.pfc_modes.iter().flat_map(|&(l, h)| [l, h]));
    out.q.sources.insert("pfc", src);
    Ok(())
}

/// `watchdog`: the global setting, or on when a port turns it on.
fn watchdog(p: &Parsed, out: &mut Out) {
    let Some(&(gl, on)) = p.wd_global.last() else {
        if !p.wd_ports.is_empty() {
            out.q.watchdog = Some(true);
            out.q.sources.insert("watchdog", p.wd_ports.iter().flat_map(|&(l, h)| [l, h]).collect());
        }
        return;
    };
    for &(l, _) in p.wd_global.iter().rev().skip(1) {
        out.note(l, NoteKind::NotUsed, format!("replaced by line {gl}"));
    }
    out.q.watchdog = Some(on);
    let mut src = vec![gl];
    if on {
        src.extend(p.wd_ports.iter().flat_map(|&(l, h)| [l, h]));
    } else {
        for &(l, _) in &p.wd_ports {
            let why = format!("the watchdog on one port: rocefab's watchdog is per switch, and line {gl} turns it off");
            out.note(l, NoteKind::NotSupported, why);
        }
    }
    out.q.sources.insert("watchdog", src);
}

/// Adds the `service-policy` lines to the keys they chose, notes the `system qos` and
/// `interface` lines nothing came from, and puts the notes in line order.
fn finish(p: &Parsed, mut out: Out) -> Result<Import, ImportError> {
    for a in &p.attach {
        let keys: &[&'static str] = match a.kind {
            Kind::Qos => &["classes"],
            Kind::Queuing => &["strict", "ets", "wred"],
            Kind::NetworkQos => &["pfc"],
        };
        for k in keys {
            if let Some(v) = out.q.sources.get_mut(k) {
                v.extend([a.line, a.head]);
            }
        }
    }
    for v in out.q.sources.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    for &(head, qos) in &p.blocks {
        if !out.q.sources.values().any(|v| v.contains(&head)) {
            let (kind, why) = if qos {
                (NoteKind::NotUsed, "none of its QoS commands is used")
            } else {
                (NoteKind::NotSupported, "no QoS commands: the topology describes the ports")
            };
            out.note(head, kind, why);
        }
    }
    out.notes.sort_by_key(|n| n.line);
    Ok(Import { qos: out.q, notes: out.notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_names_and_ranges() {
        assert_eq!(parse_dscp_list("af11,af43,cs0,cs7,ef,default"), Ok(vec![10, 38, 0, 56, 46, 0]));
        assert_eq!(parse_dscp_list("10-12,AF31"), Ok(vec![10, 11, 12, 26]));
        assert_eq!(parse_dscp_list("cs1-af12"), Ok(vec![8, 9, 10, 11, 12]));
        assert!(parse_dscp_list("12-10").unwrap_err().contains("runs backwards"));
        for bad in ["64", "af14", "af5", "cs8", "x", "", "1,,2"] {
            assert!(parse_dscp_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn queue_class_names() {
        let out = ["c-out-8q-q", "c-out-q"];
        assert_eq!(queue_of("c-out-8q-q-default", &out), Some(0));
        assert_eq!(queue_of("C-OUT-8Q-Q7", &out), Some(7));
        assert_eq!(queue_of("c-out-q3", &out), Some(3));
        assert_eq!(queue_of("c-out-8q-q0", &out), None, "queue 0 is q-default");
        assert_eq!(queue_of("c-out-8q-q8", &out), None);
        assert_eq!(queue_of("c-in-q3", &out), None);
        assert_eq!(queue_of("c-8q-nq3", &["c-8q-nq", "c-nq"]), Some(3));
    }

    #[test]
    fn source_lines_as_ranges() {
        assert_eq!(line_ranges(&[3, 4, 5, 7, 9, 10]), "3-5,7,9-10");
        assert_eq!(line_ranges(&[1]), "1");
        assert_eq!(line_ranges(&[]), "");
    }

    #[test]
    fn thresholds_read_kbytes_as_thousands() {
        let t = |value, unit| Threshold { value, unit };
        assert_eq!((t(150, SizeUnit::Kbytes).bytes(), t(150, SizeUnit::Kbytes).yaml()), (150_000, "150KB".into()));
        assert_eq!((t(3, SizeUnit::Mbytes).bytes(), t(3, SizeUnit::Mbytes).yaml()), (3_000_000, "3MB".into()));
        assert_eq!((t(9216, SizeUnit::Bytes).bytes(), t(9216, SizeUnit::Bytes).yaml()), (9216, "9216".into()));
        // What the topology loader makes of the written sizes.
        for s in [t(150, SizeUnit::Kbytes), t(3, SizeUnit::Mbytes), t(9216, SizeUnit::Bytes)] {
            assert_eq!(crate::qos::parse_byte_size(&s.yaml()), Ok(s.bytes()));
        }
    }
}
