//! The repository's Grafana dashboard (`grafana/rocefab-dashboard.json`, Grafana's JSON model)
//! as its tests read it: every PromQL expression of every panel and of every query variable,
//! with the dashboard's variables replaced by concrete values so Prometheus can run them.
use std::path::PathBuf;

use serde_json::Value;

/// `grafana/rocefab-dashboard.json` in the workspace.
pub fn dashboard_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../grafana/rocefab-dashboard.json")
}

/// The dashboard, parsed; panics naming the file when it is not JSON.
pub fn dashboard() -> Value {
    let p = dashboard_path();
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One PromQL expression of the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// `panel "<title>" <refId>`, or `variable <name>`.
    pub source: String,
    /// The expression as the dashboard has it (variables not replaced).
    pub expr: String,
}

/// Every panel, rows' collapsed panels included.
pub fn panels(dash: &Value) -> Vec<&Value> {
    let mut v = Vec::new();
    for p in dash["panels"].as_array().map(Vec::as_slice).unwrap_or_default() {
        v.push(p);
        v.extend(p["panels"].as_array().map(Vec::as_slice).unwrap_or_default());
    }
    v
}

/// Every panel target's `expr`, and the series selector of every `label_values(selector, label)`
/// query variable (what Grafana asks Prometheus for its values).
pub fn queries(dash: &Value) -> Vec<Query> {
    let mut v = Vec::new();
    for p in panels(dash) {
        let title = p["title"].as_str().unwrap_or("");
        for t in p["targets"].as_array().map(Vec::as_slice).unwrap_or_default() {
            if let Some(expr) = t["expr"].as_str() {
                let id = t["refId"].as_str().unwrap_or("?");
                v.push(Query { source: format!("panel {title:?} {id}"), expr: expr.to_string() });
            }
        }
    }
    for var in dash["templating"]["list"].as_array().map(Vec::as_slice).unwrap_or_default() {
        if var["type"] != "query" {
            continue;
        }
        let q = var["query"].as_str().or_else(|| var["query"]["query"].as_str()).unwrap_or("");
        let name = var["name"].as_str().unwrap_or("?");
        let expr = label_values_selector(q).unwrap_or(q);
        v.push(Query { source: format!("variable {name}"), expr: expr.to_string() });
    }
    v
}

/// The selector of `label_values(selector, label)`; `None` for any other text.
pub fn label_values_selector(q: &str) -> Option<&str> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    let (sel, label) = inner.rsplit_once(',')?;
    (!label.trim().is_empty()).then_some(sel.trim())
}

/// `expr` with each `$name` and `${name}` of `vars` replaced by its value; an error naming any
/// variable left (one the caller did not give).
pub fn substitute(expr: &str, vars: &[(&str, &str)]) -> Result<String, String> {
    let mut out = expr.to_string();
    // Longest names first, so `$__rate_interval` is not taken for `$__rate`.
    let mut vars = vars.to_vec();
    vars.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    for (name, value) in &vars {
        out = out.replace(&format!("${{{name}}}"), value).replace(&format!("${name}"), value);
    }
    match out.find('$') {
        Some(i) => Err(format!("{expr}: variable left at {:?}", &out[i..])),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_replaced_longest_first_and_leftovers_named() {
        let vars = [("fabric", "rs"), ("__rate_interval", "10s"), ("__range", "1m")];
        assert_eq!(
            substitute("rate(x{fabric=\"$fabric\"}[$__rate_interval]) + y{f=\"${fabric}\"}[$__range]", &vars).unwrap(),
            "rate(x{fabric=\"rs\"}[10s]) + y{f=\"rs\"}[1m]"
        );
        let e = substitute("topk($topn, x)", &vars).unwrap_err();
        assert!(e.contains("variable left at \"$topn, x)\""), "{e}");
    }

    #[test]
    fn label_values_gives_its_selector() {
        assert_eq!(label_values_selector("label_values(up{role=\"switch\"}, fabric)"), Some("up{role=\"switch\"}"));
        assert_eq!(label_values_selector("label_values(up{a=\"b\",c=\"d\"}, node)"), Some("up{a=\"b\",c=\"d\"}"));
        assert_eq!(label_values_selector("query_result(up)"), None);
    }
}
