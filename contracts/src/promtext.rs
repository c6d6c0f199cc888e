//! Reading the Prometheus text exposition format (version 0.0.4) the daemons serve on
//! `/metrics`: one parser for the CLI, xtask and the tests. Each sample line is
//! `name{label="value",...} value [timestamp]`; `#` lines (HELP, TYPE) and blank lines are
//! skipped, and so is a line that does not parse.

/// One sample line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// The text between the braces, unparsed (`port="eth1",queue="3"`).
    labels: &'a str,
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// The label pairs, values unescaped where they hold `\"`, `\\` or `\n`.
    pub fn labels(&self) -> impl Iterator<Item = (&'a str, String)> + 'a {
        Labels(self.labels)
    }

    /// The text between the braces as served (`port="eth1",queue="3"`; empty without labels).
    pub fn raw_labels(&self) -> &'a str {
        self.labels
    }

    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<String> {
        self.labels().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// True when the sample carries every `(key, value)` of `want`.
    pub fn has(&self, want: &[(&str, &str)]) -> bool {
        want.iter().all(|(k, v)| self.label(k).as_deref() == Some(*v))
    }
}

struct Labels<'a>(&'a str);

impl<'a> Iterator for Labels<'a> {
    type Item = (&'a str, String);
    fn next(&mut self) -> Option<Self::Item> {
        let s = self.0.trim_start_matches([',', ' ']);
        let (key, rest) = s.split_once('=')?;
        let rest = rest.strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.0 = &rest[i + 1..];
                    return Some((key.trim(), value));
                }
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => return None,
                },
                c => value.push(c),
            }
        }
        None
    }
}

/// Every sample line of `text`.
pub fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (name, labels, rest) = match line.find(['{', ' ']) {
            Some(i) if line.as_bytes()[i] == b'{' => {
                let end = i + line[i..].rfind('}')?;
                (&line[..i], &line[i + 1..end], &line[end + 1..])
            }
            Some(i) => (&line[..i], "", &line[i..]),
            None => return None,
        };
        let value = match rest.split_whitespace().next()? {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().ok()?,
        };
        Some(Sample { name, labels, value })
    })
}

/// The sum of every sample of metric `name` that carries all of `labels`.
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    samples(text).filter(|s| s.name == name && s.has(labels)).map(|s| s.value).sum()
}

/// Like [`sum`], but `None` when no sample of `name` carries all of `labels`: a check that a
/// counter is 0 must tell "counted nothing" from "not exported at all".
pub fn sum_present(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for s in samples(text).filter(|s| s.name == name && s.has(labels)) {
        *found.get_or_insert(0.0) += s.value;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP rocefab_queue_enqueued_packets_total Frames enqueued.
# TYPE rocefab_queue_enqueued_packets_total counter
rocefab_queue_enqueued_packets_total{port="eth1",queue="3",switch="rail1"} 5
rocefab_queue_enqueued_packets_total{port="eth2",queue="3",switch="rail1"} 7
rocefab_queue_enqueued_packets_total{port="eth2",queue="0",switch="rail1"} 1e3

rocefab_up 1
rocefab_pfc_reaction_seconds_bucket{le="+Inf"} 4
odd{msg="a \"quoted\", comma\\ and\nline"} 2 1700000000000
not a sample line
"#;

    #[test]
    fn sum_present_tells_a_zero_from_a_missing_series() {
        let t = "a_total{port=\"eth1\"} 0\na_total{port=\"eth2\"} 3\n";
        assert_eq!(sum_present(t, "a_total", &[("port", "eth1")]), Some(0.0));
        assert_eq!(sum_present(t, "a_total", &[]), Some(3.0));
        assert_eq!(sum_present(t, "a_total", &[("port", "eth3")]), None);
        assert_eq!(sum_present(t, "b_total", &[]), None);
        assert_eq!(sum(t, "b_total", &[]), 0.0);
    }

    #[test]
    fn samples_names_labels_and_values() {
        let v: Vec<Sample> = samples(TEXT).collect();
        assert_eq!(v.len(), 6, "{v:?}");
        assert_eq!((v[2].name, v[2].value), ("rocefab_queue_enqueued_packets_total", 1000.0));
        assert_eq!(v[2].label("queue").as_deref(), Some("0"));
        assert_eq!((v[3].name, v[3].value, v[3].labels().count()), ("rocefab_up", 1.0, 0));
        assert_eq!((v[4].label("le").as_deref(), v[4].value), (Some("+Inf"), 4.0));
        assert_eq!(v[5].label("msg").as_deref(), Some("a \"quoted\", comma\\ and\nline"), "escapes and a timestamp");
    }

    #[test]
    fn sum_adds_the_samples_that_carry_every_label() {
        let n = "rocefab_queue_enqueued_packets_total";
        assert_eq!(sum(TEXT, n, &[]), 1012.0);
        assert_eq!(sum(TEXT, n, &[("queue", "3")]), 12.0);
        assert_eq!(sum(TEXT, n, &[("queue", "3"), ("port", "eth2")]), 7.0);
        assert_eq!(sum(TEXT, n, &[("queue", "7")]), 0.0);
        assert_eq!(sum(TEXT, "rocefab_queue_enqueued_packets", &[]), 0.0, "names match whole");
    }
}
