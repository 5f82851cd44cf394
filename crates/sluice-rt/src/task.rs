//! Work off the async workers: blocking calls (file I/O, fsync) and tasks that get a thread
//! of their own. In a simulated world both run as tasks of the node's own runtime instead,
//! so that the simulator's single thread decides when they run.

use std::future::Future;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// `tokio::task::spawn_blocking`, or (simulated) a task of the current runtime that runs `f`
/// after the calling node's simulated disk latency.
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match crate::simulated() {
        None => tokio::task::spawn_blocking(f),
        Some(w) => {
            let latency = w.disk_latency();
            tokio::spawn(async move {
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                f()
            })
        }
    }
}

/// A task on a thread of its own; [`Dedicated::join`] waits for it to end.
pub struct Dedicated {
    done: oneshot::Receiver<()>,
}

/// Run `task` on a new thread named `name`, with a current-thread runtime of its own, until
/// it ends; tasks it spawns run on that thread too and stop with it. Simulated: a task of the
/// current runtime.
pub fn spawn_dedicated<F>(name: &str, task: F) -> std::io::Result<Dedicated>
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, done) = oneshot::channel();
    if crate::simulated().is_some() {
        tokio::spawn(async move {
            task.await;
            let _ = tx.send(());
        });
        return Ok(Dedicated { done });
    }
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
    Ok(Dedicated { done })
}

impl Dedicated {
    /// Wait (asynchronously) for the task to end.
    pub async fn join(self) {
        let _ = self.done.await;
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_dedicated_task_runs_off_the_calling_runtime_and_joins() {
        let caller = std::thread::current().id();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let t = super::spawn_dedicated("test-own-thread", async move {
            tokio::task::yield_now().await;
            let _ = tx.send(std::thread::current().id());
        })
        .unwrap();
        t.join().await;
        assert_ne!(rx.await.unwrap(), caller);
    }
}
