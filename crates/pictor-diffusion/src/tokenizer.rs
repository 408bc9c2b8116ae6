//! The CLIP tokenizer, as transformers' `CLIPTokenizer` (5.x, the `tokenizers`-backed one)
//! splits and encodes text: whitespace collapsed and lowercased, special tokens (start, end, and
//! a pad token such as SD 2's `!`) split out first, CLIP's pre-split pattern, byte-level BPE
//! with `</w>` word ends, `<|startoftext|>` … `<|endoftext|>`, padding to 77. Not done: NFC
//! normalisation (prompts in decomposed Unicode may tokenize differently).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use regex::Regex;
use serde_json::Value;

use super::{DiffusionError, read_file, read_json};
use pictor_core::files::TOKENIZER_MAX;

/// CLIP's pre-split pattern (transformers `CLIPTokenizer.pat`; the text is lowercased first).
const PATTERN: &str =
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+";
const BOS: &str = "<|startoftext|>";
const EOS: &str = "<|endoftext|>";
/// transformers reads at most this many merges (`49152 - 256 - 2 + 1` lines).
const MAX_MERGES: usize = 49152 - 256 - 2;

pub struct ClipTokenizer {
    vocab: HashMap<String, u32>,
    ranks: HashMap<(String, String), usize>,
    byte_encoder: [char; 256],
    pattern: Regex,
    bos: u32,
    eos: u32,
    pad: u32,
    /// The pad token's text when it is a token of its own (SD 2's `!`): split out of the text
    /// before BPE, as transformers does with added special tokens.
    pad_text: Option<String>,
    max_len: usize,
    cache: Mutex<HashMap<String, Vec<String>>>,
}

/// transformers' `bytes_to_unicode`: printable bytes map to themselves, the rest to 256 + n.
fn bytes_to_unicode() -> [char; 256] {
    let mut table = ['\0'; 256];
    let printable = |b: u32| {
        (u32::from('!')..=u32::from('~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut n = 0;
    for (b, slot) in table.iter_mut().enumerate() {
        let b = b as u32;
        let c = if printable(b) {
            b
        } else {
            n += 1;
            255 + n
        };
        *slot = char::from_u32(c).unwrap_or('\u{FFFD}');
    }
    table
}

fn token_text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

impl ClipTokenizer {
    /// Loads `vocab.json`, `merges.txt` and the pad token (`special_tokens_map.json` or
    /// `tokenizer_config.json`; end-of-text when neither names one) from a tokenizer folder.
    pub fn load(dir: &Path) -> Result<ClipTokenizer, DiffusionError> {
        // Both files are read within a cap (a CLIP vocabulary is ~0.9 MiB, its merges ~0.5
        // MiB), the vocabulary straight into its map.
        let vocab_path = dir.join("vocab.json");
        let (vocab, merges) = if !vocab_path.exists() && dir.join("tokenizer.json").exists() {
            // Only the fast tokenizer's file, as current transformers releases save it.
            Self::read_fast(&dir.join("tokenizer.json"))?
        } else {
            let vocab: HashMap<String, u32> = serde_json::from_slice(&read_file(
                &vocab_path,
                TOKENIZER_MAX,
                "a tokenizer vocabulary",
            )?)
            .map_err(|e| DiffusionError::Model(format!("{}: {e}", vocab_path.display())))?;
            let merges = pictor_core::files::read_text(
                &dir.join("merges.txt"),
                TOKENIZER_MAX,
                "a tokenizer's merges",
            )
            .map_err(|e| DiffusionError::Model(e.to_string()))?;
            (vocab, merges)
        };
        let mut pad = None;
        let mut max_len = 77;
        for f in ["special_tokens_map.json", "tokenizer_config.json"] {
            let p = dir.join(f);
            if std::fs::symlink_metadata(&p).is_ok() {
                let j = read_json(&p)?;
                pad = pad.or_else(|| token_text(j.get("pad_token")));
                if let Some(n) = j.get("model_max_length").and_then(Value::as_u64)
                    && n > 0
                    && n <= 1024
                {
                    max_len = n as usize;
                }
            }
        }
        Self::new(vocab, &merges, pad.as_deref(), max_len)
    }

    /// The vocabulary and merges of a `tokenizer.json` (the `tokenizers` library's file: a BPE
    /// `model` with `vocab` and `merges`, each merge `"a b"` or, since tokenizers 0.20,
    /// `["a", "b"]`), the merges as `merges.txt` writes them.
    fn read_fast(path: &Path) -> Result<(HashMap<String, u32>, String), DiffusionError> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Merge {
            Joined(String),
            Pair(String, String),
        }
        #[derive(serde::Deserialize)]
        struct Model {
            #[serde(rename = "type", default)]
            kind: Option<String>,
            vocab: HashMap<String, u32>,
            merges: Vec<Merge>,
        }
        #[derive(serde::Deserialize)]
        struct Fast {
            model: Model,
        }
        let bad = |m: String| DiffusionError::Model(format!("{}: {m}", path.display()));
        let fast: Fast = serde_json::from_slice(&read_file(path, TOKENIZER_MAX, "a tokenizer")?)
            .map_err(|e| bad(e.to_string()))?;
        if fast.model.kind.as_deref().is_some_and(|k| k != "BPE") {
            return Err(bad(format!(
                "a {:?} tokenizer, not CLIP's BPE",
                fast.model.kind.unwrap_or_default()
            )));
        }
        let mut merges = String::from("#version: 0.2\n");
        for m in fast.model.merges {
            let (a, b) = match m {
                Merge::Joined(s) => match s.split_once(' ') {
                    Some((a, b)) => (a.to_owned(), b.to_owned()),
                    None => return Err(bad(format!("merge {s:?} is not two symbols"))),
                },
                Merge::Pair(a, b) => (a, b),
            };
            if a.contains([' ', '\n']) || b.contains([' ', '\n']) {
                return Err(bad(format!("merge {a:?} {b:?} has a space in a symbol")));
            }
            merges.push_str(&a);
            merges.push(' ');
            merges.push_str(&b);
            merges.push('\n');
        }
        Ok((fast.model.vocab, merges))
    }

    /// The CLIP tokenizer every Stable Diffusion model uses (OpenAI CLIP's BPE merges, built
    /// in: single-file checkpoints carry no tokenizer). The vocabulary is derived from the
    /// merges as OpenAI's `simple_tokenizer` and transformers' `vocab.json` lay it out: the 256
    /// byte symbols, the same with `</w>`, one token per merge, then start and end of text.
    /// `pad`: the pad token (`None`: end of text, as SD 1.x; SD 2.x and SDXL's second encoder
    /// pad with `!`).
    pub fn builtin(pad: Option<&str>) -> Result<ClipTokenizer, DiffusionError> {
        const MERGES: &str = include_str!("../../../assets/clip/merges.txt");
        let symbols = byte_symbols_in_vocab_order();
        let mut vocab = HashMap::with_capacity(49408);
        let mut push = |t: String| {
            let id = vocab.len() as u32;
            vocab.entry(t).or_insert(id);
        };
        for c in &symbols {
            push(c.to_string());
        }
        for c in &symbols {
            push(format!("{c}</w>"));
        }
        for line in MERGES.trim().lines().skip(1).take(MAX_MERGES) {
            push(line.replacen(' ', "", 1));
        }
        push(BOS.to_owned());
        push(EOS.to_owned());
        Self::new(vocab, MERGES, pad, 77)
    }

    pub fn new(
        vocab: HashMap<String, u32>,
        merges: &str,
        pad: Option<&str>,
        max_len: usize,
    ) -> Result<ClipTokenizer, DiffusionError> {
        let mut ranks = HashMap::new();
        for (i, line) in merges.trim().lines().skip(1).take(MAX_MERGES).enumerate() {
            let mut parts = line.split(' ');
            if let (Some(a), Some(b)) = (parts.next(), parts.next()) {
                ranks.insert((a.to_owned(), b.to_owned()), i);
            }
        }
        let id = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| DiffusionError::Model(format!("the tokenizer has no {t:?} token")))
        };
        let bos = id(BOS)?;
        let eos = id(EOS)?;
        let (pad, pad_text) = match pad {
            Some(p) if p != BOS && p != EOS => (id(p)?, Some(p.to_owned())),
            Some(p) => (id(p)?, None),
            None => (eos, None),
        };
        let pattern =
            Regex::new(PATTERN).map_err(|e| DiffusionError::Model(format!("pattern: {e}")))?;
        Ok(ClipTokenizer {
            vocab,
            ranks,
            byte_encoder: bytes_to_unicode(),
            pattern,
            bos,
            eos,
            pad,
            pad_text,
            max_len: max_len.max(2),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// transformers' BasicTokenizer (lowercase, accents kept, no punctuation split): control
    /// characters dropped, whitespace normalised, CJK ideographs set apart.
    fn clean(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            if c == '\0' || c == '\u{FFFD}' {
                continue;
            }
            let layout = c == '\t' || c == '\n' || c == '\r';
            if !layout && (c.is_control() || is_format(c)) {
                continue;
            }
            if layout || c.is_whitespace() {
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        out.split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn bpe(&self, token: &str) -> Vec<String> {
        if let Ok(cache) = self.cache.lock()
            && let Some(hit) = cache.get(token)
        {
            return hit.clone();
        }
        let chars: Vec<char> = token.chars().collect();
        let Some((last, rest)) = chars.split_last() else {
            return Vec::new();
        };
        let mut word: Vec<String> = rest.iter().map(|c| c.to_string()).collect();
        word.push(format!("{last}</w>"));
        while word.len() > 1 {
            let best = word
                .windows(2)
                .filter_map(|w| {
                    self.ranks
                        .get(&(w[0].clone(), w[1].clone()))
                        .map(|&r| (r, w))
                })
                .min_by_key(|(r, _)| *r)
                .map(|(_, w)| (w[0].clone(), w[1].clone()));
            let Some((first, second)) = best else { break };
            let mut merged = Vec::with_capacity(word.len());
            let mut i = 0;
            while i < word.len() {
                if i + 1 < word.len() && word[i] == first && word[i + 1] == second {
                    merged.push(format!("{first}{second}"));
                    i += 2;
                } else {
                    merged.push(word[i].clone());
                    i += 1;
                }
            }
            word = merged;
        }
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(token.to_owned(), word.clone());
        }
        word
    }

    /// Token ids without the start/end tokens.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let text = Self::clean(text);
        let mut ids = Vec::new();
        match &self.pad_text {
            Some(p) if !p.is_empty() => {
                for (i, part) in text.split(p.as_str()).enumerate() {
                    if i > 0 {
                        ids.push(self.pad);
                    }
                    self.tokenize_part(part, &mut ids);
                }
            }
            _ => self.tokenize_part(&text, &mut ids),
        }
        ids
    }

    fn tokenize_part(&self, text: &str, ids: &mut Vec<u32>) {
        for m in self.pattern.find_iter(text) {
            let piece = m.as_str();
            if piece == BOS || piece == EOS {
                ids.push(if piece == BOS { self.bos } else { self.eos });
                continue;
            }
            let mapped: String = piece
                .bytes()
                .map(|b| self.byte_encoder[b as usize])
                .collect();
            for t in self.bpe(&mapped) {
                ids.push(self.vocab.get(&t).copied().unwrap_or(self.eos));
            }
        }
    }

    /// `tokenizer(text, padding="max_length", truncation=True)`: start, at most 75 tokens, end,
    /// then the pad token up to 77.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(self.max_len);
        ids.push(self.bos);
        let body = self.tokenize(text);
        ids.extend(body.into_iter().take(self.max_len - 2));
        ids.push(self.eos);
        ids.resize(self.max_len, self.pad);
        ids
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

/// `bytes_to_unicode().values()` in insertion order: the printable bytes ascending, then the
/// others ascending (mapped to 256 + n).
fn byte_symbols_in_vocab_order() -> Vec<char> {
    let table = bytes_to_unicode();
    let (printable, rest): (Vec<usize>, Vec<usize>) =
        (0..256).partition(|&b| u32::from(table[b]) == b as u32);
    printable
        .into_iter()
        .chain(rest)
        .map(|b| table[b])
        .collect()
}

/// Unicode "Cf" (format) characters that BasicTokenizer drops, the common ones.
fn is_format(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{600}'..='\u{605}' | '\u{61C}' | '\u{6DD}' | '\u{70F}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    /// `tokenizer.json` with merges in either form (`"a b"` before tokenizers 0.20, `["a", "b"]`
    /// since) reads as the same tokenizer; a merge that is not two symbols is refused.
    #[test]
    fn fast_tokenizer_files_in_both_merge_forms() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/diffusion/layouts/sd15/tokenizer");
        let pairs = ClipTokenizer::load(&dir).unwrap();
        let mut json: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer.json")).unwrap())
                .unwrap();
        let joined: Vec<Value> = json["model"]["merges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                Value::String(format!(
                    "{} {}",
                    m[0].as_str().unwrap(),
                    m[1].as_str().unwrap()
                ))
            })
            .collect();
        json["model"]["merges"] = Value::Array(joined);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("tokenizer.json"), json.to_string()).unwrap();
        let strings = ClipTokenizer::load(tmp.path()).unwrap();
        for text in ["a photo of a red car", "Hello,  WORLD!! 4k", ""] {
            assert_eq!(pairs.encode(text), strings.encode(text), "{text}");
        }
        json["model"]["merges"] = serde_json::json!(["abc"]);
        std::fs::write(tmp.path().join("tokenizer.json"), json.to_string()).unwrap();
        let e = ClipTokenizer::load(tmp.path()).err().unwrap().to_string();
        assert!(e.contains("not two symbols"), "{e}");
        json["model"]["type"] = "WordPiece".into();
        std::fs::write(tmp.path().join("tokenizer.json"), json.to_string()).unwrap();
        let e = ClipTokenizer::load(tmp.path()).err().unwrap().to_string();
        assert!(e.contains("not CLIP's BPE"), "{e}");
    }

    /// The built-in tokenizer against OpenAI CLIP's own (open_clip's `SimpleTokenizer`), ids up to
    /// the end-of-text token (`tools/sd-fixtures/clip_tokenizer.py`).
    #[test]
    fn builtin_matches_openai_clip() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/diffusion/clip_tokenizer.json"
        );
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let tok = ClipTokenizer::builtin(None).unwrap();
        assert_eq!(tok.vocab.len(), 49408);
        assert_eq!((tok.bos, tok.eos, tok.pad), (49406, 49407, 49407));
        for case in fixture["cases"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let want: Vec<u32> = case["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let end = want.iter().position(|&i| i == 49407).unwrap();
            let got = tok.encode(text);
            assert_eq!(&got[..=end], &want[..=end], "{text:?}");
            assert!(got[end + 1..].iter().all(|&i| i == 49407), "padding");
        }
        // SD 2's pad token is `!` (id 0), split out of the text as transformers does.
        let sd2 = ClipTokenizer::builtin(Some("!")).unwrap();
        assert_eq!(sd2.pad, 0);
        assert_eq!(&sd2.encode("wow!")[..4], &[49406, 2781, 0, 49407]);
    }
}
