//! The rendezvous of a training job's processes (`rocefab-rank`, `rocefab train`): one JSON
//! object per line over TCP on the frontend network. A rank sends the master (rank 0) its
//! [`Hello`]; the master answers every rank with the [`Welcome`]; each rank then prints what it
//! got as [`Joined`] for the controller.
use serde::{Deserialize, Serialize};

/// Bytes of the communicator's unique ID (`NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// A rank's hello to the master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub rank: u32,
    pub local_rank: u32,
    pub node_rank: u32,
    pub backend: Vec<std::net::IpAddr>,
}

/// The master's answer to every rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Welcome {
    /// The communicator's unique ID, hex.
    pub unique_id: String,
    /// Every rank's hello (the master's own first), by rank.
    pub world: Vec<Hello>,
}

/// What a rank prints once it has the ID.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    pub rank: u32,
    pub unique_id: String,
    pub world: Vec<Hello>,
    /// Wall-clock ns from the process's start to having the ID.
    pub rendezvous_ns: u64,
}
