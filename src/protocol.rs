//! The protocol's variants a run is told about: which spec's semantics
//! apply (`SpecMode`) and how the runtime encodes handoff tokens
//! (`TokenFormat`). Shared by ingest, the engine's settings and the audit
//! (a module below all of them, so none imports another for these).

/// Which runtime-semantics rules apply to tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpecMode {
    /// Each task by the spec version of its first event (its `dialect`
    /// column).
    #[default]
    Auto,
    /// AEP 0.1 child-first semantics for every task (early 0.2 runtimes).
    V01,
    /// Harmovela 0.2 parent-last semantics for every task.
    V02,
}

/// How handoff tokens are encoded by the runtime that wrote the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenFormat {
    /// Never decoded (the spec forbids parsing opaque tokens).
    #[default]
    Opaque,
    /// base64url JSON claims, alone or the middle of three '.'-joined parts.
    Structured,
}
