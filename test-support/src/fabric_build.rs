//! What a fabric runs, package by package: the binaries `cargo xtask` builds before the
//! privileged tests and the test library checks for staleness (one list for both).

/// Each workspace package that builds a binary a fabric or a test starts, with those binaries.
pub const FABRIC_BUILD: &[(&str, &[&str])] = &[
    ("control", &["rocefab"]),
    ("dataplane-user", &["rocefab-switchd"]),
    ("host-daemons", &["rocefab-hostd", "rocefab-nicd", "rocefab-rank"]),
    ("rocefab-web", &["rocefab-web"]),
];

/// The packages of [`FABRIC_BUILD`].
pub fn packages() -> impl Iterator<Item = &'static str> {
    FABRIC_BUILD.iter().map(|(p, _)| *p)
}

/// Every binary of [`FABRIC_BUILD`].
pub fn binaries() -> impl Iterator<Item = &'static str> {
    FABRIC_BUILD.iter().flat_map(|(_, b)| b.iter().copied())
}

/// `cargo build -p control -p dataplane-user ...`: the command that builds them all.
pub fn build_command() -> String {
    let mut s = "cargo build".to_string();
    for p in packages() {
        s.push_str(" -p ");
        s.push_str(p);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list names each package's binaries as its Cargo.toml's `[[bin]]` sections do.
    #[test]
    fn every_listed_binary_is_one_its_package_builds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        fn dir_of(p: &str) -> &str {
            match p {
                "rocefab-web" => "web",
                d => d,
            }
        }
        for (pkg, bins) in FABRIC_BUILD {
            let dir = root.join(dir_of(pkg));
            let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            assert!(toml.contains(&format!("name = \"{pkg}\"")), "{pkg} is not the package in {}", dir.display());
            for b in *bins {
                assert!(toml.contains(&format!("[[bin]]\nname = \"{b}\"")), "{pkg} builds no binary {b}");
            }
        }
        assert_eq!(binaries().count(), 6);
        assert_eq!(build_command(), "cargo build -p control -p dataplane-user -p host-daemons -p rocefab-web");
    }
}
