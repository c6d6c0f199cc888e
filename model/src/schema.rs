//! The parts of the topology file's JSON Schema that the types cannot derive: the spellings of
//! sizes, rates, durations and cable delays, and off/on-or-settings sections. The schema itself
//! is generated from the types serde reads ([`crate::topology::json_schema`]), so that
//! an editor checks a topology file as it is typed: `topologies/topology.schema.json`, named by
//! the `# yaml-language-server: $schema=` line at the top of every shipped topology (as
//! containerlab's topology files name theirs).
//!
//! The schema says what the loader accepts field by field: names, nesting, enumerations,
//! integer ranges and the spelling of sizes, rates and durations ([`rocefab_units`]). What
//! spans fields (a rail switch's `hosts` inside the host count, a spine named in `links` that
//! exists, headroom within the buffer) is the loader's alone, with its file-line-field errors.

use schemars::{json_schema, Schema};

/// A decimal number as [`rocefab_units`] reads one: digits with at most one point.
const NUMBER: &str = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)";

/// A size in bytes: an integer, or a number with an SI or IEC unit (`3.2MB`, `512KiB`).
pub(crate) fn size(what: &str) -> Schema {
    json_schema!({
        "description": format!("{what}: bytes, or a number with an SI or IEC unit (3200000, 3.2MB, 512KiB); a unit without B is refused"),
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": format!(r"^\s*{NUMBER}\s*(?:B|kB|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*$") }
        ]
    })
}

/// A rate in bit/s: an integer, or a number with an SI multiple (`400G`, `1Gbps`, `2.5 Gbit/s`).
pub(crate) fn rate(what: &str) -> Schema {
    json_schema!({
        "description": format!("{what}: bit/s, or a number with an SI multiple (400G, 1Gbps, 100Mbps, 2.5 Gbit/s)"),
        "anyOf": [
            { "type": "integer", "minimum": 1 },
            { "type": "string", "pattern": format!(r"^\s*{NUMBER}\s*[kKmMgGtT]?(?:[bB][pP][sS]|[bB][iI][tT]/[sS])?\s*$") }
        ]
    })
}

/// The units of a duration in a topology file (a bare number is refused).
const DURATION_UNITS: &str = "(?:ns|us|µs|ms|s|m|min|h)";

/// A duration with its unit (`500us`, `1.5ms`, `30s`).
pub(crate) fn duration(what: &str) -> Schema {
    json_schema!({
        "description": format!("{what}: a number with its unit: ns, us, ms, s, m or h (500us, 1.5ms, 30s)"),
        "type": "string",
        "pattern": format!(r"^\s*{NUMBER}\s*{DURATION_UNITS}\s*$")
    })
}

/// A cable delay: a duration, a cable length in metres (`m` is metres here) or 0.
pub(crate) fn delay() -> Schema {
    json_schema!({
        "description": "a propagation delay up to 10ms (600ns, 1us), or a cable length in metres at 5 ns/m (200m); 0 for none",
        "anyOf": [
            { "const": 0 },
            { "type": "string", "pattern": format!(r"^\s*{NUMBER}\s*{DURATION_UNITS}\s*$") }
        ]
    })
}

/// `off`, `on` (a boolean too) or the section's settings.
pub(crate) fn off_or(settings: Schema) -> Schema {
    json_schema!({
        "anyOf": [
            { "enum": ["off", "on"] },
            { "type": "boolean" },
            settings
        ]
    })
}
