//! A caller's request to stop work early, for a process that embeds
//! hvaudit and keeps running after an interrupt (the Python module's
//! Ctrl-C). Once set, the ingest stops parsing (what the reader still cuts
//! is dropped), the rules stop (their queries are dropped, which aborts
//! them), and [`Audit::run_on`](crate::audit::Audit::run_on) returns
//! [`AuditError::Interrupted`](crate::audit::AuditError::Interrupted). The
//! CLI has no use for it: an interrupt ends its process (`signals`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Shared by the caller, who sets it, and the work, which looks at it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

impl Interrupt {
    /// Ask the work to stop.
    pub fn interrupt(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Resolves once [`interrupt`](Self::interrupt) is called (looked at
    /// every 20 ms).
    pub async fn wait(&self) {
        while !self.is_set() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clone_sees_the_interrupt_and_wait_returns() {
        let interrupt = Interrupt::default();
        let seen = interrupt.clone();
        assert!(!seen.is_set());
        let waiting = tokio::spawn(async move { seen.wait().await });
        interrupt.interrupt();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("wait returns once interrupted")
            .unwrap();
    }
}
