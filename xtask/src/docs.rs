//! `cargo xtask docs`: builds the book in `docs/` with mdBook ([`crate::setup::MDBOOK_VERSION`],
//! which `cargo xtask setup` installs) into `target/book`, and checks the book and the README:
//!
//! - mdBook builds without a warning or an error;
//! - every relative link resolves: the file exists, and a `#anchor` names a heading of the
//!   target page (GitHub's and mdBook's heading ids: lowercase, spaces to `-`, other
//!   punctuation dropped);
//! - every command quoted (a code line or code span that starts with `rocefab` or `cargo xtask`,
//!   after an optional `$ ` or `# ` prompt) exists: `rocefab <subcommand> --help` succeeds (one
//!   more word for each level whose help shows `<COMMAND>`: `rocefab fail link`), and every
//!   `--option` it uses is in that help. Placeholders (`<...>`, `[...]`, `...`) are skipped.
//!
//! `cargo xtask test` runs it as a phase.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use crate::util::root;

/// The pages checked: the README and every page of the book.
fn pages(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut v = vec![root.join("README.md")];
    let src = root.join("docs/src");
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                v.push(p);
            }
        }
    }
    v.sort();
    Ok(v)
}

/// A heading's id as GitHub and mdBook make it.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// What one page holds: its heading ids, its links and its quoted commands, with line numbers.
#[derive(Debug, Default, PartialEq)]
pub struct Page {
    pub anchors: BTreeSet<String>,
    pub links: Vec<(usize, String)>,
    pub commands: Vec<(usize, String)>,
}

/// The line of byte offset `at` in `text` (1-based).
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// A command quoted on a line, if the line is one: `rocefab ...` or `cargo xtask ...`, after an
/// optional prompt.
fn command_of(line: &str) -> Option<String> {
    let l = line.trim();
    let l = l.strip_prefix("$ ").or_else(|| l.strip_prefix("# ")).unwrap_or(l).trim();
    (l.starts_with("rocefab ") || l.starts_with("cargo xtask ")).then(|| l.to_string())
}

/// Parses a page.
pub fn parse(text: &str) -> Page {
    let mut page = Page::default();
    let mut heading: Option<String> = None;
    let mut code_block: Option<bool> = None;
    for (e, range) in Parser::new(text).into_offset_iter() {
        match e {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    page.anchors.insert(slug(&h));
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links.push((line_of(text, range.start), dest_url.to_string()));
            }
            Event::Start(Tag::CodeBlock(kind)) => {
                // Console and shell blocks, and indented ones; not YAML, JSON, Rust, ...
                code_block = Some(match kind {
                    CodeBlockKind::Indented => true,
                    CodeBlockKind::Fenced(lang) => {
                        matches!(lang.as_ref(), "" | "console" | "sh" | "shell" | "bash" | "text")
                    }
                });
            }
            Event::End(TagEnd::CodeBlock) => code_block = None,
            Event::Text(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                if code_block == Some(true) {
                    let first = line_of(text, range.start);
                    for (i, l) in t.lines().enumerate() {
                        if let Some(c) = command_of(l) {
                            page.commands.push((first + i, c));
                        }
                    }
                }
            }
            Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
                if let Some(c) = command_of(&t) {
                    page.commands.push((line_of(text, range.start), c));
                }
            }
            _ => {}
        }
    }
    page
}

/// Whether a word is a placeholder or the end of the command proper.
fn is_placeholder(w: &str) -> bool {
    w.starts_with('<') || w.starts_with('[') || w.contains("...") || w.contains('…') || w.starts_with('(')
}

fn ends_command(w: &str) -> bool {
    matches!(w, "|" | "||" | "&&" | ";" | "#" | ">" | "2>" | "<" | "&") || w.starts_with('>') || w.starts_with("2>")
}

/// (the words before the first option, the `--options`) of a quoted command: `rocefab fail
/// link x --for 2s` gives (["fail", "link", "x"], ["--for"]). `None` when the subcommand is a
/// placeholder. Which of the words are subcommands, the program's help says ([`subcommand`]).
pub fn split(program_words: usize, cmd: &str) -> Option<(Vec<String>, Vec<String>)> {
    let words: Vec<&str> = cmd.split_whitespace().skip(program_words).take_while(|w| !ends_command(w)).collect();
    let first = words.first()?;
    if is_placeholder(first) || first.starts_with('-') {
        return None;
    }
    let positional = words.iter().take_while(|w| !w.starts_with('-')).map(|w| w.to_string()).collect();
    let options = words
        .iter()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.split('=').next().unwrap_or(w).trim_end_matches([',', ')', '`']).to_string())
        .collect();
    Some((positional, options))
}

/// `<bin> <path> --help`: its text, or the first line of its error.
fn help(bin: &Path, path: &[String]) -> Result<String, String> {
    match Command::new(bin).args(path).arg("--help").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).to_string()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a help text is that of a command with subcommands (clap: `Usage: x y <COMMAND>`).
fn has_subcommands(help: &str) -> bool {
    help.lines().any(|l| l.starts_with("Usage:") && l.contains("<COMMAND>"))
}

/// Builds the book and checks every page; the summary line, or every problem.
pub fn run() -> anyhow::Result<String> {
    let root = root();
    crate::util::run(Command::new("cargo").current_dir(&root).args(["build", "-p", "control"]))
        .context("building rocefab for the command check")?;
    let rocefab = root.join("target/debug/rocefab");
    let xtask = std::env::current_exe().context("the xtask binary")?;
    let mut problems = Vec::new();

    let mdbook = crate::setup::mdbook_path();
    let out = Command::new(&mdbook)
        .current_dir(root.join("docs"))
        .args(["build", "--dest-dir"])
        .arg(root.join("target/book"))
        .output()
        .with_context(|| format!("running {} (cargo xtask setup installs it)", mdbook.display()))?;
    let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        problems.push(format!("mdbook build failed: {}", log.trim()));
    }
    for l in log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")) {
        problems.push(format!("mdbook: {l}"));
    }

    let pages = pages(&root)?;
    let parsed: BTreeMap<PathBuf, Page> = pages
        .iter()
        .map(|p| {
            Ok((p.clone(), parse(&std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?)))
        })
        .collect::<anyhow::Result<_>>()?;
    let rel = |p: &Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let (mut links, mut commands) = (0, 0);
    let mut helps: BTreeMap<(bool, Vec<String>), Result<String, String>> = BTreeMap::new();
    for (p, page) in &parsed {
        for (line, url) in &page.links {
            if url.contains("://") || url.starts_with("mailto:") {
                continue;
            }
            links += 1;
            let (file, anchor) = url.split_once('#').map_or((url.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { p.clone() } else { p.parent().unwrap_or(&root).join(file) };
            if !target.exists() {
                problems.push(format!("{}:{line}: link {url}: {} does not exist", rel(p), rel(&target)));
                continue;
            }
            if let Some(a) = anchor {
                let known = match parsed.get(&target.canonicalize().unwrap_or(target.clone())).or(parsed.get(&target)) {
                    Some(t) => t.anchors.contains(a),
                    None => {
                        let text = std::fs::read_to_string(&target).unwrap_or_default();
                        parse(&text).anchors.contains(a)
                    }
                };
                if !known {
                    problems.push(format!("{}:{line}: link {url}: {} has no heading #{a}", rel(p), rel(&target)));
                }
            }
        }
        for (line, cmd) in &page.commands {
            let is_xtask = cmd.starts_with("cargo xtask ");
            let Some((words, options)) = split(if is_xtask { 2 } else { 1 }, cmd) else { continue };
            let (bin, program) = if is_xtask { (&xtask, "cargo xtask") } else { (&rocefab, "rocefab") };
            // The subcommand path: one word, and one more for each level with subcommands.
            let mut path = vec![words[0].clone()];
            let mut text = helps.entry((is_xtask, path.clone())).or_insert_with(|| help(bin, &path)).clone();
            while let Ok(h) = &text {
                if !has_subcommands(h) {
                    break;
                }
                match words.get(path.len()) {
                    Some(w) if !is_placeholder(w) => path.push(w.clone()),
                    _ => break,
                }
                text = helps.entry((is_xtask, path.clone())).or_insert_with(|| help(bin, &path)).clone();
            }
            if matches!(&text, Ok(h) if has_subcommands(h)) {
                continue; // `rocefab fail <what>`: a placeholder where the subcommand goes
            }
            commands += 1;
            match text {
                Err(e) => {
                    problems.push(format!("{}:{line}: {program} {}: no such command ({e})", rel(p), path.join(" ")))
                }
                Ok(h) => {
                    for o in options.iter().filter(|o| !o.eq_ignore_ascii_case("--help") && !h.contains(o.as_str())) {
                        problems.push(format!("{}:{line}: {program} {}: no option {o}", rel(p), path.join(" ")));
                    }
                }
            }
        }
    }
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("xtask docs: {p}");
        }
        bail!("{} problem(s) in the docs; see above", problems.len());
    }
    Ok(format!(
        "the book builds without warnings into target/book; {} pages, {links} relative links and {commands} quoted commands check",
        pages.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_become_github_ids() {
        assert_eq!(
            slug("Failures: links, switches, NICs (static routing)"),
            "failures-links-switches-nics-static-routing"
        );
        assert_eq!(slug("Routing by BGP: `routing: bgp`"), "routing-by-bgp-routing-bgp");
        assert_eq!(slug("The 3-hop fabric"), "the-3-hop-fabric");
    }

    #[test]
    fn a_page_yields_its_anchors_links_and_commands() {
        let text = "# Title\n\n## Routing by BGP: `routing: bgp`\n\nSee [capture](capture.md#live) and \
                    [x](https://example.com).\n\n```console\n$ rocefab fail link rs rail1:eth5 --for 2s | tee x\n\
                    not a command\n```\n\nRun `cargo xtask docs`; `rocefab <command>` is a placeholder.\n\n\
                    ```yaml\nrocefab: not a command\n```\n";
        let p = parse(text);
        assert!(p.anchors.contains("routing-by-bgp-routing-bgp"), "{:?}", p.anchors);
        assert_eq!(p.links, vec![(5, "capture.md#live".to_string()), (5, "https://example.com".to_string())]);
        assert_eq!(
            p.commands,
            vec![
                (8, "rocefab fail link rs rail1:eth5 --for 2s | tee x".to_string()),
                (12, "cargo xtask docs".to_string()),
                (12, "rocefab <command>".to_string()),
            ]
        );
    }

    #[test]
    fn commands_split_into_their_words_and_options() {
        let s = |n, c| split(n, c);
        let v = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            s(1, "rocefab fail link rs rail1:eth5 --for 2s --flap=300ms | tee"),
            Some((v(&["fail", "link", "rs", "rail1:eth5"]), v(&["--for", "--flap"])))
        );
        assert_eq!(s(2, "cargo xtask bench --scale"), Some((v(&["bench"]), v(&["--scale"]))));
        assert_eq!(s(1, "rocefab <command>"), None);
        assert_eq!(s(1, "rocefab --version"), None);
        assert_eq!(s(1, "rocefab up x.yaml # --not-an-option"), Some((v(&["up", "x.yaml"]), vec![])));
    }

    #[test]
    fn clap_usage_tells_subcommands() {
        assert!(has_subcommands("Build a frame\n\nUsage: rocefab frame <COMMAND>\n"));
        assert!(!has_subcommands("Usage: rocefab up [OPTIONS] <TOPOLOGY>\n"));
    }
}
