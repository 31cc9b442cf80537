//! What the loom models share: running one under a builder and proving it
//! explored some concurrency.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Checks `f` under every interleaving `builder` allows and prints how many
/// it explored; fails if it explored one (a model with no concurrency in it
/// checks nothing).
pub fn check(name: &str, builder: loom::model::Builder, f: impl Fn() + Sync + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        f()
    });
    let runs = runs.load(Ordering::Relaxed);
    println!("{name}: {runs} interleavings");
    assert!(runs > 1, "{name}: loom explored no concurrency");
}
