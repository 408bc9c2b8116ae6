//! Renderer benchmarks (criterion). Filled in by the renderer work.

fn main() {}
