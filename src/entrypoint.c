// Registers the package's .Call routines (extendr's wrappers and one raw
// routine; see R_init_wispack_routines in src/rust/src/boundary/mod.rs) and
// forwards to Rust, so the linker keeps the static library.

void R_init_wispack_routines(void *dll);
void register_extendr_panic_hook(void);

void R_init_wispack(void *dll) {
    register_extendr_panic_hook();
    R_init_wispack_routines(dll);
}
