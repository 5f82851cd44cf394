//! A task on a thread of its own, with a current-thread runtime: for the coordinators, whose
//! actor loops append to their internal topics inline (blocking file I/O, an fsync with
//! `flush.messages`), so that work never stalls the async workers serving connections
//! (Kafka runs its coordinators on threads of their own too).

use std::future::Future;

use tokio::sync::oneshot;

/// The thread running one task; [`OwnThread::join`] waits for the task to end.
pub struct OwnThread {
    done: oneshot::Receiver<()>,
}

/// Run `task` on a new thread named `name` until it ends. Tasks it spawns run on that thread
/// too and stop with it.
pub fn spawn<F>(name: &str, task: F) -> std::io::Result<OwnThread>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, done) = oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            runtime.block_on(task);
            // Tasks still running on this runtime are cancelled as it drops.
            drop(runtime);
            let _ = tx.send(());
        })?;
    Ok(OwnThread { done })
}

impl OwnThread {
    /// Wait (asynchronously) for the task to end.
    pub async fn join(self) {
        let _ = self.done.await;
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn runs_off_the_calling_runtime_and_joins() {
        let caller = std::thread::current().id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = super::spawn("test-own-thread", async move {
            tokio::task::yield_now().await;
            let _ = tx.send(std::thread::current().id());
        })
        .unwrap();
        t.join().await;
        assert_ne!(rx.await.unwrap(), caller);
    }
}
