//! AUTOMATIC1111's LoRA prompt syntax: `<lora:name>`, `<lora:name:weight>`,
//! `<lora:name:text_weight:unet_weight>` and the named forms `te=…` / `unet=…` (`lyco` is the
//! same network). The tags are taken out of the text the model reads (AUTOMATIC1111 removes the
//! tag and leaves what is around it); the prompt as written keeps them, as AUTOMATIC1111's
//! infotext does.

/// One LoRA a prompt asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraTag {
    pub name: String,
    /// The multiplier for the text encoders' layers.
    pub text: f32,
    /// The multiplier for the UNet's layers.
    pub unet: f32,
}

/// The largest multiplier taken (either sign): beyond it a LoRA only makes noise.
pub const MAX_WEIGHT: f32 = 10.0;

/// `prompt` without its LoRA tags, and the tags in order; an error names a tag that cannot be
/// read.
pub fn parse(prompt: &str) -> Result<(String, Vec<LoraTag>), String> {
    let mut text = String::with_capacity(prompt.len());
    let mut tags = Vec::new();
    let mut rest = prompt;
    while let Some(start) = rest.find('<') {
        text.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match tag_body(after) {
            Some((network, body, len)) if matches!(network, "lora" | "lyco") => {
                tags.push(read_tag(body).map_err(|e| format!("<{network}:{body}>: {e}"))?);
                rest = &after[len..];
            }
            _ => {
                text.push('<');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    Ok((text, tags))
}

/// `prompt` with a tag for each of `loras` (name, text weight, UNet weight) it does not
/// already have, appended as AUTOMATIC1111 writes them: a picture's `parameters` then carry
/// every LoRA it was drawn with in its prompt, whether the job asked in the prompt, in
/// `loras`, or its prompt was rewritten by the enhancer.
pub fn with_tags(prompt: &str, loras: &[(String, f32, f32)]) -> String {
    let present: Vec<String> = parse(prompt)
        .map(|(_, tags)| tags.into_iter().map(|t| t.name).collect())
        .unwrap_or_default();
    let mut out = prompt.to_owned();
    for (name, text, unet) in loras {
        if present.contains(name) {
            continue;
        }
        if text == unet {
            out.push_str(&format!(" <lora:{name}:{text}>"));
        } else {
            out.push_str(&format!(" <lora:{name}:{text}:{unet}>"));
        }
    }
    out
}

/// `word:body>` at the start of `s` (AUTOMATIC1111's `<(\w+):([^>]+)>`): the network, its
/// arguments and the length through the `>`.
fn tag_body(s: &str) -> Option<(&str, &str, usize)> {
    let colon = s.find(':')?;
    let network = &s[..colon];
    if network.is_empty() || !network.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let close = s[colon + 1..].find('>')?;
    let body = &s[colon + 1..colon + 1 + close];
    (!body.is_empty()).then_some((network, body, colon + 1 + close + 1))
}

fn read_tag(body: &str) -> Result<LoraTag, String> {
    let mut positional = Vec::new();
    let mut named = Vec::new();
    for item in body.split(':') {
        match item.split_once('=') {
            Some((k, v)) => named.push((k.trim(), v.trim())),
            None => positional.push(item.trim()),
        }
    }
    let name = positional.first().copied().unwrap_or("");
    if name.is_empty() {
        return Err("no LoRA name".into());
    }
    let number = |v: &str| -> Result<f32, String> {
        match v.parse::<f32>() {
            Ok(w) if w.is_finite() && w.abs() <= MAX_WEIGHT => Ok(w),
            _ => Err(format!(
                "{v:?} is not a weight (a number from -{MAX_WEIGHT} to {MAX_WEIGHT})"
            )),
        }
    };
    if positional.len() > 3 {
        return Err("AUTOMATIC1111's fourth value (dyn, the rank to keep) is not supported".into());
    }
    let mut text = match positional.get(1) {
        Some(v) => number(v)?,
        None => 1.0,
    };
    for (k, v) in &named {
        if *k == "te" {
            text = number(v)?;
        }
    }
    let mut unet = match positional.get(2) {
        Some(v) => number(v)?,
        None => text,
    };
    for (k, v) in &named {
        match *k {
            "te" => {}
            "unet" => unet = number(v)?,
            other => {
                return Err(format!(
                    "unknown setting {other:?} (te= and unet= are understood)"
                ));
            }
        }
    }
    Ok(LoraTag {
        name: name.to_owned(),
        text,
        unet,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, text: f32, unet: f32) -> LoraTag {
        LoraTag {
            name: name.into(),
            text,
            unet,
        }
    }

    #[test]
    fn tags_are_read_as_automatic1111_reads_them() {
        let (text, tags) =
            parse("a castle, <lora:ink:0.8> at night <lyco:detail> <lora:x:0.5:1.5>").unwrap();
        assert_eq!(text, "a castle,  at night  ");
        assert_eq!(
            tags,
            vec![
                tag("ink", 0.8, 0.8),
                tag("detail", 1.0, 1.0),
                tag("x", 0.5, 1.5)
            ]
        );
        let (_, tags) = parse("<lora:a:unet=0.3:te=0> <lora:b:1:te=0.2>").unwrap();
        assert_eq!(tags, vec![tag("a", 0.0, 0.3), tag("b", 0.2, 0.2)]);
    }

    #[test]
    fn missing_tags_are_appended() {
        let l = |n: &str, t, u| (n.to_owned(), t, u);
        assert_eq!(
            with_tags(
                "a castle <lora:ink:0.8>",
                &[l("ink", 0.8, 0.8), l("x", 0.7, 0.7), l("y", 0.5, 1.0)]
            ),
            "a castle <lora:ink:0.8> <lora:x:0.7> <lora:y:0.5:1>"
        );
        let (text, tags) = parse(&with_tags("a", &[l("x", 0.7, 0.7)])).unwrap();
        assert_eq!((text.as_str(), tags), ("a ", vec![tag("x", 0.7, 0.7)]));
    }

    #[test]
    fn other_angle_brackets_stay_text() {
        let p = "x < y, <b>bold</b>, <hypernet:h:1>, <lora>, <:a>, <lora:>";
        let (text, tags) = parse(p).unwrap();
        assert_eq!(text, p);
        assert!(tags.is_empty());
    }

    #[test]
    fn unreadable_tags_are_errors() {
        for bad in [
            "<lora:a:lots>",
            "<lora:a:NaN>",
            "<lora:a:11>",
            "<lora::1>",
            "<lora:a:1:1:8>",
            "<lora:a:strength=1>",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
