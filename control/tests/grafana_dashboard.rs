//! The Grafana dashboard in the repository (`grafana/rocefab-dashboard.json`) is a well-formed
//! Grafana JSON model whose every query reads through the `datasource` variable, selects one
//! fabric, uses only variables the dashboard defines, and parses as PromQL (promtool, offline).
//! `tests/tests/prometheus_live.rs` runs every query against a live fabric.
use std::collections::BTreeSet;

use rocefab_test_support::grafana::{dashboard, panels, queries, substitute};
use rocefab_test_support::promtool::promtool_check_exprs;
use serde_json::Value;

/// Concrete values for the dashboard's variables and Grafana's built-in ones.
const VARS: [(&str, &str); 5] =
    [("fabric", "rs"), ("switch", ".+"), ("topn", "10"), ("__rate_interval", "1m"), ("__range", "15m")];

fn variable_names(text: &str) -> BTreeSet<String> {
    let mut v = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let name: String =
            rest.trim_start_matches('{').chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        v.insert(name);
    }
    v
}

#[test]
fn every_panel_reads_the_datasource_variable_and_fits_the_grid() {
    let d = dashboard();
    assert_eq!((d["uid"].as_str(), d["title"].as_str()), (Some("rocefab-fabric"), Some("rocefab fabric")));
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36), "Grafana 9/10 JSON model");
    let vars: Vec<&Value> = d["templating"]["list"].as_array().expect("templating.list").iter().collect();
    let var = |n: &str| *vars.iter().find(|v| v["name"] == n).unwrap_or_else(|| panic!("no variable {n}"));
    assert_eq!(
        (var("datasource")["type"].as_str(), var("datasource")["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    assert_eq!(var("fabric")["type"], "query");
    assert_eq!(var("switch")["allValue"], ".+");
    let ds = serde_json::json!({ "type": "prometheus", "uid": "${datasource}" });
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    let ps = panels(&d);
    assert!(ps.len() >= 10, "{} panels", ps.len());
    for p in ps {
        let title = p["title"].as_str().expect("title");
        assert!(ids.insert(p["id"].as_u64().expect("id")), "{title}: id used twice");
        assert_eq!(p["datasource"], ds, "{title}");
        assert!(!p["description"].as_str().unwrap_or("").is_empty(), "{title}: no description");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"], ds, "{title}");
            assert!(t["expr"].as_str().is_some_and(|e| e.contains("fabric=\"$fabric\"")), "{title}: {t}");
        }
        let g = &p["gridPos"];
        let (x, y, w, h) =
            (g["x"].as_u64().unwrap(), g["y"].as_u64().unwrap(), g["w"].as_u64().unwrap(), g["h"].as_u64().unwrap());
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: {g}");
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(cells.insert((cx, cy)), "{title} overlaps another panel at ({cx}, {cy})");
            }
        }
    }
}

#[test]
fn every_query_uses_defined_variables_and_parses_as_promql() {
    let d = dashboard();
    let defined: BTreeSet<String> =
        d["templating"]["list"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_string()).collect();
    let qs = queries(&d);
    assert!(qs.iter().any(|q| q.source == "variable fabric") && qs.iter().any(|q| q.source == "variable switch"));
    let mut exprs = Vec::new();
    for q in &qs {
        for v in variable_names(&q.expr) {
            assert!(v.starts_with("__") || defined.contains(&v), "{}: ${v} is not a dashboard variable", q.source);
        }
        exprs.push(substitute(&q.expr, &VARS).unwrap_or_else(|e| panic!("{}: {e}", q.source)));
    }
    promtool_check_exprs(&exprs);
}
