#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (sluice_fuzz::target("telemetry").expect("a sluice-fuzz target").run)(data);
});
