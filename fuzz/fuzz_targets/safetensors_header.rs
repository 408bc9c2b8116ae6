//! Safetensors headers as a model folder or checkpoint may hold them: any bytes, never a panic,
//! never more tensors than the cap, every accepted tensor inside the data and its size in range.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first 8 bytes choose the data length after the header, as the file's size would.
    let Some((len, header)) = data.split_first_chunk::<8>() else {
        return;
    };
    let data_len = u64::from_le_bytes(*len);
    if let Ok(tensors) = pictor::models::parse_safetensors_header(header, data_len) {
        assert!(tensors.len() <= pictor::models::MAX_TENSORS);
        for t in tensors.values() {
            assert!(t.data_offsets[0] <= t.data_offsets[1] && t.data_offsets[1] <= data_len);
            assert!(t.elements() <= data_len.saturating_mul(8));
            let _ = t.f32_bytes();
        }
    }
});
