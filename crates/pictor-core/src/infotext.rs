//! AUTOMATIC1111's "infotext": the PNG `parameters` text that says how a picture was made, as
//! A1111 writes it (`create_infotext`) and reads it back (`parse_generation_parameters`):
//!
//! ```text
//! a red fox in the snow
//! Negative prompt: blurry
//! Steps: 20, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7, Seed: 1, Size: 512x512, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, RNG: NV
//! ```
//!
//! The prompt may span lines; a `Negative prompt:` line starts the negative prompt; the last line
//! is the settings line when it holds at least three `Key: value` pairs. Values that contain a
//! comma, a colon or a newline are JSON-quoted.

/// A parsed infotext.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Infotext {
    pub prompt: String,
    pub negative_prompt: String,
    /// The settings in their order, values unquoted.
    pub params: Vec<(String, String)>,
}

impl Infotext {
    /// Reads an infotext the way A1111 does.
    pub fn parse(text: &str) -> Infotext {
        let mut lines: Vec<&str> = text.trim().split('\n').collect();
        let mut params = Vec::new();
        if let Some(last) = lines.last() {
            let found = parse_params(last.trim());
            if found.len() >= 3 {
                params = found;
                lines.pop();
            }
        }
        let (mut prompt, mut negative) = (Vec::new(), Vec::new());
        let mut in_negative = false;
        for line in lines {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("Negative prompt:") {
                in_negative = true;
                negative.push(rest.trim());
            } else if in_negative {
                negative.push(line);
            } else {
                prompt.push(line);
            }
        }
        Infotext {
            prompt: prompt.join("\n"),
            negative_prompt: negative.join("\n"),
            params,
        }
    }

    /// The value of `key` (exact name, as A1111 writes it).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `Size` (or another `WxH` value) as numbers.
    pub fn size(&self, key: &str) -> Option<(u32, u32)> {
        let (w, h) = self.get(key)?.split_once('x')?;
        Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
    }

    /// Writes the infotext as A1111 does: prompt, negative prompt when not empty, settings.
    pub fn render(&self) -> String {
        let mut t = self.prompt.clone();
        if !self.negative_prompt.is_empty() {
            t.push_str("\nNegative prompt: ");
            t.push_str(&self.negative_prompt);
        }
        if !self.params.is_empty() {
            t.push('\n');
            let parts: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| format!("{k}: {}", quote(v)))
                .collect();
            t.push_str(&parts.join(", "));
        }
        t.trim().to_owned()
    }
}

/// A value as A1111 writes it: JSON-quoted when it holds a comma, a colon or a newline.
pub fn quote(v: &str) -> String {
    if v.contains([',', ':', '\n']) {
        serde_json::Value::String(v.to_owned()).to_string()
    } else {
        v.to_owned()
    }
}

/// The `Key: value` pairs of a settings line: a key is a word character then word characters,
/// spaces, `-` or `/`; a value is a JSON string or runs to the next comma.
fn parse_params(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let b = line.as_bytes();
    let mut i = 0;
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        // Skip separators before a key.
        while i < b.len() && (b[i] == b' ' || b[i] == b',') {
            i += 1;
        }
        let Some(colon) = line[i..].find(':').map(|c| c + i) else {
            break;
        };
        // A bare token before the key (A1111 writes `k` alone when its value is `k`) is not
        // part of it: the key starts after the last comma.
        let start = line[i..colon].rfind(',').map_or(i, |c| i + c + 1);
        let key = line[start..colon].trim_start();
        let mut chars = key.chars();
        let key_ok = chars.next().is_some_and(is_word)
            && key.chars().count() >= 2
            && key
                .chars()
                .all(|c| is_word(c) || c == ' ' || c == '-' || c == '/');
        i = colon + 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let value;
        // A JSON string only when it closes; else (as A1111's regex) up to the next comma.
        let closed = i < b.len() && b[i] == b'"' && {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j < b.len()
        };
        if closed {
            // A JSON string: to the closing quote not escaped.
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let raw = &line[i..(j + 1).min(line.len())];
            value = serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned());
            i = (j + 1).min(line.len());
            // To the next comma.
            while i < b.len() && b[i] != b',' {
                i += 1;
            }
        } else {
            let end = line[i..].find(',').map_or(line.len(), |c| c + i);
            value = line[i..end].trim_end().to_owned();
            i = end;
        }
        if key_ok {
            out.push((key.trim().to_owned(), value));
        }
        if i < b.len() && b[i] == b',' {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a1111_text() {
        let t = Infotext::parse(
            "a red fox,\nin the snow\nNegative prompt: blurry, dark\nugly\nSteps: 20, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7, Seed: 3, Size: 512x768, Model hash: 6ce0161689, Model: \"my, model\", RNG: NV, Version: v1.10.1",
        );
        assert_eq!(t.prompt, "a red fox,\nin the snow");
        assert_eq!(t.negative_prompt, "blurry, dark\nugly");
        assert_eq!(t.get("Sampler"), Some("DPM++ 2M"));
        assert_eq!(t.get("Schedule type"), Some("Karras"));
        assert_eq!(t.get("Model"), Some("my, model"));
        assert_eq!(t.get("RNG"), Some("NV"));
        assert_eq!(t.size("Size"), Some((512, 768)));
        assert_eq!(t.get("Version"), Some("v1.10.1"));
    }

    #[test]
    fn bare_tokens_and_unterminated_quotes_do_not_eat_settings() {
        let t = Infotext::parse("cat\nSteps: 4, Tiling, Sampler: Euler, Model: \"oops, Seed: 5");
        assert_eq!(t.get("Sampler"), Some("Euler"));
        assert_eq!(t.get("Model"), Some("\"oops"));
        assert_eq!(t.get("Seed"), Some("5"));
    }

    #[test]
    fn a_short_last_line_is_prompt() {
        let t = Infotext::parse("a cat: sitting\nSteps: 4");
        assert_eq!(t.prompt, "a cat: sitting\nSteps: 4");
        assert!(t.params.is_empty());
    }

    #[test]
    fn writes_and_reads_back() {
        let t = Infotext {
            prompt: "a, b".into(),
            negative_prompt: "c".into(),
            params: vec![
                ("Steps".into(), "4".into()),
                ("Sampler".into(), "Euler a".into()),
                ("Model".into(), "x: y, \"z\"".into()),
                ("Seed".into(), "9".into()),
            ],
        };
        let text = t.render();
        assert_eq!(
            text,
            "a, b\nNegative prompt: c\nSteps: 4, Sampler: Euler a, Model: \"x: y, \\\"z\\\"\", Seed: 9"
        );
        assert_eq!(Infotext::parse(&text), t);
    }
}
