fn main() {
    // The simulation test replaces libc's `getrandom` (see tests/simulation.rs) so that the
    // keys of std's HashMaps and tokio's runtime seeds come from the run's seed. std finds
    // `getrandom` through dlsym, which sees only symbols in the dynamic symbol table.
    println!("cargo:rustc-link-arg-tests=-rdynamic");
}
